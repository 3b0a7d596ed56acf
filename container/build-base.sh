#!/usr/bin/env bash
# Build a Debian bookworm base image without any container registry: debootstrap a minbase
# root file system (with the appliance's runtime packages already in it, so the image build
# itself needs no network), then `docker import` it.
#
# Usage: container/build-base.sh [TAG]   (default: skill-mcp-base:bookworm)
# Needs root, debootstrap and a running Docker daemon. Skips the work when TAG exists.
# On a machine that can pull images, pass BASE_IMAGE=debian:bookworm-slim to `make image`
# instead; the Dockerfile installs whatever of these packages the base lacks.
set -euo pipefail
tag=${1:-skill-mcp-base:bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# The closed interpreter set (python3, nodejs, bash), the fence (nftables) and the egress
# proxy (tinyproxy-bin: the binary without the init-script package).
packages=python3,nodejs,nftables,tinyproxy-bin,ca-certificates

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "base image $tag exists" >&2
  exit 0
fi
work=$(mktemp -d /var/tmp/skill-mcp-base.XXXXXX)
trap 'rm -rf "$work"' EXIT
debootstrap --variant=minbase --include="$packages" bookworm "$work/root" "$mirror" >"$work/debootstrap.log" 2>&1 \
  || { tail -30 "$work/debootstrap.log" >&2; exit 1; }
# Caches and documentation only cost size; apt lists are refetched by anyone who needs them.
rm -rf "$work/root"/var/cache/apt/archives/*.deb "$work/root"/var/lib/apt/lists/* \
  "$work/root"/usr/share/doc/* "$work/root"/usr/share/man/* "$work/root"/usr/share/locale/*
tar -C "$work/root" -c . | docker import - "$tag" >/dev/null
echo "built base image $tag" >&2
