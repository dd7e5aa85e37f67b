"""The cost of TLS: kaflite's client and confluent-kafka over PLAINTEXT and SASL_SSL.

Not a test. Starts a one-broker kaflite cluster with a PLAINTEXT and a SASL_SSL
listener (test certificates from ``kaflite.security.certs``, SCRAM-SHA-512),
then, for 100-byte and 1 KB records, produces N records to a fresh topic and
reads them back with each client over each listener, in rounds (every run once
per round). It prints msg/s (best and median) and the ratio SASL_SSL / PLAINTEXT
per client::

    .venv/bin/python benchmarks/security.py --records 200000 --repeat 3

The producers and consumers are those of ``benchmarks/clients.py``, given the
security properties; both clients use librdkafka's property names.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from clients import (
    confluent_consume,
    confluent_produce,
    create_topic,
    kaflite_consume,
    kaflite_send_batch,
    timed,
)

Run = Callable[..., None]
RUNS: dict[str, tuple[Run, Run]] = {
    "kaflite": (kaflite_send_batch, kaflite_consume),
    "confluent-kafka": (confluent_produce, confluent_consume),
}


@contextmanager
def secured_broker() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(PLAINTEXT bootstrap, SASL_SSL bootstrap, the SASL_SSL client properties)."""
    from kaflite.cluster import Cluster
    from kaflite.security.certs import write_test_pki

    with tempfile.TemporaryDirectory(prefix="kaflite-bench-tls-") as tmp:
        pki = write_test_pki(Path(tmp))
        config = {**pki.broker_properties(), "sasl.users": "bench:bench-secret",
                  "inter.broker.listener.name": "PLAINTEXT"}
        with Cluster(brokers=1, listeners="PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                     config=config) as cluster:
            client = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                      "sasl.username": "bench", "sasl.password": "bench-secret",
                      "ssl.ca.location": str(pki.ca)}
            yield cluster.bootstrap("PLAINTEXT"), cluster.bootstrap("SASL_SSL"), client


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    lines = []
    with secured_broker() as (plain, secured, sasl_ssl):
        listeners = {"PLAINTEXT": (plain, {}), "SASL_SSL": (secured, sasl_ssl)}
        for size in (100, 1024):
            n = args.records if size == 100 else max(args.records // 4, 1000)
            value = b"x" * size
            times: dict[tuple[str, str, str], list[float]] = {}
            for _ in range(max(args.repeat, 1)):
                for client, (produce, consume) in RUNS.items():
                    for proto, (servers, conf) in listeners.items():
                        topic = create_topic(plain)
                        for op, fn in (("produce", produce), ("consume", consume)):
                            secs = timed(functools.partial(fn, servers, topic, value, n, conf=conf))
                            times.setdefault((op, client, proto), []).append(secs)
            lines.append(f"\n{size}-byte records, {n} records, one kaflite broker, best of "
                         f"{max(args.repeat, 1)}\n")
            lines.append("| run | PLAINTEXT msg/s | SASL_SSL msg/s (median) | SASL_SSL / "
                         "PLAINTEXT |\n|---|---:|---:|---:|")
            for op in ("produce", "consume"):
                for client in RUNS:
                    plain_best = n / min(times[(op, client, "PLAINTEXT")])
                    tls = times[(op, client, "SASL_SSL")]
                    tls_best = n / min(tls)
                    lines.append(f"| {op} {client} | {plain_best:,.0f} | {tls_best:,.0f} "
                                 f"({n / statistics.median(tls):,.0f}) | "
                                 f"{tls_best / plain_best:.2f} |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
