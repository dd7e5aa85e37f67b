"""Resolving a consumer group's subscribed regular expressions, under ACLs.

Kafka (``GroupMetadataManager.refreshRegularExpressions``) resolves the regular
expressions of a group with the request context of the heartbeat that asked for
it, and keeps only the matching topics that heartbeat's principal may DESCRIBE
(``filterTopicDescribeAuthorizedTopics``); the result stands for the whole group
until it is resolved again: when the topics change, or after a refresh interval
(Kafka 4.1's ``group.consumer.regex.refresh.interval.ms``, 10 minutes), so that an
ACL change is seen. Without an authorizer every match is kept.

``RegexResolver`` does the same: a heartbeat sets who is asking (``asking``) for
the time it is served; a resolution made without a heartbeat (a session expiry
that recomputes the subscription) reuses the last result, or, for a pattern not
resolved yet since the coordinator loaded, keeps the matching topics the group's
stored subscription already holds (which were authorized when they were stored).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass

from kaflite.protocol import errors

__all__ = ["REGEX_REFRESH_INTERVAL_MS", "RegexResolver", "compile_regex"]

REGEX_REFRESH_INTERVAL_MS = 10 * 60 * 1000   # Kafka 4.1's default refresh interval
TopicAllowed = Callable[[str], bool]          # may the asking principal DESCRIBE the topic?


def compile_regex(pattern: str) -> re.Pattern[str]:
    """Kafka uses RE2/J; Python's ``re`` agrees on the common syntax (see docs/groups.md)."""
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise errors.InvalidRegularExpressionError(
            f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {exc}.") from exc


@dataclass(frozen=True)
class _Resolved:
    universe: frozenset[str]     # the topics that existed when it was resolved
    at_ms: int
    topics: frozenset[str]


class RegexResolver:
    def __init__(self, names: Callable[[], Iterable[str]], now_ms: Callable[[], int]) -> None:
        self._names = names
        self._now_ms = now_ms
        self._asking: TopicAllowed | None = None
        self._resolved: dict[str, dict[str, _Resolved]] = {}   # group -> regex -> topics

    @contextlib.contextmanager
    def asking(self, allowed: TopicAllowed) -> Iterator[None]:
        """Resolutions within are made for the principal ``allowed`` speaks for."""
        self._asking = allowed
        try:
            yield
        finally:
            self._asking = None

    def resolve(self, group_id: str, regex: str, stored: Collection[str]) -> frozenset[str]:
        """The topics ``regex`` stands for in ``group_id``; ``stored`` are the topics of
        the group's stored subscription metadata."""
        try:
            pattern = compile_regex(regex)
        except errors.KafkaError:
            return frozenset()
        last = self._resolved.get(group_id, {}).get(regex)
        universe = frozenset(self._names())
        if self._asking is None:
            if last is not None:
                return last.topics
            return frozenset(t for t in stored if pattern.fullmatch(t))
        now = self._now_ms()
        if last is not None and last.universe == universe \
                and now - last.at_ms < REGEX_REFRESH_INTERVAL_MS:
            return last.topics
        allowed = self._asking
        topics = frozenset(t for t in universe if pattern.fullmatch(t) and allowed(t))
        self._resolved.setdefault(group_id, {})[regex] = _Resolved(universe, now, topics)
        return topics

    def forget(self, group_id: str, keep: Collection[str]) -> None:
        """Drop the group's resolutions of patterns no member subscribes to any more."""
        mine = self._resolved.get(group_id)
        if mine is None:
            return
        for regex in [r for r in mine if r not in keep]:
            del mine[regex]
        if not mine:
            del self._resolved[group_id]
