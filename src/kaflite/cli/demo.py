"""``kaflite demo``: what is really inside poll(), live."""

from __future__ import annotations

import typer

DEMO_PLAN = """\
kaflite demo: what is really inside poll(), live.

The demo is not built yet: it needs the smart client and the Spark source.
When it lands, `make demo` will:
  1. start a 3-broker embedded cluster in a temporary data directory;
  2. create an `events` topic (6 partitions, replication factor 3) and `results`;
  3. run a producer writing a keyed clickstream, and a group of 2 consumers;
  4. run a Spark pipeline (kaflite.spark) writing windowed aggregates to `results`;
  5. show every client connection and its role (bootstrap, partition leader,
     group coordinator), the heartbeat/fetch/commit cadences and consumer lag;
  6. inject failures (leader moves, a broker kill, a coordinator move, a
     rebalance) and show how each client recovers;
  7. verify that no record was lost and print a summary.

Available today: the protocol codec (kaflite.protocol) and the embedded
cluster: try `kaflite up --brokers 3` and point any Kafka client at it.
"""


def demo() -> None:
    """Run the main job on an embedded cluster (not built yet: prints the plan)."""
    typer.echo(DEMO_PLAN, nl=False)
