"""``kaflite up --front-port``: the cluster behind a stable bootstrap address, replaceable.

The brokers run on any free ports, behind a TCP forwarder on the front port
(``kaflite.cluster.replace.FrontedCluster``); clients bootstrap through the front.
``kaflite chaos replace-cluster`` (``POST /cluster/replace``) puts a whole new cluster
behind it. The console is bound to one cluster, so after a replacement it restarts on
the new one, on the same port with the same token, once the answer is sent; the state
file then names the new cluster id (the bootstrap address does not change).
"""

from __future__ import annotations

import asyncio
import dataclasses

import typer

from kaflite.cli._state import Registration
from kaflite.cluster.http import HttpApi
from kaflite.cluster.replace import RETIRE_MODES, FrontedCluster
from kaflite.console.embedded import EmbeddedBackend
from kaflite.console.web import ApiError, Json

__all__ = ["FrontedServe"]


class FrontedServe:
    def __init__(self, fronted: FrontedCluster, api: HttpApi | None,
                 registration: Registration) -> None:
        self.fronted = fronted
        self.api = api
        self.registration = registration
        self._restart: asyncio.Task[None] | None = None
        self._install()

    def _install(self) -> None:
        if self.api is not None and isinstance(self.api.console.backend, EmbeddedBackend):
            self.api.console.backend.replace_cluster = self.replace

    async def replace(self, retire: str) -> Json:
        if retire not in RETIRE_MODES:
            raise ApiError(400, f"retire must be one of {', '.join(RETIRE_MODES)}, "
                                f"got {retire!r}")
        if self._restart is not None and not self._restart.done():
            raise ApiError(409, "a replacement is still under way")
        r = await self.fronted.replace_async("hang" if retire == "hang" else "stop")
        typer.echo(f"cluster {r.old_cluster_id} replaced by {r.new_cluster_id}: brokers "
                   f"{r.new_bootstrap}; bootstrap.servers={self.fronted.bootstrap_servers} "
                   f"unchanged; the old brokers {'hang' if retire == 'hang' else 'stopped'}")
        self._restart = asyncio.get_running_loop().create_task(self._restart_console())
        return r.to_dict()

    async def _restart_console(self) -> None:
        cluster = self.fronted.cluster
        old = self.api
        if old is not None:
            await old.stop()     # (graceful: the answer to the replace request goes first)
            self.api = await HttpApi(cluster, old.host, old.port, token=old.token).start()
            self._install()
        state = dataclasses.replace(self.registration.state, cluster_id=cluster.cluster_id)
        self.registration = Registration(state).write()

    async def settle(self) -> tuple[HttpApi | None, Registration]:
        """The console and registration now (after any restart under way)."""
        if self._restart is not None:
            await asyncio.gather(self._restart, return_exceptions=True)
        return self.api, self.registration

