"""ApiVersions through the proxy: the intersection of what the upstream serves and
what the proxy's codec decodes, so that the proxy never passes on a version it
cannot parse.

* An API the codec knows is advertised at ``max(upstream min, codec min)`` to
  ``min(upstream max, codec max)``, and left out where these do not overlap.
* An API key the codec does not know is advertised as the upstream gives it:
  the proxy forwards it as bytes (it reads only the request header's leading api
  key, version and correlation id, which every header version shares) and never
  decodes it. A request with a key the upstream did not advertise closes the
  connection, as a broker does.
* SaslHandshake starts at v1: after a v0 handshake the SASL tokens travel
  without a Kafka request header, which a proxy that reads headers cannot
  follow. Every client that speaks v1 uses it when the broker offers it.
* The finalized ``transaction.version`` is lowered to 1 when the narrowed versions
  cannot carry transactions v2 (KIP-890: a client of version 2 sends Produce v12+
  and EndTxn v5+, and adds no partitions itself). Kafka 4.4's Java client, told
  version 2 but offered Produce v11, sent transactional records to partitions it
  never added, and its transactions failed TRANSACTION_ABORTABLE. Told 1, it runs
  them as Kafka's older clients do, which Kafka 4.4 still serves.
* The answer is written as Kafka writes it: a tagged field that holds its
  default value (FinalizedFeaturesEpoch -1, an empty feature list,
  ZkMigrationReady false) is left out. Some brokers send them anyway (Tansu 0.6
  sends all four), and a client whose tag skipping is off by one byte
  (librdkafka 2.0.2, as bundled in kcat 1.7.1) cannot read past an eight-byte
  FinalizedFeaturesEpoch.
"""

from __future__ import annotations

from kaflite.protocol.messages import REGISTRY, ApiVersionsResponse
from kaflite.protocol.messages._generated.api_versions_response import ApiVersion

__all__ = ["PROXY_MIN_VERSIONS", "advertise_sasl", "intersect", "omit_default_tags"]

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
PRODUCE, END_TXN = 0, 26
TRANSACTION_VERSION = "transaction.version"
# KIP-890 part 2: the least versions a client of transaction.version 2 sends
TXN_V2_NEEDS = {PRODUCE: 12, END_TXN: 5}
PROXY_MIN_VERSIONS = {SASL_HANDSHAKE: 1}
# ApiVersionsResponse's own tagged fields (v3+), as its schema names them
_KNOWN_TAGS = frozenset(f.tag for f in ApiVersionsResponse.FIELDS if f.tag is not None)


def codec_range(api_key: int) -> tuple[int, int] | None:
    info = REGISTRY.get(api_key)
    if info is None:
        return None
    return max(info.min_version, PROXY_MIN_VERSIONS.get(api_key, 0)), info.max_version


def intersect(response: ApiVersionsResponse) -> dict[int, tuple[int, int]]:
    """Narrow ``response.api_keys`` in place; return what the upstream advertised."""
    advertised: dict[int, tuple[int, int]] = {}
    kept: list[ApiVersion] = []
    for api in response.api_keys:
        advertised[api.api_key] = (api.min_version, api.max_version)
        ours = codec_range(api.api_key)
        if ours is None:
            kept.append(api)
            continue
        low, high = max(api.min_version, ours[0]), min(api.max_version, ours[1])
        if low > high:
            continue
        api.min_version, api.max_version = low, high
        kept.append(api)
    response.api_keys = kept
    _clamp_transaction_version(response)
    return advertised


def _clamp_transaction_version(response: ApiVersionsResponse) -> None:
    """transaction.version 2 only where the narrowed versions carry it (see above)."""
    highest = {a.api_key: a.max_version for a in response.api_keys}
    if all(highest.get(key, -1) >= least for key, least in TXN_V2_NEEDS.items()):
        return
    for finalized in response.finalized_features:
        if finalized.name == TRANSACTION_VERSION and finalized.max_version_level > 1:
            finalized.max_version_level = 1
            finalized.min_version_level = min(finalized.min_version_level, 1)
    for supported in response.supported_features:
        if supported.name == TRANSACTION_VERSION and supported.max_version > 1:
            supported.max_version = 1
            supported.min_version = min(supported.min_version, 1)


def advertise_sasl(response: ApiVersionsResponse) -> None:
    """Ending SASL at the proxy: SaslHandshake and SaslAuthenticate are the proxy's
    own, offered at the versions it answers whatever the upstream says of them."""
    own = {SASL_HANDSHAKE: (1, 1), SASL_AUTHENTICATE: (0, 2)}
    response.api_keys = [a for a in response.api_keys if a.api_key not in own]
    for key, (low, high) in own.items():
        response.api_keys.append(ApiVersion(api_key=key, min_version=low, max_version=high))
    response.api_keys.sort(key=lambda a: a.api_key)


def omit_default_tags(response: ApiVersionsResponse) -> None:
    """Leave out the known tagged fields that hold their defaults.

    The codec keeps a known tagged field that came with its default value among
    the unknown ones, so that a decoded answer re-encodes to the same bytes; the
    proxy's answer drops those (their absence means the same value), and keeps
    the tags it does not know.
    """
    response.unknown_tagged_fields = tuple(
        (tag, data) for tag, data in response.unknown_tagged_fields if tag not in _KNOWN_TAGS)
