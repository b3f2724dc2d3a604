#!/usr/bin/env bash
# hosts-demo.sh: a fleet and two worker hosts on this one machine, each in a
# network namespace of its own joined to the fleet's by a veth pair, so the
# hosts reach the fleet only over those links (docs/hosts.md).
#
# It starts the fleet listening for hosts on its side, enrols and joins h1
# and h2, runs a task on each (h2's prints a numbered line a second for a
# while), cuts h2's link for less than the lease and heals it, and prints
# what happened: the hosts, the workers and their branches, and whether
# every numbered line of h2's task arrived once and in order.
#
# Needs root (ip netns). Usage: sudo scripts/hosts-demo.sh [--keep]
#   FLEET=path/to/fleet   use this binary (default: go build ./cmd/fleet)
#   --keep                leave the work directory (logs, repository) behind
set -euo pipefail

keep=0
[ "${1:-}" = --keep ] && keep=1
if [ "$(id -u)" != 0 ]; then
	echo "hosts-demo.sh needs root: it makes network namespaces (sudo $0)" >&2
	exit 2
fi
for tool in ip git; do
	command -v "$tool" >/dev/null || { echo "hosts-demo.sh needs $tool" >&2; exit 2; }
done

root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/hosts-demo.XXXXXX)
fleet_bin=${FLEET:-}
if [ -z "$fleet_bin" ]; then
	echo "== building fleet"
	(cd "$root" && go build -o "$work/fleet" ./cmd/fleet)
	fleet_bin=$work/fleet
fi

id=$$
ns_f=hd$id-fleet ns_1=hd$id-h1 ns_2=hd$id-h2
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	for ns in "$ns_f" "$ns_1" "$ns_2"; do ip netns del "$ns" 2>/dev/null || true; done
	if [ "$keep" = 1 ]; then echo "work directory kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

echo "== network: $ns_f <-> $ns_1 (10.233.1.0/30), $ns_f <-> $ns_2 (10.233.2.0/30)"
for ns in "$ns_f" "$ns_1" "$ns_2"; do
	ip netns add "$ns"
	ip -n "$ns" link set lo up
done
link() { # link N HOSTNS
	ip link add "hd${id}f$1" type veth peer name "hd${id}h$1"
	ip link set "hd${id}f$1" netns "$ns_f"
	ip link set "hd${id}h$1" netns "$2"
	ip -n "$ns_f" addr add "10.233.$1.1/30" dev "hd${id}f$1"
	ip -n "$2" addr add "10.233.$1.2/30" dev "hd${id}h$1"
	ip -n "$ns_f" link set "hd${id}f$1" up
	ip -n "$2" link set "hd${id}h$1" up
}
link 1 "$ns_1"
link 2 "$ns_2"

# The user's repository, and a fleet home for the fleet and each host.
repo=$work/repo
git init -q -b main "$repo"
git -C "$repo" -c user.name=demo -c user.email=demo@example.com commit -q --allow-empty -m "the demo's base"
mkdir -p "$work/home-fleet" "$work/home-h1" "$work/home-h2"
chmod 700 "$work"/home-*
cat >"$work/home-fleet/config.json" <<'EOF'
{"hosts": {"listen": "0.0.0.0:7422", "placement": "hosts-only"}}
EOF

fleet_cmd() { (cd "$repo" && AGENTS_FLEET_HOME=$work/home-fleet "$fleet_bin" "$@"); }
export AGENTS_FLEET_HOME=$work/home-fleet

echo "== fleet: listening for hosts on :7422 in $ns_f"
(cd "$repo" && AGENTS_FLEET_HOME=$work/home-fleet exec ip netns exec "$ns_f" "$fleet_bin" run --headless --control-socket --name demo) \
	>"$work/fleet.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do fleet_cmd ls 2>/dev/null | grep -q demo && break; sleep 0.2; done

for n in 1 2; do
	fleet_cmd hosts add "h$n" --slots 2 --advertise "10.233.$n.1:7422" --out "$work/h$n.join" 2>&1 | sed 's/^/   /'
	(AGENTS_FLEET_HOME=$work/home-h$n exec ip netns exec "$( [ $n = 1 ] && echo "$ns_1" || echo "$ns_2")" \
		"$fleet_bin" join "$work/h$n.join" --work-dir "$work/work-h$n") >"$work/h$n.log" 2>&1 &
	pids+=($!)
done
echo "== waiting for h1 and h2 to be up"
for _ in $(seq 1 120); do
	[ "$(fleet_cmd hosts --json | grep -o '"state":"up"' | wc -l)" = 2 ] && break
	sleep 0.5
done
fleet_cmd hosts

echo "== tasks: one on h1, one on h2 (60 numbered lines, one every 0.5 s)"
# Everything the fleet's consoles see of the transcripts, live, from now on.
fleet_cmd events --live --type transcript >"$work/transcript.ndjson" 2>/dev/null &
pids+=($!)
sleep 0.5
fleet_cmd send --wait-reply "/spawn --host h1 echo made on \$(hostname) > from-h1.txt; echo done on h1"
fleet_cmd send --wait-reply '/spawn --host h2 for i in $(seq 1 60); do echo "line $i"; sleep 0.5; done; echo line-count > from-h2.txt'
fleet_cmd send --wait-reply /tasks
sleep 6
echo "== cutting h2's link for 5 s (the lease is 15 s)"
ip -n "$ns_f" link set "hd${id}f2" down
sleep 5
ip -n "$ns_f" link set "hd${id}f2" up
echo "== link healed; waiting for both tasks to end"
for _ in $(seq 1 240); do
	out=$(fleet_cmd send --wait-reply /tasks 2>/dev/null || true)
	if echo "$out" | grep -qE '^ +t1 +(done|failed) ' && echo "$out" | grep -qE '^ +t2 +(done|failed) '; then break; fi
	sleep 0.5
done
fleet_cmd send --wait-reply /tasks
fleet_cmd send --wait-reply /workers
echo "== the workers' branches in the repository"
fleet_cmd workers
fleet_cmd diff w1 --stat || true
fleet_cmd diff w2 --stat || true

echo "== h2's numbered lines as the fleet recorded them"
grep '"agent":"w2"' "$work/transcript.ndjson" | grep -o '"text":"line [0-9]*"' | sed 's/.*line //; s/"//' >"$work/lines.txt" || true
if [ "$(cat "$work/lines.txt")" = "$(seq 1 60)" ]; then
	echo "all 60 lines arrived, once each and in order"
else
	echo "lines differ from 1..60: got $(wc -l <"$work/lines.txt") lines; see $work/lines.txt"
	keep=1
fi
echo "== what the fleet logged about its hosts"
grep -E 'component=hosts|component=remote' "$work/fleet.log" | sed 's/^/   /' | tail -20
