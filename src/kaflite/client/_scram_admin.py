"""The admin's SCRAM credential calls (KIP-554): DescribeUserScramCredentials and
AlterUserScramCredentials, sent to the controller."""

from __future__ import annotations

from collections.abc import Iterable

from kaflite.client._admin_base import AdminBase
from kaflite.client._admin_base import check as _check

__all__ = ["ScramAdmin"]


class ScramAdmin(AdminBase):
    async def describe_user_scram_credentials(self, users: Iterable[str] | None = None
                                              ) -> dict[str, list[tuple[str, int]]]:
        """``{user: [(mechanism, iterations), ...]}``; every user when ``users`` is None."""
        from kaflite.protocol.messages import DescribeUserScramCredentialsRequest
        from kaflite.protocol.messages import describe_user_scram_credentials_request as dq
        from kaflite.security.scram import MECHANISM_TYPES
        await self.start()
        names = {t: m for m, t in MECHANISM_TYPES.items()}
        resp = await self._request(await self._controller(), DescribeUserScramCredentialsRequest(
            users=None if users is None else [dq.UserName(u) for u in users]))
        _check(resp.error_code, "describe SCRAM credentials", resp.error_message)
        out = {}
        for r in resp.results:
            _check(r.error_code, f"describe SCRAM credentials of {r.user}", r.error_message)
            out[r.user] = [(names.get(c.mechanism, str(c.mechanism)), c.iterations)
                           for c in r.credential_infos]
        return out

    async def alter_user_scram_credentials(
            self, upsertions: Iterable[tuple[str, str, str, int]] = (),
            deletions: Iterable[tuple[str, str]] = ()) -> None:
        """Upsert ``(user, mechanism, password, iterations)`` and delete ``(user, mechanism)``;
        passwords are salted here (a random salt) and never sent, as Java's admin does.
        A broker takes one alteration of a user a request (Kafka's ScramControlManager
        fails a user named twice DUPLICATE_RESOURCE, whatever the mechanisms): a user's
        second alteration goes in a second request, and so on."""
        import secrets

        from kaflite.protocol.messages import AlterUserScramCredentialsRequest
        from kaflite.protocol.messages import alter_user_scram_credentials_request as aq
        from kaflite.security.scram import MECHANISM_TYPES, salted_password

        def mechanism_type(mechanism: str) -> int:
            return MECHANISM_TYPES.get(mechanism.upper(), 0)

        ups = []
        for user, mechanism, password, iterations in upsertions:
            salt = secrets.token_bytes(32)
            ups.append(aq.ScramCredentialUpsertion(
                user, mechanism_type(mechanism), iterations, salt,
                salted_password(mechanism.upper(), password, salt, iterations)
                if mechanism_type(mechanism) and iterations > 0 else b""))
        dels = [aq.ScramCredentialDeletion(u, mechanism_type(m)) for u, m in deletions]
        rounds: list[tuple[list[aq.ScramCredentialDeletion], list[aq.ScramCredentialUpsertion]]]
        rounds = []
        seen: dict[str, int] = {}

        def round_of(user: str) -> int:
            n = seen[user] = seen.get(user, -1) + 1
            if n == len(rounds):
                rounds.append(([], []))
            return n
        for d in dels:
            rounds[round_of(d.name)][0].append(d)
        for u in ups:
            rounds[round_of(u.name)][1].append(u)
        await self.start()
        for round_dels, round_ups in rounds:
            resp = await self._request(await self._controller(), AlterUserScramCredentialsRequest(
                deletions=round_dels, upsertions=round_ups))
            for r in resp.results:
                _check(r.error_code, f"alter SCRAM credentials of {r.user}", r.error_message)
