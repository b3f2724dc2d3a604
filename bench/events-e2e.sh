#!/usr/bin/env bash
# End-to-end: a `fleet run` task prints LINES lines; K `fleet events`
# processes are attached; prints the time from sending the task until every
# client has printed every line.
#
#   bench/events-e2e.sh [K] [LINES]        # defaults: 16 200000
set -euo pipefail
K=${1:-16}; LINES=${2:-200000}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/fev.XXXX)
trap 'kill $fp 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
(cd "$repo" && go build -o "$work/fleet" ./cmd/fleet)
export AGENTS_FLEET_HOME=$work/home
mkdir -p "$work/cwd"; cd "$work/cwd"
"$work/fleet" run --control-socket --headless --log-level warn 2>"$work/fleet.log" & fp=$!
for _ in $(seq 100); do ls "$AGENTS_FLEET_HOME"/sockets/*.json >/dev/null 2>&1 && break; sleep 0.05; done

pids=()
for i in $(seq "$K"); do
  "$work/fleet" events --live --type transcript --count "$LINES" > "$work/out.$i" & pids+=($!)
done
sleep 1 # let every client attach before the task starts
start=$(date +%s.%N)
"$work/fleet" send "\$ yes 'a 200-byte transcript line .................................................................................................................................................................' | head -n $LINES"
for p in "${pids[@]}"; do wait "$p"; done
end=$(date +%s.%N)
for i in $(seq "$K"); do
  n=$(wc -l < "$work/out.$i"); [ "$n" = "$LINES" ] || { echo "client $i got $n lines" >&2; exit 1; }
done
hwm=$(awk '/VmHWM/{print $2}' /proc/$fp/status)
python3 - "$K" "$LINES" "$start" "$end" "$hwm" <<'PY'
import sys
k, n, s, e, hwm = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
d = e - s
print(f"K={k} lines={n} every client had every line after {d:.2f}s "
      f"({k*n/d/1e6:.2f}M frames/s delivered to fleet events processes), fleet peak RSS {hwm/1024:.0f} MiB")
PY
