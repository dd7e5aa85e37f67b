"""What every route shares: the error type, JSON answers, and checked inputs.

A route raises ``ApiError(status, message)`` for anything the caller got wrong;
``handle_errors`` turns it, Kafka's errors and malformed input into a JSON
``{"error": ...}`` answer with the status the contract (docs/console.md) names.
Every parser here checks before anything is changed, so a 400 changes nothing.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeAlias

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from kaflite.config import ConfigError
from kaflite.protocol import errors

if TYPE_CHECKING:
    from kaflite.console.backend import Backend

__all__ = ["ApiError", "Json", "JsonBody", "answer", "backend_of", "body_of", "error_response",
           "int_field", "int_query", "topic_name"]

log = logging.getLogger("kaflite.console")

Json: TypeAlias = dict[str, object]
JsonBody: TypeAlias = dict[str, object]
MAX_BODY = 1 << 20
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")

# Kafka errors that mean "the input was wrong" (400), not "the cluster said no" (409).
BAD_INPUT = frozenset({
    errors.InvalidTopicExceptionError.code, errors.InvalidPartitionsError.code,
    errors.InvalidReplicationFactorError.code, errors.InvalidConfigError.code,
    errors.InvalidRequestError.code, errors.InvalidReplicaAssignmentError.code,
})
NOT_FOUND = frozenset({
    errors.UnknownTopicOrPartitionError.code, errors.GroupIdNotFoundError.code,
})


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def answer(payload: object, status: int = 200) -> Response:
    return Response(json.dumps(payload, default=str, separators=(",", ":")).encode(), status,
                    media_type="application/json")


def error_response(exc: BaseException) -> Response:
    """The JSON answer for an exception a route raised."""
    if isinstance(exc, ApiError):
        return JSONResponse({"error": str(exc)}, exc.status)
    if isinstance(exc, ConfigError):
        return JSONResponse({"error": str(exc)}, 400)
    if isinstance(exc, errors.KafkaError):
        status = 400 if exc.code in BAD_INPUT else 404 if exc.code in NOT_FOUND else 409
        return JSONResponse({"error": f"{exc.name}: {exc}"}, status)
    from kaflite.cluster.faults import FaultUnavailable

    if isinstance(exc, FaultUnavailable):
        return JSONResponse({"error": str(exc)}, 409)
    if isinstance(exc, (ValueError, KeyError, TypeError)):
        return JSONResponse({"error": f"{type(exc).__name__}: {exc}"}, 400)
    if isinstance(exc, TimeoutError):
        return JSONResponse({"error": f"timed out: {exc}"}, 504)
    log.error("console request failed", exc_info=exc)
    return JSONResponse({"error": repr(exc)}, 500)


async def body_of(request: Request) -> JsonBody:
    """The request's JSON object body ({} when empty)."""
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise ApiError(413, "body too large")
    if not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError as exc:
        raise ApiError(400, f"the body is not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise ApiError(400, "the body must be a JSON object")
    return parsed


def backend_of(request: Request) -> Backend:
    backend: Backend = request.app.state.backend
    return backend


def _as_int(value: object, what: str, lo: int | None, hi: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ApiError(400, f"{what} must be an integer, got {value!r}")
    try:
        out = int(value)
    except ValueError:
        raise ApiError(400, f"{what} must be an integer, got {value!r}") from None
    if lo is not None and out < lo:
        raise ApiError(400, f"{what} must be at least {lo}, got {out}")
    if hi is not None and out > hi:
        raise ApiError(400, f"{what} must be at most {hi}, got {out}")
    return out


def int_field(body: Mapping[str, object], name: str, default: int | None = None,
              lo: int | None = None, hi: int | None = None) -> int:
    """``body[name]`` as an integer in [lo, hi]; 400 when missing (and no default) or bad."""
    value = body.get(name)
    if value is None:
        if default is None:
            raise ApiError(400, f"{name} is required")
        return default
    return _as_int(value, name, lo, hi)


def int_query(request: Request, name: str, lo: int | None = None,
              hi: int | None = None) -> int | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    return _as_int(value, name, lo, hi)


def topic_name(value: object) -> str:
    """A legal Kafka topic name (Kafka's Topic.validate), else 400."""
    if not isinstance(value, str):
        raise ApiError(400, f"the topic name must be a string, got {value!r}")
    if not value or value in (".", "..") or len(value) > 249 or not _LEGAL_TOPIC.match(value):
        raise ApiError(400, f"Topic name {value!r} is illegal: it must be 1 to 249 "
                            "characters of ASCII letters, digits, '.', '_' and '-', and "
                            "not '.' or '..'")
    return value
