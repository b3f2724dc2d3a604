#!/usr/bin/env bash
# N worker hosts × 8 workers, each host in a network namespace of its own
# joined to the fleet's by a veth pair, as separate machines would be
# (docs/performance.md, "Worker hosts"). The fleet listens for hosts in its
# namespace; each host dials its own link's address. Every host runs 8
# tasks of `sleep 5; seq 1 2000` at once; the script reports how long the
# 8×N tasks took, the fleet's CPU over that time and its peak RSS, and the
# hosts' RSS, busy (peak) and then idle.
#
# Then the fleet's CPU while idle, holding the finished workers (IDLE s).
#
# Needs root (ip netns). Usage: sudo bench/hosts-netns.sh [N]   (default 8)
#   FLEET=path/to/fleet   use this binary (default: go build ./cmd/fleet)
set -euo pipefail
N=${1:-8}
if [ "$(id -u)" != 0 ]; then
	echo "hosts-netns.sh needs root: it makes network namespaces" >&2
	exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/hnetns.XXXXXX)
F=${FLEET:-}
if [ -z "$F" ]; then
	(cd "$root" && go build -o "$work/fleet" ./cmd/fleet)
	F=$work/fleet
fi
id=$$
nsf=hn$id-f
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	ip netns del "$nsf" 2>/dev/null || true
	for i in $(seq "$N"); do ip netns del "hn$id-$i" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

ip netns add "$nsf"
ip -n "$nsf" link set lo up
for i in $(seq "$N"); do
	ns=hn$id-$i
	ip netns add "$ns"
	ip -n "$ns" link set lo up
	ip link add "hn${id}f$i" type veth peer name "hn${id}h$i"
	ip link set "hn${id}f$i" netns "$nsf"
	ip link set "hn${id}h$i" netns "$ns"
	ip -n "$nsf" addr add "10.235.$i.1/30" dev "hn${id}f$i"
	ip -n "$ns" addr add "10.235.$i.2/30" dev "hn${id}h$i"
	ip -n "$nsf" link set "hn${id}f$i" up
	ip -n "$ns" link set "hn${id}h$i" up
done

repo=$work/repo
git init -q -b main "$repo"
git -C "$repo" -c user.name=b -c user.email=b@x commit -q --allow-empty -m base
mkdir -p "$work/home"
chmod 700 "$work/home"
echo '{"hosts": {"listen": "0.0.0.0:7422", "placement": "hosts-only"}}' >"$work/home/config.json"
export AGENTS_FLEET_HOME=$work/home
fleet() { (cd "$repo" && "$F" "$@"); }
(cd "$repo" && exec ip netns exec "$nsf" "$F" run --headless --control-socket --log-level warn) 2>"$work/fleet.log" &
fp=$!
pids+=($fp)
for _ in $(seq 200); do fleet ls 2>/dev/null | grep -q "$repo" && break; sleep 0.1; done

hp=()
for i in $(seq "$N"); do
	fleet hosts add "m$i" --slots 8 --advertise "10.235.$i.1:7422" --out "$work/m$i.join" >/dev/null 2>&1
	mkdir -p "$work/hh$i" && chmod 700 "$work/hh$i"
	(AGENTS_FLEET_HOME=$work/hh$i exec ip netns exec "hn$id-$i" "$F" join "$work/m$i.join" --work-dir "$work/w$i") 2>"$work/m$i.log" &
	pids+=($!)
	hp+=($!)
done
for _ in $(seq 600); do
	[ "$(fleet hosts --json | grep -Eo '"state": ?"up"' | wc -l)" -ge "$N" ] && break
	sleep 0.2
done
if [ "$(fleet hosts --json | grep -Eo '"state": ?"up"' | wc -l)" -lt "$N" ]; then
	echo "not every host joined:" >&2
	fleet hosts >&2
	tail -n 3 "$work"/m1.log "$work/fleet.log" >&2
	exit 1
fi

cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
rss() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }
now() { date +%s.%N; }
hz=$(getconf CLK_TCK)
f0=$(cpu "$fp"); t0=$(now)
for i in $(seq "$N"); do
	for _ in $(seq 8); do fleet send "/spawn --host m$i sleep 5; seq 1 2000"; done
done
peak=0
for _ in $(seq 1200); do
	for p in "${hp[@]}"; do r=$(rss "$p"); [ "$r" -gt "$peak" ] && peak=$r; done
	out=$(fleet send --wait-reply /tasks)
	echo "$out" | grep -qE ' (running|pending) ' || break
	sleep 0.1
done
f1=$(cpu "$fp"); t1=$(now)
done_n=$(echo "$out" | head -1 | grep -oE '[0-9]+ done' | cut -d' ' -f1)
hwm=$(awk '/VmHWM/{print $2}' "/proc/$fp/status")
python3 -c "print(f'$N hosts x 8 workers (namespaces): {$done_n} of {$N*8} tasks done in {$t1-$t0:.1f}s; fleet CPU {100*($f1-$f0)/$hz/($t1-$t0):.1f}% of a core, fleet peak RSS {$hwm/1024:.0f} MiB; largest host RSS while busy {$peak/1024:.0f} MiB')"
sleep 15 # quiet for 10 s: the hosts give memory back
idle=""
for p in "${hp[@]}"; do idle="$idle $(rss "$p")"; done
python3 -c "import statistics as s; r=[int(x)/1024 for x in '$idle'.split()]; print(f'hosts idle after: RSS median {s.median(r):.1f} MiB, max {max(r):.1f} MiB')"
# Then the fleet idle, holding the N×8 finished workers' sessions (each
# keeps its events' pull iterator): its CPU over IDLE seconds.
IDLE=${IDLE:-30}
f0=$(cpu "$fp"); t0=$(now)
sleep "$IDLE"
f1=$(cpu "$fp"); t1=$(now)
python3 -c "print(f'fleet idle with {$N*8} finished host workers held: {100*($f1-$f0)/$hz/($t1-$t0):.2f}% of a core over {$t1-$t0:.0f}s')"
