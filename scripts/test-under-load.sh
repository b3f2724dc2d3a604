#!/usr/bin/env bash
# The tests on a loaded machine: the README's test command, `go test ./...`,
# then `go test -race` on the packages with concurrency (the list .ci/run
# uses, scripts/race-packages.txt), with CPU hogs running beside them. A
# test that sleeps instead of waiting for its condition, or whose deadline
# does not hold under load, fails here.
#
#   scripts/test-under-load.sh                    # two hogs, once
#   scripts/test-under-load.sh -n 3               # three times in a row, stopping at the first failure
#   scripts/test-under-load.sh --hogs 4 -count=1  # four hogs; other arguments go to go test
#   scripts/test-under-load.sh -- -run TestX      # everything after -- goes to go test
#
# Options: -n N runs (default 1), --hogs N CPU hogs (default 2; 0 for none),
# --no-race skips the race step, -h this help. go test gets -count=1 (no
# cached results) unless a -count is given. The agent-CLI tests skip unless
# scripts/install-agent-clis.sh has run. Exits 0 when every step of every run
# passed; the output of a failed step is kept and its path printed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

usage() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; }

runs=1 hogs=2 race=1 goargs=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n) [ $# -ge 2 ] || { echo "-n wants a number" >&2; exit 2; }; runs=$2; shift 2 ;;
    --hogs) [ $# -ge 2 ] || { echo "--hogs wants a number" >&2; exit 2; }; hogs=$2; shift 2 ;;
    --no-race) race=0; shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; goargs+=("$@"); break ;;
    *) goargs+=("$1"); shift ;;
  esac
done
# A cached result says nothing about this load: run every test.
[[ " ${goargs[*]} " == *" -count"* || " ${goargs[*]} " == *" --count"* ]] || goargs=(-count=1 "${goargs[@]}")
for v in "$runs" "$hogs"; do
  [[ "$v" =~ ^[0-9]+$ ]] || { echo "-n and --hogs want a number, got \"$v\"" >&2; exit 2; }
done
[ "$runs" -ge 1 ] || { echo "-n wants at least 1" >&2; exit 2; }

mapfile -t racepkgs < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' scripts/race-packages.txt)
if [ "$race" = 1 ] && [ "${#racepkgs[@]}" = 0 ]; then
  echo "scripts/race-packages.txt lists no packages" >&2; exit 2
fi

# The hogs are this script's: killed by pid when it exits, however it exits
# (a trap), and each also ends by itself once the script is gone (kill -9).
hogpids=() logdir=""
cleanup() {
  for p in "${hogpids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${hogpids[@]}"; do wait "$p" 2>/dev/null; done
  hogpids=()
}
trap cleanup EXIT
trap 'echo; echo "interrupted" >&2; exit 130' INT
trap 'exit 143' TERM
self=$$
for ((i = 0; i < hogs; i++)); do
  ( trap - INT TERM EXIT
    while kill -0 "$self" 2>/dev/null; do for ((j = 0; j < 200000; j++)); do :; done; done ) &
  hogpids+=($!)
done

clock() { local s=$1; printf '%dm%02ds' $((s / 60)) $((s % 60)); }

if [ -n "${FLEET_TEST_CLAUDE_PATH:-}" ] || [ -x "$HOME/.cache/agents-fleet/agent-clis/node_modules/.bin/claude" ]; then
  clis="installed: their tests run"
else
  clis="not installed: their tests skip (scripts/install-agent-clis.sh installs them)"
fi
echo "test-under-load: $runs run(s), $hogs CPU hog(s) (pids ${hogpids[*]:-none}), $(nproc) CPUs; agent CLIs $clis"
echo "go test arguments: ${goargs[*]}"

summary=() failed=0 start=$SECONDS
# step NAME ARGS...: runs go test ARGS plus the extra arguments, keeping its
# output in a log, and records PASS/FAIL with the duration.
step() {
  local name=$1; shift
  local log t0=$SECONDS rc
  [ -n "$logdir" ] || logdir=$(mktemp -d "${TMPDIR:-/tmp}/test-under-load.XXXXXX")
  log="$logdir/run$run-${name//[^a-z]/_}.log"
  printf '\n=== run %d/%d: %s\n' "$run" "$runs" "$name"
  go test "$@" "${goargs[@]}" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  local took; took=$(clock $((SECONDS - t0)))
  if [ "$rc" = 0 ]; then
    summary+=("PASS  run $run/$runs  $name  $took")
    rm -f "$log"
  else
    summary+=("FAIL  run $run/$runs  $name  $took  (output: $log)")
    failed=1
  fi
  return "$rc"
}

for ((run = 1; run <= runs; run++)); do
  step "go test ./..." ./... || break
  if [ "$race" = 1 ]; then
    # -timeout: the e2e package under the race detector takes 6-10 minutes
    # here, against go test's default 10-minute bound (as in .ci/run).
    step "go test -race (scripts/race-packages.txt)" -race -timeout 30m "${racepkgs[@]}" || break
  fi
done
cleanup

printf '\n=== summary (%d CPU hog(s), %s in all)\n' "$hogs" "$(clock $((SECONDS - start)))"
printf '%s\n' "${summary[@]}"
if [ "$failed" = 1 ]; then
  echo "failed tests:"
  grep -h -E '^\s*--- FAIL|^FAIL\s|^panic:' "$logdir"/*.log 2>/dev/null | sed 's/^/  /' | sort -u
  echo "FAIL"
  exit 1
fi
[ -n "$logdir" ] && rmdir "$logdir" 2>/dev/null
echo "PASS"
