"""``kaflite demo --proxy``: a producer behind a shared VIP, caught by ``kaflite doctor``,
then moved behind kaflite's proxy, and the doctor finding nothing more.

The seeds' warning, end to end, on an embedded 3-broker cluster that writes its request
log (``__kaflite_requests``), with a 6-partition topic:

1. a confluent-kafka producer writes keyed records through kaflite's naive proxy, the
   shared VIP (every broker advertised at one address, each connection on a broker
   drawn at random: ``kaflite.demo.proxy_storm``). The draw can put each of the
   producer's connections on the broker it meant, about one producer in 27: then
   nothing goes wrong, the demo says so and tries another producer (a few at most);
2. the doctor reads the request log (``kaflite.demo.doctor_pass``: ``kaflite.doctor``'s
   reader and analyzer) and the demo prints each finding: its name, its subject, the
   doctor's line about it and its counts;
3. the switch: the same producer, under a new client.id, through kaflite's proxy (a
   port per broker);
4. the doctor again, over the records answered after the switch only.

Every line comes from what happened: the producers' delivery reports, the proxies'
registries, and the doctor's report. ``ok`` says whether the story came out as told
(a storm, the doctor naming it for that producer, nothing after the switch).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from kaflite.cluster import Cluster
from kaflite.demo.doctor_pass import DoctorPass, diagnose
from kaflite.demo.proxy_storm import NOT_LEADER, StormResult, produce_through
from kaflite.demo.story import Phases, fit, pack, wrap
from kaflite.doctor import Finding
from kaflite.proxy import Proxy

__all__ = ["PROXIED", "TITLES", "VipStory", "run_vip_story", "vip_client"]

TOPIC, PARTITIONS, BROKERS = "storm", 6, 3
ATTEMPTS = 4          # producers behind the VIP at most: all four draws right is 1 in 27^4
PROXIED = "behind-proxy"
REQUEST_LOG = {"kaflite.request.log.enable": "true", "kaflite.request.log.flush.ms": "100"}
TITLES = ["produce through the shared VIP", "kaflite doctor reads the request log",
          "the switch: the same producer through kaflite proxy",
          "kaflite doctor over the records after the switch"]

Say = Callable[[str], None]


def vip_client(n: int) -> str:
    return f"behind-vip-{n}"


@dataclass(frozen=True)
class VipStory:
    vip: tuple[StormResult, ...]    # each producer behind the VIP, in order
    before: DoctorPass              # the doctor over the log before the switch
    proxied: StormResult
    after: DoctorPass               # ... and over those after it

    @property
    def stormer(self) -> str | None:
        return stormer_of(self.vip)

    @property
    def ok(self) -> bool:
        return (self.stormer is not None
                and any(f.name == "vip-bootstrap" for f in self.before.findings_of(self.stormer))
                and not self.after.findings and self.after.requests_of(PROXIED) > 0
                and self.proxied.failed == 0 and not self.proxied.stormed)


# -- the lines --------------------------------------------------------------------------
def produced_lines(r: StormResult) -> list[str]:
    return wrap(f"{r.client_id}: {r.delivered} of {r.records} delivered, {r.failed} failed "
                f"in {r.seconds:.1f} s; {r.not_leader} {NOT_LEADER} in {r.requests} requests",
                indent="    ")


def lucky_draw_lines() -> list[str]:
    return wrap("the draw put each of its connections on the broker it meant (about one "
                "producer in 27): no storm, so another producer", indent="      ")


def finding_lines(f: Finding) -> list[str]:
    counts = [f"{name}={value:g}" for name, value in f.counts.items()]
    return [fit(f"    {f.name}  {f.subject}"),
            *wrap(f.explanation, indent="      ", subsequent=""),
            *pack("      counts:", counts, indent="        ", sep=" ")]


def stormer_of(vip: tuple[StormResult, ...]) -> str | None:
    """The producer behind the VIP that got NOT_LEADER_OR_FOLLOWER answers."""
    return next((r.client_id for r in vip if r.stormed), None)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def before_lines(d: DoctorPass, vip: tuple[StormResult, ...]) -> list[str]:
    mine = ", ".join(f"{d.requests_of(r.client_id)} of {r.client_id}" for r in vip)
    lines = wrap(f"read {d.requests} requests ({mine}): "
                 f"{_plural(len(d.findings), 'finding')}", indent="    ")
    for f in d.findings:
        lines += finding_lines(f)
    stormer = stormer_of(vip)
    if stormer is None:
        lines += wrap("every producer's draw put each connection on its own broker: no "
                      "storm for the doctor to find", indent="    ")
    elif not any(f.name == "vip-bootstrap" for f in d.findings_of(stormer)):
        lines += wrap(f"no vip-bootstrap for {stormer}, though the proxy counted "
                      f"{NOT_LEADER} answers to it", indent="    ")
    return lines


def after_lines(d: DoctorPass) -> list[str]:
    refused = sum(c.errors.get(NOT_LEADER, 0) for c in d.clients)
    found = _plural(len(d.findings), "finding") if d.findings else "no findings"
    lines = [f"    after the switch: {found}"]
    lines += wrap(f"read {d.requests} requests answered after the switch "
                  f"({d.requests_of(PROXIED)} of {PROXIED}), {refused} {NOT_LEADER}",
                  indent="      ")
    for f in d.findings:
        lines += finding_lines(f)
    return lines


# -- the run ----------------------------------------------------------------------------
def _behind_vip(cluster: Cluster, records: int, timeout_s: float, say: Say
                ) -> tuple[StormResult, ...]:
    results: list[StormResult] = []
    with Proxy(cluster.bootstrap_servers, naive=True) as vip:
        for n in range(1, ATTEMPTS + 1):
            r = produce_through(vip, vip_client(n), TOPIC, records, timeout_s)
            results.append(r)
            for line in produced_lines(r):
                say(line)
            if r.stormed:
                break
            for line in lucky_draw_lines():
                say(line)
    return tuple(results)


def run_vip_story(records: int = 3000, timeout_s: float = 10.0, say: Say = print
                  ) -> VipStory:
    """Tell the story (``say`` gets each line as it happens); what happened."""
    say(fit("kaflite demo --proxy: a producer behind a shared VIP, caught by kaflite "
            "doctor, then fixed"))
    say(fit(f"  a {BROKERS}-broker cluster writing its request log (__kaflite_requests); "
            f"topic {TOPIC}, {PARTITIONS} partitions"))
    phases = Phases(TITLES, say)
    with Cluster(brokers=BROKERS, config=REQUEST_LOG) as cluster:
        cluster.create_topic(TOPIC, PARTITIONS, BROKERS)
        phases.begin(TITLES[0], f"{records} keyed records from a confluent-kafka producer "
                     "through kaflite's naive proxy: every broker advertised at one address, "
                     "each connection on a broker drawn at random")
        vip = _behind_vip(cluster, records, timeout_s, say)
        phases.begin(TITLES[1], "as `kaflite doctor` does (its reader and analyzer), over "
                     "the request log so far")
        before = diagnose(cluster)
        for line in before_lines(before, vip):
            say(line)
        # The switch: the VIP closed before the doctor read the log, so the requests its
        # producers had in flight then were answered long before this moment.
        switch = time.time()
        phases.begin(TITLES[2], f"client.id {PROXIED}; a port per broker: each connection "
                     "reaches the broker it is meant for")
        with Proxy(cluster.bootstrap_servers) as aware:
            proxied = produce_through(aware, PROXIED, TOPIC, records, timeout_s)
        for line in produced_lines(proxied):
            say(line)
        phases.begin(TITLES[3])
        after = diagnose(cluster, lambda r: r.timestamp >= switch)
        for line in after_lines(after):
            say(line)
    return VipStory(vip, before, proxied, after)
