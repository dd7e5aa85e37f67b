#!/usr/bin/env bash
# kafka-python's own integration tests (test/integration in its PyPI sdist), at the version
# of the kafka-python the given interpreter imports, unpacked into the cache (outside the
# repository). Prints the source tree's path. The sdist leaves out test/__init__.py (an
# empty file: without it `import test` finds the standard library's package) and
# test/service.py (tests/interop/kafka_python/plugin.py gives its external half).
#   $1 / KAFLITE_PYTHON   the interpreter (default python3)
#   KAFLITE_CACHE         the cache root (default ~/.cache/kaflite)
set -u
python="${1:-${KAFLITE_PYTHON:-python3}}"
if ! version="$("$python" -c 'import kafka; print(kafka.__version__)' 2>/dev/null)"; then
  echo "note: $python cannot import kafka-python" >&2
  exit 1
fi
cache="${KAFLITE_CACHE:-$HOME/.cache/kaflite}"
tree="$cache/kafka-python-$version"
if [ -f "$tree/test/integration/conftest.py" ] && [ -f "$tree/test/__init__.py" ]; then
  echo "$tree"; exit 0
fi
mkdir -p "$cache" || exit 1
work="$(mktemp -d "$cache/kafka-python-$version.part.XXXXXX")" || exit 1
trap 'rm -rf "$work"' EXIT
if ! "$python" -m pip download --quiet --no-binary :all: --no-deps --dest "$work" \
     "kafka-python==$version" >&2; then
  echo "note: could not download kafka-python $version's sdist from PyPI" >&2
  exit 1
fi
sdist="$(ls "$work"/kafka_python-*.tar.gz 2>/dev/null | head -n 1)"
if [ -z "$sdist" ] || ! tar -xzf "$sdist" -C "$work"; then
  echo "note: kafka-python $version's sdist did not unpack" >&2
  exit 1
fi
unpacked="$work/kafka_python-$version"
if [ ! -f "$unpacked/test/integration/conftest.py" ]; then
  echo "note: kafka-python $version's sdist has no test/integration" >&2
  exit 1
fi
: > "$unpacked/test/__init__.py"
rm -rf "$tree"
mv "$unpacked" "$tree"
echo "$tree"
