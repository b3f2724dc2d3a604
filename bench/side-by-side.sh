#!/usr/bin/env bash
# Measures `fleet run` end to end beside the shared bench's anchors, in the
# same run (../shared/bench/run.sh, anchors alternated, fresh server each
# run). The fleet is one more anchor, "fleet": a task runs
# `loadgen emit N SIZE [RATE]`, every line becomes a transcript frame, and
# the loadgen's K clients count them.
#
#   bench/side-by-side.sh                      # REPS=3 KS="1 16 64" ANCHORS="node go goraw fleet"
#   REPS=1 KS=16 ANCHORS="go fleet" bench/side-by-side.sh
#   FLEET_EMIT_SIZE=122 KS=16 bench/side-by-side.sh   # fleet frames of the anchors' 200 bytes
#   RATE=2000 N=20000 bench/side-by-side.sh    # paced: latency below saturation
#
# Results: JSON lines in $OUT (default /tmp/fleet-bench/side-by-side.jsonl)
# and a Markdown summary from the shared summarize.py.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED_BENCH:-$repo/../shared/bench}
out=${OUT:-/tmp/fleet-bench/side-by-side.jsonl}
mkdir -p "$(dirname "$out")"
bin=$(mktemp -d /tmp/fleet-bench-bin.XXXX)
trap 'rm -rf "$bin"' EXIT

(cd "$repo" && go build -o "$bin/fleet" ./cmd/fleet)
(cd "$shared/loadgen" && go build -o "$bin/loadgen" .)

# The fleet derives its socket and token paths from its home, so a helper
# waits for the descriptor and then puts the token and a link to the socket
# where run.sh expects them (token first: run.sh starts as soon as the
# socket path exists). The fleet itself is exec'd so $! is its pid. Once
# it exits the helper removes its home (~40 MB a run): otherwise every run
# leaves its database in /tmp, and the kernel writes it back to disk during
# later runs of whichever anchor, which is noise.
export FLEET_BIN="$bin/fleet" LOADGEN_BIN="$bin/loadgen"
CMD_fleet='home=$(mktemp -d /tmp/fbh.XXXX)
( for _ in $(seq 1 200); do
    d=$(ls "$home"/sockets/*.json 2>/dev/null | head -1) && [ -n "$d" ] && break; sleep 0.02
  done
  tok=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))[\"tokenPath\"])" "$d")
  sock=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))[\"socketPath\"])" "$d")
  cp "$tok" "$TOKEN_FILE"; ln -sf "$sock" "$SOCKET"
  while kill -0 $$ 2>/dev/null; do sleep 0.1; done; rm -rf "$home" ) &
cd "$home"
exec env AGENTS_FLEET_HOME="$home" "$FLEET_BIN" run --control-socket --headless --log-level warn'
export CMD_fleet
# FLEET_EMIT_SIZE: the length of the lines the fleet's task prints (default
# SIZE, as the issue's command does). Each becomes a frame 78 bytes longer
# (the transcript wrapper), so FLEET_EMIT_SIZE=122 gives the fleet frames
# the anchors' size (SIZE=200), to compare at equal bytes.
emit=${FLEET_EMIT_SIZE:-'$SIZE'}
if [ -n "${RATE:-}" ] && [ "${RATE:-0}" != 0 ]; then
  export TRIGGER_fleet='{"type":"prompt","text":"$ '"$bin"'/loadgen emit $N '"$emit"' $RATE"}'
else
  export TRIGGER_fleet='{"type":"prompt","text":"$ '"$bin"'/loadgen emit $N '"$emit"'"}'
fi
export READY_fleet=replayEnd

cd "$shared"
OUT="$out" REPS="${REPS:-3}" KS="${KS:-1 16 64}" ANCHORS="${ANCHORS:-node go goraw fleet}" ./run.sh
python3 summarize.py --ref goraw --ref go --ref node "$out" | tee "${out%.jsonl}.md"
