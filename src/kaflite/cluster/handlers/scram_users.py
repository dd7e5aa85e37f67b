"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51).

The credentials live in the controller's metadata. Describe lists each user's
mechanisms and iterations (never a salt or key); a named user without any gets
RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE. Alter takes already
salted passwords (the client salts, as Kafka's admin client does): an unknown
mechanism gets UNSUPPORTED_SASL_MECHANISM, iterations outside 4096..16384 or an
empty name UNACCEPTABLE_CREDENTIAL, deleting a missing credential
RESOURCE_NOT_FOUND, a user changed twice for one mechanism DUPLICATE_RESOURCE.
A user with any error has none of its changes applied, as in Kafka.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.cluster.handlers._base import Handler
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kaflite.protocol.messages import alter_user_scram_credentials_response as ar
from kaflite.protocol.messages import describe_user_scram_credentials_response as dr
from kaflite.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_TYPES,
    MIN_ITERATIONS,
    ScramCredential,
    salted_credential,
)

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS"]

MECHANISM_NAMES = {t: name for name, t in MECHANISM_TYPES.items()}
NOT_FOUND = errors.ResourceNotFoundError.code
DUPLICATE = errors.DuplicateResourceError.code
UNACCEPTABLE = errors.UnacceptableCredentialError.code
UNSUPPORTED = errors.UnsupportedSaslMechanismError.code


async def handle_describe(broker: Broker, conn: ServerConnection, header: RequestHeader,
                          req: DescribeUserScramCredentialsRequest
                          ) -> DescribeUserScramCredentialsResponse:
    scram = broker.controller.scram
    names = [u.name for u in req.users] if req.users else sorted(scram)
    results = []
    for name in dict.fromkeys(names):
        result = dr.DescribeUserScramCredentialsResult(user=name, error_code=0,
                                                       error_message=None)
        if names.count(name) > 1:
            result.error_code, result.error_message = DUPLICATE, f"Cannot describe SCRAM " \
                f"credentials for the same user twice in a single request: {name}"
        elif not scram.get(name):
            result.error_code, result.error_message = NOT_FOUND, \
                f"Attempt to describe a user credential that does not exist: {name}"
        else:
            result.credential_infos = [
                dr.CredentialInfo(mechanism=MECHANISM_TYPES[m], iterations=c.iterations)
                for m, c in sorted(scram[name].items())]
        results.append(result)
    return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=0,
                                                error_message=None, results=results)


async def handle_alter(broker: Broker, conn: ServerConnection, header: RequestHeader,
                       req: AlterUserScramCredentialsRequest
                       ) -> AlterUserScramCredentialsResponse:
    controller = broker.controller
    errors_by_user: dict[str, tuple[int, str]] = {}
    seen: dict[tuple[str, int], int] = {}
    keys = [(c.name, c.mechanism) for c in req.deletions] + \
        [(c.name, c.mechanism) for c in req.upsertions]
    for key in keys:
        seen[key] = seen.get(key, 0) + 1
    upserts: list[tuple[str, ScramCredential]] = []
    deletions: list[tuple[str, str]] = []

    def fail(user: str, code: int, message: str) -> None:
        errors_by_user.setdefault(user, (code, message))

    def refused(name: str, mechanism_type: int) -> bool:
        """The checks a deletion and an upsertion share; True (and recorded) if one fails."""
        if not name:
            fail(name, UNACCEPTABLE, "Username must not be empty")
        elif mechanism_type not in MECHANISM_NAMES:
            fail(name, UNSUPPORTED, f"Unknown SCRAM mechanism {mechanism_type}")
        elif seen[(name, mechanism_type)] > 1:
            fail(name, DUPLICATE, "A user credential cannot be altered twice in the same "
                                  f"request: {name}")
        else:
            return False
        return True

    for d in req.deletions:
        if refused(d.name, d.mechanism):
            continue
        mechanism = MECHANISM_NAMES[d.mechanism]
        if controller.scram_credential(d.name, mechanism) is None:
            fail(d.name, NOT_FOUND, "Attempt to delete a user credential that does not "
                                    f"exist: {d.name}")
        else:
            deletions.append((d.name, mechanism))
    for u in req.upsertions:
        if refused(u.name, u.mechanism):
            continue
        mechanism = MECHANISM_NAMES[u.mechanism]
        if not MIN_ITERATIONS <= u.iterations <= MAX_ITERATIONS:
            fail(u.name, UNACCEPTABLE, f"Iterations {u.iterations} must be between "
                                       f"{MIN_ITERATIONS} and {MAX_ITERATIONS}")
        elif not u.salt or not u.salted_password:
            fail(u.name, UNACCEPTABLE, "The salt and the salted password must not be empty")
        else:
            upserts.append((u.name, salted_credential(mechanism, bytes(u.salt),
                                                      bytes(u.salted_password), u.iterations)))
    controller.alter_scram([(n, c) for n, c in upserts if n not in errors_by_user],
                           [(n, m) for n, m in deletions if n not in errors_by_user])
    users = dict.fromkeys(name for name, _ in keys)
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
        ar.AlterUserScramCredentialsResult(
            user=name, error_code=errors_by_user.get(name, (0, ""))[0],
            error_message=errors_by_user[name][1] if name in errors_by_user else None)
        for name in users])


HANDLERS = [Handler(DescribeUserScramCredentialsRequest, 0, 0, handle_describe),
            Handler(AlterUserScramCredentialsRequest, 0, 0, handle_alter)]
