#!/usr/bin/env bash
# Worker hosts against local workers, in one run (docs/performance.md,
# "Worker hosts"). A fleet listens for hosts on loopback and h1 joins it
# (another `fleet join` process on this machine: the link is TLS over TCP
# through the embedded NATS hub and leaf node, as across machines). Then,
# alternating local and host, ROUNDS times:
#   - flood: a task prints LINES 200-byte lines while K `fleet events`
#     clients are attached; the time until every client has every line;
#   - spawn: the time from `fleet send` to the worker's first transcript
#     line (the host warm: it has run a task of this repository before).
# Then the idle cost: the joined host's RSS (sampled once a second: median
# and max) and CPU, and the fleet's CPU, over IDLE seconds with nothing
# running. With HOSTS=N (default 0) it also
# joins N more hosts of 8 slots each, runs 8 tasks on each, and reports the
# fleet's CPU and peak memory.
#
#   bench/hosts-e2e.sh [K] [LINES] [ROUNDS]       # defaults: 16 200000 3
#   IDLE=30 HOSTS=8 bench/hosts-e2e.sh
set -euo pipefail
K=${1:-16}; LINES=${2:-200000}; ROUNDS=${3:-3}; IDLE=${IDLE:-30}; HOSTS=${HOSTS:-0}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/hbench.XXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"' EXIT
(cd "$repo" && go build -o "$work/fleet" ./cmd/fleet)
F=$work/fleet
export AGENTS_FLEET_HOME=$work/home
mkdir -p "$work/home" "$work/cwd" && chmod 700 "$work/home"
cd "$work/cwd"
git init -q -b main . && git -c user.name=b -c user.email=b@x commit -q --allow-empty -m base
echo '{"workers": 1}' >"$work/home/config.json"
port=$((20000 + RANDOM % 20000))
"$F" run --control-socket --headless --log-level warn --hosts-listen "127.0.0.1:$port" 2>"$work/fleet.log" & fp=$!
pids+=($fp)
for _ in $(seq 200); do ls "$AGENTS_FLEET_HOME"/sockets/*.json >/dev/null 2>&1 && break; sleep 0.05; done

join() { # join NAME SLOTS
	"$F" hosts add "$1" --slots "$2" --out "$work/$1.join" >/dev/null 2>&1
	mkdir -p "$work/hh-$1" && chmod 700 "$work/hh-$1"
	AGENTS_FLEET_HOME=$work/hh-$1 "$F" join "$work/$1.join" --work-dir "$work/w-$1" 2>"$work/$1.log" &
	pids+=($!)
	eval "jp_$1=$!"
}
up() { "$F" hosts --json | grep -Eo '"state": ?"up"' | wc -l; }
join h1 4
for _ in $(seq 300); do [ "$(up)" -ge 1 ] && break; sleep 0.1; done

now() { date +%s.%N; }
line="a 200-byte transcript line ................................................................................................................................................................."
n=0
flood() { # flood PIN -> seconds until every client had every line
	local cl=()
	for i in $(seq "$K"); do
		"$F" events --live --type transcript --count "$LINES" >"$work/out.$i" & cl+=($!)
	done
	sleep 1
	local s e
	s=$(now)
	"$F" send "/spawn $1 yes '$line' | head -n $LINES"
	for p in "${cl[@]}"; do wait "$p"; done
	e=$(now)
	for i in $(seq "$K"); do
		[ "$(wc -l <"$work/out.$i")" = "$LINES" ] || { echo "client $i: $(wc -l <"$work/out.$i") lines" >&2; exit 1; }
	done
	python3 -c "print(f'{$e-$s:.3f}')"
}
first() { # first PIN -> seconds from send to the worker's first line
	n=$((n + 1))
	"$F" events --live --type transcript >"$work/first.$n" & local c=$!
	sleep 0.5
	local s e
	s=$(now)
	"$F" send "/spawn $1 echo first-line-$n"
	until grep -q "\"text\":\"first-line-$n\"" "$work/first.$n"; do sleep 0.005; done
	e=$(now)
	kill "$c"; wait "$c" 2>/dev/null || true
	python3 -c "print(f'{$e-$s:.3f}')"
}
settle() { for _ in $(seq 600); do "$F" send --wait-reply /tasks | grep -qE ' (running|pending) ' || return 0; sleep 0.1; done; }

first "--host h1" >/dev/null # warm the host: its cache has the repository
settle
echo "round,where,flood_s,lines_per_s_per_client,first_output_s"
for r in $(seq "$ROUNDS"); do
	for where in local host; do
		pin=""; [ "$where" = host ] && pin="--host h1"
		# --workers 1 and placement local-first: an unpinned task runs here.
		d=$(flood "$pin"); settle
		f=$(first "$pin"); settle
		python3 -c "print(f'$r,$where,$d,{$LINES/$d:.0f},$f')"
	done
done

cpu() { awk '{print $14+$15}' "/proc/$1/stat"; } # utime+stime, clock ticks
hz=$(getconf CLK_TCK)
sleep 2
f0=$(cpu "$fp"); h0=$(cpu "$jp_h1"); t0=$(now)
: >"$work/rss"
for _ in $(seq "$IDLE"); do # the host's RSS once a second (kB)
	awk '/VmRSS/{print $2}' "/proc/$jp_h1/status" >>"$work/rss"
	sleep 1
done
f1=$(cpu "$fp"); h1=$(cpu "$jp_h1"); t1=$(now)
python3 - "$f0" "$f1" "$h0" "$h1" "$t0" "$t1" "$hz" "$work/rss" <<'PY'
import sys, statistics
f0, f1, h0, h1, t0, t1, hz = map(float, sys.argv[1:8])
rss = [int(l) / 1024 for l in open(sys.argv[8]) if l.strip()]
print("host RSS MiB each second:", " ".join(f"{r:.0f}" for r in rss), file=sys.stderr)
el = t1 - t0
print(f"idle {el:.0f}s: host RSS median {statistics.median(rss):.1f} MiB, max {max(rss):.1f} MiB; "
      f"host CPU {100*(h1-h0)/hz/el:.2f}% of a core, fleet CPU {100*(f1-f0)/hz/el:.2f}% of a core")
PY

if [ "$HOSTS" -gt 0 ]; then
	for i in $(seq 2 $((HOSTS + 1))); do join "m$i" 8; done
	for _ in $(seq 600); do [ "$(up)" -ge $((HOSTS + 1)) ] && break; sleep 0.1; done
	f0=$(cpu "$fp"); t0=$(now)
	for i in $(seq 2 $((HOSTS + 1))); do
		for j in $(seq 8); do "$F" send "/spawn --host m$i sleep 5; seq 1 2000"; done
	done
	settle
	f1=$(cpu "$fp"); t1=$(now)
	hwm=$(awk '/VmHWM/{print $2}' "/proc/$fp/status")
	python3 -c "print(f'{$HOSTS} hosts x 8 workers: {$HOSTS*8} tasks done in {$t1-$t0:.1f}s, fleet CPU {100*($f1-$f0)/$hz/($t1-$t0):.1f}% of a core, fleet peak RSS {$hwm/1024:.0f} MiB')"
fi
