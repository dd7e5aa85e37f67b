"""Every Kafka API message, one version-agnostic class per request and response.

Each class covers all versions of its schema; the version is an argument:

    req = MetadataRequest(topics=[MetadataRequestTopic(name="t")])
    data = req.encode(12)
    assert MetadataRequest.decode(data, 12) == req

``REGISTRY`` maps an API key to an ``ApiInfo`` with its name, request and
response classes and version range. Struct classes nested in a message are
available from their generated module, ``messages.<module>``, and from here when
their name is unique across all schemas.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from kaflite.protocol.messages import _generated
from kaflite.protocol.messages._generated import *  # noqa: F403
from kaflite.protocol.messages._generated import APIS
from kaflite.protocol.messages._runtime import FieldSpec, Struct, UnsupportedVersionError

__all__ = ["REGISTRY", "ApiInfo", "FieldSpec", "Struct", "UnsupportedVersionError", "api_by_name"]
__all__ += _generated.__all__


@dataclass(frozen=True, slots=True)
class ApiInfo:
    api_key: int
    name: str                      # e.g. "Metadata"
    request: type[Struct]
    response: type[Struct]
    min_version: int
    max_version: int
    latest_version_unstable: bool  # the schema marks its newest version as unstable

    @property
    def request_flexible_version(self) -> int:
        return self.request.FLEXIBLE_VERSION

    @property
    def response_flexible_version(self) -> int:
        return self.response.FLEXIBLE_VERSION


REGISTRY: dict[int, ApiInfo] = {
    key: ApiInfo(key, name, req, resp, req.MIN_VERSION, req.MAX_VERSION, unstable)
    for key, (name, req, resp, unstable) in APIS.items()
}

_BY_NAME = {info.name: info for info in REGISTRY.values()}


def api_by_name(name: str) -> ApiInfo:
    """Look an API up by its Kafka name, e.g. ``"Fetch"``."""
    return _BY_NAME[name]


def _export_unique_structs() -> None:
    """Re-export struct classes whose names no other schema reuses."""
    seen: dict[str, type | None] = {}
    for mod_name in dir(_generated):
        mod = getattr(_generated, mod_name)
        if not hasattr(mod, "__all__") or not mod_name.islower():
            continue
        for name in mod.__all__:
            cls = getattr(mod, name)
            seen[name] = None if name in seen and seen[name] is not cls else cls
    this = sys.modules[__name__]
    for name, cls in seen.items():
        if cls is not None and not hasattr(this, name):
            setattr(this, name, cls)


_export_unique_structs()
