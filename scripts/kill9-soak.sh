#!/usr/bin/env bash
# Reliability: kill -9 the daemon during a flood and a native mutation storm,
# ROUNDS times (default 20), resuming the same session; after each restart
# every line a console was told and every acknowledged receipt must be there.
set -euo pipefail
cd "$(dirname "$0")/.."
FLEET_SOAK="${ROUNDS:-20}" go test ./e2e -run '^TestKill9Soak$' -count=1 -v -timeout 20m
