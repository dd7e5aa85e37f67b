"""The fetching side of an incremental fetch session (KIP-227), for consumers and replicas.

Java's ``FetchSessionHandler`` in one class, shared by the consumer's fetcher and
the broker's replica fetchers. The caller says what it wants of each partition
(a value that compares equal while nothing about the fetch changed: offset, leader
epoch, ...), either all at once (``replace``, a consumer's whole fetchable set) or
one partition at a time (``want``/``drop``, a replica fetcher that knows which of
its thousands of partitions moved). ``build`` then gives what the next request
carries:

* no session yet (id 0): everything wanted, and epoch 0 asks the broker for one;
* in a session: only the partitions whose value changed since it was last sent,
  and those no longer wanted, as forgotten.

``build`` costs O(partitions changed), not O(partitions wanted), so a follower of
20,000 idle partitions sends, and the leader reads, only the few that moved.
FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH (any error of the whole
response) or a lost connection end the session; the next request is full again.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Generic, TypeVar

__all__ = ["FetchSession"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

MAX_EPOCH = 0x7FFFFFFF


class FetchSession(Generic[K, V]):
    """KIP-227 for one broker: session id and epoch, and what the broker's session holds."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.session_id = 0
        self.epoch = 0                  # 0: ask for a new session
        self._wanted: dict[K, V] = {}
        self._sent: dict[K, V] = {}      # what the broker's session holds, as last sent
        self._changed: set[K] = set()    # keys whose wanted value may differ from sent

    @property
    def wanted(self) -> Mapping[K, V]:
        return self._wanted

    @property
    def sent(self) -> Mapping[K, V]:
        """What the last request left in the broker's session (its leader epochs, say)."""
        return self._sent

    def want(self, key: K, value: V) -> None:
        if self._wanted.get(key) != value:
            self._wanted[key] = value
            self._changed.add(key)

    def drop(self, key: K) -> None:
        if self._wanted.pop(key, None) is not None:
            self._changed.add(key)

    def replace(self, wanted: Mapping[K, V]) -> None:
        """Want exactly ``wanted`` (O(len(wanted)): for a consumer's fetchable set)."""
        for key in [k for k in self._wanted if k not in wanted]:
            self.drop(key)
        for key, value in wanted.items():
            self.want(key, value)

    def build(self) -> tuple[dict[K, V], dict[K, V], bool]:
        """(partitions to send, partitions to forget with their last sent value, full?)."""
        if self.session_id == 0:
            return dict(self._wanted), {}, True
        wanted, sent = self._wanted, self._sent
        send: dict[K, V] = {}
        forget: dict[K, V] = {}
        for key in self._changed:
            value = wanted.get(key)
            if value is not None:
                if sent.get(key) != value:
                    send[key] = value
            elif key in sent:
                forget[key] = sent[key]
        return send, forget, False

    def sent_request(self) -> None:
        """The request ``build`` described went out: the broker's session now holds it."""
        if self.session_id == 0:
            self._sent = dict(self._wanted)
        else:
            for key in self._changed:
                value = self._wanted.get(key)
                if value is None:
                    self._sent.pop(key, None)
                else:
                    self._sent[key] = value
        self._changed.clear()

    def handle(self, error_code: int, session_id: int) -> None:
        """The response's top-level error code and session id."""
        if error_code:
            self.reset()
        elif session_id == 0:
            self.reset()                 # no session granted (or a sessionless broker)
        elif session_id != self.session_id:
            self.session_id, self.epoch = session_id, 1
        else:
            self.epoch = self.epoch + 1 if self.epoch < MAX_EPOCH else 1

    def reset(self) -> None:
        """End the session: the next request is a full one that asks for a new session."""
        self.session_id, self.epoch, self._sent = 0, 0, {}
        self._changed.clear()
