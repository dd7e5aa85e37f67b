"""kaflite.testing: the clusters kaflite's interop tests and benchmarks run against.

    from kaflite.testing import ApacheKafka, KafliteCluster

    with ApacheKafka(libs, brokers=3) as target:      # libs: tools/ensure_kafka.sh's output
        ...target.bootstrap_servers, target.kill(2), target.restart(2)...

Every target is a ``ClusterUnderTest``: start/stop, ``bootstrap_servers``,
``kill``/``restart`` of one broker, and ``move_leader`` where the target can. The
targets: ``KafliteCluster`` (in this process, or a process per broker), ``ApacheKafka``
(KRaft, from Maven's jars), ``Tansu`` (one broker, in-memory: a restart loses the data)
and ``KFake`` (franz-go's fake cluster, built by ``tools/ensure_kfake.sh``).
``Proxied(target)`` puts any of them behind ``kaflite proxy``, whose filter cuts a
broker off from the clients for a ``kill`` the target cannot do itself (its data kept).
"""

from kaflite.testing._apache_kafka import ApacheKafka, kafka_version
from kaflite.testing._kaflite import KafliteCluster
from kaflite.testing._kfake import KFake
from kaflite.testing._proxied import Proxied
from kaflite.testing._tansu import Tansu, tansu_binary
from kaflite.testing._target import ClusterUnderTest, TargetUnavailable, Unsupported

__all__ = ["ApacheKafka", "ClusterUnderTest", "KFake", "KafliteCluster", "Proxied", "Tansu",
           "TargetUnavailable", "Unsupported", "kafka_version", "tansu_binary"]
