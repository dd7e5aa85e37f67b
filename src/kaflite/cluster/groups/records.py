"""Public codec for ``__consumer_offsets`` keys and values (Kafka's formats).

Tools that read the topic directly (a ``kaflite groups`` command, tests,
third-party readers) decode its records with these functions.
"""

from kaflite.cluster.groups._records import (
    GROUP_METADATA_KEY_VERSION,
    GROUP_METADATA_VALUE_VERSION,
    OFFSET_COMMIT_KEY_VERSION,
    GroupKey,
    OffsetAndMetadata,
    OffsetKey,
    OtherKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)

__all__ = [
    "GROUP_METADATA_KEY_VERSION",
    "GROUP_METADATA_VALUE_VERSION",
    "OFFSET_COMMIT_KEY_VERSION",
    "GroupKey",
    "OffsetAndMetadata",
    "OffsetKey",
    "OtherKey",
    "decode_group_value",
    "decode_key",
    "decode_offset_value",
    "encode_group_key",
    "encode_group_value",
    "encode_offset_key",
    "encode_offset_value",
]
