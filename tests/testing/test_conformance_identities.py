"""The differential replay pairs each broker's cluster id as an identity it minted, so an
ApiVersions v5 that names Kafka's cluster and node (KIP-1242) reaches kaflite naming
kaflite's; left as recorded, kaflite would answer it REBOOTSTRAP_REQUIRED."""

from __future__ import annotations

from kaflite.protocol.messages import ApiVersionsRequest, MetadataResponse
from kaflite.protocol.messages import metadata_response as mr
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
