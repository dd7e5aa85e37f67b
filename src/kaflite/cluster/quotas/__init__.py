"""Client quotas and throttling (KIP-13, KIP-55, KIP-124, KIP-219, KIP-599).

* ``entities``: users, client ids and their ``<default>`` entities, the quota
  keys, and Kafka's precedence of the eight entity combinations;
* ``rate``: Kafka's sampled rate windows, token bucket and throttle-time math;
* ``manager``: a broker's enforcement (what each request records, and the
  throttle time it calls for).

The quotas themselves live in the controller's metadata (``Controller.client_quotas``).
"""

from kaflite.cluster.quotas.entities import QUOTA_KEYS, Entity, QuotaStore, Resolved
from kaflite.cluster.quotas.manager import QuotaManager, Usage
from kaflite.cluster.quotas.rate import QuotaWindows, Rate, TokenBucket

__all__ = ["QUOTA_KEYS", "Entity", "QuotaManager", "QuotaStore", "QuotaWindows", "Rate",
           "Resolved", "TokenBucket", "Usage"]
