"""Spark's Kafka schema, as Arrow and as Spark DDL.

Spark's ``kafka`` source produces::

    key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int
    [, headers array<struct<key: string, value: binary>>]   (includeHeaders=true)

and PySpark checks a data source's Arrow batches against the Arrow form of the
declared schema (``timestamp[us, tz=UTC]``, ``int32``, list items named
``element``), so ``SCHEMA``/``SCHEMA_WITH_HEADERS`` are built to match it
field for field. As in Spark, a record without headers has a null
``headers`` value.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = [
    "HEADERS_TYPE",
    "HEADER_TYPE",
    "SCHEMA",
    "SCHEMA_WITH_HEADERS",
    "TIMESTAMP",
    "arrow_schema",
    "spark_ddl",
]

TIMESTAMP = pa.timestamp("us", tz="UTC")
HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_TYPE = pa.list_(pa.field("element", HEADER_TYPE))

_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", TIMESTAMP),
    pa.field("timestampType", pa.int32()),
]
SCHEMA = pa.schema(_FIELDS)
SCHEMA_WITH_HEADERS = pa.schema([*_FIELDS, pa.field("headers", HEADERS_TYPE)])

_DDL = ("key binary, value binary, topic string, partition int, offset long, "
        "timestamp timestamp, timestampType int")


def arrow_schema(include_headers: bool) -> pa.Schema:
    return SCHEMA_WITH_HEADERS if include_headers else SCHEMA


def spark_ddl(include_headers: bool) -> str:
    """The schema as Spark DDL (what ``DataSource.schema()`` returns)."""
    if include_headers:
        return _DDL + ", headers array<struct<key: string, value: binary>>"
    return _DDL
