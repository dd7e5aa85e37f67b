"""What the kernel says about a process's TCP connections (Linux ``/proc``, as ``ss -tnp``)."""

from __future__ import annotations

import os
from pathlib import Path

ESTABLISHED = "01"


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed while we looked
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1], 16)


def established_connections(pid: int, remote_ports: set[int]) -> set[int]:
    """The local ports of ``pid``'s established TCP connections to ``remote_ports``."""
    inodes = _socket_inodes(pid)
    local_ports = set()
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
            if state == ESTABLISHED and inode in inodes and _port(remote) in remote_ports:
                local_ports.add(_port(local))
    return local_ports


def ss_connections(pid: int, remote_ports: set[int]) -> set[int] | None:
    """The same, read from ``ss -tnp`` (None where ss is not installed)."""
    import shutil
    import subprocess

    if shutil.which("ss") is None:
        return None
    out = subprocess.run(["ss", "-tnp"], capture_output=True, text=True, check=True).stdout
    local_ports = set()
    for line in out.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 6 or fields[0] != "ESTAB" or f"pid={pid}," not in line:
            continue
        if int(fields[4].rsplit(":", 1)[1]) in remote_ports:
            local_ports.add(int(fields[3].rsplit(":", 1)[1]))
    return local_ports
