"""A broker in its own OS process: ``python -m kaflite.cluster.broker_process``.

``Cluster(processes=True)`` (``kaflite up --processes``) keeps the controller in
its own process and starts one of these per broker. Its standard input brings
one JSON line, the spec: the node id, the controller's port and token, the data
directory, the listeners, the broker configs (on stdin, not the command line,
where any local user could read passwords and keys with ``ps``). The process connects to the controller
(``controller_client.RemoteController``), starts a ``Broker`` on it, prints one
JSON line (``{"ready": ..., "bound": {listener: port}}``) and serves until:

* the controller asks it to shut down, or it gets SIGTERM: a controlled
  shutdown (leaderships move first, logs are flushed), then exit 0;
* the connection to the controller ends: the controller is gone, exit at once;
* SIGKILL: nothing runs; the controller fences the broker when the connection
  drops, and its logs recover on the next start from what is on disk.

``BrokerProcess`` is the controller process's handle on one such process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from kaflite.cluster.controller_server import BrokerUnavailable, ControllerServer
from kaflite.cluster.listeners import ListenerSpec
from kaflite.cluster.metadata_image import Json
from kaflite.cluster.metadata_state import BrokerInfo

if TYPE_CHECKING:
    from kaflite.cluster.controller_client import RemoteController

__all__ = ["BrokerProcess", "main"]

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


class BrokerProcess:
    """The controller process's handle on one broker process."""

    def __init__(self, node_id: int, spec: Json, server: ControllerServer) -> None:
        self.node_id = node_id
        self.spec = spec
        self.server = server
        self.proc: asyncio.subprocess.Process | None = None
        self.bound: dict[str, int] = {}
        self.data_dir = Path(spec["data_dir"])
        self._last_info: BrokerInfo | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.running and self.proc is not None else None

    def _info(self) -> BrokerInfo:
        """Its registration, or the last one seen (an unregistered broker keeps its
        addresses until it registers again)."""
        info = self.server.controller.brokers.get(self.node_id)
        if info is not None:
            self._last_info = info
        elif self._last_info is None:
            raise KeyError(f"broker {self.node_id} has not registered")
        else:
            info = self._last_info
        return info

    def endpoint(self, listener: str) -> tuple[str, int]:
        found = self._info().endpoint(listener)
        if found is None:
            raise KeyError(listener)
        return found

    @property
    def advertised_host(self) -> str:
        return self._info().host

    @property
    def advertised_port(self) -> int:
        return self._info().port

    async def start(self) -> None:
        if self.running:
            return
        registered = self.server.registration(self.node_id)
        registered.clear()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        spec = {**self.spec, "controller_port": self.server.port,
                "controller_token": self.server.token}
        with open(self.data_dir.parent / f"broker-{self.node_id}.log", "ab") as errlog:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "kaflite.cluster.broker_process",
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog,
                start_new_session=True)
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(spec).encode() + b"\n")
        self.proc.stdin.close()
        try:
            line = await asyncio.wait_for(self.proc.stdout.readline(), READY_TIMEOUT_S)
            if not line:
                raise RuntimeError(f"broker {self.node_id} exited before it was ready "
                                   f"(see {self.data_dir.parent}/broker-{self.node_id}.log)")
            self.bound = {str(k): int(v) for k, v in json.loads(line)["bound"].items()}
            await asyncio.wait_for(registered.wait(), READY_TIMEOUT_S)
        except BaseException:
            await self.kill()
            raise
        # A restart listens on the same ports (clients and followers know them).
        self.spec["listeners"] = [{**spec_l, "port": self.bound.get(spec_l["name"],
                                                                    spec_l["port"])}
                                  for spec_l in self.spec["listeners"]]

    async def stop(self) -> None:
        """Controlled shutdown; a process that does not finish in time is killed."""
        if not self.running or self.proc is None:
            return
        with contextlib.suppress(BrokerUnavailable, RuntimeError, asyncio.TimeoutError):
            await self.server.call_broker(self.node_id, "shutdown", timeout=STOP_TIMEOUT_S)
        try:
            await asyncio.wait_for(self.proc.wait(), STOP_TIMEOUT_S)
        except TimeoutError:
            await self.kill()

    async def kill(self) -> None:
        """SIGKILL: a real crash. Returns once the controller has fenced the broker."""
        if self.proc is None:
            return
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
        await self.proc.wait()
        for _ in range(200):   # the connection's end reaches the controller's loop
            if self.node_id not in self.server.channels:
                break
            await asyncio.sleep(0.01)


# -- the broker process ------------------------------------------------------------------
async def serve(spec: Json) -> int:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.configs import BrokerConfig
    from kaflite.cluster.controller_client import RemoteController

    loop = asyncio.get_running_loop()
    node_id = int(spec["node_id"])
    ctl: RemoteController = RemoteController("127.0.0.1", int(spec["controller_port"]), node_id,
                                             str(spec["controller_token"]))
    ctl.attach(loop)
    config = BrokerConfig.from_props(spec["props"])
    listeners = [ListenerSpec(str(s["name"]), str(s["host"]), int(s["port"]),
                              str(s["security_protocol"])) for s in spec["listeners"]]
    advertised = {k: (str(h), int(p)) for k, (h, p) in spec["advertised"].items()}
    broker = Broker(node_id, ctl, config, Path(spec["data_dir"]),
                    advertised_host=spec.get("advertised_host"),
                    advertised_port=spec.get("advertised_port"), rack=spec.get("rack"),
                    listeners=listeners, advertised_listeners=advertised)
    stop = asyncio.Event()
    from kaflite.cluster import broker_services

    ctl.services.update(broker_services.services(broker, stop))
    broker.faults = broker_services.rule_book(ctl)
    await broker.start()
    print(json.dumps({"ready": True, "bound": broker.bound}), flush=True)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    interval = config.int("broker.heartbeat.interval.ms") / 1000

    async def heartbeats() -> None:
        while not ctl.closed:
            await asyncio.sleep(interval)
            with contextlib.suppress(OSError):
                ctl.heartbeat()

    beat = loop.create_task(heartbeats())
    gone = loop.create_task(ctl.gone.wait())
    stopping = loop.create_task(stop.wait())
    await asyncio.wait([gone, stopping], return_when=asyncio.FIRST_COMPLETED)
    beat.cancel()
    if ctl.closed:
        # The controller is gone (or fenced this broker): nothing to hand over to.
        os._exit(1)
    if broker.running:
        await broker.stop()
    await asyncio.sleep(0)
    ctl.close()
    return 0


def main(argv: list[str] | None = None) -> None:
    from kaflite._loop import run
    from kaflite.cluster import gc_policy
    from kaflite.cluster.groups.removals import install_sink_from_env
    from kaflite.protocol.records import _jit

    # A broker reads records with its C walker; numba's loops (65 MB a process) would
    # serve only a coordinator's load of its log: not worth it in each broker process.
    _jit.set_enabled(False)
    install_sink_from_env()     # the removals of its coordinators, where a run asks for them
    gc_policy.install()
    line = sys.stdin.readline() if argv is None else argv[0]
    sys.exit(run(serve(json.loads(line))))


if __name__ == "__main__":
    main()
