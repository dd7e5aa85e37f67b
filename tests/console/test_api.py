"""The console's JSON API against a 3-broker cluster with traffic (real loopback HTTP)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest

from kaflite.cluster import Cluster
from kaflite.cluster.http import HttpApi
from kaflite.protocol.hashing import murmur2_partition

ck = pytest.importorskip("confluent_kafka")

TOKEN = "console-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Cluster, httpx.Client]]:
    with Cluster(brokers=3, config={"offsets.topic.num.partitions": 3}) as cluster:
        cluster.create_topic("orders", 3, 3)
        producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                "client.id": "ck-producer"})
        for i in range(60):
            producer.produce("orders", b'{"n": %d}' % i, key=b"k%d" % (i % 7),
                             headers=[("source", b"test")])
        producer.produce("orders", b"\xff\xfe binary", key=None, partition=0)
        assert producer.flush(10) == 0
        api = cluster.call(HttpApi(cluster, token=TOKEN).start())
        try:
            with httpx.Client(base_url=api.url, timeout=30) as client:
                yield cluster, client
        finally:
            cluster.call(api.stop())


def test_cluster_and_topics(served: tuple[Cluster, httpx.Client]) -> None:
    cluster, c = served
    info = c.get("/api/info").json()
    assert info["backend"] == "kaflite" and info["cluster_id"] == cluster.cluster_id
    assert info["features"]["chaos"] is True
    view = c.get("/api/cluster").json()
    assert [b["id"] for b in view["brokers"]] == [0, 1, 2]
    assert all(b["alive"] and b["running"] for b in view["brokers"])
    [orders] = [t for t in c.get("/api/topics").json() if t["name"] == "orders"]
    assert orders["partitions"] == 3 and orders["replication_factor"] == 3
    assert orders["messages"] == 61 and orders["size_bytes"] > 0
    topic = c.get("/api/topics/orders").json()
    for row in topic["partitions"]:
        state = cluster.controller.topics["orders"].partitions[row["partition"]]
        leader = cluster.broker(state.leader).partitions[("orders", row["partition"])]
        assert row["leader"] == state.leader and row["isr"] == state.isr
        assert row["log_end_offset"] == leader.log_end_offset
        assert row["high_watermark"] == leader.high_watermark
        assert row["last_stable_offset"] == leader.last_stable_offset
    assert {"retention.ms", "cleanup.policy"} <= {cfg["name"] for cfg in topic["configs"]}
    bulk = {t["name"]: t for t in c.get("/api/partitions").json()["topics"]}
    assert bulk["orders"] == {k: v for k, v in topic.items() if k != "configs"}
    assert not [t for t in bulk.values() if t["internal"]]
    assert {t["name"] for t in c.get("/api/partitions", params={"internal": 1})
            .json()["topics"]} == set(cluster.controller.topics)
    assert c.get("/api/topics/nope").status_code == 404
    # the old routes answer as before
    old = c.get("/cluster").json()
    assert any(t["name"] == "orders" for t in old["topics"])


def test_openapi_lists_the_routes(served: tuple[Cluster, httpx.Client]) -> None:
    _, c = served
    paths = c.get("/openapi.json").json()["paths"]
    for path in ("/api/topics", "/api/topics/{name}/messages", "/api/produce",
                 "/api/groups/{group}/reset", "/api/groups/{group}/share-partitions",
                 "/api/stream", "/api/fanout", "/faults/error", "/cluster", "/api/users",
                 "/api/users/{user}", "/api/acls", "/api/acls/delete", "/api/quotas"):
        assert path in paths, path
    assert "security" in paths["/api/produce"]["post"]
    assert "security" not in paths["/api/topics"]["get"]
    page = c.get("/docs")
    assert page.status_code == 200 and "/openapi.json" in page.text
    assert "http://" not in page.text and "https://" not in page.text   # no CDN


def test_browse_text_json_binary_search_and_timestamp(
        served: tuple[Cluster, httpx.Client]) -> None:
    _, c = served
    got = c.get("/api/topics/orders/messages",
                params={"partition": 0, "from": "earliest", "limit": 500}).json()
    records = got["records"]
    assert records and all(r["partition"] == 0 for r in records)
    assert [r["offset"] for r in records] == list(range(len(records)))
    binary = [r for r in records if r["value"]["text"] is None]
    assert len(binary) == 1 and binary[0]["value"]["base64"] and binary[0]["key"] is None
    text = [r for r in records if r["value"]["text"] is not None]
    assert all(r["value"]["json"] for r in text)
    assert text[0]["headers"] == [{"key": "source", "value": {
        "text": "test", "base64": None, "json": False, "size": 4}}]
    # search, server-side, across all partitions
    hits = c.get("/api/topics/orders/messages",
                 params={"from": "earliest", "search": '"N": 42}', "limit": 10}).json()
    assert [json.loads(r["value"]["text"])["n"] for r in hits["records"]] == [42]
    assert hits["scanned"] == 61
    # an offset: only that partition, from there
    second = c.get("/api/topics/orders/messages",
                   params={"partition": 0, "offset": 2, "limit": 3}).json()["records"]
    assert [r["offset"] for r in second] == [2, 3, 4]
    # a timestamp after everything: nothing
    late = c.get("/api/topics/orders/messages",
                 params={"timestamp": 4_000_000_000_000}).json()
    assert late["records"] == []


def test_produce_trace_and_a_confluent_consumer_reads_it(
        served: tuple[Cluster, httpx.Client]) -> None:
    cluster, c = served
    body = {"topic": "orders", "key": "customer-9", "value": "hello", "headers": {"h": "1"}}
    out = c.post("/api/produce", json=body, headers=AUTH).json()
    expected = murmur2_partition(b"customer-9", 3)
    assert out["partition"] == expected
    steps = [s["step"] for s in out["steps"]]
    rest = iter(steps)            # in this order, with the client's own events between
    assert all(step in rest for step in ("partition", "metadata", "produce", "response"))
    leader = cluster.controller.topics["orders"].partitions[expected].leader
    assert any(s["step"] == "metadata" and f"leader of orders-{expected} is broker {leader}"
               in s["detail"] for s in out["steps"])
    assert any(s["step"] == "connection" for s in out["steps"])
    # the same key again: the same partition, over the connection already open
    again = c.post("/api/produce", json={**body, "value": "again"}, headers=AUTH).json()
    assert (again["partition"], again["offset"]) == (expected, out["offset"] + 1)
    [conn] = [s for s in again["steps"] if s["step"] == "connection"]
    assert conn["detail"].startswith(f"using the open connection to broker {leader}")
    assert not [s for s in again["steps"] if s["step"] in ("bootstrap", "connect")]
    consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                            "group.id": "trace-reader", "enable.auto.commit": False})
    try:
        consumer.assign([ck.TopicPartition("orders", expected, out["offset"])])
        msg = None
        for _ in range(50):
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                break
        assert msg is not None and msg.error() is None
        assert (msg.key(), msg.value(), msg.offset()) == (b"customer-9", b"hello",
                                                          out["offset"])
    finally:
        consumer.close()


def test_state_changes_need_the_token(served: tuple[Cluster, httpx.Client]) -> None:
    cluster, c = served
    body = {"name": "unauthorized", "partitions": 1}
    assert c.post("/api/topics", json=body).status_code == 401
    assert c.post("/api/topics", json=body, headers={"X-Kaflite-Token": "no"}).status_code == 401
    assert c.delete("/api/topics/orders").status_code == 401
    assert c.post("/brokers/1/kill").status_code == 401
    assert "unauthorized" not in cluster.controller.topics
    assert cluster.broker_running(1)
    assert c.get("/api/topics").status_code == 200                 # reads need none
    # a page elsewhere that rebinds its name to 127.0.0.1 cannot read it either
    rebound = c.get("/api/topics", headers={"Host": "evil.example:9990"})
    assert rebound.status_code == 421 and "loopback" in rebound.json()["error"]
    assert c.get("/api/topics", headers={"Host": "localhost:9990"}).status_code == 200


@pytest.mark.parametrize(("path", "body", "says"), [
    ("/api/topics", {"name": "bad name!"}, "illegal"),
    ("/api/topics", {"name": "x" * 250}, "illegal"),
    ("/api/topics", {"name": "ok", "partitions": 0}, "partitions must be at least 1"),
    ("/api/topics", {"name": "ok", "partitions": "many"}, "partitions must be an integer"),
    ("/api/topics", {"name": "ok", "configs": {"retention.ms": "soon"}}, "retention.ms"),
    ("/api/topics", {"name": "ok", "configs": {"no.such": "1"}}, "no.such"),
    ("/api/topics", {"name": "ok", "replication_factor": 5}, "INVALID_REPLICATION_FACTOR"),
    ("/api/topics/orders/partitions", {"count": 2}, "must be larger"),
    ("/api/topics/orders/configs", {"set": {"cleanup.policy": "shred"}}, "cleanup.policy"),
    ("/api/produce", {"topic": "orders", "value": "v", "partition": 7}, "no partition 7"),
    ("/api/produce", {"topic": "orders", "value": 5}, "value must be a string"),
    ("/api/groups/g/reset", {"to": "yesterday"}, "to must be one of"),
    ("/api/groups/g/reset", {"to": "offset"}, "offset is required"),
    ("/api/groups/g/reset", {"to": "shift"}, "shift is required"),
    ("/api/groups/g/reset", {"to": "duration", "duration_ms": 0}, "duration_ms must be at least 1"),
    ("/api/users", {"user": "u", "password": "p", "mechanism": "MD5"}, "mechanism must be"),
    ("/api/users", {"user": "u", "password": ""}, "password must be"),
    ("/api/users", {"user": "u", "password": "p", "iterations": 10}, "iterations must be"),
    ("/api/acls", {"resource_type": "TOPIC", "name": "t", "principal": "alice",
                   "operation": "READ"}, "principal must be TYPE:NAME"),
    ("/api/acls", {"resource_type": "SHELF", "name": "t", "principal": "User:a",
                   "operation": "READ"}, "resource_type: unknown value"),
    ("/api/quotas", {"entity": {"team": "x"}, "set": {"producer_byte_rate": 1}},
     "unknown type 'team'"),
    ("/api/quotas", {"entity": {"user": "x"}, "set": {"producer_byte_rate": "fast"}},
     "must be a number"),
])
def test_bad_input_is_refused_and_changes_nothing(served: tuple[Cluster, httpx.Client],
                                                  path: str, body: dict[str, object],
                                                  says: str) -> None:
    cluster, c = served
    before = {n: (len(t.partitions), dict(t.configs))
              for n, t in cluster.controller.topics.items()}
    resp = c.post(path, json=body, headers=AUTH)
    assert resp.status_code == 400, resp.text
    assert says in resp.json()["error"]
    after = {n: (len(t.partitions), dict(t.configs))
             for n, t in cluster.controller.topics.items()}
    assert after == before


def test_users_acls_and_quotas_on_a_cluster_without_an_authorizer(
        served: tuple[Cluster, httpx.Client]) -> None:
    """SCRAM users and quotas work anywhere; ACLs say the cluster keeps none."""
    _, c = served
    acls = c.get("/api/acls").json()
    assert acls["enabled"] is False and acls["acls"] == []
    assert "authorizer" in acls["note"]
    body = {"user": "carol", "password": "pw", "mechanism": "SCRAM-SHA-256"}
    assert c.post("/api/users", json=body).status_code == 401          # the token
    users = c.post("/api/users", json=body, headers=AUTH).json()["users"]
    assert {"user": "carol", "credentials": [{"mechanism": "SCRAM-SHA-256",
                                              "iterations": 4096}]} in users
    gone = c.delete("/api/users/carol", params={"mechanism": "SCRAM-SHA-512"}, headers=AUTH)
    assert gone.status_code == 404
    assert c.delete("/api/users/carol", headers=AUTH).json() == {
        "deleted": "carol", "mechanisms": ["SCRAM-SHA-256"]}
    assert "carol" not in {u["user"] for u in c.get("/api/users").json()["users"]}
    entity = {"client-id": None}
    quotas = c.post("/api/quotas", json={"entity": entity, "set": {"consumer_byte_rate": 5e6}},
                    headers=AUTH).json()["quotas"]
    assert {"entity": entity, "values": {"consumer_byte_rate": 5e6}} in quotas
    c.post("/api/quotas", json={"entity": entity, "delete": ["consumer_byte_rate"]},
           headers=AUTH)
    assert c.get("/api/quotas").json()["quotas"] == []


def test_bad_query_is_refused(served: tuple[Cluster, httpx.Client]) -> None:
    _, c = served
    for params, says in [({"partition": 9}, "no partition 9"),
                         ({"offset": "x"}, "offset must be an integer"),
                         ({"limit": 0}, "limit must be at least 1"),
                         ({"isolation": "dirty"}, "isolation must be")]:
        resp = c.get("/api/topics/orders/messages", params=params)
        assert resp.status_code == 400 and says in resp.json()["error"], resp.text


def test_browse_read_committed_hides_aborted_records(
        served: tuple[Cluster, httpx.Client]) -> None:
    cluster, c = served
    made = c.post("/api/topics", json={"name": "txn", "partitions": 1}, headers=AUTH)
    assert made.status_code == 201, made.text
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                            "transactional.id": "console-txn"})
    producer.init_transactions(30)
    for commit in (True, False, True):
        producer.begin_transaction()
        producer.produce("txn", b"committed" if commit else b"aborted")
        assert producer.flush(10) == 0        # in the log before the abort marker
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    def values(isolation: str) -> list[str]:
        got = c.get("/api/topics/txn/messages", params={"from": "earliest",
                                                         "isolation": isolation}).json()
        return [r["value"]["text"] for r in got["records"]]
    assert values("read_committed") == ["committed", "committed"]
    assert values("read_uncommitted") == ["committed", "aborted", "committed"]


def test_topic_lifecycle(served: tuple[Cluster, httpx.Client]) -> None:
    cluster, c = served
    made = c.post("/api/topics", json={"name": "life", "partitions": 2, "replication_factor": 2,
                                       "configs": {"retention.ms": "60000"}}, headers=AUTH)
    assert made.status_code == 201, made.text
    assert len(made.json()["partitions"]) == 2
    assert c.post("/api/topics", json={"name": "life"}, headers=AUTH).status_code == 409
    grown = c.post("/api/topics/life/partitions", json={"count": 4}, headers=AUTH)
    assert grown.json() == {"topic": "life", "partitions": 4}
    assert len(cluster.controller.topics["life"].partitions) == 4
    altered = c.post("/api/topics/life/configs", json={"set": {"cleanup.policy": "compact"},
                                                       "delete": ["retention.ms"]},
                     headers=AUTH)
    assert altered.status_code == 200, altered.text
    configs = {cfg["name"]: cfg for cfg in altered.json()["configs"]}
    assert configs["cleanup.policy"]["value"] == "compact"
    assert configs["retention.ms"]["default"] is True
    assert cluster.controller.topics["life"].configs == {"cleanup.policy": "compact"}
    assert c.delete("/api/topics/life", headers=AUTH).json() == {"deleted": "life"}
    assert "life" not in cluster.controller.topics


def test_group_lag_equals_the_log_and_reset(served: tuple[Cluster, httpx.Client]) -> None:
    cluster, c = served
    consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                            "group.id": "lagging", "enable.auto.commit": False,
                            "client.id": "ck-lagging"})
    try:
        consumer.assign([ck.TopicPartition("orders", p, 0) for p in range(3)])
        consumer.commit(offsets=[ck.TopicPartition("orders", p, 5 + p) for p in range(3)],
                        asynchronous=False)
    finally:
        consumer.close()
    listed = {g["group_id"]: g for g in c.get("/api/groups").json()}
    assert listed["lagging"]["type"] == "classic"
    group = c.get("/api/groups/lagging").json()
    assert group["state"] == "Empty"
    # the coordinator, in the list as in the detail, is the cluster's own for that group
    _, _, coordinator = cluster.faults.coordinator_of("lagging")
    assert listed["lagging"]["coordinator"] == group["coordinator"] == coordinator
    by_part = {o["partition"]: o for o in group["offsets"]}
    total = 0
    for p in range(3):
        leader = cluster.controller.topics["orders"].partitions[p].leader
        end = cluster.broker(leader).partitions[("orders", p)].high_watermark
        assert by_part[p]["committed"] == 5 + p
        assert by_part[p]["lag"] == end - (5 + p)
        total += end - (5 + p)
    assert group["lag"] == total == listed["lagging"]["lag"]
    reset = c.post("/api/groups/lagging/reset", json={"to": "earliest"}, headers=AUTH).json()
    assert {(o["partition"], o["offset"]) for o in reset["offsets"]} == {(0, 0), (1, 0), (2, 0)}
    again = c.get("/api/groups/lagging").json()
    assert all(o["committed"] == 0 for o in again["offsets"])
    assert c.delete("/api/groups/lagging", headers=AUTH).json() == {"deleted": "lagging"}
    assert c.get("/api/groups/lagging").status_code == 404


def test_reset_refused_on_a_group_with_members(served: tuple[Cluster, httpx.Client]) -> None:
    cluster, c = served
    consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                            "group.id": "busy", "session.timeout.ms": 6000,
                            "client.id": "ck-busy"})
    try:
        consumer.subscribe(["orders"])
        for _ in range(100):
            consumer.poll(0.1)
            if consumer.assignment():
                break
        assert consumer.assignment()
        resp = c.post("/api/groups/busy/reset", json={"to": "latest", "topic": "orders"},
                      headers=AUTH)
        assert resp.status_code == 409 and "NON_EMPTY_GROUP" in resp.json()["error"]
        group = c.get("/api/groups/busy").json()
        [member] = group["members"]
        assert member["client_id"] == "ck-busy" and member["host"]
        assert {a["partition"] for a in member["assignment"]} == {0, 1, 2}
        # its fan-out: one fetch connection per leader broker, one to the coordinator
        leaders = {p.leader for p in cluster.controller.topics["orders"].partitions}
        fan: dict[str, object] = {}
        for _ in range(100):
            consumer.poll(0.1)
            fan = c.get("/api/clients/ck-busy").json()
            conns = fan["connections"]
            assert isinstance(conns, list)
            if {x["broker"] for x in conns if "partition-leader" in x["roles"]} == leaders:
                break
        conns = fan["connections"]
        assert isinstance(conns, list)
        assert {x["broker"] for x in conns if "partition-leader" in x["roles"]} == leaders
        assert len([x for x in conns if "group-coordinator" in x["roles"]]) == 1
    finally:
        consumer.close()


def test_connections_and_the_client_log(served: tuple[Cluster, httpx.Client]) -> None:
    cluster, c = served
    assert c.get("/api/clients/nobody").status_code == 404
    # the console's own clients are marked, and left out unless asked for
    clients = c.get("/api/clients", params={"console": 1}).json()
    assert [cl["console"] for cl in clients if cl["client_id"] == "kaflite-console"] == [True]
    assert all(cl["console"] == (cl["client_id"] or "").startswith("kaflite-console")
               for cl in clients)
    assert any(not cl["console"] for cl in clients)
    assert not any(cl["console"] for cl in c.get("/api/clients").json())
    assert not any(row["console"] for row in c.get("/api/connections").json())
    conns = c.get("/api/connections", params={"client_id": "kaflite-console"}).json()
    assert conns and all(row["client_id"] == "kaflite-console" and row["console"]
                         for row in conns)
    # it reads a group's offsets (its lag) but is no member: no coordinator role for it
    committer = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                             "group.id": "read-only", "client.id": "ck-read-only"})
    try:
        committer.commit(offsets=[ck.TopicPartition("orders", 0, 1)], asynchronous=False)
    finally:
        committer.close()
    assert c.get("/api/groups/read-only").json()["offsets"][0]["committed"] == 1
    assert "read-only" in {g["group_id"] for g in c.get("/api/groups").json()}
    assert not any("read-only" in row["groups"] for row in c.get(
        "/api/connections", params={"client_id": "kaflite-console"}).json())
    log = c.get("/api/events").json()
    assert any(r["source"] == "client" and r["client_id"] == "kaflite-console"
               and r["kind"] == "bootstrap" for r in log)
    since = log[-1]["id"]
    assert all(r["id"] > since for r in c.get("/api/events", params={"since": since}).json())
    # a new client's connections appear in the log as the brokers see them
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                            "client.id": "ck-newcomer"})
    producer.produce("orders", b"hi", partition=0)
    assert producer.flush(10) == 0
    rows: list[dict[str, object]] = []
    for _ in range(50):           # the registry is compared every 0.5 s
        rows = c.get("/api/events", params={"client_id": "ck-newcomer",
                                            "kind": "connect"}).json()
        if rows:
            break
        time.sleep(0.1)
    assert rows and rows[0]["source"] == "registry" and rows[0]["id"] > since
    assert {r["broker"] for r in rows} <= {0, 1, 2}


def test_the_live_fan_out(served: tuple[Cluster, httpx.Client]) -> None:
    """GET /api/fanout: the brokers and every open client connection (the console's own
    only with ?console=1), each with its roles, partitions and request and error counters,
    the same connections as /api/connections."""
    cluster, c = served
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                            "client.id": "ck-fan", "retry.backoff.ms": 50})
    try:
        producer.produce("orders", b"one", partition=0)
        assert producer.flush(10) == 0
        view = c.get("/api/fanout").json()
        assert [b["id"] for b in view["brokers"]] == [0, 1, 2]
        assert {(r["broker"], r["connection_id"]) for r in view["connections"]} == {
            (r["broker"], r["connection_id"]) for r in c.get("/api/connections").json()}
        assert not any(r["console"] for r in view["connections"])
        assert any(r["console"] for r in c.get("/api/fanout", params={"console": 1})
                   .json()["connections"])
        leader = cluster.controller.topics["orders"].partitions[0].leader
        [before] = [r for r in view["connections"] if r["client_id"] == "ck-fan"
                    and "orders-0" in r["partitions"]]
        assert before["broker"] == leader and "partition-leader" in before["roles"]
        assert before["requests"] >= 1 and before["errors"] == 0
        # one error, counted on the connection that got it
        rule = c.post("/faults/error", json={"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER",
                                             "count": 1, "client_id": "ck-fan"}, headers=AUTH)
        assert rule.status_code == 200, rule.text
        producer.produce("orders", b"two", partition=0)
        assert producer.flush(10) == 0
        [after] = [r for r in c.get("/api/fanout").json()["connections"]
                   if (r["broker"], r["connection_id"]) == (before["broker"],
                                                            before["connection_id"])]
        assert after["errors"] == 1 and after["requests"] > before["requests"]
    finally:
        producer.flush(5)


def test_the_stream_delivers_a_leader_change(served: tuple[Cluster, httpx.Client]) -> None:
    cluster, c = served
    with c.stream("GET", "/api/stream", params={"kinds": "cluster"}) as stream:
        lines = stream.iter_lines()
        assert next(lines) == "event: hello"
        assert json.loads(next(lines)[len("data: "):])["cluster_id"] == cluster.cluster_id
        state = cluster.controller.topics["orders"].partitions[1]
        target = next(b for b in state.isr if b != state.leader)
        with httpx.Client(base_url=str(c.base_url), timeout=30) as other:
            moved = other.post("/leaders/move", json={"topic": "orders", "partition": 1,
                                                      "to": target}, headers=AUTH)
        assert moved.status_code == 200, moved.text
        event = None
        for line, _ in zip(lines, range(200), strict=False):
            if line.startswith("data: "):
                data = json.loads(line[len("data: "):])
                if data.get("change") == "leader" and data["topic"] == "orders" \
                        and data["partition"] == 1:
                    event = data
                    break
        assert event is not None and event["leader"] == target
        assert event["previous"] == state.leader or event["previous"] != target


def _rate(sample: dict[str, dict[str, dict[str, float]]], group: str, name: str,
          field: str) -> float:
    return sample[group].get(name, {}).get(field, 0.0)


def test_series_have_produce_throughput(served: tuple[Cluster, httpx.Client]) -> None:
    cluster, c = served
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers})
    seen = False
    for _ in range(40):                       # the sampler runs once a second
        for i in range(20):
            producer.produce("orders", b"x" * 100, key=b"%d" % i)
        producer.flush(10)
        samples = c.get("/api/series").json()["samples"]
        if any(_rate(s, "topics", "orders", "messages_in") > 0
               and _rate(s, "apis", "Produce", "requests") > 0 for s in samples):
            seen = True
            break
        time.sleep(0.25)
    assert seen
