#!/usr/bin/env bash
# IBM/sarama's functional tests (the `functional` build tag of github.com/IBM/sarama) and
# Shopify's toxiproxy, the TCP proxy those tests drive in front of the brokers, both built
# with Go from the Go module proxy into the cache (outside the repository), at the versions
# tests/interop/sarama/go.mod pins. Prints the directory holding the two binaries
# (sarama.test, toxiproxy-server). Without Go, says so and exits 1
# (tests/interop/test_sarama_suite.py then skips, or fails under CI=true).
#   KAFLITE_CACHE   the cache root (default ~/.cache/kaflite)
set -u
dir="$(cd "$(dirname "$0")/.." && pwd)/tests/interop/sarama"
version="$(awk '$1 == "github.com/IBM/sarama" {print $2}' "$dir/go.mod")"
# the pins name the build, so a change to either version builds both again
digest="$(cat "$dir/go.mod" "$dir/go.sum" | sha256sum | cut -c1-12)"
cache="${KAFLITE_CACHE:-$HOME/.cache/kaflite}/sarama-$version-$digest"
if [ -x "$cache/sarama.test" ] && [ -x "$cache/toxiproxy-server" ]; then
  echo "$cache"; exit 0
fi
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  PATH="$PATH:/usr/local/go/bin"
fi
if ! command -v go >/dev/null 2>&1; then
  echo "note: go is not installed; sarama's functional tests cannot be built" >&2
  exit 1
fi
mkdir -p "$cache"
if ! (cd "$dir" && go build -o "$cache/toxiproxy-server.part.$$" \
        github.com/Shopify/toxiproxy/v2/cmd/server) >&2; then
  echo "note: could not build toxiproxy's server" >&2
  rm -f "$cache/toxiproxy-server.part.$$"
  exit 1
fi
if ! (cd "$dir" && go test -c -tags functional -o "$cache/sarama.test.part.$$" \
        github.com/IBM/sarama) >&2; then
  echo "note: could not build sarama $version's functional tests" >&2
  rm -f "$cache/toxiproxy-server.part.$$" "$cache/sarama.test.part.$$"
  exit 1
fi
mv "$cache/toxiproxy-server.part.$$" "$cache/toxiproxy-server"
mv "$cache/sarama.test.part.$$" "$cache/sarama.test"
echo "$cache"
