"""Fail with a clear message when no Java 17+ runtime is available for PySpark."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

HOW_TO_INSTALL = (
    "PySpark needs a Java 17 or later runtime.\n"
    "  Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless\n"
    "  macOS:         brew install openjdk@17\n"
    "Or set JAVA_HOME to an existing JDK/JRE 17+."
)


def java_binary() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("java")


def java_major(binary: str) -> int | None:
    try:
        out = subprocess.run(
            [binary, "-version"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    # Java 8 and earlier report "1.8".
    return int(match.group(2) or 0) if major == 1 else major


def main() -> int:
    binary = java_binary()
    if binary is None:
        print(f"error: no `java` found.\n{HOW_TO_INSTALL}", file=sys.stderr)
        return 1
    major = java_major(binary)
    if major is None or major < 17:
        print(f"error: {binary} is Java {major or 'unknown'}.\n{HOW_TO_INSTALL}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
