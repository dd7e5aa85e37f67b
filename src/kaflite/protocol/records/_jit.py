"""Optional compiled loops for records of varied shapes, with numba (``kaflite[jit]``).

Theory of operation
-------------------
Records whose keys and values vary in length cannot be cut out in columns
(``_stride.py``); in pure Python, ``_bulk.py`` walks them with one Python step a
record (the *chain*: a record starts where the one before it ends) and numpy
for the fields. The chain alone costs about 70 ns a record and numpy's passes
about 50, against about 250 ns for a whole record in aiokafka's Cython reader.

With numba installed, the same walk is one loop compiled from the Python below:
it reads every varint of every record, makes the checks ``_bulk`` makes, and
writes each record's positions and deltas into one column of a table (a row per
field, so that each field's row is a contiguous array for ``_bulk``). What is left in Python is what must
make Python objects: one slice per key and value. Encoding is the mirror: keys
and values are joined into two buffers by ``bytes.join`` (C), and one compiled
loop writes every record (its varints and a copy of its key and value) into one
section.

This is an accelerator, never a requirement: without numba (or with
``KAFLITE_JIT=0``) every caller takes the pure-Python path, which gives the same
answer. The price of it is paid once a process, on first use: importing numba
(about 0.15 s and 65 MB of memory) and loading the compiled loops (about 0.3 s
from numba's on-disk cache, 1-2 s the first time). ``docs/records.md`` has the
measurements.

numba's ``cache=True`` keeps the compiled code beside this file's ``__pycache__``
(or, where that is not writable, in numba's user cache directory).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from kaflite.protocol.primitives import BytesLike

__all__ = ["FIELDS", "Kernels", "encode_keyed", "kernels", "locate", "set_enabled", "wait_ready"]

# Rows of ``walk``'s table (one column per record).
START, END, KEY_FROM, KEY_LEN, VALUE_FROM, VALUE_LEN, OFFSET_DELTA, TS_DELTA, HEADERS = range(9)
FIELDS = 9
BAD = -1          # ``walk``'s answer when the records do not fit its checks


@dataclass(frozen=True)
class Kernels:
    """The compiled loops (numba dispatchers, called with numpy arrays)."""

    walk: Callable[..., int]
    build: Callable[..., int]


class _Loader:
    """Loads the loops once, off the caller's thread: until they are ready (0.3-0.5 s
    from numba's cache, a few seconds on the first compile) callers take the
    pure-Python paths, so no decode or encode ever waits for numba."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ready = threading.Event()
        self.kernels: Kernels | None = None
        self.started = False

    def get(self) -> Kernels | None:
        if self.ready.is_set():
            return self.kernels
        with self.lock:
            if not self.started:
                self.started = True
                threading.Thread(target=self._load, name="kaflite-jit", daemon=True).start()
        return None

    def _load(self) -> None:
        try:
            self.kernels = _compile()
        finally:
            self.ready.set()

    def set(self, enabled: bool | None) -> None:
        with self.lock:
            if enabled is None:
                self.ready.clear()
                self.kernels, self.started = None, False
            else:
                self.kernels = _compile() if enabled else None
                self.started = True
                self.ready.set()


_loader = _Loader()


def kernels() -> Kernels | None:
    """The compiled loops, or None: numba is not installed, ``KAFLITE_JIT=0``, or they
    are still loading (the first call starts that)."""
    return _loader.get()


def wait_ready(timeout: float) -> Kernels | None:
    """Start loading the loops if need be and wait for them (benchmarks, warm-ups)."""
    _loader.get()
    _loader.ready.wait(timeout)
    return _loader.kernels


def set_enabled(enabled: bool | None) -> None:
    """Use the compiled loops (True: loaded now; numba must be installed), the
    pure-Python paths (False), or load them in the background on next use, as at
    start (None). For tests and benchmarks."""
    _loader.set(enabled)


def _compile() -> Kernels | None:
    if os.environ.get("KAFLITE_JIT", "1") == "0":
        return None
    try:
        from kaflite.protocol.records import _jit_loops
    except ImportError:   # numba is not installed
        return None
    k = Kernels(walk=_jit_loops.walk, build=_jit_loops.build)
    # one call of each, with the array types real calls pass (numba compiles one
    # version per type: a buffer of ``bytes`` is read-only), loads its code now
    import numpy as np

    table = np.empty((FIELDS, 0), np.int64)
    for section in (np.frombuffer(b"\0", np.uint8), np.zeros(1, np.uint8)):
        k.walk(section, 0, 0, table)
    blob = np.frombuffer(b"", np.uint8)
    empty = np.empty(0, np.int64)
    k.build(np.empty(0, np.uint8), 0, blob, empty, blob, empty, empty)
    return k


def locate(k: Kernels, buf: BytesLike, count: int, start: int) -> NDArray[np.int64] | None:
    """The table of ``count`` records from ``buf[start:]`` (rows START..HEADERS), or
    None when they do not pass ``walk``'s checks."""
    import numpy as np

    out = np.empty((FIELDS, count), np.int64)
    if k.walk(np.frombuffer(buf, np.uint8), count, start, out) == BAD:
        return None
    return out


def encode_keyed(k: Kernels, values: Sequence[BytesLike], keys: Sequence[BytesLike],
                 vlens: list[int], klens: list[int],
                 deltas: Sequence[int] | None) -> list[BytesLike]:
    """The records section of records with a key and a value each (their lengths
    ``klens`` and ``vlens``), no headers and consecutive offsets, as one piece."""
    from array import array

    import numpy as np

    kb = np.frombuffer(b"".join(keys), np.uint8)
    vb = np.frombuffer(b"".join(values), np.uint8)
    ts = np.frombuffer(array("q", deltas), np.int64) if deltas is not None \
        else np.empty(0, np.int64)
    # a record is its key, its value and at most 30 bytes more: its length (5), the
    # attributes (1), the timestamp delta (10), the offset delta (3: fewer than 2**20
    # records), the key and value lengths (5 each) and the header count (1)
    out = np.empty(len(kb) + len(vb) + 32 * len(klens), np.uint8)
    end = k.build(out, 0, kb, np.frombuffer(array("q", klens), np.int64), vb,
                  np.frombuffer(array("q", vlens), np.int64), ts)
    return [out[:end].data]
