"""The doctor's thresholds: each a named value with the reason it has that value.

``Thresholds`` holds them all (its defaults are the constants below), so a caller
can tighten or loosen one without touching the others; ``docs/doctor.md`` lists
them beside the findings they drive.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT", "Thresholds"]

# -- vip-bootstrap ---------------------------------------------------------------------
# NOT_LEADER_OR_FOLLOWER answers a client must have had. A leader moving (a broker
# restart, a reassignment) costs a client one or two per partition it writes, and a
# failover of a whole broker perhaps a dozen; twenty is past what one failover of a
# small cluster explains.
VIP_MIN_NOT_LEADER = 20
# Of those, how many came after the client had refreshed its metadata (a Metadata
# request of the same client between the first NOT_LEADER_OR_FOLLOWER for that
# partition from that broker and this one), from the same broker for the same
# partition. A client that was told the new leader goes there; one that keeps
# reaching the broker that refused it, after asking, is connecting to an address
# that does not lead to the broker it meant: every broker advertised at one
# load-balanced address. Five leaves room for a refresh that raced an election.
VIP_MIN_STALE_REPEATS = 5

# -- metadata-storm --------------------------------------------------------------------
# Metadata requests of one client in any 60-second window. Clients refresh every
# metadata.max.age.ms (5 minutes) and, after an error, with a backoff of 100 ms or
# more (librdkafka's topic.metadata.refresh.fast.interval.ms, the Java client's
# retry.backoff.ms): a failover is a burst of a few seconds, some tens of requests.
# Two a second for a whole minute is a client that never settles.
METADATA_STORM_PER_MINUTE = 120
# A Metadata request that follows one of the client's errors within this long is
# counted as caused by it (the reason shown in the health): retry backoffs are 50 ms
# to 1 s.
METADATA_CAUSE_S = 2.0
# A Metadata request this long after the client's previous one, with no error just
# before it and no new topic, is a periodic refresh (metadata.max.age.ms, 5 minutes by
# default, or a timer set lower). Retry loops run at backoffs of 1 s at most
# (retry.backoff.max.ms), so 15 s keeps a timer apart from a loop even when the
# timer's previous tick was an error's refresh a few seconds earlier.
METADATA_PERIODIC_S = 15.0

# -- rebalance-storm -------------------------------------------------------------------
# New generations (classic groups) or member epochs (KIP-848) of one group within
# REBALANCE_STORM_WINDOW_S. A deploy or a scaling step moves a group through one or
# two generations per member change (the classic protocol also batches joins within
# group.initial.rebalance.delay.ms, 3 s); six in five minutes is a group whose members
# keep dropping out and coming back (session timeouts, max.poll.interval.ms exceeded,
# crash loops).
REBALANCE_STORM_COUNT = 6
REBALANCE_STORM_WINDOW_S = 300.0

# -- coordinator-flapping --------------------------------------------------------------
# Moves of a group's coordinator (the broker that answers its members' requests
# successfully changes) within COORDINATOR_FLAP_WINDOW_S, at least one of them back
# to a broker it had left. A broker restart moves it once, and the preferred-leader
# election that follows moves it back: two moves. Three or more, going back and
# forth, is leadership of the __consumer_offsets partition bouncing.
COORDINATOR_FLAP_MOVES = 3
COORDINATOR_FLAP_WINDOW_S = 600.0

# -- connection-fanout -----------------------------------------------------------------
# Connections of one client seen open at once (a connection is open at least from its
# first request to its last) against the brokers of the cluster. A client needs one
# connection per broker it talks to, plus its bootstrap connection and, in the Java
# client and librdkafka, a separate one to its group coordinator: brokers + 2. Twice
# the brokers plus two leaves room for a transactional producer and a reconnect that
# overlaps its predecessor; beyond it the client, or an application that makes a
# client per request under one client.id, opens connections it does not need.
FANOUT_PER_BROKER = 2
FANOUT_SLACK = 2

# -- idle-connections ------------------------------------------------------------------
# A connection is idle when it has sent nothing for IDLE_AFTER_S while its client kept
# sending on other connections. The request log records requests, not closes, so a
# connection closed and not replaced looks the same; one replaced (a newer connection
# of the client to the same broker with the same role) is not counted. Two minutes is
# past every cadence a working connection has (heartbeats 3 s, fetch waits 500 ms,
# metadata refresh 5 minutes only on the bootstrap connection, which is not counted
# alone) and well inside the broker's connections.max.idle.ms (10 minutes), after
# which the broker closes it.
IDLE_AFTER_S = 120.0
# Idle connections one client must hold. One idle bootstrap connection is what
# librdkafka keeps by design; three are connections the client opened and forgot.
IDLE_MIN_CONNECTIONS = 3

# -- evidence --------------------------------------------------------------------------
# Records kept as a finding's evidence: enough to show the shape, not the whole storm.
EVIDENCE_RECORDS = 5


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Every threshold the checks use; the defaults are the module's constants."""

    vip_min_not_leader: int = VIP_MIN_NOT_LEADER
    vip_min_stale_repeats: int = VIP_MIN_STALE_REPEATS
    metadata_storm_per_minute: int = METADATA_STORM_PER_MINUTE
    metadata_cause_s: float = METADATA_CAUSE_S
    metadata_periodic_s: float = METADATA_PERIODIC_S
    rebalance_storm_count: int = REBALANCE_STORM_COUNT
    rebalance_storm_window_s: float = REBALANCE_STORM_WINDOW_S
    coordinator_flap_moves: int = COORDINATOR_FLAP_MOVES
    coordinator_flap_window_s: float = COORDINATOR_FLAP_WINDOW_S
    fanout_per_broker: int = FANOUT_PER_BROKER
    fanout_slack: int = FANOUT_SLACK
    idle_after_s: float = IDLE_AFTER_S
    idle_min_connections: int = IDLE_MIN_CONNECTIONS
    evidence_records: int = EVIDENCE_RECORDS


DEFAULT = Thresholds()
