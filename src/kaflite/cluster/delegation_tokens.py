"""Delegation tokens (KIP-48, KIP-373): what a token is, its HMAC and the rules that
change it, as Kafka's DelegationTokenControlManager and DelegationTokenManager have them.

A token is issued to an owner (the requester itself, or with KIP-373 another
principal the requester holds CREATE_TOKENS on) and lives in the controller's
metadata as a DelegationTokenRecord, which a RemoveDelegationTokenRecord deletes;
both go through the metadata log (``kaflite.cluster.metalog``), so tokens survive a
restart and reach every broker process as SCRAM credentials do.

Its password is never stored: the HMAC is ``HmacSHA512(delegation.token.secret.key,
token id)``, which every broker computes again from the shared secret. A client
authenticates with SCRAM, the token id as its user name, the base64 of the HMAC
as its password and the extension ``tokenauth=true``; the broker derives a SCRAM
credential from that password (``scram_credential``, as Kafka's token cache does,
at 4096 iterations) and the session's principal is the token's owner.

Times, as Kafka's: a token may be renewed until its max timestamp (issue time +
``delegation.token.max.lifetime.ms``, or the shorter lifetime the request asks),
and expires unless renewed by its expiry timestamp (``delegation.token.expiry.time.ms``
after issue or renewal, never past the max). The controller removes expired tokens
every ``delegation.token.expiry.check.interval.ms`` (``sweep``). Without a secret
key the APIs answer DELEGATION_TOKEN_AUTH_DISABLED.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import hmac
import logging
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kaflite.protocol import errors
from kaflite.protocol.messages._generated.delegation_token_record import DelegationTokenRecord
from kaflite.protocol.messages._generated.remove_delegation_token_record import (
    RemoveDelegationTokenRecord,
)
from kaflite.security.scram import MIN_ITERATIONS, ScramCredential, scram_credential

if TYPE_CHECKING:
    from kaflite.cluster.controller import Controller

__all__ = ["DEFAULTS", "ERROR_TIMESTAMP", "SECRET_KEY", "TokenInfo", "TokenSettings",
           "create", "expire", "find", "from_record", "hmac_of", "record", "removal", "renew",
           "sweep", "sweeper", "token_credential"]

log = logging.getLogger("kaflite.cluster.delegation_tokens")

SECRET_KEY = "delegation.token.secret.key"
MAX_LIFETIME = "delegation.token.max.lifetime.ms"
EXPIRY_TIME = "delegation.token.expiry.time.ms"
CHECK_INTERVAL = "delegation.token.expiry.check.interval.ms"
# Kafka's defaults (DelegationTokenManagerConfigs): 7 days, 1 day, 1 hour
DEFAULTS = {MAX_LIFETIME: str(7 * 24 * 3600 * 1000), EXPIRY_TIME: str(24 * 3600 * 1000),
            CHECK_INTERVAL: str(3600 * 1000)}
# the expiry timestamp of a refused renewal or expiry (DelegationTokenManager.ErrorTimestamp)
ERROR_TIMESTAMP = -1
_LONG_MAX = (1 << 63) - 1

NOT_FOUND = errors.DelegationTokenNotFoundError.code
OWNER_MISMATCH = errors.DelegationTokenOwnerMismatchError.code
EXPIRED = errors.DelegationTokenExpiredError.code


@dataclass(frozen=True)
class TokenInfo:
    """One token (Kafka's TokenInformation); principals as ``Type:name``."""
    token_id: str
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_ms: int
    max_ms: int
    expiry_ms: int

    def owner_or_renewer(self, principal: str) -> bool:
        """Kafka's ``ownerOrRenewer``: the owner, the requester or a renewer."""
        return principal in (self.owner, self.requester) or principal in self.renewers

    def may_renew(self, principal: str) -> bool:
        """Who may renew or expire it: the owner and the renewers."""
        return principal == self.owner or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.max_ms < now_ms or self.expiry_ms < now_ms


@dataclass(frozen=True)
class TokenSettings:
    """The broker configs of delegation tokens."""
    secret: str | None
    max_lifetime_ms: int
    expiry_time_ms: int
    check_interval_ms: int

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> TokenSettings:
        def get(name: str) -> int:
            return int(props.get(name) or DEFAULTS[name])
        return cls(props.get(SECRET_KEY) or None, get(MAX_LIFETIME), get(EXPIRY_TIME),
                   get(CHECK_INTERVAL))

    @property
    def enabled(self) -> bool:
        return self.secret is not None


def _sum(now: int, duration: int) -> int:
    return _LONG_MAX if now > _LONG_MAX - duration else now + duration


def now_ms() -> int:
    return int(time.time() * 1000)


@functools.lru_cache(maxsize=4096)
def hmac_of(secret: str, token_id: str) -> bytes:
    """The token's HMAC, as Kafka computes it: HmacSHA512 of the id's UTF-8 bytes, keyed
    by the secret's UTF-8 bytes."""
    return hmac.new(secret.encode(), token_id.encode(), hashlib.sha512).digest()


@functools.lru_cache(maxsize=4096)
def _derived(secret: str, token_id: str, mechanism: str) -> ScramCredential:
    password = base64.b64encode(hmac_of(secret, token_id)).decode()
    return scram_credential(mechanism, password, MIN_ITERATIONS)


def token_credential(secret: str, token_id: str, mechanism: str) -> ScramCredential:
    """The SCRAM credential a broker checks a token login against (a random salt, made
    once a process and token, as Kafka's token cache makes one per token)."""
    return _derived(secret, token_id, mechanism)


def find(tokens: Iterable[TokenInfo], secret: str, token_hmac: bytes) -> TokenInfo | None:
    """The token whose HMAC this is (Kafka's ``tokenForHmac``)."""
    for info in tokens:
        if hmac.compare_digest(hmac_of(secret, info.token_id), token_hmac):
            return info
    return None


# -- the controller's rules (DelegationTokenControlManager) --------------------------------
def create(settings: TokenSettings, owner: str, requester: str, renewers: list[str],
           max_lifetime_ms: int, now: int) -> TokenInfo:
    """A new token: its max timestamp is the configured lifetime, or the shorter one
    the request asks; it expires one expiry time later, never after its max."""
    lifetime = settings.max_lifetime_ms
    if max_lifetime_ms > 0:
        lifetime = min(lifetime, max_lifetime_ms)
    max_ms = _sum(now, lifetime)
    expiry = min(max_ms, _sum(now, settings.expiry_time_ms))
    return TokenInfo(str(uuid.uuid4()), owner, requester, tuple(renewers), now, max_ms, expiry)


def renew(settings: TokenSettings, info: TokenInfo | None, principal: str, period_ms: int,
          now: int) -> tuple[int, TokenInfo | None]:
    """RenewDelegationToken's checks, in Kafka's order: the error code (0 for none) and
    the renewed token."""
    if info is None:
        return NOT_FOUND, None
    if info.expired(now):
        return EXPIRED, None
    if not info.may_renew(principal):
        return OWNER_MISMATCH, None
    period = settings.expiry_time_ms
    if period_ms > 0:
        period = min(period, period_ms)
    return 0, replace(info, expiry_ms=min(info.max_ms, now + period))


def expire(info: TokenInfo | None, principal: str, period_ms: int, now: int
           ) -> tuple[int, TokenInfo | None, int]:
    """ExpireDelegationToken's checks, in Kafka's order: the error code, the changed
    token (None with no error: remove it now) and the new expiry timestamp."""
    if info is None:
        return NOT_FOUND, None, 0
    if not info.may_renew(principal):
        return OWNER_MISMATCH, None, 0
    if period_ms < 0:                 # at once
        return 0, None, now
    if info.expired(now):
        return EXPIRED, None, 0
    expiry = min(info.max_ms, _sum(now, period_ms))
    return 0, replace(info, expiry_ms=expiry), expiry


def sweep(tokens: Iterable[TokenInfo], now: int) -> list[str]:
    """The ids of the tokens past their expiry or max timestamp."""
    return [t.token_id for t in tokens if t.expired(now)]


async def sweeper(controller: Controller, settings: TokenSettings) -> None:
    """Remove expired tokens every check interval, as Kafka's controller does (while
    tokens are enabled)."""
    if not settings.enabled:
        return
    while True:
        await asyncio.sleep(settings.check_interval_ms / 1000)
        gone = sweep(controller.tokens.values(), now_ms())
        if gone:
            for token_id in gone:
                log.info("delegation token %s of %s expired", token_id,
                         controller.tokens[token_id].owner)
            controller.remove_tokens(gone)


# -- records ------------------------------------------------------------------------------
def record(t: TokenInfo) -> DelegationTokenRecord:
    return DelegationTokenRecord(owner=t.owner, requester=t.requester,
                                 renewers=list(t.renewers), issue_timestamp=t.issue_ms,
                                 max_timestamp=t.max_ms, expiration_timestamp=t.expiry_ms,
                                 token_id=t.token_id)


def removal(token_id: str) -> RemoveDelegationTokenRecord:
    return RemoveDelegationTokenRecord(token_id=token_id)


def from_record(r: DelegationTokenRecord) -> TokenInfo:
    return TokenInfo(r.token_id, r.owner, r.requester, tuple(r.renewers), r.issue_timestamp,
                     r.max_timestamp, r.expiration_timestamp)
