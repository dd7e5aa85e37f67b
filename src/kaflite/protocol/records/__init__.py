"""Kafka record formats: v2 record batches, legacy message sets, compression.

Decoding is zero-copy: keys, values and header values are ``memoryview``
slices of the (decompressed) input. Malformed input raises only
``RemoteProtocolError``; values the wire cannot carry raise
``LocalProtocolError``.

Client side::

    data = encode_batch([b"v1", b"v2"], keys=[b"k", None], timestamps=[t, t + 1])
    for batch in iter_batches(fetch_records):
        cols = batch.columns()          # offsets, timestamps, keys, values, headers

Broker side (no record decoding)::

    batches = validate_record_set(produce_records)      # CRC, framing, counts
    next_offset = assign_offsets(buffer, log_end_offset, partition_leader_epoch=5)
"""

from kaflite.protocol.records._batch import RecordBatch, iter_batches
from kaflite.protocol.records._broker import (
    BatchErrorReason,
    BatchProducer,
    InvalidRecordBatch,
    RecordSummary,
    assign_offsets,
    batch_codec,
    batch_producer,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_batch,
    validate_record_set,
    validate_records,
)
from kaflite.protocol.records._builder import RecordBatchBuilder
from kaflite.protocol.records._compression import (
    DEFAULT_DECOMPRESSION_LIMIT,
    Compression,
    compress,
    decompress,
)
from kaflite.protocol.records._control import (
    ControlRecordType,
    EndTxnMarker,
    encode_end_txn_marker,
    encode_end_txn_marker_batch,
    parse_control_type,
    parse_end_txn_marker,
    read_end_txn_marker,
)
from kaflite.protocol.records._decode import Header, Headers, Record, RecordColumns
from kaflite.protocol.records._encode import (
    assemble_batch,
    encode_batch,
    encode_batch_buffer,
    encode_records,
)
from kaflite.protocol.records._legacy import (
    LegacyMessage,
    encode_message_set,
    iter_legacy_messages,
    iter_legacy_records,
)
from kaflite.protocol.records._recordset import iter_record_set, iter_record_set_records
from kaflite.protocol.records._wire import (
    HEADER_SIZE,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    crc32c,
)

__all__ = [
    "DEFAULT_DECOMPRESSION_LIMIT",
    "HEADER_SIZE",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "BatchErrorReason",
    "BatchProducer",
    "Compression",
    "ControlRecordType",
    "EndTxnMarker",
    "Header",
    "Headers",
    "InvalidRecordBatch",
    "LegacyMessage",
    "Record",
    "RecordBatch",
    "RecordBatchBuilder",
    "RecordColumns",
    "RecordSummary",
    "assemble_batch",
    "assign_offsets",
    "batch_codec",
    "batch_producer",
    "compress",
    "crc32c",
    "decompress",
    "encode_batch",
    "encode_batch_buffer",
    "encode_end_txn_marker",
    "encode_end_txn_marker_batch",
    "encode_message_set",
    "encode_records",
    "iter_batches",
    "iter_legacy_messages",
    "iter_legacy_records",
    "iter_record_set",
    "iter_record_set_records",
    "parse_control_type",
    "parse_end_txn_marker",
    "read_end_txn_marker",
    "set_base_offset",
    "set_log_append_time",
    "set_partition_leader_epoch",
    "validate_batch",
    "validate_record_set",
    "validate_records",
]
