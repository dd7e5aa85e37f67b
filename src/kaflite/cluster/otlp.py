"""The metrics a client pushes (KIP-714): an OTLP ``MetricsData`` protobuf, decoded with
the ``opentelemetry-proto`` package into flat ``name -> latest value`` rows.

A metric with attributes (a node id, a topic) gives one row per data point, named
``name{key=value,...}`` with its attributes sorted; gauges and sums give their value,
histograms and summaries two rows, ``<name>.count`` and ``<name>.sum``. A payload that
is not a ``MetricsData`` raises ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

__all__ = ["decode_metrics"]


def _value(v: AnyValue) -> str:
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return v.string_value
    if kind == "int_value":
        return str(v.int_value)
    if kind == "double_value":
        return repr(v.double_value)
    if kind == "bool_value":
        return "true" if v.bool_value else "false"
    return ""


def _key(name: str, attributes: Iterable[KeyValue]) -> str:
    pairs = sorted(f"{a.key}={_value(a.value)}" for a in attributes)
    return f"{name}{{{','.join(pairs)}}}" if pairs else name


def decode_metrics(payload: bytes) -> dict[str, float]:
    """Every data point of an uncompressed OTLP ``MetricsData`` payload."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

    data = MetricsData()
    try:
        data.ParseFromString(payload)
    except DecodeError as exc:
        raise ValueError(f"not an OTLP MetricsData: {exc}") from None
    out: dict[str, float] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                kind = metric.WhichOneof("data")
                if kind in ("gauge", "sum"):
                    points = metric.gauge.data_points if kind == "gauge" \
                        else metric.sum.data_points
                    for p in points:
                        out[_key(metric.name, p.attributes)] = (
                            float(p.as_int) if p.WhichOneof("value") == "as_int"
                            else p.as_double)
                elif kind in ("histogram", "exponential_histogram", "summary"):
                    hist = (metric.histogram if kind == "histogram"
                            else metric.exponential_histogram if kind == "exponential_histogram"
                            else metric.summary)
                    for h in hist.data_points:
                        key = _key(metric.name, h.attributes)
                        out[f"{key}.count"] = float(h.count)
                        out[f"{key}.sum"] = float(h.sum)
    return out
