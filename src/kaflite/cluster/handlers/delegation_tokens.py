"""CreateDelegationToken (38), RenewDelegationToken (39), ExpireDelegationToken (40)
and DescribeDelegationToken (41), as Kafka 4.4's KafkaApis and ControllerApis answer them.

The rules are ``kaflite.cluster.delegation_tokens``'s; this is who may ask:

* none of the four over a connection that logged in with a token, nor over
  PLAINTEXT, nor over SSL without a client certificate (Kafka's ``allowTokenRequests``):
  DELEGATION_TOKEN_REQUEST_NOT_ALLOWED;
* create: a token for oneself, or (KIP-373) for another owner with CREATE_TOKENS on
  that owner's USER resource (else DELEGATION_TOKEN_AUTHORIZATION_FAILED); renewers
  must be ``User`` principals (INVALID_PRINCIPAL_TYPE);
* renew and expire: the owner and the renewers (DELEGATION_TOKEN_OWNER_MISMATCH);
* describe: the tokens the caller owns, requested or may renew, and those it holds
  DESCRIBE on (DELEGATION_TOKEN resource) or DESCRIBE_TOKENS on their owner (USER
  resource); with ``owners`` given, only the tokens those principals own or renew.

Without ``delegation.token.secret.key`` every one answers DELEGATION_TOKEN_AUTH_DISABLED.
Versions are Kafka 4.4's (KIP-896 removed each v0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.cluster import delegation_tokens as dt
from kaflite.cluster.acl import allows
from kaflite.cluster.handlers._base import Handler
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import (
    CreateDelegationTokenRequest,
    CreateDelegationTokenResponse,
    DescribeDelegationTokenRequest,
    DescribeDelegationTokenResponse,
    ExpireDelegationTokenRequest,
    ExpireDelegationTokenResponse,
    RenewDelegationTokenRequest,
    RenewDelegationTokenResponse,
)
from kaflite.protocol.messages import describe_delegation_token_response as ddr
from kaflite.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS", "allow_token_requests"]

NOT_ALLOWED = errors.DelegationTokenRequestNotAllowedError.code
DISABLED = errors.DelegationTokenAuthDisabledError.code
AUTHORIZATION_FAILED = errors.DelegationTokenAuthorizationFailedError.code
INVALID_PRINCIPAL_TYPE = errors.InvalidPrincipalTypeError.code
USER = "User"
ANONYMOUS = "User:ANONYMOUS"


def allow_token_requests(conn: ServerConnection) -> bool:
    """Kafka's ``allowTokenRequests``: not over a token login, PLAINTEXT or one-way SSL."""
    protocol = conn.listener.security_protocol
    if conn.sasl is not None and conn.sasl.token_authenticated:
        return False
    if protocol == "PLAINTEXT":
        return False
    return not (protocol == "SSL" and conn.info.principal == ANONYMOUS)


def _split(principal: str) -> tuple[str, str]:
    kind, _, name = principal.partition(":")
    return kind, name


def _settings(broker: Broker) -> dt.TokenSettings:
    return dt.TokenSettings.from_props(broker.config.props)


async def handle_create(broker: Broker, conn: ServerConnection, header: RequestHeader,
                        req: CreateDelegationTokenRequest) -> CreateDelegationTokenResponse:
    requester = conn.info.principal
    owner = requester
    if req.owner_principal_name:
        owner = f"{req.owner_principal_type}:{req.owner_principal_name}"

    def answer(code: int, token: dt.TokenInfo | None = None, hmac: bytes = b"",
               timestamp: int = dt.ERROR_TIMESTAMP) -> CreateDelegationTokenResponse:
        owner_type, owner_name = _split(owner)
        requester_type, requester_name = _split(requester)
        resp = CreateDelegationTokenResponse(
            error_code=code, principal_type=owner_type, principal_name=owner_name,
            issue_timestamp_ms=token.issue_ms if token else timestamp,
            expiry_timestamp_ms=token.expiry_ms if token else timestamp,
            max_timestamp_ms=token.max_ms if token else timestamp,
            token_id=token.token_id if token else "", hmac=hmac, throttle_time_ms=0)
        if header.request_api_version > 2:
            resp.token_requester_principal_type = requester_type
            resp.token_requester_principal_name = requester_name
        return resp

    if not allow_token_requests(conn):
        return answer(NOT_ALLOWED)
    if owner != requester and not allows(broker, conn, AclOperation.CREATE_TOKENS,
                                         ResourceType.USER, owner):
        return answer(AUTHORIZATION_FAILED)
    if any(r.principal_type != USER for r in req.renewers):
        return answer(INVALID_PRINCIPAL_TYPE)
    settings = _settings(broker)
    if settings.secret is None:     # the controller's answer: no token fields
        return answer(DISABLED, timestamp=0)
    token = dt.create(settings, owner, requester,
                      [f"{r.principal_type}:{r.principal_name}" for r in req.renewers],
                      req.max_lifetime_ms, dt.now_ms())
    broker.controller.put_token(token)
    return answer(0, token, dt.hmac_of(settings.secret, token.token_id))


