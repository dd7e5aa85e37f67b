"""A confluent-kafka consumer in its own process, so the kernel's view of its sockets
is its own: ``python consumer_process.py BOOTSTRAP TOPIC PARTITIONS CLIENT_ID [GROUP]``.

It prints ``ready`` once it has read a record from every partition, then keeps
polling until its stdin closes.
"""

from __future__ import annotations

import sys
import threading

from confluent_kafka import Consumer, TopicPartition


def main() -> None:
    bootstrap, topic, partitions, client_id = sys.argv[1:5]
    group = sys.argv[5] if len(sys.argv) > 5 else None
    n = int(partitions)
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "group.id": group or f"{client_id}-unused",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": bool(group),
        "auto.commit.interval.ms": 1000,
        "heartbeat.interval.ms": 500,
        "session.timeout.ms": 6000,
        "fetch.wait.max.ms": 200,
    })
    if group:
        consumer.subscribe([topic])
    else:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(n)])
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    seen: set[int] = set()
    announced = False
    while not stop.is_set():
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            seen.add(msg.partition())
        if len(seen) == n and not announced:
            print("ready", flush=True)
            announced = True
    consumer.close()


if __name__ == "__main__":
    main()
