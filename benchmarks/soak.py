"""The long version of the checker's rounds: every client, every fault, for a while.

    python benchmarks/soak.py [--minutes 30] [--seed N] [--out soak.md]

Runs ``kaflite.verify`` rounds one after another until ``--minutes`` have passed:
each client of ``kaflite.verify.clients`` with the queue workload, and each with
transactions with the txn workload, in turn, each round under every kind of fault
(``--nemesis all``) for ``--round-seconds``, with its own seed drawn from
``--seed``. Every history is checked as it ends (an invalid one is kept in
``--histories``). At the end it prints, and writes
to ``--out`` as Markdown, the totals per client in the form of Jepsen's reports:
operations, faults injected by kind, and lost, duplicated, skipped and stuck
counts, plus the seed of every round (``python -m kaflite.verify ... --seed S``
replays one), and every invalid round's replay line.

With ``--groups`` it soaks the group protocols instead (issue 36): rounds of the
queue workload with group churn (``--churn``: members leave and join again, crash, are
cut off from the cluster past their session timeout, or stall past max.poll.interval.ms,
and carry on) for each
client and each group protocol it speaks (classic eager and cooperative, KIP-848's
``consumer``, and share groups, KIP-932's ``share``), on a
cluster holding ``--filler-partitions`` idle partitions, under ``--nemesis``. Its
table has members, rebalances, faults, two-owner intervals, fenced overlaps (a
member fenced and told late), members the coordinators removed (sessions expired,
rebalances not finished: their own log) and silent expiries among them (a removed
member that went on using its partitions, never told), partitions nobody held for longer than a rebalance
(15 s) while the group had members, and the longest such interval, stuck groups,
the share invariant's anomalies (``verify/_share.py``: a record held by two members,
an acknowledgement taken from a member that no longer held it, an accepted record
delivered again, a delivery count past the limit, a record never finished) with the
records archived at the delivery limit, and the worst ApiVersions round trip.

Not a test (it takes half an hour); its figures are in docs/reliability.md.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from kaflite.verify.clients import CLIENTS, factory
from kaflite.verify.report import replay_command
from kaflite.verify.runner import RunConfig, run

# anomaly kinds shown as columns (the checker's names, Jepsen's terms)
COLUMNS = {"lost": ("lost-write",), "duplicated": ("duplicate", "inconsistent-offsets"),
           "skipped": ("poll-skip", "int-poll-skip", "unseen"),
           "out of order": ("nonmonotonic-send", "nonmonotonic-poll", "int-nonmonotonic-poll",
                            "nonmonotonic-commit"),
           "txn (G1a, torn)": ("G1a", "torn-txn", "unprocessed"),
           "stuck": ("stuck",)}


def _runnable(clients: list[str]) -> list[str]:
    out = []
    for c in clients:
        why = factory(c).unavailable()
        if why is None:
            out.append(c)
        else:
            print(f"left out: {c}: {why}", flush=True)
    return out


def rounds(seed: int) -> list[tuple[str, str]]:
    clients = _runnable(sorted(CLIENTS))
    plan = [(c, "queue") for c in clients]
    plan += [(c, "txn") for c in clients if factory(c).transactions]
    random.Random(seed).shuffle(plan)
    return plan


def finish(out: Path, lines: list[str], invalid: list[str]) -> int:
    """Print the report (and the replay lines of invalid rounds), write it to ``out``."""
    if invalid:
        lines += ["", "Invalid rounds (replay):", ""] + [f"    {cmd}" for cmd in invalid]
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    out.write_text(text)
    return 1 if invalid else 0


def group_rounds(seed: int, only: str = "") -> list[tuple[str, str]]:
    """Each client that can run here with each group protocol it speaks, shuffled;
    with ``only`` ("client:protocol,..."), just those pairs, in that order."""
    if only:
        pairs = [tuple(p.split(":", 1)) for p in only.split(",")]
        plan = [(c, p) for c, p in pairs if c in _runnable([c])]
        for c, p in plan:
            if p not in factory(c).group_protocols:
                raise SystemExit(f"{c} has no group protocol {p!r}")
        return plan
    clients = _runnable([c for c in sorted(CLIENTS) if c != "spark"])
    plan = [(c, p) for c in clients for p in factory(c).group_protocols]
    random.Random(seed).shuffle(plan)
    return plan


def soak_groups(args: argparse.Namespace, seed: int) -> int:
    rng = random.Random(seed)
    plan = group_rounds(seed, args.only)
    deadline = time.monotonic() + args.minutes * 60
    rows: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    worst: dict[tuple[str, str], int] = defaultdict(int)
    longest: dict[tuple[str, str], int] = defaultdict(int)
    invalid: list[str] = []
    started, i = time.monotonic(), 0
    nemesis = tuple(args.nemesis.split(",")) if args.nemesis != "all" else RunConfig().nemesis
    while time.monotonic() < deadline:
        client, protocol = plan[i % len(plan)]
        i += 1
        round_seed = rng.randrange(1 << 31)
        history = args.histories / f"{client}-{protocol}-{round_seed}.jsonl"
        # the cluster's data too: an invalid round's logs show what was written (the
        # batch headers of a duplicate say which producer epoch wrote each copy)
        data = args.histories / f"{client}-{protocol}-{round_seed}-data"
        config = RunConfig(client=client, seconds=args.round_seconds, seed=round_seed,
                           history=history, group_protocol=protocol, churn=True,
                           filler_partitions=args.filler_partitions, nemesis=nemesis,
                           data_dir=data, request_log=args.request_log)
        _, result = run(config)
        key, st, c = (client, protocol), result.stats, result.counts
        if result.valid and not st.get("unowned beyond a rebalance"):
            shutil.rmtree(data, ignore_errors=True)     # kept like the history (below)
        churns = result.faults.get("churn", 0)
        crashes, cuts, stalls = (result.faults.get(f"member-{k}", 0)
                                 for k in ("crash", "cut", "stall"))
        rows[key].update({
            "rounds": 1, "members": config.consumers + churns + crashes,
            "rebalances": st.get("assigns", 0) + st.get("revokes", 0) + st.get("losts", 0),
            "faults": sum(result.faults.values()) - churns - crashes - cuts - stalls,
            "crashes": crashes, "cuts": cuts, "stalls": stalls,
            "two-owners": c.get("two-owners", 0), "fenced": st.get("fenced overlaps", 0),
            "removed": st.get("members removed", 0),
            "subscriptions": st.get("subscription changes", 0),
            "silent expiries": c.get("silent-expiry", 0),
            "stuck": c.get("stuck", 0), "lost": c.get("lost-write", 0),
            "share anomalies": sum(n for k, n in c.items() if k.startswith("share-")),
            "share archived": st.get("share archived at the limit", 0),
            "unowned > 15 s": st.get("unowned beyond a rebalance", 0),
            "unreachable": st.get("apiversions unreachable", 0)})
        worst[key] = max(worst[key], st.get("apiversions worst (ms)", 0))
        longest[key] = max(longest[key], st.get("longest unowned (ms)", 0))
        if result.valid and not st.get("unowned beyond a rebalance"):
            history.unlink(missing_ok=True)     # kept: invalid, or a partition left unowned
        else:
            invalid.append(f"{replay_command(config.meta())}  (history: {history})")
        print(f"{(time.monotonic() - started) / 60:5.1f} min  {client:16} {protocol:8} "
              f"seed {round_seed:<10} {'valid' if result.valid else 'INVALID'}  "
              f"{ {k: v for k, v in c.items() if v} or ''}", flush=True)
    cols = ("rounds", "members", "rebalances", "faults", "crashes", "cuts", "stalls",
            "subscriptions",
            "two-owners", "fenced", "removed", "silent expiries",
            "unowned > 15 s", "stuck", "lost", "share anomalies", "share archived")
    lines = [f"Group soak of {(time.monotonic() - started) / 60:.0f} minutes, soak seed "
             f"{seed}, {i} rounds of {args.round_seconds:.0f} s with churn, "
             f"{args.filler_partitions} idle partitions, nemesis {args.nemesis}.", "",
             "| client | protocol | " + " | ".join(cols)
             + " | longest unowned (ms) | worst ApiVersions (ms) |",
             "|---|---|" + "---|" * (len(cols) + 2)]
    for key in sorted(rows):
        lines.append(f"| {key[0]} | {key[1]} | "
                     + " | ".join(str(rows[key][k]) for k in cols)
                     + f" | {longest[key]} | {worst[key]} |")
    return finish(args.out, lines, invalid)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--round-seconds", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", type=Path, default=Path("soak.md"))
    ap.add_argument("--histories", type=Path, default=Path("soak-histories"),
                    help="keep the history of every invalid round here")
    ap.add_argument("--groups", action="store_true",
                    help="soak the group protocols with churn instead (see above)")
    ap.add_argument("--filler-partitions", type=int, default=2000)
    ap.add_argument("--nemesis", default="all", help="with --groups: fault kinds, or all")
    ap.add_argument("--only", default="",
                    help="with --groups: just these client:protocol pairs, comma-separated "
                         "(a 30-minute soak of one pair: --minutes 30 --round-seconds 1800)")
    ap.add_argument("--request-log", action="store_true",
                    help="with --groups: the cluster keeps every request "
                         "(__kaflite_requests), read from an invalid round's kept data")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    if args.groups:
        args.histories.mkdir(parents=True, exist_ok=True)
        return soak_groups(args, seed)
    rng = random.Random(seed)
    plan = rounds(seed)
    deadline = time.monotonic() + args.minutes * 60
    ops: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    anomalies: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    faults: Counter[str] = Counter()
    seeds: dict[tuple[str, str], list[int]] = defaultdict(list)
    invalid: list[str] = []
    args.histories.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    i = 0
    while time.monotonic() < deadline:
        client, workload = plan[i % len(plan)]
        i += 1
        round_seed = rng.randrange(1 << 31)
        history = args.histories / f"{client}-{workload}-{round_seed}.jsonl"
        config = RunConfig(client=client, workload=workload, seconds=args.round_seconds,
                           seed=round_seed, history=history)
        key = (client, workload)
        seeds[key].append(config.seed)
        _, result = run(config)
        ops[key].update({"rounds": 1, "sent ok": result.stats.get("send ok", 0),
                         "polled": result.stats.get("records polled", 0)})
        faults.update(result.faults)
        anomalies[key].update({k: v for k, v in result.counts.items() if v})
        verdict = "valid" if result.valid else "INVALID"
        if result.valid:
            history.unlink(missing_ok=True)
        else:   # kept: python -m kaflite.verify --check <history> shows every anomaly
            invalid.append(f"{replay_command(config.meta())}  (history: {history})")
        print(f"{(time.monotonic() - started) / 60:5.1f} min  {client:16} {workload:5} "
              f"seed {config.seed:<10} {verdict}  {dict(anomalies[key]) or ''}", flush=True)
    lines = [f"Soak of {(time.monotonic() - started) / 60:.0f} minutes, soak seed {seed}, "
             f"{i} rounds of {args.round_seconds:.0f} s under every fault.", "",
             "| client | workload | rounds | acked writes | records read | "
             + " | ".join(COLUMNS) + " |",
             "|---|---|---|---|---|" + "---|" * len(COLUMNS)]
    for key in sorted(ops):
        counts = anomalies[key]
        cells = [str(sum(counts.get(k, 0) for k in kinds)) for kinds in COLUMNS.values()]
        lines.append(f"| {key[0]} | {key[1]} | {ops[key]['rounds']} | {ops[key]['sent ok']} | "
                     f"{ops[key]['polled']} | " + " | ".join(cells) + " |")
    lines += ["", "Faults injected, by kind:", "", "| fault | count |", "|---|---|"]
    lines += [f"| {kind} | {n} |" for kind, n in sorted(faults.items())]
    lines += ["", "Round seeds: " + "; ".join(
        f"{c} {w}: {', '.join(map(str, s))}" for (c, w), s in sorted(seeds.items()))]
    return finish(args.out, lines, invalid)


if __name__ == "__main__":
    sys.exit(main())
