"""numba's loops (``_jit``) are optional and never make a caller wait.

Their answers are held to the pure-Python paths' by test_bulk.py and
test_keyed_encode.py (every test there runs on both paths); here, how they are
loaded and switched off.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from kaflite.protocol import records
from kaflite.protocol.records import RecordBatch, _jit, encode_batch

N = 500
KEYS = [b"key-%d" % i for i in range(N)]
VALUES = [b"v" * (1 + i % 97) for i in range(N)]


@pytest.fixture(autouse=True)
def _fresh_loader() -> Iterator[None]:
    _jit.set_enabled(None)
    yield
    _jit.set_enabled(None)


def _round_trip() -> None:
    data = encode_batch(VALUES, keys=KEYS, base_timestamp=1)
    cols = RecordBatch.from_buffer(data).columns(copy=True)
    assert cols.keys == KEYS and cols.values == VALUES and cols.offsets == list(range(N))


def test_the_first_use_loads_them_in_the_background() -> None:
    assert _jit.kernels() is None          # started loading; this call takes pure Python
    _round_trip()
    loaded = _jit.wait_ready(120)
    assert loaded is not None, "numba is not installed (make test installs kaflite[jit])"
    assert _jit.kernels() is loaded
    _round_trip()


def test_kaflite_jit_0_keeps_them_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFLITE_JIT", "0")
    _jit.set_enabled(None)
    assert _jit.wait_ready(30) is None
    _round_trip()


def test_without_numba_the_python_paths_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numba", None)     # import numba: ImportError
    monkeypatch.delitem(sys.modules, "kaflite.protocol.records._jit_loops", raising=False)
    monkeypatch.delattr(records, "_jit_loops", raising=False)
    _jit.set_enabled(None)
    assert _jit.wait_ready(30) is None
    _round_trip()
