"""Both ways through the varied-records codec: pure Python, and numba's loops (_jit)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kaflite.protocol.records import _jit


@pytest.fixture(scope="module", params=["python", "jit"])
def codec_path(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test of a module that uses this runs once per path. ``make test`` installs
    ``kaflite[jit]``: without numba the jit runs fail rather than skip."""
    if request.param == "jit":
        _jit.set_enabled(True)
        assert _jit.kernels() is not None, "numba is not installed (pip install kaflite[jit])"
    else:
        _jit.set_enabled(False)
    yield str(request.param)
    _jit.set_enabled(None)
