"""kaflite.testing: the clusters kaflite's interop tests and benchmarks run against.

    from kaflite.testing import ApacheKafka, KafliteCluster

    with ApacheKafka(libs, brokers=3) as target:      # libs: tools/ensure_kafka.sh's output
        ...target.bootstrap_servers, target.kill(2), target.restart(2)...

Every target is a ``ClusterUnderTest``: start/stop, ``bootstrap_servers``,
``kill``/``restart`` of one broker, and ``move_leader`` where the target can. Tansu
and franz-go's kfake are still to come (issue 37).
"""

from kaflite.testing._apache_kafka import ApacheKafka, kafka_version
from kaflite.testing._kaflite import KafliteCluster
from kaflite.testing._target import ClusterUnderTest, TargetUnavailable, Unsupported

__all__ = ["ApacheKafka", "ClusterUnderTest", "KafliteCluster", "TargetUnavailable",
           "Unsupported", "kafka_version"]
