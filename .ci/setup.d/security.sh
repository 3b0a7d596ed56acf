#!/usr/bin/env bash
# The security suite (tests/security) runs the standalone server as root, which drops scripts
# to SKILL_MCP_SCRIPT_USER. A user of its own lets the suite assert "zero processes of the
# script uid remain" without confusing them with another suite's `nobody` children.
set -euo pipefail
id skillmcp-sectest >/dev/null 2>&1 || useradd --system --no-create-home --home-dir /nonexistent \
  --shell /usr/sbin/nologin skillmcp-sectest
# A second one for tests/fence/test_process_limit.py, which fills its user's RLIMIT_NPROC on
# purpose: it must not share a uid with anything else running at the same time.
id skillmcp-nproc >/dev/null 2>&1 || useradd --system --no-create-home --home-dir /nonexistent \
  --shell /usr/sbin/nologin skillmcp-nproc
