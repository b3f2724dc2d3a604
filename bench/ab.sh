#!/usr/bin/env bash
# Alternates fleet builds (or one build under different environments) on
# the same burst, one bench/loadgen-one.sh run each, repetition by
# repetition, so that the machine's changes of speed hit every variant
# alike. Prints a line per run.
#
#   bench/ab.sh K N REPS NAME=BINARY[@VAR=V,VAR2=V2] ...
#   bench/ab.sh 16 200000 5 old=/tmp/fleet-old new=/tmp/fleet-new
#   bench/ab.sh 16 200000 5 base=/tmp/fleet p1=/tmp/fleet@GOMAXPROCS=1
#   bench/ab.sh 16 200000 5 base=/tmp/fleet big=/tmp/fleet@FLEET_CONFIG_FILE=/tmp/c.json
#
# Variables named FLEET_* are bench/loadgen-one.sh's settings (FLEET_CONFIG_FILE:
# a config.json for the fleet's home); the others are the fleet's environment.
#
# The loadgen must be built at /tmp/loadgen (see bench/loadgen-one.sh).
# srv/lg is the server's CPU over the loadgen's: both slow down together
# when the machine does, so it compares variants across speed changes.
set -u
K=$1; N=$2; REPS=$3; shift 3
repo=$(cd "$(dirname "$0")/.." && pwd)
for _ in $(seq "$REPS"); do
  for spec in "$@"; do
    name=${spec%%=*}; rest=${spec#*=}; exe=${rest%%@*}; envs=""
    [[ $rest == *@* ]] && envs=${rest#*@}
    fleet_env=() own=()
    for v in ${envs//,/ }; do
      if [[ $v == FLEET_* ]]; then own+=("$v"); else fleet_env+=("$v"); fi
    done
    env "${own[@]}" FLEET_BIN="$exe" FLEET_ENV="env ${fleet_env[*]}" "$repo/bench/loadgen-one.sh" "$K" "$N" 2>&1 |
      python3 -c '
import json, sys
for l in sys.stdin:
    try:
        d = json.loads(l)
    except ValueError:
        continue
    print("%-8s fps=%.2fM srv=%.2fs lg=%.2fs srv/lg=%.2f p50=%.1fms p99=%.1fms rss=%dMiB" % (sys.argv[1],
        d["frames_per_s"]/1e6, d["server_cpu_s"], d["loadgen_cpu_s"], d["server_cpu_s"]/d["loadgen_cpu_s"],
        d["lat_p50_us"]/1e3, d["lat_p99_us"]/1e3, d["server_vmhwm_kib"]//1024), flush=True)' "$name"
  done
done
