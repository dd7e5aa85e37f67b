#!/usr/bin/env bash
# The console's browser tests drive Debian's chromium through Playwright. Install it when
# it is missing and we may (root with apt-get); otherwise those tests report themselves skipped.
set -u
[ -x /usr/bin/chromium ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
    >/dev/null 2>&1 || echo "note: could not install chromium; the console browser tests will be skipped" >&2
else
  echo "note: chromium is not installed; the console browser tests will be skipped (apt-get install chromium)" >&2
fi
exit 0
