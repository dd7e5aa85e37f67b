#!/usr/bin/env bash
# franz-go's fake cluster (pkg/kfake) behind the small driver in tests/interop/kfake, built
# with Go from the Go module proxy into the cache (outside the repository), at the versions
# tests/interop/kfake/go.mod pins. Prints the binary's path. Without Go, says so and exits 1
# (the kfake targets of tests/interop then skip, or fail under CI=true).
#   KAFLITE_CACHE   the cache root (default ~/.cache/kaflite)
set -u
dir="$(cd "$(dirname "$0")/.." && pwd)/tests/interop/kfake"
# the driver's source and pins name the build, so an edit to either builds it again
digest="$(cat "$dir/go.mod" "$dir/go.sum" "$dir/main.go" | sha256sum | cut -c1-12)"
cache="${KAFLITE_CACHE:-$HOME/.cache/kaflite}/kfake-$digest"
binary="$cache/kfake"
if [ -x "$binary" ]; then echo "$binary"; exit 0; fi
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  PATH="$PATH:/usr/local/go/bin"
fi
if ! command -v go >/dev/null 2>&1; then
  echo "note: go is not installed; franz-go's kfake cannot be built" >&2
  exit 1
fi
mkdir -p "$cache"
if ! (cd "$dir" && go build -o "$binary.part.$$" .) >&2; then
  echo "note: could not build tests/interop/kfake" >&2
  rm -f "$binary.part.$$"
  exit 1
fi
mv "$binary.part.$$" "$binary"
echo "$binary"
