#!/usr/bin/env bash
# The soak of issue 26 (docs/unattended.md): a fleet of Claude Code workers
# against the scripted endpoint for a while, with trouble injected — 429s
# with a reset, hanging responses, 5xx outages, a worker that allocates
# memory until it is stopped, the endpoint gone for up to a minute — then
# the report: tasks done and failed by kind with the reasons, stalls and
# outages healed, rate limits waited out, and the daemon's CPU and RSS over
# time. It fails when a task never ends, fails without a reason, a CLI
# process outlives its worker, or the daemon exits.
#
#   bench/overnight.sh            # 8 hours of new work
#   bench/overnight.sh 30m        # half an hour
#
# Needs the pinned Claude Code CLI (scripts/install-agent-clis.sh). The
# report is also written to overnight-report.txt in the current directory.
set -euo pipefail
dur=${1:-8h}
here=$(pwd)
cd "$(dirname "$0")/.."
FLEET_OVERNIGHT="$dur" FLEET_OVERNIGHT_REPORT="$here/overnight-report.txt" \
  go test ./e2e/unattended -run 'TestOvernight$' -count=1 -v -timeout 0
