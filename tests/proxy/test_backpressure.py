"""Back-pressure: a client that stops reading stops the proxy reading its upstream.

A raw client pipelines 40 Fetch requests of about 1 MB answer each and reads
nothing. The proxy's write buffer toward it reaches its high-water mark, so the
proxy pauses reading that client's upstream connection (``client-writes``) and
holds a bounded amount (the write buffer's limit plus the frame being
forwarded), not 40 MB. When the client reads again, every answer arrives, in
order.
"""

from __future__ import annotations

import socket
import struct

from kaflite.cluster import Cluster
from kaflite.protocol import decode_response, encode_request
from kaflite.protocol.messages import FetchRequest
from kaflite.protocol.messages._generated.fetch_request import FetchPartition, FetchTopic
from kaflite.proxy import Proxy
from kaflite.proxy.session import WRITE_HIGH
from tests._net import recv_exactly
from tests.conftest import wait_for

REQUESTS = 40
MB = 1024 * 1024


def test_a_client_that_does_not_read_pauses_its_upstream(cluster3: Cluster) -> None:
    from confluent_kafka import Producer

    topic = "px-bp"
    cluster3.create_topic(topic, 1, 1, assignments=[[0]])
    with Proxy(cluster3.bootstrap_servers) as proxy:
        producer = Producer({"bootstrap.servers": proxy.bootstrap_servers, "linger.ms": 20})
        for _ in range(2000):
            producer.produce(topic, b"v" * 1024, partition=0)
        assert producer.flush(30) == 0
        del producer
        port = proxy.node_ports[0]
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        try:
            fetch = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=MB, topics=[
                FetchTopic(topic=topic, partitions=[FetchPartition(
                    partition=0, fetch_offset=0, partition_max_bytes=MB)])])
            for corr in range(REQUESTS):
                sock.sendall(b"".join(bytes(c) for c in encode_request(1, 4, corr, "bp", fetch)))

            def paused() -> bool:
                s = proxy._call(lambda: next(
                    (x for x in proxy.sessions if x.record.client_id == "bp"), None))
                return s is not None and s.upstream is not None \
                    and "client-writes" in s.upstream.paused_by

            wait_for(paused, "the proxy to pause the upstream of a client that does not read")
            s = proxy._call(lambda: next(x for x in proxy.sessions
                                         if x.record.client_id == "bp"))
            assert s.downstream.transport is not None
            held = proxy._call(s.downstream.transport.get_write_buffer_size)
            assert held <= WRITE_HIGH + 2 * MB
            assert len(s.pending) > 0            # answers still owed: the upstream waits
            # now read: every answer arrives, in order, whole
            sock.settimeout(30)
            for corr in range(REQUESTS):
                size = struct.unpack(">i", recv_exactly(sock, 4))[0]
                frame = recv_exactly(sock, size)
                header, body = decode_response(frame, 1, 4)
                assert header.correlation_id == corr
                assert body.responses[0].partitions[0].error_code == 0
            assert not proxy._call(lambda: "client-writes" in s.upstream.paused_by
                                   if s.upstream is not None else True)
        finally:
            sock.close()
