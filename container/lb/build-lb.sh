#!/usr/bin/env bash
# Build the load-balancer image used by the scale-out test and bench: Debian's HAProxy on the
# same debootstrap base as the appliance, with no container registry. The .deb files of haproxy
# and of every dependency the base image lacks are fetched on the host by apt-get, run with the
# base image's own apt sources, archive keys and package database (any host with apt will do),
# and installed in the image with dpkg: the image build itself needs no network.
#
# Usage: container/lb/build-lb.sh [TAG] [BASE]   (defaults: skill-mcp-lb:dev, skill-mcp-base:bookworm)
# Needs apt-get and a running Docker daemon. Skips the work when TAG exists.
set -euo pipefail
tag=${1:-skill-mcp-lb:dev}
base=${2:-skill-mcp-base:bookworm}
here=$(cd "$(dirname "$0")" && pwd)

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "load-balancer image $tag exists" >&2
  exit 0
fi
docker image inspect "$base" >/dev/null 2>&1 || { echo "base image $base is missing (container/build-base.sh)" >&2; exit 1; }
work=$(mktemp -d /var/tmp/skill-mcp-lb.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs"
# apt's own resolver decides what to fetch, with the base image's apt configuration (its sources
# and archive keys) and its dpkg database, not the host's: exactly the packages `apt-get install
# haproxy` would add to the base, verified with the keys the base trusts, whatever the host runs.
mkdir -p "$work/etc-apt" "$work/lists/partial" "$work/cache" "$work/debs/partial"
docker run --rm --entrypoint tar "$base" -C /etc/apt -c . | tar -C "$work/etc-apt" -x
docker run --rm --entrypoint cat "$base" /var/lib/dpkg/status >"$work/status"
apt_opts=(-o Dir::Etc="$work/etc-apt" -o Dir::State::Lists="$work/lists" -o Dir::State::status="$work/status"
          -o Dir::Cache="$work/cache" -o Dir::Cache::archives="$work/debs" -o Debug::NoLocking=1
          -o APT::Architecture=amd64)
{ apt-get "${apt_opts[@]}" -qq update \
    && apt-get "${apt_opts[@]}" install -y -qq --download-only --no-install-recommends haproxy; } \
  >"$work/download.log" 2>&1 || { tail -20 "$work/download.log" >&2; exit 1; }
rm -rf "$work/debs/partial" "$work/debs/lock"
ls "$work/debs" >"$work/fetch"
cp "$here/Dockerfile" "$work/"
DOCKER_BUILDKIT=0 docker build -q --build-arg BASE_IMAGE="$base" -t "$tag" "$work" >/dev/null
echo "built load-balancer image $tag ($(tr '\n' ' ' <"$work/fetch"))" >&2
