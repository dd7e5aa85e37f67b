"""Every Kafka API message, one version-agnostic class per request and response.

Each class covers all versions of its schema; the version is an argument:

    req = MetadataRequest(topics=[MetadataRequestTopic(name="t")])
    data = req.encode(12)
    assert MetadataRequest.decode(data, 12) == req

``REGISTRY`` maps an API key to an ``ApiInfo`` with its name, request and
response classes and version range. Struct classes nested in a message are
available from their generated module, ``messages.<module>``, and from here when
their name is unique across all schemas.

The generated modules are imported on first use (see ``_generated``): a client
loads the dozen APIs it speaks, not all of them. ``ApiInfo`` knows an API's
name and versions without its classes, and imports them when asked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kaflite.protocol.messages import _generated
from kaflite.protocol.messages._generated import API_TABLE, DATA_NAMES, WHERE
from kaflite.protocol.messages._runtime import FieldSpec, FieldVersionError, Request, Struct

if TYPE_CHECKING:
    from kaflite.protocol.messages._generated import *  # noqa: F403

    DATA: tuple[type[Struct], ...]

__all__ = ["DATA", "REGISTRY", "ApiInfo", "FieldSpec", "FieldVersionError", "Request", "Struct",
           "api_by_name"]
__all__ += [n for n in _generated.__all__ if n not in ("API_TABLE", "DATA_NAMES", "WHERE")]


class ApiInfo:
    """One API: key, name, versions, and its request and response classes (loaded lazily)."""

    __slots__ = ("_request", "_response", "api_key", "latest_version_unstable", "max_version",
                 "min_version", "name", "request_name", "response_name")

    def __init__(self, api_key: int, name: str, request_name: str, response_name: str,
                 min_version: int, max_version: int, latest_version_unstable: bool) -> None:
        self.api_key = api_key
        self.name = name                        # e.g. "Metadata"
        self.request_name = request_name
        self.response_name = response_name
        self.min_version = min_version
        self.max_version = max_version
        self.latest_version_unstable = latest_version_unstable  # newest version unstable
        self._request: type[Struct] | None = None
        self._response: type[Struct] | None = None

    @property
    def request(self) -> type[Struct]:
        if self._request is None:
            self._request = getattr(_generated, self.request_name)
        return self._request

    @property
    def response(self) -> type[Struct]:
        if self._response is None:
            self._response = getattr(_generated, self.response_name)
        return self._response

    @property
    def request_flexible_version(self) -> int:
        return self.request.FLEXIBLE_VERSION

    @property
    def response_flexible_version(self) -> int:
        return self.response.FLEXIBLE_VERSION

    def __repr__(self) -> str:
        return (f"ApiInfo({self.api_key}, {self.name!r}, "
                f"v{self.min_version}-{self.max_version})")


REGISTRY: dict[int, ApiInfo] = {
    key: ApiInfo(key, name, req, resp, lo, hi, unstable)
    for key, (name, req, resp, lo, hi, unstable) in API_TABLE.items()
}

_BY_NAME = {info.name: info for info in REGISTRY.values()}


def api_by_name(name: str) -> ApiInfo:
    """Look an API up by its Kafka name, e.g. ``"Fetch"``."""
    return _BY_NAME[name]


def __getattr__(name: str) -> Any:
    if name == "DATA":   # the schemas that are not API messages (all of them imported)
        return tuple(getattr(_generated, n) for n in DATA_NAMES)
    if name in WHERE:
        value = getattr(_generated, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
