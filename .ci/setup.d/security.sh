#!/usr/bin/env bash
# The security suite (tests/security) runs the standalone server as root, which drops scripts
# to SKILL_MCP_SCRIPT_USER. A user of its own lets the suite assert "zero processes of the
# script uid remain" without confusing them with another suite's `nobody` children.
set -euo pipefail
id skillmcp-sectest >/dev/null 2>&1 || useradd --system --no-create-home --home-dir /nonexistent \
  --shell /usr/sbin/nologin skillmcp-sectest
