"""A bare Kafka wire client for the security tests: one request at a time, over
TCP or TLS, so a test can send exactly the bytes it means (bad ones included)."""

from __future__ import annotations

import asyncio
import ssl
import struct
from typing import TypeVar, cast

from kaflite.protocol.framing import decode_response, encode_request
from kaflite.protocol.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    MetadataResponse,
    Request,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
    Struct,
)
from kaflite.security.sasl import client_mechanism

R = TypeVar("R", bound=Struct)
TIMEOUT = 10.0


class Wire:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation = 0
        self.session_lifetime_ms = 0

    @classmethod
    async def open(cls, port: int, tls: ssl.SSLContext | None = None) -> Wire:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port, ssl=tls,
                                    server_hostname="localhost" if tls else None), TIMEOUT)
        return cls(reader, writer)

    async def send_raw(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def read_frame(self) -> bytes:
        size = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), TIMEOUT))[0]
        return await asyncio.wait_for(self.reader.readexactly(size), TIMEOUT)

    async def request(self, body: Request[R], version: int) -> R:
        self.correlation += 1
        api_key = type(body).API_KEY
        await self.send_raw(b"".join(bytes(c) for c in encode_request(
            api_key, version, self.correlation, "security-test", body)))
        _, response = decode_response(await self.read_frame(), api_key, version)
        return cast(R, response)

    async def closed_by_broker(self) -> bool:
        """True once the broker has closed the connection (reads hit EOF or a reset)."""
        try:
            data = await asyncio.wait_for(self.reader.read(65536), TIMEOUT)
            while data:
                data = await asyncio.wait_for(self.reader.read(65536), TIMEOUT)
        except (ConnectionError, ssl.SSLError):
            return True
        return True

    async def metadata(self) -> MetadataResponse:
        return await self.request(MetadataRequest(topics=[]), 9)

    async def api_versions(self) -> Struct:
        return await self.request(ApiVersionsRequest(client_software_name="t",
                                                     client_software_version="1"), 3)

    async def handshake(self, mechanism: str, version: int = 1) -> SaslHandshakeResponse:
        return await self.request(SaslHandshakeRequest(mechanism=mechanism), version)

    async def authenticate(self, mechanism: str, user: str, password: str,
                           version: int = 2) -> SaslAuthenticateResponse:
        """A whole exchange; the last response (its error, if any, ends it)."""
        client = client_mechanism(mechanism, {"sasl.username": user, "sasl.password": password})
        shake = await self.handshake(mechanism)
        assert shake.error_code == 0, shake
        token: bytes | None = client.start()
        response = SaslAuthenticateResponse()
        while token is not None:
            response = await self.request(SaslAuthenticateRequest(auth_bytes=token), version)
            if response.error_code:
                return response
            self.session_lifetime_ms = response.session_lifetime_ms
            token = client.respond(bytes(response.auth_bytes))
        assert client.complete
        return response

    def close(self) -> None:
        self.writer.close()
