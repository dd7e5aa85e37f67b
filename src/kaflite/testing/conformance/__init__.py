"""Differential conformance: a client's session with Apache Kafka, replayed against kaflite.

    recorder = Recorder()
    async with Proxy(kafka_bootstrap, filters=[recorder]) as proxy:
        ...a client's session through proxy.bootstrap_servers...
    outcomes = await replay(recorder.exchanges, kaflite_bootstrap)
    for (api, version), results in scorecard(outcomes).items(): ...

Each response kaflite gives is compared field by field with the one Kafka gave, after
the normalisation ``_compare`` documents (identities each broker mints, throttle
times, addresses, error messages' wording).
"""

from kaflite.testing.conformance._compare import Diff, Identities, diff, substitute
from kaflite.testing.conformance._record import Recorded, Recorder
from kaflite.testing.conformance._replay import Outcome, replay, scorecard

__all__ = ["Diff", "Identities", "Outcome", "Recorded", "Recorder", "diff", "replay",
           "scorecard", "substitute"]