async def handle_renew(broker: Broker, conn: ServerConnection, header: RequestHeader,
                       req: RenewDelegationTokenRequest) -> RenewDelegationTokenResponse:
    if not allow_token_requests(conn):
        return RenewDelegationTokenResponse(error_code=NOT_ALLOWED,
                                            expiry_timestamp_ms=dt.ERROR_TIMESTAMP)
    settings = _settings(broker)
    if settings.secret is None:
        return RenewDelegationTokenResponse(error_code=DISABLED, expiry_timestamp_ms=0)
    controller = broker.controller
    found = dt.find(controller.tokens.values(), settings.secret, bytes(req.hmac))
    code, renewed = dt.renew(settings, found, conn.info.principal, req.renew_period_ms,
                             dt.now_ms())
    if renewed is None:
        return RenewDelegationTokenResponse(error_code=code, expiry_timestamp_ms=0)
    controller.put_token(renewed)
    return RenewDelegationTokenResponse(error_code=0, expiry_timestamp_ms=renewed.expiry_ms)


async def handle_expire(broker: Broker, conn: ServerConnection, header: RequestHeader,
                        req: ExpireDelegationTokenRequest) -> ExpireDelegationTokenResponse:
    if not allow_token_requests(conn):
        return ExpireDelegationTokenResponse(error_code=NOT_ALLOWED,
                                             expiry_timestamp_ms=dt.ERROR_TIMESTAMP)
    settings = _settings(broker)
    if settings.secret is None:
        return ExpireDelegationTokenResponse(error_code=DISABLED, expiry_timestamp_ms=0)
    controller = broker.controller
    found = dt.find(controller.tokens.values(), settings.secret, bytes(req.hmac))
    code, changed, expiry = dt.expire(found, conn.info.principal, req.expiry_time_period_ms,
                                      dt.now_ms())
    if code == 0 and found is not None:
        if changed is None:
            controller.remove_tokens([found.token_id])
        else:
            controller.put_token(changed)
    return ExpireDelegationTokenResponse(error_code=code, expiry_timestamp_ms=expiry)


async def handle_describe(broker: Broker, conn: ServerConnection, header: RequestHeader,
                          req: DescribeDelegationTokenRequest
                          ) -> DescribeDelegationTokenResponse:
    if not allow_token_requests(conn):
        return DescribeDelegationTokenResponse(error_code=NOT_ALLOWED, tokens=[])
    settings = _settings(broker)
    if settings.secret is None:
        return DescribeDelegationTokenResponse(error_code=DISABLED, tokens=[])
    if req.owners is not None and not req.owners:
        return DescribeDelegationTokenResponse(error_code=0, tokens=[])
    owners = None if req.owners is None else [f"{o.principal_type}:{o.principal_name}"
                                              for o in req.owners]
    caller = conn.info.principal

    def eligible(token: dt.TokenInfo) -> bool:       # DelegationTokenManager.filterToken
        if owners is not None and not any(token.owner_or_renewer(o) for o in owners):
            return False
        return (token.owner_or_renewer(caller)
                or allows(broker, conn, AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN,
                          token.token_id)
                or allows(broker, conn, AclOperation.DESCRIBE_TOKENS, ResourceType.USER,
                          token.owner))

    out = []
    for token in list(broker.controller.tokens.values()):
        if not eligible(token):
            continue
        owner_type, owner_name = _split(token.owner)
        described = ddr.DescribedDelegationToken(
            principal_type=owner_type, principal_name=owner_name,
            issue_timestamp=token.issue_ms, expiry_timestamp=token.expiry_ms,
            max_timestamp=token.max_ms, token_id=token.token_id,
            hmac=dt.hmac_of(settings.secret, token.token_id),
            renewers=[ddr.DescribedDelegationTokenRenewer(*_split(r)) for r in token.renewers])
        if header.request_api_version > 2:
            described.token_requester_principal_type, \
                described.token_requester_principal_name = _split(token.requester)
        out.append(described)
    return DescribeDelegationTokenResponse(error_code=0, tokens=out)


HANDLERS = [Handler(CreateDelegationTokenRequest, 1, 3, handle_create),
            Handler(RenewDelegationTokenRequest, 1, 2, handle_renew),
            Handler(ExpireDelegationTokenRequest, 1, 2, handle_expire),
            Handler(DescribeDelegationTokenRequest, 1, 3, handle_describe)]
