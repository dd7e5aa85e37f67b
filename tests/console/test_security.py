"""The console of a kaflite cluster with SASL and an authorizer: its own clients connect
through the SASL bootstrap listener, and state changes take the cluster's credentials
(HTTP Basic, checked against the cluster's PLAIN and SCRAM users) besides the token."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from kaflite.cluster import Cluster
from kaflite.cluster.http import HttpApi
from kaflite.console.credentials import basic_credentials

TOKEN = "console-security-token"
USERS = {"admin": "admin-secret", "alice": "alice-secret"}
CONFIG = {
    "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "sasl.users": ",".join(f"{u}:{p}" for u, p in USERS.items()),
    "authorizer.class.name": "kaflite",
    "super.users": "User:admin;User:carol",
}


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Cluster, HttpApi, httpx.Client]]:
    # the SASL listener first: it is the bootstrap the console's own clients use
    with Cluster(brokers=1, listeners="SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
                 config=CONFIG) as cluster:
        api = cluster.call(HttpApi(cluster, token=TOKEN, sampling=False).start())
        try:
            with httpx.Client(base_url=api.url, timeout=30) as client:
                yield cluster, api, client
        finally:
            cluster.call(api.stop())


def _created(client: httpx.Client, name: str, auth: httpx.Auth | None = None,
             headers: dict[str, str] | None = None) -> httpx.Response:
    return client.post("/api/topics", json={"name": name, "partitions": 1},
                       auth=auth, headers=headers)


def test_the_consoles_clients_connect_over_sasl(
        served: tuple[Cluster, HttpApi, httpx.Client]) -> None:
    cluster, _, c = served
    cluster.create_topic("seen", 2, 1)
    assert "seen" in {t["name"] for t in c.get("/api/topics").json()}
    assert c.get("/api/groups").json() == []        # through the console's admin client
    conns = c.get("/api/connections", params={"client_id": "kaflite-console"}).json()
    assert conns and {row["principal"] for row in conns} == {"User:admin"}


def test_state_changes_take_the_clusters_credentials(
        served: tuple[Cluster, HttpApi, httpx.Client]) -> None:
    cluster, api, c = served
    topics = cluster.controller.topics
    # a PLAIN user of sasl.users who is a super user
    assert _created(c, "by-admin", httpx.BasicAuth("admin", "admin-secret")).status_code == 201
    assert "by-admin" in topics
    # a wrong password, and a real user who is not a super user: refused, nothing made
    for user, password in (("admin", "wrong"), ("alice", "alice-secret"), ("nobody", "x")):
        resp = _created(c, f"by-{user}-x", httpx.BasicAuth(user, password))
        assert resp.status_code == 401 and "user or password" in resp.json()["error"]
        assert f"by-{user}-x" not in topics
    # a SCRAM-only user (AlterUserScramCredentials, salted on the client): checked by its
    # StoredKey, as the SCRAM exchange proves it
    admin = cluster.call(api.console.backend.admin())
    cluster.call(admin.alter_user_scram_credentials(
        [("carol", "SCRAM-SHA-512", "carol-secret", 4096)]))
    assert _created(c, "by-carol", httpx.BasicAuth("carol", "carol-secret")).status_code == 201
    assert _created(c, "by-carol-x", httpx.BasicAuth("carol", "nope")).status_code == 401
    assert "by-carol" in topics and "by-carol-x" not in topics
    # the token still works, and nothing at all is still refused
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert _created(c, "by-token", headers=auth).status_code == 201
    resp = _created(c, "by-none")
    assert resp.status_code == 401 and "HTTP Basic" in resp.json()["error"]
    assert "by-none" not in topics


def test_basic_header_parsing() -> None:
    assert basic_credentials("Basic YWRtaW46YTpi") == ("admin", "a:b")
    assert basic_credentials("Bearer YWRtaW46YTpi") is None
    assert basic_credentials("Basic not-base64!") is None
    assert basic_credentials("Basic OnBhc3M=") is None          # ":pass": no user
