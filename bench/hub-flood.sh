#!/usr/bin/env bash
# fleet hub under an output flood: a local fleet prints N lines at once
# (`seq 1 N`), the hub relays it at verbosity verbose to the Bot API
# emulator. Prints what reached the chat (messages, edits, the largest gap
# rule) and the CPU the hub spent, against the CPU the fleet spent
# producing and fanning out the same lines (the anchor, same run).
#
#   bench/hub-flood.sh [N]        # default 10000; needs scripts/install-telegram-emulator.sh
#   SPREAD=1 bench/hub-flood.sh   # the lines over ~25 s (a sleep per line), not at once
#   HUB_PROFILE=/tmp/hub.pprof …  # and a CPU profile of the hub
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-10000}
eval "$(scripts/install-telegram-emulator.sh --env)"

D=$(mktemp -d /tmp/hub-flood.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$D"
}
trap cleanup EXIT

go build -o "$D/fleet" ./cmd/fleet
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
port=$(free_port); api=http://127.0.0.1:$port; token='123456:FLOOD'
node scripts/telegram-emulator.js "$port" "$FLEET_TEST_TELEGRAM_EMULATOR" >"$D/emu.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do grep -q READY "$D/emu.log" && break; sleep 0.1; done

export AGENTS_FLEET_HOME=$D/home
mkdir -p "$D/home" "$D/repo" && chmod 700 "$D/home"
git -C "$D/repo" init -q && git -C "$D/repo" commit -q --allow-empty -m init
printf '%s\n' "$token" >"$D/tok" && chmod 600 "$D/tok"
(cd "$D/repo" && exec "$D/fleet" run --hub --headless --name flood) >"$D/fleet.log" 2>&1 &
fleet_pid=$!; pids+=($fleet_pid)
for _ in $(seq 200); do "$D/fleet" ls >/dev/null 2>&1 && break; sleep 0.1; done
"$D/fleet" hub --bot-token-file "$D/tok" --allowed-chat-id 42 --api-base-url "$api" --verbosity verbose ${HUB_PROFILE:+--cpuprofile "$HUB_PROFILE"} >"$D/hub.log" 2>&1 &
hub_pid=$!; pids+=($hub_pid)

post() { curl -sS -X POST "$api/$1" -H 'content-type: application/json' -d "$2"; }
user='{"id":42,"is_bot":false,"first_name":"Op"}'; chat='{"id":42,"type":"private","first_name":"Op"}'
history() { post getUpdatesHistory "{\"token\":\"$token\"}"; }
for _ in $(seq 300); do history | grep -q 'wants to attach' && break; sleep 0.1; done
data=$(history | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const m=JSON.parse(s).result[0].message;console.log(m.reply_markup.inline_keyboard[0][0].callback_data)})')
post sendCallback "{\"botToken\":\"$token\",\"from\":$user,\"data\":\"$data\",\"date\":$(date +%s),\"message\":{\"message_id\":1,\"chat\":$chat,\"date\":$(date +%s)}}" >/dev/null
for _ in $(seq 300); do history | grep -q 'attached to flood' && break; sleep 0.1; done
sleep 2 # let the attach line go out
post _calls/reset "{\"token\":\"$token\"}" >/dev/null

cpu() { awk '{print $14+$15}' "/proc/$1/stat"; } # utime+stime, clock ticks
hz=$(getconf CLK_TCK)
h0=$(cpu $hub_pid); f0=$(cpu $fleet_pid); t0=$(date +%s.%N)
cmd="seq 1 $N"
[ "${SPREAD:-0}" = 1 ] && cmd="seq 1 $N | while read l; do echo \$l; sleep 0.001; done"
post sendMessage "$(node -e 'console.log(JSON.stringify({botToken:process.argv[1],from:JSON.parse(process.argv[2]),chat:JSON.parse(process.argv[3]),date:Math.floor(Date.now()/1000),text:"$ "+process.argv[4]}))' "$token" "$user" "$chat" "$cmd")" >/dev/null
for _ in $(seq 3000); do history | grep -q "</code> $N\"" && break; sleep 0.1; done
history | grep -q "</code> $N\"" || { echo "the last line never reached the chat" >&2; exit 1; }
t1=$(date +%s.%N); h1=$(cpu $hub_pid); f1=$(cpu $fleet_pid)

post _calls "{\"token\":\"$token\"}" | node -e '
  let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{
  const cs=JSON.parse(s).result.filter(c=>c.method==="sendMessage"||c.method==="editMessageText");
  let gap=1e9;for(let i=1;i<cs.length;i++)gap=Math.min(gap,cs[i].time-cs[i-1].time);
  console.log("calls to the chat: "+cs.filter(c=>c.method==="sendMessage").length+" messages, "+cs.filter(c=>c.method==="editMessageText").length+" edits; smallest gap between two: "+(cs.length>1?gap+" ms":"n/a"))})'
awk -v n="$N" -v hz="$hz" -v h="$((h1-h0))" -v f="$((f1-f0))" -v t0="$t0" -v t1="$t1" 'BEGIN{
  printf "%d lines reached the chat in %.1f s\n", n, t1-t0
  printf "CPU: hub %.0f ms, fleet %.0f ms (anchor): hub/fleet = %.2f\n", h*1000/hz, f*1000/hz, (f>0? h/f : 0)}'
