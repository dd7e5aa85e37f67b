"""Request and response headers, and which header version goes with which API.

Header version rules (KIP-482):

* A request uses header v2 when its API version is flexible, else v1. Header v2
  adds a tagged-field section but keeps the client id as a classic, non-compact
  int16-length nullable string.
* ControlledShutdown v0 is the one request with header v0 (no client id).
* A response uses header v1 (with a tagged-field section) when its API version is
  flexible, else v0, except ApiVersions: its response header is always v0, so a
  client that does not yet know the broker's versions can always parse it.
"""

from __future__ import annotations

from kaflite.protocol.messages import REGISTRY
from kaflite.protocol.messages._generated.request_header import RequestHeader
from kaflite.protocol.messages._generated.response_header import ResponseHeader

__all__ = [
    "API_VERSIONS_KEY",
    "CONTROLLED_SHUTDOWN_KEY",
    "RequestHeader",
    "ResponseHeader",
    "request_header_version",
    "response_header_version",
]

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7


def request_header_version(api_key: int, api_version: int) -> int:
    """The request header version for ``api_key`` at ``api_version``.

    An API key this codec does not know gets v1, the header every Kafka request
    version shares a prefix with, so a broker can still read its correlation id.
    """
    info = REGISTRY.get(api_key)
    if info is None:
        return 1
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    flexible = info.request.FLEXIBLE_VERSION
    return 2 if 0 <= flexible <= api_version else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """The response header version for ``api_key`` at ``api_version``."""
    if api_key == API_VERSIONS_KEY:
        return 0
    info = REGISTRY.get(api_key)
    if info is None:
        return 0
    flexible = info.response.FLEXIBLE_VERSION
    return 1 if 0 <= flexible <= api_version else 0
