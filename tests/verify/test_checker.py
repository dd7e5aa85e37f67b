"""The checker on hand-built histories: each anomaly kind is built exactly and must be found.

Every history starts from ``Run.clean()``: one producer wrote values 0..5 to two
partitions (value v at partition v % 2, offset v // 2), consumers c0 and c1 of
group g read them all and committed, and the final drain holds exactly that
log. A test then changes one thing and checks that the checker reports that
anomaly, and nothing else where the anomaly implies nothing else.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kaflite.verify.checker import KINDS, CheckResult, check
from kaflite.verify.history import (
    Assign,
    Commit,
    Drain,
    Fault,
    History,
    Meta,
    Op,
    Phase,
    Poll,
    Send,
    Txn,
)
from kaflite.verify.report import render_text

Recs = list[tuple[int, int]]


class Run:
    """A history under construction, with a clock that ticks on every operation."""

    def __init__(self) -> None:
        self.ops: list[Op] = [Meta(time=0, process="test", config={"progress_bound": 10})]
        self.t = 0.0

    def tick(self) -> float:
        self.t += 0.1
        return self.t

    def add(self, op: Op) -> Run:
        self.ops.append(op)
        return self

    def send(self, value: int, partition: int, offset: int | None, *, process: str = "p0",
             topic: str = "t", txn: str | None = None, ok: bool = True) -> Run:
        self.add(Send(time=self.tick(), process=process, type="invoke", topic=topic,
                      value=value, txn=txn))
        if ok:
            self.add(Send(time=self.tick(), process=process, type="ok", topic=topic,
                          value=value, partition=partition, offset=offset, txn=txn))
        return self

    def assign(self, process: str, *parts: int, type: str = "assign", topic: str = "t",
               group: str = "g", client: str | None = None) -> Run:
        return self.add(Assign(time=self.tick(), process=process, type=type, group=group,
                               topic=topic, partitions=tuple(parts), client=client))

    def poll(self, process: str, partition: int, records: Recs, *, topic: str = "t",
             group: str | None = "g", isolation: str = "read_uncommitted") -> Run:
        return self.add(Poll(time=self.tick(), process=process, group=group, topic=topic,
                             partition=partition, records=tuple(records),
                             isolation=isolation))

    def commit(self, process: str, partition: int, offset: int, *, invoked: float | None = None,
               done: float | None = None, topic: str = "t") -> Run:
        t = self.tick() if done is None else done
        return self.add(Commit(time=t, process=process, type="ok", group="g", topic=topic,
                               partition=partition, offset=offset,
                               invoked=t - 0.05 if invoked is None else invoked))

    def phase(self, name: str, topic: str | None = None) -> Run:
        return self.add(Phase(time=self.tick(), process="run", name=name, topic=topic))

    def drain(self, partition: int, records: Recs, *, topic: str = "t",
              isolation: str = "read_uncommitted") -> Run:
        return self.add(Drain(time=self.tick(), process="drain", topic=topic,
                              partition=partition, isolation=isolation,
                              records=tuple(records), end_offset=len(records)))

    @staticmethod
    def log(partition: int, values: range = range(6)) -> Recs:
        return [(v // 2, v) for v in values if v % 2 == partition]

    @classmethod
    def clean(cls, reads: bool = True) -> Run:
        run = cls()
        for v in range(6):
            run.send(v, v % 2, v // 2)
        run.phase("healed").phase("writers-done", "t")
        if reads:
            for c, part in (("c0", 0), ("c1", 1)):
                run.assign(c, part)
                run.poll(c, part, cls.log(part)[:2]).commit(c, part, 2)
                run.poll(c, part, cls.log(part)[2:]).commit(c, part, 3)
        return run

    def finish(self) -> Run:
        self.drain(0, self.log(0)).drain(1, self.log(1))
        return self

    def check(self) -> CheckResult:
        return check(self.ops)


def found(result: CheckResult) -> dict[str, int]:
    return {k: n for k, n in result.counts.items() if n}


def test_a_clean_history_is_valid() -> None:
    result = Run.clean().finish().check()
    assert result.valid, result.examples
    assert found(result) == {}
    assert result.stats["send ok"] == 6 and result.stats["records polled"] == 6
    assert "valid" in render_text(result)


def test_every_kind_has_a_description() -> None:
    assert len(KINDS) == 23 and "G1a" in KINDS and "stuck" in KINDS and "two-owners" in KINDS
    assert "silent-expiry" in KINDS
    assert {"share-two-holders", "share-stale-ack", "share-redelivered", "share-delivery-limit",
            "share-lost"} <= set(KINDS)


# -- writes -------------------------------------------------------------------------------

def test_lost_write_an_acked_value_missing_from_the_log() -> None:
    run = Run.clean().send(6, 0, 3).finish()
    result = run.check()
    assert found(result) == {"lost-write": 1}
    assert result.examples["lost-write"][0]["value"] == 6
    assert not result.valid


def test_lost_write_a_value_read_then_gone() -> None:
    run = Run.clean()
    run.send(6, 0, None, ok=False)          # sent, outcome unknown, read by c0 at offset 3
    run.poll("c0", 0, [(3, 6)])
    run.finish()                            # ...but the final log ends at offset 2
    assert found(run.check()) == {"lost-write": 1}


def test_a_failed_send_missing_from_the_log_is_not_lost() -> None:
    run = Run.clean().send(6, 0, None, ok=False).finish()
    assert run.check().valid


def test_duplicate_a_value_at_two_offsets() -> None:
    run = Run.clean()
    run.poll("c0", 0, [(3, 4)])             # the duplicate read back, in order
    run.drain(0, [*Run.log(0), (3, 4)]).drain(1, Run.log(1))
    result = run.check()
    assert found(result) == {"duplicate": 1}
    assert result.examples["duplicate"][0]["at"] == [(0, 2), (0, 3)]


def test_inconsistent_offsets_an_ack_at_another_offset() -> None:
    run = Run()
    run.send(0, 0, 0).send(2, 0, 0, process="p1")   # both acked at offset 0 of partition 0
    run.phase("healed").phase("writers-done", "t")
    run.assign("c0", 0).poll("c0", 0, [(0, 0), (1, 2)])
    run.drain(0, [(0, 0), (1, 2)])
    result = run.check()
    assert found(result) == {"inconsistent-offsets": 1}
    assert result.examples["inconsistent-offsets"][0]["acked"] == 2


def test_inconsistent_offsets_a_poll_disagrees_with_the_log() -> None:
    run = Run.clean()
    run.assign("c9", 0, group="other").poll("c9", 0, [(0, 2)], group=None)
    run.finish()
    result = run.check()
    assert found(result) == {"inconsistent-offsets": 1}


def test_unexpected_a_value_never_sent() -> None:
    run = Run.clean().poll("c0", 0, [(3, 99)])
    run.drain(0, [*Run.log(0), (3, 99)]).drain(1, Run.log(1))
    result = run.check()
    assert found(result) == {"unexpected": 1}
    assert result.examples["unexpected"][0]["value"] == 99


def test_nonmonotonic_send_acks_out_of_send_order() -> None:
    run = Run()
    run.send(0, 0, 1).send(2, 0, 0)         # 0 sent first but acked at the higher offset
    run.phase("healed").phase("writers-done", "t")
    run.assign("c0", 0).poll("c0", 0, [(0, 2), (1, 0)])
    run.drain(0, [(0, 2), (1, 0)])
    result = run.check()
    assert found(result) == {"nonmonotonic-send": 1}


def test_sends_of_two_producers_interleave_freely() -> None:
    run = Run()
    run.send(0, 0, 1, process="p0").send(2, 0, 0, process="p1")
    run.phase("healed").phase("writers-done", "t")
    run.assign("c0", 0).poll("c0", 0, [(0, 2), (1, 0)])
    run.drain(0, [(0, 2), (1, 0)])
    assert run.check().valid


# -- polls --------------------------------------------------------------------------------

def skip_run(rebalance: bool) -> Run:
    run = Run.clean(reads=False)
    run.assign("c1", 1).poll("c1", 1, Run.log(1))
    run.assign("c0", 0).poll("c0", 0, [(0, 0)])
    if rebalance:
        run.assign("c0", 0, type="revoke").assign("c0", 0)
    run.poll("c0", 0, [(2, 4)])
    run.assign("c2", 0).poll("c2", 0, Run.log(0))   # the group sees everything
    return run.finish()


def test_poll_skip_within_one_assignment() -> None:
    result = skip_run(rebalance=False).check()
    assert found(result) == {"poll-skip": 1}
    assert result.examples["poll-skip"][0]["skipped"] == [1]


def test_a_jump_across_a_rebalance_is_not_a_skip() -> None:
    assert skip_run(rebalance=True).check().valid


def test_a_jump_after_a_seek_is_not_a_skip() -> None:
    run = Run.clean(reads=False)
    run.assign("c1", 1).poll("c1", 1, Run.log(1))
    run.assign("c0", 0).poll("c0", 0, Run.log(0)).assign("c0", 0, type="seek")
    run.poll("c0", 0, [(0, 0)])
    assert run.finish().check().valid


def test_int_poll_skip_within_one_poll() -> None:
    run = Run.clean()
    run.assign("c2", 0).poll("c2", 0, [(0, 0), (2, 4)])
    assert found(run.finish().check()) == {"int-poll-skip": 1}


def test_nonmonotonic_poll_goes_back() -> None:
    run = Run.clean(reads=False)
    run.assign("c1", 1).poll("c1", 1, Run.log(1))
    run.assign("c0", 0).poll("c0", 0, [(0, 0), (1, 2)]).poll("c0", 0, [(1, 2), (2, 4)])
    result = run.finish().check()
    assert found(result) == {"nonmonotonic-poll": 1}
    assert result.examples["nonmonotonic-poll"][0]["offsets"] == (1, 1)


def test_int_nonmonotonic_poll_within_one_poll() -> None:
    run = Run.clean()
    run.assign("c2", 0).poll("c2", 0, [(0, 0), (1, 2), (1, 2), (2, 4)])
    assert found(run.finish().check()) == {"int-nonmonotonic-poll": 1}


def test_read_committed_skips_of_aborted_records_are_not_skips() -> None:
    run = Run()
    run.send(0, 0, 0, txn="a").send(1, 0, 1, txn="b").send(2, 0, 3, txn="c")
    for name, kind in (("a", "commit"), ("b", "abort"), ("c", "commit")):
        run.add(Txn(time=run.tick(), process="p0", txn=name, type=kind, outcome="ok",
                    values=()))
    run.phase("healed").phase("writers-done", "t")
    run.assign("c0", 0).poll("c0", 0, [(0, 0)], isolation="read_committed")
    run.poll("c0", 0, [(3, 2)], isolation="read_committed")
    run.drain(0, [(0, 0), (1, 1), (3, 2)])             # offset 2: the abort marker
    run.drain(0, [(0, 0), (3, 2)], isolation="read_committed")
    result = run.check()
    assert result.valid, result.examples


# -- commits ------------------------------------------------------------------------------

def test_nonmonotonic_commit_a_later_commit_goes_back() -> None:
    run = Run.clean()
    run.commit("c2", 0, 1, invoked=run.t + 1, done=run.t + 1.1)  # after c0 committed 3
    result = run.finish().check()
    assert found(result) == {"nonmonotonic-commit": 1}


def test_concurrent_commits_may_complete_in_any_order() -> None:
    run = Run.clean(reads=False)
    run.assign("c1", 1).poll("c1", 1, Run.log(1))
    run.assign("c0", 0).poll("c0", 0, Run.log(0))
    t = run.t
    run.commit("c0", 0, 3, invoked=t + 1, done=t + 3)
    run.commit("c9", 0, 1, invoked=t + 2, done=t + 2.5)   # overlaps the commit of 3
    assert run.finish().check().valid


# -- transactions -------------------------------------------------------------------------

def txn_run(outcome: str = "ok", kind: str = "abort", visible: tuple[int, ...] = (),
            read: tuple[int, ...] = ()) -> Run:
    """Committed txn a: 0@0, 1@1; txn b (``kind``/``outcome``): 2@2, 3@3; committed c: 4@5."""
    run = Run()
    for v, off, txn in ((0, 0, "a"), (1, 1, "a"), (2, 2, "b"), (3, 3, "b"), (4, 5, "c")):
        run.send(v, 0, off, txn=txn)
    for name, k, o in (("a", "commit", "ok"), ("b", kind, outcome), ("c", "commit", "ok")):
        run.add(Txn(time=run.tick(), process="p0", txn=name, type=k, outcome=o, values=()))
    run.phase("healed").phase("writers-done", "t")
    log = [(0, 0), (1, 1), (2, 2), (3, 3), (5, 4)]
    committed = [(o, v) for o, v in log if v not in (2, 3) or v in visible]
    reads = [(o, v) for o, v in log if v not in (2, 3) or v in read]
    run.assign("c0", 0).poll("c0", 0, reads, isolation="read_committed")
    run.drain(0, log)
    run.drain(0, committed, isolation="read_committed")
    return run


def test_transactions_committed_and_aborted_are_valid() -> None:
    assert txn_run().check().valid
    assert txn_run(kind="commit", visible=(2, 3), read=(2, 3)).check().valid


def test_g1a_an_aborted_value_read_by_read_committed() -> None:
    result = txn_run(read=(2, 3)).check()
    assert found(result) == {"G1a": 2}
    assert result.examples["G1a"][0]["txn"] == "b"


def test_g1a_an_aborted_value_in_the_committed_view() -> None:
    result = txn_run(visible=(2, 3), read=(2, 3)).check()
    assert found(result) == {"G1a": 3}      # in the drain, and the two values c0 read


def resent_run(read_first: bool = False) -> Run:
    """Transformer p0: txn b sent 1 (no answer) and 2 (acked 2@0), then aborted; txn c
    sent both again (1@1, 2@2) and committed: the consume-transform-produce retry."""
    run = Run()
    run.send(1, 0, None, txn="b", ok=False).send(2, 0, 0, txn="b")
    run.add(Txn(time=run.tick(), process="p0", txn="b", type="abort", outcome="ok",
                values=(("t", 1), ("t", 2))))
    run.send(1, 0, 1, txn="c").send(2, 0, 2, txn="c")
    run.add(Txn(time=run.tick(), process="p0", txn="c", type="commit", outcome="ok",
                values=(("t", 1), ("t", 2))))
    run.phase("healed").phase("writers-done", "t")
    committed = [(1, 1), (2, 2)]
    run.assign("c0", 0).poll("c0", 0, [(0, 2), *committed] if read_first else committed,
                             isolation="read_committed")
    run.drain(0, [(0, 2), (1, 1), (2, 2)])
    run.drain(0, committed, isolation="read_committed")
    return run


def test_a_value_sent_again_after_its_transaction_aborted() -> None:
    """Neither an aborted read (2 and 1 are read at the offsets of committed txn c)
    nor acknowledgements out of send order (2@0 belongs to b, 1@1 and 2@2 to c)."""
    result = resent_run().check()
    assert found(result) == {}, found(result)
    # Reading 2 at offset 0, where aborted txn b's send of it was acknowledged, is G1a.
    result = resent_run(read_first=True).check()
    assert found(result)["G1a"] == 1
    assert result.examples["G1a"][0]["offset"] == 0


def test_torn_txn_partly_visible_in_the_log() -> None:
    result = txn_run(kind="commit", outcome="info", visible=(2,), read=(2,)).check()
    assert found(result) == {"torn-txn": 1}
    assert result.examples["torn-txn"][0]["missing"] == [("t", 3)]


def test_torn_txn_a_reader_saw_part_of_a_committed_txn() -> None:
    result = txn_run(kind="commit", visible=(2, 3), read=(2,)).check()
    # c0 read 2@2 and 4@5 but not 3@3 of the same transaction: torn, and a skip.
    assert found(result) == {"torn-txn": 1, "int-poll-skip": 1, "unseen": 1}
    assert result.examples["torn-txn"][0]["missed"] == [(3, 3)]


def test_lost_write_a_committed_txn_not_visible() -> None:
    result = txn_run(kind="commit", visible=(), read=()).check()
    assert found(result) == {"lost-write": 2}


def test_unprocessed_a_committed_input_never_transformed() -> None:
    run = Run()
    run.ops[0] = Meta(time=0, process="test", config={"transforms": [["in", "out"]]})
    run.send(0, 0, 0, topic="in").send(1, 0, 1, topic="in")
    run.send(0, 0, 0, topic="out", txn="x")
    run.add(Txn(time=run.tick(), process="p0", txn="x", type="commit", outcome="ok",
                values=(("out", 0),)))
    for topic, recs in (("in", [(0, 0), (1, 1)]), ("out", [(0, 0)])):
        for isolation in ("read_uncommitted", "read_committed"):
            run.drain(0, recs, topic=topic, isolation=isolation)
    result = run.check()
    assert found(result) == {"unprocessed": 1}
    assert result.examples["unprocessed"][0]["value"] == 1


# -- groups -------------------------------------------------------------------------------

def test_unseen_a_value_no_member_of_the_group_read() -> None:
    run = Run.clean(reads=False)
    run.assign("c1", 1).poll("c1", 1, Run.log(1))
    run.assign("c0", 0).poll("c0", 0, [(0, 0)]).assign("c0", 0, type="revoke")
    run.assign("c2", 0).poll("c2", 0, [(2, 4)])
    result = run.finish().check()
    assert found(result) == {"unseen": 1}
    assert result.examples["unseen"][0]["value"] == 2


def test_stuck_a_group_that_never_reaches_the_end() -> None:
    run = Run.clean(reads=False)
    run.assign("c0", 0, 1).poll("c0", 0, Run.log(0)).poll("c0", 1, Run.log(1)[:2])
    result = run.finish().check()
    assert found(result) == {"stuck": 1, "unseen": 1}
    stuck = result.examples["stuck"][0]
    assert (stuck["partition"], stuck["last_offset"], stuck["max_read"]) == (1, 2, 1)
    assert stuck["consumer"] == "c0"


def test_stuck_a_group_that_reaches_the_end_too_late() -> None:
    run = Run.clean(reads=False)
    run.assign("c0", 0, 1).poll("c0", 0, Run.log(0)).poll("c0", 1, Run.log(1)[:2])
    run.t += 60                              # past the bound of 10 s
    run.poll("c0", 1, Run.log(1)[2:])
    result = run.finish().check()
    assert found(result) == {"stuck": 1}
    assert result.examples["stuck"][0]["reached_after"] > 10
    assert check(run.ops, progress_bound=120).valid


def test_incomplete_without_a_drain() -> None:
    result = Run.clean().check()
    assert found(result) == {"incomplete": 1}


def test_incomplete_when_no_write_was_acknowledged() -> None:
    run = Run()
    for v in range(3):
        run.send(v, 0, None, ok=False)
    run.drain(0, [])
    result = run.check()
    assert found(result) == {"incomplete": 1}
    assert result.examples["incomplete"][0]["why"] == "no write was acknowledged"


def test_incomplete_when_nothing_was_sent() -> None:
    """A client that never started (kafkajs not installed, say) wrote nothing: the round
    tested nothing and must not pass (the group soak counted such rounds as valid)."""
    run = Run()
    run.drain(0, [])
    result = run.check()
    assert found(result) == {"incomplete": 1}
    assert "nothing was sent" in result.examples["incomplete"][0]["why"]


# -- the history file ---------------------------------------------------------------------

def test_a_history_survives_json_lines(tmp_path: Path) -> None:
    run = txn_run(read=(2, 3))
    run.add(Fault(time=run.tick(), process="nemesis", fault="kill-broker", args={"broker": 1},
                  start=0.5, end=1.5))
    history = History(run.ops)
    history.dump(tmp_path / "h.jsonl")
    loaded = History.load(tmp_path / "h.jsonl")
    assert loaded.ops == run.ops
    before, after = check(run.ops), check(loaded.ops)
    assert (before.counts, before.faults) == (after.counts, after.faults)
    assert after.faults == {"kill-broker": 1} and found(after) == {"G1a": 2}


@pytest.mark.parametrize("kind", ["lost-write", "duplicate", "poll-skip", "stuck"])
def test_the_report_names_the_anomaly(kind: str) -> None:
    runs = {"lost-write": Run.clean().send(6, 0, 3).finish(),
            "poll-skip": skip_run(rebalance=False)}
    run = runs.get(kind)
    if run is None:
        run = Run.clean(reads=False)
        run.assign("c0", 0, 1).poll("c0", 0, Run.log(0)).poll("c0", 1, [(0, 1), (0, 1)][:1])
        if kind == "duplicate":
            run.drain(0, [*Run.log(0), (3, 4)]).drain(1, Run.log(1))
        else:
            run.finish()
    text = render_text(run.check())
    assert kind in text and "INVALID" in text
