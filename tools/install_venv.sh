#!/usr/bin/env bash
# Install the project and its extras into the virtualenv $1 (made by make), fast:
# uv installs from its cache in seconds where pip took 50 s on the CI machine.
# PyPI has PySpark only as a source archive, and uv built its wheel again on every
# install (28 s), so the wheel is built once into ~/.cache/kaflite/wheels, and found
# there. Without uv (no network for it), pip installs as before. The packages are
# compiled to bytecode as pip does (--compile-bytecode): where PYTHONDONTWRITEBYTECODE
# is set, as on the CI machine, nothing else ever writes their .pyc, and every Python
# process compiled PySpark and numpy again (make test took 17 min instead of 14).
set -euo pipefail
venv="$1"
extras="${2:-test,spark,jit}"
py="$venv/bin/python"
wheels="${KAFLITE_CACHE:-$HOME/.cache/kaflite}/wheels"
if ! "$py" -m pip install --quiet uv >/dev/null 2>&1; then
  "$py" -m pip install --quiet --upgrade pip
  exec "$py" -m pip install --quiet -e ".[$extras]"
fi
uv="$venv/bin/uv"
mkdir -p "$wheels"
# the PySpark that the resolver picks for our requirements, as a wheel in the cache
pin=$("$uv" pip compile --quiet --python "$py" --extra spark --no-header --no-annotate \
      pyproject.toml 2>/dev/null | grep -i '^pyspark==' || true)
if [ -n "$pin" ] && ! ls "$wheels"/pyspark-"${pin#*==}"-*.whl >/dev/null 2>&1; then
  "$py" -m pip wheel --quiet --no-deps "$pin" -w "$wheels" || true
fi
exec "$uv" pip install --quiet --compile-bytecode --python "$py" --find-links "$wheels" -e ".[$extras]"
