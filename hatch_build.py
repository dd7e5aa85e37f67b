"""Build hook: compiles kaflite's one C extension, the broker's record walker.

``kaflite.protocol.records._walk`` checks every record of a Produce before the
broker appends it (see docs/benchmarks.md, "Produce validation"). It is
optional: without a C compiler the wheel is built pure-Python and the broker
uses the Python decoders, which check the same things more slowly.

An editable install (``pip install -e .``, as ``make`` does) compiles the module
next to its source, where the editable import path finds it; a regular wheel
carries it in the wheel.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

MODULE = "kaflite.protocol.records._walk"
SOURCE = os.path.join("src", "kaflite", "protocol", "records", "_walk.c")


def compile_extension(root: str, build_lib: str) -> str:
    """Compile the walker into ``build_lib``; returns the path of the built module."""
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    ext = Extension(MODULE, [os.path.join(root, SOURCE)], extra_compile_args=["-O2"])
    dist = Distribution({"name": "kaflite-native", "ext_modules": [ext]})
    cmd = build_ext(dist)
    cmd.build_lib = build_lib
    cmd.build_temp = tempfile.mkdtemp(prefix="kaflite-build-")
    cmd.ensure_finalized()
    cmd.run()
    return str(cmd.get_ext_fullpath(MODULE))


class NativeBuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        editable = version == "editable"
        out = os.path.join(self.root, "src") if editable else tempfile.mkdtemp(
            prefix="kaflite-ext-")
        try:
            built = compile_extension(self.root, out)
        except Exception as exc:  # no compiler, no headers: stay pure-Python
            print(f"kaflite: the C record walker was not built ({exc}); the broker "
                  "validates records in Python", file=sys.stderr)
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if not editable:
            rel = os.path.relpath(built, out)
            build_data["force_include"][built] = rel
