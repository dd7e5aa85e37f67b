"""The differential replay pairs each broker's cluster id as an identity it minted, so an
ApiVersions v5 that names Kafka's cluster and node (KIP-1242) reaches kaflite naming
kaflite's; left as recorded, kaflite would answer it REBOOTSTRAP_REQUIRED."""

from __future__ import annotations

import asyncio

from kaflite.protocol import decode_request, encode_response, errors
from kaflite.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kaflite.protocol.messages import metadata_response as mr
from kaflite.protocol.messages._runtime import Struct
from kaflite.testing.conformance import Outcome, Recorded, replay
from kaflite.testing.conformance._compare import Identities, diff, substitute


def test_cluster_ids_are_paired_and_rewritten_in_api_versions_v5() -> None:
    ids = Identities()
    kafka = MetadataResponse(cluster_id="kafka-cluster", controller_id=1,
                             brokers=[mr.MetadataResponseBroker(1, "k", 9092, None)])
    kaflite = MetadataResponse(cluster_id="kaflite-cluster", controller_id=0,
                               brokers=[mr.MetadataResponseBroker(0, "l", 9092, None)])
    assert list(diff(kafka, kaflite, 13, ids)) == []
    request = ApiVersionsRequest(client_software_name="j", client_software_version="4.4",
                                 cluster_id="kafka-cluster", node_id=1)
    substitute(request, 5, ids)
    assert (request.cluster_id, request.node_id) == ("kaflite-cluster", 0)
    # another cluster id later is a difference: one broker, one cluster
    other = MetadataResponse(cluster_id="kafka-cluster", controller_id=1)
    moved = MetadataResponse(cluster_id="someone-else", controller_id=0)
    assert [d.path for d in diff(other, moved, 13, ids)] == ["cluster_id"]


async def _slow_metadata_broker(reader: asyncio.StreamReader,
                                writer: asyncio.StreamWriter) -> None:
    """kaflite's side of the replay, as a fake: node 0 of cluster "kaflite-cluster",
    answering Metadata only after 300 ms, and an ApiVersions v5 that names another node
    REBOOTSTRAP_REQUIRED (as kaflite's broker does)."""
    try:
        while True:
            size = int.from_bytes(await reader.readexactly(4))
            header, request = decode_request(await reader.readexactly(size))
            body: Struct
            if isinstance(request, MetadataRequest):
                await asyncio.sleep(0.3)
                body = MetadataResponse(cluster_id="kaflite-cluster", controller_id=0, brokers=[
                    mr.MetadataResponseBroker(0, "l", 9092, None)])
            else:
                assert isinstance(request, ApiVersionsRequest)
                ok = (request.cluster_id, request.node_id) == ("kaflite-cluster", 0)
                body = ApiVersionsResponse(
                    error_code=0 if ok else errors.RebootstrapRequiredError.code)
            writer.writelines(encode_response(header.request_api_key,
                                              header.request_api_version,
                                              header.correlation_id, body))
    except asyncio.IncompleteReadError:
        writer.close()


def test_a_request_waits_for_the_answers_its_client_had_seen() -> None:
    """The client learnt node 1 from a Metadata answer on its bootstrap connection, then
    opened a connection to node 1 with an ApiVersions v5 naming it. Replayed, that
    ApiVersions waits until the Metadata answer is back and has paired node 1 with
    kaflite's node 0, however late that answer comes; sent at its recorded time, it
    would name Kafka's node 1 and draw REBOOTSTRAP_REQUIRED."""
    kafka_meta = MetadataResponse(cluster_id="kafka-cluster", controller_id=1,
                                  brokers=[mr.MetadataResponseBroker(1, "k", 9092, None)])
    recording = [
        Recorded(0, 1, 0.0, 3, 12, "c", MetadataRequest(topics=[]), kafka_meta,
                 answered_at=0.001),
        Recorded(1, 2, 0.002, 18, 5, "c",
                 ApiVersionsRequest(client_software_name="c", client_software_version="1",
                                    cluster_id="kafka-cluster", node_id=1),
                 ApiVersionsResponse(error_code=0)),
    ]

    async def main() -> list[Outcome]:
        server = await asyncio.start_server(_slow_metadata_broker, "127.0.0.1", 0)
        try:
            port = server.sockets[0].getsockname()[1]
            return await asyncio.wait_for(replay(recording, f"127.0.0.1:{port}"), 30)
        finally:
            server.close()
            await server.wait_closed()

    outcomes = asyncio.run(main())
    assert [o.error for o in outcomes] == [None, None]
    api_versions = outcomes[1].answer
    assert isinstance(api_versions, ApiVersionsResponse)
    assert api_versions.error_code == 0, [str(d) for d in outcomes[1].diffs]
    assert outcomes[1].diffs == []
