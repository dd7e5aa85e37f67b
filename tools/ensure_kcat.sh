#!/usr/bin/env bash
# kcat comes from Debian's packages. Install it when it is missing and we may
# (root with apt-get); otherwise the kcat interop tests report themselves skipped.
set -u
command -v kcat >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat) \
    >/dev/null 2>&1 || echo "note: could not install kcat; its tests will be skipped" >&2
else
  echo "note: kcat is not installed; its tests will be skipped (apt-get install kcat)" >&2
fi
exit 0
