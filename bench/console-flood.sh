#!/usr/bin/env bash
# fleet console under a flood: a local fleet prints about RATE lines a
# second for SECS seconds while `fleet console` (in a tmux window, on the
# Workers view) is attached. Prints the console's CPU (share of one core
# over the flood) and its peak RSS, the fleet's CPU beside it, how many
# frames the fleet fanned out, and whether the console still answers a key
# and shows the last line afterwards.
#
#   bench/console-flood.sh [RATE] [SECS]     # default 10000 lines/s for 10 s
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${1:-10000}
SECS=${2:-10}
command -v tmux >/dev/null || { echo "needs tmux" >&2; exit 1; }

D=$(mktemp -d /tmp/console-flood.XXXXXX)
pids=()
cleanup() {
  tmux -S "$D/tmux.sock" kill-server 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -s "$D/console.err" ] && { echo "console stderr:"; cat "$D/console.err"; }
  rm -rf "$D"
}
trap cleanup EXIT

go build -o "$D/fleet" ./cmd/fleet
export AGENTS_FLEET_HOME=$D/home
mkdir -p "$D/home" "$D/repo" && chmod 700 "$D/home"
git -C "$D/repo" init -q && git -C "$D/repo" commit -q --allow-empty -m init
(cd "$D/repo" && exec "$D/fleet" run --control-socket --headless --name flood) >"$D/fleet.log" 2>&1 &
fleet_pid=$!; pids+=($fleet_pid)
for _ in $(seq 200); do "$D/fleet" ls 2>/dev/null | grep -q flood && break; sleep 0.1; done

tmux -S "$D/tmux.sock" -f /dev/null new-session -d -s c -x 120 -y 40 \
  "env AGENTS_FLEET_HOME=$AGENTS_FLEET_HOME TERM=xterm-256color $D/fleet console 2>$D/console.err"
screen() { tmux -S "$D/tmux.sock" capture-pane -p -t c; }
for _ in $(seq 200); do screen | grep -q "fleet flood" && break; sleep 0.1; done
cpid=$(pgrep -f "^$D/fleet console" | head -1)
[ -n "$cpid" ] || { echo "no console process" >&2; exit 1; }

hz=$(getconf CLK_TCK)
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
total=$((RATE * SECS))
per=$((RATE / 50)) # a batch every 20 ms: 15 ms of sleep, about 5 ms for sleep to start
cmd="awk 'BEGIN{for(i=1;i<=$total;i++){print \"line \" i; if(i%$per==0){fflush(); system(\"sleep 0.015\")}}}'"
c0=$(cpu "$cpid"); f0=$(cpu "$fleet_pid"); t0=$(date +%s.%N)
"$D/fleet" send "\$ $cmd" >/dev/null
# Sample the console's RSS while the flood runs.
peak=0
end=$(( $(date +%s) + SECS * 4 + 30 ))
while [ "$(date +%s)" -lt "$end" ]; do
  rss=$(awk '/VmRSS/{print $2}' "/proc/$cpid/status")
  [ "$rss" -gt "$peak" ] && peak=$rss
  screen | grep -q "line $total\b" && break # the last line reached the screen
  sleep 0.2
done
t1=$(date +%s.%N); c1=$(cpu "$cpid"); f1=$(cpu "$fleet_pid")
hwm=$(awk '/VmHWM/{print $2}' "/proc/$cpid/status")
tmux -S "$D/tmux.sock" send-keys -t c 3
sleep 1
responsive=no; screen | grep -q "3 Feed" && screen | head -3 | grep -q "Feed" && responsive=yes
awk -v hz="$hz" -v c="$((c1-c0))" -v f="$((f1-f0))" -v t0="$t0" -v t1="$t1" -v hwm="$hwm" -v peak="$peak" -v total="$total" -v resp="$responsive" 'BEGIN{
  w=t1-t0
  printf "%d lines in %.1f s (%.0f lines/s)\n", total, w, total/w
  printf "console: CPU %.1f%% of one core, peak RSS %.1f MiB (sampled %.1f MiB)\n", 100*c/hz/w, hwm/1024, peak/1024
  printf "fleet:   CPU %.1f%% of one core\n", 100*f/hz/w
  printf "console answered a key afterwards: %s\n", resp}'
