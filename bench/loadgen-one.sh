#!/usr/bin/env bash
# One fleet, one loadgen run: a task prints N lines (loadgen emit N 200
# [RATE]) and K loadgen clients count them. Prints the loadgen's JSON line.
# FLEET_CONFIG_FILE: a config.json for the fleet's home.
#   bench/loadgen-one.sh K [N] [RATE]
# Needs the binaries: go build -o /tmp/fleet ./cmd/fleet   (or FLEET_BIN=path)
#                     (cd ../shared/bench/loadgen && go build -o /tmp/loadgen .)
set -u
K=$1; N=${2:-200000}; RATE=${3:-}
export AGENTS_FLEET_HOME=$(mktemp -d /tmp/fb.XXXX)
mkdir -p "$AGENTS_FLEET_HOME/cwd"; cd "$AGENTS_FLEET_HOME/cwd"
[ -n "${FLEET_CONFIG_FILE:-}" ] && cp "$FLEET_CONFIG_FILE" "$AGENTS_FLEET_HOME/config.json"
${FLEET_ENV:-} ${FLEET_BIN:-/tmp/fleet} run --control-socket --headless --log-level warn ${FLEET_ARGS:-} 2>"$AGENTS_FLEET_HOME/err.log" & FP=$!
for _ in $(seq 50); do D=$(ls "$AGENTS_FLEET_HOME"/sockets/*.json 2>/dev/null) && break; sleep 0.1; done
SOCK=$(python3 -c "import json;print(json.load(open('$D'))['socketPath'])")
TOKF=$(python3 -c "import json;print(json.load(open('$D'))['tokenPath'])")
/tmp/loadgen -socket "$SOCK" -token-file "$TOKF" -clients "$K" -expect "$N" -timeout 120s \
  -trigger "{\"type\":\"prompt\",\"text\":\"\$ /tmp/loadgen emit $N 200 $RATE\"}" -server-pid "$FP" -label "fleet-K$K"
kill -TERM "$FP"; wait "$FP"
head -5 "$AGENTS_FLEET_HOME/err.log"
rm -rf "$AGENTS_FLEET_HOME"
