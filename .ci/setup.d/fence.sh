#!/usr/bin/env bash
# The execution fence's tests (tests/fence) run tiny children under each interpreter of the
# closed set, resolved on the fixed PATH /usr/local/bin:/usr/bin:/bin: node, python3, bash.
# The same-uid /proc test runs the server as `nobody` through setpriv (util-linux).
set -euo pipefail
missing=()
command -v /usr/bin/node >/dev/null 2>&1 || [ -x /usr/local/bin/node ] || missing+=(nodejs)
[ -x /usr/bin/python3 ] || [ -x /usr/local/bin/python3 ] || missing+=(python3)
command -v setpriv >/dev/null 2>&1 || missing+=(util-linux)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi
id nobody >/dev/null
