"""A port another process holds: which process, so that the error can name it."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

import psutil

__all__ = ["PortInUse", "check_free"]


class PortInUse(OSError):
    """``kaflite up`` cannot listen where it was asked to; ``owner`` names the holder."""

    def __init__(self, what: str, host: str, port: int, owner: str | None,
                 closing: bool = False) -> None:
        holder = owner or "another process (not visible to this user)"
        super().__init__(errno.EADDRINUSE, f"{what} port {host}:{port} is in use by {holder}")
        self.what, self.host, self.port, self.owner = what, host, port, owner
        self.closing = closing   # held by a closed connection (TIME_WAIT), not a process


def _tcp_connections() -> list[psutil._common.sconn] | None:
    try:
        return list(psutil.net_connections("tcp"))
    except (psutil.AccessDenied, OSError):
        return None


def _holder(port: int, conns: list[psutil._common.sconn]) -> tuple[str | None, bool]:
    """(who holds ``port``: ``pid N (command line)`` of the process listening on it, or
    the closed connection holding it; None if not visible), and whether it is the
    latter."""
    for conn in conns:
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
            if conn.pid is None:
                return None, False   # a listener of another user's
            try:
                cmdline = " ".join(psutil.Process(conn.pid).cmdline())
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                cmdline = "?"
            mine = " (this process)" if conn.pid == os.getpid() else ""
            return f"pid {conn.pid}{mine}: {_shorten(cmdline)}", False
    # Nothing listens: a closed connection that had the port as its local one, still in
    # TIME_WAIT (the kernel keeps it for a minute), is what holds it.
    if not any(c.status == psutil.CONN_TIME_WAIT and c.laddr and c.laddr.port == port
               for c in conns):
        return None, False
    why = "a closed connection from that port, in TIME_WAIT for up to a minute"
    low_high = _ephemeral_range()
    if low_high is not None and low_high[0] <= port <= low_high[1]:
        why += (f" (the port is in this machine's ephemeral range {low_high[0]}-{low_high[1]},"
                " which outgoing connections take ports from)")
    return why, True


def _ephemeral_range() -> tuple[int, int] | None:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return None


def _shorten(cmdline: str, limit: int = 80) -> str:
    return cmdline if len(cmdline) <= limit else cmdline[:limit - 3] + "..."


def check_free(what: str, host: str, port: int) -> None:
    """Raise PortInUse naming the holder when ``host:port`` cannot be bound (0 is free)."""
    if port == 0:
        return
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as asyncio's servers
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            conns = _tcp_connections()
            owner, closing = _holder(port, conns) if conns is not None else (None, False)
            raise PortInUse(what, host, port, owner, closing=closing) from None
