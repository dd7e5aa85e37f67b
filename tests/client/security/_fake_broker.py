"""A scripted one-node "broker" on 127.0.0.1 for the client's handshake tests.

It speaks just enough Kafka to let a kaflite client start: ApiVersions,
SaslHandshake v0-1, SaslAuthenticate v0-2 (with ``kaflite.security``'s
``SaslServer``), Metadata (itself as the only broker, no topics) and
DescribeCluster. It enforces what a Kafka broker enforces: nothing but the
handshake before authentication, and KIP-368's rule that a request other than
SaslHandshake after the session has expired closes the connection.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
import time
from dataclasses import dataclass, field

from kaflite.protocol.framing import decode_request, encode_response
from kaflite.protocol.messages import (
    REGISTRY,
    ApiVersionsResponse,
    MetadataResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
    Struct,
)
from kaflite.protocol.messages._generated import api_versions_response as avr
from kaflite.protocol.messages._generated import metadata_response as mr
from kaflite.security.errors import SaslError
from kaflite.security.sasl import SaslServer, server_mechanism
from kaflite.security.scram import StaticCredentialStore

API_VERSIONS, METADATA, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 3, 17, 36


@dataclass
class Session:
    principal: str | None = None
    mechanism: str | None = None
    authentications: int = 0
    expires: float | None = None        # time.monotonic()


@dataclass
class FakeBroker:
    store: StaticCredentialStore
    mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    ssl_context: ssl.SSLContext | None = None
    sasl: bool = True
    session_lifetime_ms: int = 0
    host: str = "127.0.0.1"
    port: int = 0
    sessions: list[Session] = field(default_factory=list)
    closed_expired: int = 0          # connections closed for an expired session
    requests: list[str] = field(default_factory=list)
    _server: asyncio.Server | None = None
    _writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def __aenter__(self) -> FakeBroker:
        self._server = await asyncio.start_server(self._serve, self.host, 0,
                                                  ssl=self.ssl_context)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        await self._server.wait_closed()

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        session = Session()
        self.sessions.append(session)
        self._writers.append(writer)
        server: SaslServer | None = None
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                header, body = decode_request(frame)
                key, version = header.request_api_key, header.request_api_version
                self.requests.append(REGISTRY[key].name)
                now = time.monotonic()
                if key not in (API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE):
                    if self.sasl and session.principal is None:
                        return             # not authenticated: close, as Kafka does
                    if session.expires is not None and now > session.expires:
                        self.closed_expired += 1
                        return
                if key == SASL_HANDSHAKE:
                    assert isinstance(body, SaslHandshakeRequest)
                    if body.mechanism not in self.mechanisms:
                        self._reply(writer, header.correlation_id, key, version,
                                    SaslHandshakeResponse(33, list(self.mechanisms)))
                        continue
                    server = server_mechanism(body.mechanism, self.store, {})
                    session.mechanism = body.mechanism
                    reply: Struct = SaslHandshakeResponse(0, list(self.mechanisms))
                elif key == SASL_AUTHENTICATE:
                    assert isinstance(body, SaslAuthenticateRequest) and server is not None
                    try:
                        data = server.respond(bytes(body.auth_bytes))
                    except SaslError as exc:
                        self._reply(writer, header.correlation_id, key, version,
                                    SaslAuthenticateResponse(58, str(exc)))
                        await writer.drain()
                        return
                    lifetime = 0
                    if server.complete:
                        if session.principal not in (None, server.principal):
                            return          # a re-authentication may not change principal
                        session.principal = server.principal
                        session.authentications += 1
                        lifetime = self.session_lifetime_ms
                        session.expires = now + lifetime / 1000 if lifetime else None
                    reply = SaslAuthenticateResponse(0, None, data, lifetime)
                elif key == API_VERSIONS:
                    reply = ApiVersionsResponse(0, [
                        avr.ApiVersion(k, info.min_version, info.max_version)
                        for k, info in sorted(REGISTRY.items())])
                elif key == METADATA:
                    reply = MetadataResponse(brokers=[mr.MetadataResponseBroker(
                        0, self.host, self.port)], cluster_id="fake", controller_id=0)
                else:
                    return
                self._reply(writer, header.correlation_id, key, version, reply)
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    @staticmethod
    def _reply(writer: asyncio.StreamWriter, cid: int, key: int, version: int,
               body: Struct) -> None:
        writer.writelines(encode_response(key, version, cid, body))
