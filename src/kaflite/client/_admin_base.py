"""What the admin's mixins share: the node that controller-bound requests go to, and
raising a refused answer's error."""

from __future__ import annotations

from kaflite.client._base import BaseClient
from kaflite.protocol import errors

__all__ = ["AdminBase", "check"]


def check(code: int, what: str, message: str | None = None) -> None:
    """Raise the ``kaflite.protocol.errors`` class of ``code`` (nothing for 0)."""
    if code:
        raise errors.error_for_code(code, f"{what}: {message}" if message else what)


class AdminBase(BaseClient):
    async def _controller(self) -> int:
        await self.start()
        if self.metadata.controller_id < 0:
            await self.metadata.refresh("controller unknown")
        node = self.metadata.controller_id
        return node if node >= 0 else next(iter(self.pool.brokers))
