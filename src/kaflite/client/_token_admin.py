"""The admin's delegation-token calls (KIP-48, KIP-373): CreateDelegationToken,
RenewDelegationToken, ExpireDelegationToken and DescribeDelegationToken.

As Java's admin: principals are ``Type:name`` strings (``User:alice``); a token is
named by its HMAC for renewing and expiring; an error raises the
``kaflite.protocol.errors`` class of its code (DELEGATION_TOKEN_AUTH_DISABLED,
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED over PLAINTEXT or a token login...). Log in
with a token by setting ``sasl.username`` to its id, ``sasl.password`` to
``hmac_b64`` and ``sasl.scram.tokenauth`` (SCRAM only).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass, field

from kaflite.client._admin_base import check as _check
from kaflite.client._base import BaseClient
from kaflite.protocol.messages import (
    CreateDelegationTokenRequest,
    DescribeDelegationTokenRequest,
    ExpireDelegationTokenRequest,
    RenewDelegationTokenRequest,
)
from kaflite.protocol.messages import create_delegation_token_request as cq
from kaflite.protocol.messages import describe_delegation_token_request as dq

__all__ = ["DelegationToken", "TokenAdmin"]


@dataclass(frozen=True)
class DelegationToken:
    """A token as the broker describes it (Java's DelegationToken and TokenInformation)."""
    token_id: str
    hmac: bytes = field(repr=False)     # the token's password: never in a repr or a log
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_timestamp_ms: int
    expiry_timestamp_ms: int
    max_timestamp_ms: int

    @property
    def hmac_b64(self) -> str:
        """The token's password for a SCRAM login (Java's ``hmacAsBase64String``)."""
        return base64.b64encode(self.hmac).decode()


def _principal(text: str) -> tuple[str, str]:
    kind, sep, name = text.partition(":")
    if not sep or not kind:
        raise ValueError(f"{text!r} is not a principal (expected Type:name, e.g. User:alice)")
    return kind, name


class TokenAdmin(BaseClient):
    """Mixed into ``Admin``: any broker serves the token APIs (it asks the controller)."""

    async def create_delegation_token(self, renewers: Iterable[str] = (),
                                      max_lifetime_ms: int = -1,
                                      owner: str | None = None) -> DelegationToken:
        """A new token for this client's principal, or (KIP-373) for ``owner``;
        ``max_lifetime_ms`` <= 0 takes the broker's ``delegation.token.max.lifetime.ms``."""
        renewers = list(renewers)
        owner_type, owner_name = _principal(owner) if owner else (None, None)
        req = CreateDelegationTokenRequest(
            owner_principal_type=owner_type, owner_principal_name=owner_name,
            renewers=[cq.CreatableRenewers(*_principal(r)) for r in renewers],
            max_lifetime_ms=max_lifetime_ms)
        await self.start()
        resp = await self._request_any(req)
        _check(resp.error_code, "create delegation token")
        requester = (f"{resp.token_requester_principal_type}:"
                     f"{resp.token_requester_principal_name}"
                     if resp.token_requester_principal_type else "")
        return DelegationToken(resp.token_id, bytes(resp.hmac),
                               f"{resp.principal_type}:{resp.principal_name}", requester,
                               tuple(renewers), resp.issue_timestamp_ms,
                               resp.expiry_timestamp_ms, resp.max_timestamp_ms)

    async def renew_delegation_token(self, hmac: bytes, renew_period_ms: int = -1) -> int:
        """Renew the token (owner or renewer only); its new expiry timestamp."""
        await self.start()
        resp = await self._request_any(RenewDelegationTokenRequest(
            hmac=bytes(hmac), renew_period_ms=renew_period_ms))
        _check(resp.error_code, "renew delegation token")
        return resp.expiry_timestamp_ms

    async def expire_delegation_token(self, hmac: bytes, expiry_time_period_ms: int = -1
                                      ) -> int:
        """Expire the token after ``expiry_time_period_ms`` (negative: at once, as Java's
        default); its new expiry timestamp."""
        await self.start()
        resp = await self._request_any(ExpireDelegationTokenRequest(
            hmac=bytes(hmac), expiry_time_period_ms=expiry_time_period_ms))
        _check(resp.error_code, "expire delegation token")
        return resp.expiry_timestamp_ms

    async def describe_delegation_token(self, owners: Iterable[str] | None = None
                                        ) -> list[DelegationToken]:
        """The tokens this principal may see; with ``owners``, those they own or renew."""
        req = DescribeDelegationTokenRequest(
            owners=None if owners is None else [dq.DescribeDelegationTokenOwner(*_principal(o))
                                                for o in owners])
        await self.start()
        resp = await self._request_any(req)
        _check(resp.error_code, "describe delegation tokens")
        return [DelegationToken(
            t.token_id, bytes(t.hmac), f"{t.principal_type}:{t.principal_name}",
            f"{t.token_requester_principal_type}:{t.token_requester_principal_name}"
            if t.token_requester_principal_type else "",
            tuple(f"{r.principal_type}:{r.principal_name}" for r in t.renewers),
            t.issue_timestamp, t.expiry_timestamp, t.max_timestamp) for t in resp.tokens]
