"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51).

The credentials live in the controller's metadata. Describe lists each user's
mechanisms and iterations (never a salt or key); a named user without any gets
RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE. Alter takes already
salted passwords (the client salts, as Kafka's admin client does): an unknown
mechanism gets UNSUPPORTED_SASL_MECHANISM, iterations outside 4096..16384 or an
empty name UNACCEPTABLE_CREDENTIAL, deleting a missing credential
RESOURCE_NOT_FOUND, a user altered twice in one request (whatever the mechanisms)
DUPLICATE_RESOURCE. A user with any error has none of its changes applied, as in
Kafka's ScramControlManager.
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
    # As Kafka's ScramControlManager: a user may be altered once a request, whatever the
    # mechanism. Its second alteration (deletion or upsertion) drops the first and fails
    # the user DUPLICATE_RESOURCE; a user that already failed is passed over.
    deletions: dict[str, tuple[str, str]] = {}
    upserts: dict[str, tuple[str, ScramCredential]] = {}

    def fail(user: str, code: int, message: str) -> None:
        errors_by_user.setdefault(user, (code, message))

    def refused(name: str, mechanism_type: int, twice: bool) -> bool:
        """The checks a deletion and an upsertion share; True (and recorded) if one fails."""
        if name in errors_by_user:
            pass
        elif twice:
            fail(name, DUPLICATE, "A user credential cannot be altered twice in the same "
                                  f"request: {name}")
        elif not name:
            fail(name, UNACCEPTABLE, "Username must not be empty")
        elif mechanism_type not in MECHANISM_NAMES:
            fail(name, UNSUPPORTED, f"Unknown SCRAM mechanism {mechanism_type}")
        else:
            return False
        return True

    for d in req.deletions:
        if refused(d.name, d.mechanism, deletions.pop(d.name, None) is not None):
            continue
        mechanism = MECHANISM_NAMES[d.mechanism]
        if controller.scram_credential(d.name, mechanism) is None:
            fail(d.name, NOT_FOUND, "Attempt to delete a user credential that does not "
                                    f"exist: {d.name}")
        else:
            deletions[d.name] = (d.name, mechanism)
    for u in req.upsertions:
        twice = deletions.pop(u.name, None) is not None or upserts.pop(u.name, None) is not None
        if refused(u.name, u.mechanism, twice):
            continue
        mechanism = MECHANISM_NAMES[u.mechanism]
        if not MIN_ITERATIONS <= u.iterations <= MAX_ITERATIONS:
            fail(u.name, UNACCEPTABLE, f"Iterations {u.iterations} must be between "
                                       f"{MIN_ITERATIONS} and {MAX_ITERATIONS}")
        elif not u.salt or not u.salted_password:
            fail(u.name, UNACCEPTABLE, "The salt and the salted password must not be empty")
        else:
            upserts[u.name] = (u.name, salted_credential(mechanism, bytes(u.salt),
                                                         bytes(u.salted_password), u.iterations))
    controller.alter_scram(list(upserts.values()), list(deletions.values()))
    users = dict.fromkeys([c.name for c in req.deletions] + [c.name for c in req.upsertions])
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
        ar.AlterUserScramCredentialsResult(
            user=name, error_code=errors_by_user.get(name, (0, ""))[0],
            error_message=errors_by_user[name][1] if name in errors_by_user else None)
        for name in users])


HANDLERS = [Handler(DescribeUserScramCredentialsRequest, 0, 0, handle_describe),
            Handler(AlterUserScramCredentialsRequest, 0, 0, handle_alter)]
