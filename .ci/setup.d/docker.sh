#!/usr/bin/env bash
# The appliance suite (tests/appliance) needs Docker and debootstrap (the base image is
# built locally: no registry is reachable). Installs them, starts dockerd when it is not
# running, and waits (bounded) until it answers. The image itself is built by the suite's
# session fixture (`make image`), once.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v nft >/dev/null 2>&1 || need+=(nftables)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if ! docker info >/dev/null 2>&1; then
  nohup dockerd >/var/log/dockerd.log 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
fi
docker info --format 'docker {{.ServerVersion}} ready' || { tail -20 /var/log/dockerd.log >&2; exit 1; }
