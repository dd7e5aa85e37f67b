#!/usr/bin/env bash
# kafkajs comes from the npm registry, pinned by tests/cluster/kafkajs/package-lock.json.
# Install it when node and npm are there; otherwise its interop tests report themselves skipped.
set -u
dir="$(cd "$(dirname "$0")/.." && pwd)/tests/cluster/kafkajs"
[ -f "$dir/node_modules/kafkajs/package.json" ] && exit 0
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >/dev/null 2>&1 \
    || echo "note: could not install kafkajs; its tests will be skipped" >&2
else
  echo "note: node/npm are not installed; the kafkajs tests will be skipped" >&2
fi
exit 0
