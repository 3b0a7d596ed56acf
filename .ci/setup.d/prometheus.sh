#!/usr/bin/env bash
# Prometheus for the telemetry suite (tests/http/test_metrics_prometheus.py): a real server
# scrapes the /metrics endpoint and answers a PromQL query. Debian's package brings the binary;
# its service is never started (the test starts its own on loopback, with a config it writes,
# and stops it).
set -euo pipefail
if ! command -v prometheus >/dev/null 2>&1; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
# The package's post-install may start its own service on :9090; the test needs none of it.
if command -v systemctl >/dev/null 2>&1; then systemctl stop prometheus >/dev/null 2>&1 || true; fi
if command -v service >/dev/null 2>&1; then service prometheus stop >/dev/null 2>&1 || true; fi
prometheus --version 2>&1 | head -1
