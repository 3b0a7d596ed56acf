#!/usr/bin/env bash
# python-prctl (a runtime dependency: the launcher's capabilities and prctl calls) has no wheel
# on the package index; pip builds it from source, on `make install` and for the image's wheel
# directory in `make image`. It needs a C compiler, libcap's headers and Python's own headers.
# The image gets the built wheel and libcap's runtime library only, never a compiler.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
need=()
command -v gcc >/dev/null 2>&1 || need+=(gcc)
[ -e /usr/include/sys/capability.h ] || need+=(libcap-dev)
py=${PY:-python3}
if ! "$py" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
  need+=(python3-dev)
fi
# --check: only say (by the exit status) whether everything is there; install nothing.
if [ "${1:-}" = --check ]; then
  [ ${#need[@]} -eq 0 ]
  exit
fi
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
