"""Recovery timelines (``kaflite.doctor.recovery``) from hand-made client histories."""

from __future__ import annotations

from kaflite.doctor.recovery import ClientEvents, Event, OwnerSearch, recoveries, timeline

T0 = 1_700_000_000.0
P0 = "partition orders-0"


def _client(*events: Event, client_id: str = "app") -> ClientEvents:
    return ClientEvents(client_id, "10.0.0.7", "kaflite 1.0", tuple(events))


def _err(at: float, api: str = "Produce", error: str = "NOT_LEADER_OR_FOLLOWER",
         targets: tuple[str, ...] = (P0,), broker: int = 1, count: int = 1) -> Event:
    return Event("error", T0 + at, broker, 10, api, error, targets, count)


def _ok(at: float, api: str = "Produce", targets: tuple[str, ...] = (P0,),
        broker: int = 2, conn: int = 20) -> Event:
    return Event("success", T0 + at, broker, conn, api, targets=targets)


def _lookup(at: float, api: str = "Metadata", broker: int = 0) -> Event:
    return Event("lookup", T0 + at, broker, 5, api)


def _connect(at: float, broker: int = 2, conn: int = 20) -> Event:
    return Event("connect", T0 + at, broker, conn)


def test_error_lookup_connection_success_with_the_milliseconds_between() -> None:
    r = timeline(_client(_connect(-5, broker=1, conn=10), _ok(-4.9, broker=1, conn=10),
                         _err(0.0), _err(0.010, count=2), _lookup(0.050),
                         _connect(0.120), _ok(0.200)), now=T0 + 10)
    assert r is not None and r.status == "recovered" and r.episodes_total == 1
    ep = r.episodes[0]
    assert (ep.api, ep.error, ep.broker, ep.errors) == ("Produce", "NOT_LEADER_OR_FOLLOWER",
                                                        1, 3)
    assert [s.kind for s in ep.steps] == ["error", "metadata", "connection", "success"]
    assert [s.after_error_ms for s in ep.steps] == [0.0, 50.0, 120.0, 200.0]
    assert [s.after_previous_ms for s in ep.steps] == [0.0, 50.0, 70.0, 80.0]
    assert ep.steps[2].broker == 2 and ep.steps[3].detail == P0
    assert ep.recovered and ep.refreshed and ep.recovery_ms == 200.0 and ep.note == ""
    assert r.last_recovery_ms == r.worst_recovery_ms == 200.0


def test_a_near_miss_recovers_without_a_lookup() -> None:
    """The error, then a success on the same broker: no metadata refresh, no connection
    (the lookup after the success is not a step of it)."""
    r = timeline(_client(_err(0.0), _ok(0.030, broker=1, conn=10), _lookup(0.5)),
                 now=T0 + 1)
    assert r is not None
    ep = r.episodes[0]
    assert [s.kind for s in ep.steps] == ["error", "success"]
    assert ep.recovered and not ep.refreshed and ep.recovery_ms == 30.0
    assert "without a lookup" in ep.note


def test_a_client_never_recovered_is_still_recovering() -> None:
    r = timeline(_client(_err(0.0), _lookup(0.1), _lookup(0.2)), now=T0 + 3)
    assert r is not None and r.status == "recovering" and r.recovering == 1
    ep = r.episodes[0]
    assert not ep.recovered and ep.recovery_ms is None and ep.waiting_ms == 3000.0
    assert [s.kind for s in ep.steps] == ["error", "metadata"]
    assert "no successful Produce since" in ep.note
    assert r.last_recovery_ms is None and r.worst_recovery_ms is None


def test_another_api_on_the_partition_does_not_end_the_episode() -> None:
    r = timeline(_client(_err(0.0), _lookup(0.01), _ok(0.02, api="Fetch")), now=T0 + 1)
    assert r is not None and r.status == "recovering"


def test_a_group_error_waits_for_find_coordinator_and_any_group_success() -> None:
    g = ("group g1",)
    r = timeline(_client(_err(0.0, "Heartbeat", "NOT_COORDINATOR", g), _lookup(0.01),
                         _lookup(0.02, "FindCoordinator"), _ok(0.5, "JoinGroup", g)),
                 now=T0 + 1)
    assert r is not None
    ep = r.episodes[0]
    assert [s.kind for s in ep.steps] == ["error", "find-coordinator", "success"]
    assert ep.steps[1].after_error_ms == 20.0 and ep.recovery_ms == 500.0


def test_an_error_without_targets_is_about_its_api() -> None:
    r = timeline(_client(_err(0.0, "InitProducerId", "COORDINATOR_LOAD_IN_PROGRESS", ()),
                         _ok(0.1, "Produce"), _ok(0.4, "InitProducerId", ())), now=T0 + 1)
    assert r is not None and r.episodes[0].recovery_ms == 400.0


def test_episodes_one_after_another_and_protocol_steps_start_none() -> None:
    r = timeline(_client(_err(0.0, "JoinGroup", "MEMBER_ID_REQUIRED", ("group g",)),
                         _err(1.0, "Metadata", "LEADER_NOT_AVAILABLE"),
                         _err(2.0), _ok(2.1), _err(5.0), _lookup(5.1)), now=T0 + 6)
    assert r is not None and r.episodes_total == 2 and r.status == "recovering"
    newest, older = r.episodes
    assert newest.at == T0 + 5.0 and not newest.recovered
    assert older.recovery_ms == 100.0
    assert r.last_recovery_ms == 100.0


def test_a_lost_connection_recovers_on_any_target_it_served() -> None:
    lost = Event("error", T0, 1, 10, "Produce", "NETWORK_EXCEPTION",
                 (P0, "partition orders-3"), cause="broker 1 went down with the connection")
    r = timeline(_client(lost, _lookup(0.004), _ok(0.090, targets=("partition orders-3",))),
                 now=T0 + 1)
    assert r is not None
    ep = r.episodes[0]
    assert ep.recovered and ep.recovery_ms == 90.0
    assert ep.steps[0].detail == "NETWORK_EXCEPTION: broker 1 went down with the connection"
    # both of its targets were found: a later error on orders-0 is a new episode
    r2 = timeline(_client(lost, _ok(0.090, targets=("partition orders-3",)), _err(1.0)),
                  now=T0 + 2)
    assert r2 is not None and r2.episodes_total == 2


def test_clients_without_errors_are_not_listed_and_the_recovering_come_first() -> None:
    quiet = _client(_connect(0.0), _ok(0.1), client_id="quiet")
    done = _client(_err(0.0), _ok(0.1), client_id="done")
    stuck = _client(_err(-1.0), client_id="stuck")
    assert [r.client_id for r in recoveries([quiet, done, stuck], now=T0 + 1)] == \
        ["stuck", "done"]


def test_owner_search_keeps_the_first_failure_until_a_success() -> None:
    search: OwnerSearch[float] = OwnerSearch()
    assert search.failed(["a", "b"], 1.0) == ["a", "b"]
    assert search.failed(["b", "c"], 2.0) == ["c"]
    assert search.succeeded(["b", "x"]) == [1.0] and len(search) == 2
