"""kaflite.protocol: a sans-I/O codec for the Kafka wire protocol.

No sockets, no asyncio, no clocks: bytes in, messages out, and back.

* ``primitives``: ``Reader`` (zero-copy, over ``memoryview``) and ``Writer``.
* ``messages``: one generated class per API request/response, all versions.
* ``headers`` and ``framing``: header versions, frame splitting, request and
  response encode/decode.
* ``records``: record batches (v2) and legacy message sets, with compression.
* ``errors``: Kafka's error codes as exceptions, and the codec's own errors.
* ``hashing``: murmur2 and ``String.hashCode``, identical to Java's.
"""

from kaflite.protocol._exceptions import (
    KafkaError,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
)
from kaflite.protocol.framing import (
    FrameDecoder,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from kaflite.protocol.headers import (
    RequestHeader,
    ResponseHeader,
    request_header_version,
    response_header_version,
)
from kaflite.protocol.messages import REGISTRY, ApiInfo, api_by_name
from kaflite.protocol.primitives import Reader, Writer

__all__ = [
    "REGISTRY",
    "ApiInfo",
    "FrameDecoder",
    "KafkaError",
    "LocalProtocolError",
    "ProtocolError",
    "Reader",
    "RemoteProtocolError",
    "RequestHeader",
    "ResponseHeader",
    "Writer",
    "api_by_name",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "request_header_version",
    "response_header_version",
]
