#!/usr/bin/env bash
# franz-go's kgo integration tests, built from the Go module proxy into a test binary in the
# cache (outside the repository), at the version tests/interop/franz_go/go.mod pins. Prints
# the binary's path. Without Go, says so and exits 1 (tests/interop/test_franz_go.py then
# skips, or fails under CI=true).
#   KAFLITE_CACHE   the cache root (default ~/.cache/kaflite)
set -u
dir="$(cd "$(dirname "$0")/.." && pwd)/tests/interop/franz_go"
version="$(awk '$1 == "require" && $2 == "github.com/twmb/franz-go" {print $3}' "$dir/go.mod")"
cache="${KAFLITE_CACHE:-$HOME/.cache/kaflite}/franz-go-$version"
binary="$cache/kgo.test"
if [ -x "$binary" ]; then echo "$binary"; exit 0; fi
if ! command -v go >/dev/null 2>&1; then
  echo "note: go is not installed; franz-go's tests cannot be built" >&2
  exit 1
fi
mkdir -p "$cache"
if ! (cd "$dir" && go test -c -o "$binary.part" github.com/twmb/franz-go/pkg/kgo) >&2; then
  echo "note: could not build franz-go $version's kgo tests" >&2
  rm -f "$binary.part"
  exit 1
fi
mv "$binary.part" "$binary"
echo "$binary"
