#!/usr/bin/env bash
# The fleet hub demo (docs/hub.md): two fleets — "web" on the embedded local
# provider and "agents", a Claude Code coordinator with its workers against
# the scripted model endpoint — the Telegram Bot API emulator, and
# `fleet hub`. The script plays the operator's phone through the emulator's
# client API (approve each fleet, answer a question, allow an agent's Bash
# call, /fleets, /status), then prints the chat as it ended up.
#
#   scripts/install-agent-clis.sh && scripts/install-telegram-emulator.sh
#   scripts/hub-demo.sh          # KEEP=1 keeps the folder for a look around
#
# Everything runs on 127.0.0.1 in a temporary folder; every process it
# starts is stopped by pid at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

eval "$(scripts/install-telegram-emulator.sh --env)"
eval "$(scripts/install-agent-clis.sh --env)"

D=$(mktemp -d /tmp/hub-demo.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $D"; else rm -rf "$D"; fi
}
trap cleanup EXIT

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "build"
go build -o "$D/bin/fleet" ./cmd/fleet
go build -o "$D/bin/modelmock" ./cmd/modelmock
export PATH="$D/bin:$PATH"

free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

say "the Telegram Bot API emulator"
port=$(free_port)
node scripts/telegram-emulator.js "$port" "$FLEET_TEST_TELEGRAM_EMULATOR" >"$D/emulator.log" 2>&1 &
pids+=($!)
api=http://127.0.0.1:$port
for _ in $(seq 200); do grep -q READY "$D/emulator.log" && break; sleep 0.1; done
grep READY "$D/emulator.log"

say "the scripted model endpoint (docs/examples/tour.json)"
modelmock --addr 127.0.0.1:0 --script docs/examples/tour.json >"$D/modelmock.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do grep -q listening "$D/modelmock.log" && break; sleep 0.1; done
mock=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' "$D/modelmock.log")
echo "$mock"

export AGENTS_FLEET_HOME=$D/home
mkdir -p "$AGENTS_FLEET_HOME" "$D/claude-home"
chmod 700 "$AGENTS_FLEET_HOME"
token='123456:DEMO-token'
chat=42
printf '%s\n' "$token" >"$D/bot.token"
chmod 600 "$D/bot.token"
cat >"$AGENTS_FLEET_HOME/config.json" <<EOF
{
  "telegramHub": {
    "botTokenFile": "$D/bot.token",
    "allowedChatIds": [$chat],
    "apiBaseUrl": "$api",
    "verbosity": "normal"
  },
  "providers": {
    "claude": {
      "path": "$FLEET_TEST_CLAUDE_PATH",
      "env": {"HOME": "$D/claude-home", "ANTHROPIC_BASE_URL": "$mock", "ANTHROPIC_API_KEY": "sk-test"}
    }
  }
}
EOF

say "two fleets that opt in to the hub (--hub)"
for name in web agents; do
  mkdir -p "$D/$name" && git -C "$D/$name" init -q && git -C "$D/$name" commit -q --allow-empty -m init
done
(cd "$D/web" && exec fleet run --hub --headless --name web) >"$D/web.log" 2>&1 &
pids+=($!)
(cd "$D/agents" && exec fleet run --hub --headless --name agents --provider claude) >"$D/agents.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do [ "$(fleet ls --json 2>/dev/null | grep -o '"hubAttach": *true' | wc -l)" -ge 2 ] && break; sleep 0.1; done
fleet ls

say "fleet hub"
fleet hub >"$D/hub.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do fleet hub status >/dev/null 2>&1 && break; sleep 0.1; done
fleet hub status

# --- the operator's phone, through the emulator's client API ---------------
post() { curl -sS -X POST "$api/$1" -H 'content-type: application/json' -d "$2"; }
user='{"id":42,"is_bot":false,"first_name":"Ada","username":"ada"}'
chatj="{\"id\":$chat,\"type\":\"private\",\"first_name\":\"Ada\"}"
send() { # send TEXT: the operator types TEXT
  local body
  body=$(node -e 'const [t,u,c,tok]=process.argv.slice(1);const m={botToken:tok,from:JSON.parse(u),chat:JSON.parse(c),date:Math.floor(Date.now()/1000),text:t};if(t.startsWith("/"))m.entities=[{offset:0,length:t.split(" ")[0].length,type:"bot_command"}];console.log(JSON.stringify(m))' "$1" "$user" "$chatj" "$token")
  case "$1" in /*) post sendCommand "$body" >/dev/null ;; *) post sendMessage "$body" >/dev/null ;; esac
  echo "ada> $1"
}
history() { post getUpdatesHistory "{\"token\":\"$token\"}"; }
# find TEXT LABEL: the message id and callback data of the newest bot message
# containing TEXT with a button whose label contains LABEL, once it exists.
find_button() {
  local i out
  for i in $(seq 600); do
    out=$(history | node -e '
      const [text,label]=process.argv.slice(1);let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{
      const r=JSON.parse(s).result.filter(x=>x.message&&x.message.chat_id!==undefined).reverse();
      for(const x of r){const m=x.message;const kb=(m.reply_markup&&m.reply_markup.inline_keyboard)||[];
        if(!String(m.text).includes(text))continue;
        for(const row of kb)for(const b of row)if(b.text.includes(label)){console.log(x.messageId+" "+b.callback_data);return}}})' "$1" "$2")
    [ -n "$out" ] && { echo "$out"; return; }
    sleep 0.1
  done
  echo "hub-demo: no message with \"$1\" and a \"$2\" button" >&2; exit 1
}
press() { # press TEXT LABEL
  local id data
  read -r id data < <(find_button "$1" "$2")
  post sendCallback "{\"botToken\":\"$token\",\"from\":$user,\"data\":\"$data\",\"date\":$(date +%s),\"message\":{\"message_id\":$id,\"chat\":$chatj,\"date\":$(date +%s)}}" >/dev/null
  echo "ada taps [$2] on: $1"
}
wait_text() { # wait_text TEXT
  local i
  for i in $(seq 1200); do history | grep -qF -- "$1" && return; sleep 0.1; done
  echo "hub-demo: the chat never showed \"$1\"" >&2; exit 1
}

say "the operator approves each fleet before the hub reads its token"
press "Fleet web wants to attach" "Approve"
wait_text "attached to web"
press "Fleet agents wants to attach" "Approve"
wait_text "attached to agents"

say "a question from a shell task, answered with a button"
send "/use web"
send "\$ echo '::ask::{\"question\":\"Deploy to which environment?\",\"choices\":[{\"label\":\"staging\",\"value\":\"staging\"},{\"label\":\"production\",\"value\":\"production\"}]}'; read env; echo deploying to \$env"
press "Deploy to which environment?" "staging"
wait_text "t1 done in"

say "an agent's permission requests, allowed from the phone"
send "/use agents"
send "Add a greeting and a farewell to the repo"
press "wants to use Write" "Allow once"
press "wants to use Bash: echo bye" "Allow once"
wait_text "t1 done in"
wait_text "t2 done in"

say "/fleets and /status"
send "/fleets"
wait_text "<b>Fleets</b>"
send "/status"
wait_text "tasks:"
sleep 1.5 # the last notices go out at about one message a second

say "the chat, as the operator's phone shows it"
history | node -e '
  let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{
  const strip=t=>String(t).replace(/<[^>]+>/g,"").replace(/&lt;/g,"<").replace(/&gt;/g,">").replace(/&quot;|&#34;/g,"\"").replace(/&#39;/g,"\x27").replace(/&amp;/g,"&");
  for(const x of JSON.parse(s).result){
    if(x.callbackQuery){continue}
    const m=x.message||{};
    if(m.chat_id===undefined){console.log("\n  ada: "+m.text);continue}
    const kb=((m.reply_markup&&m.reply_markup.inline_keyboard)||[]).flat().map(b=>"["+b.text+"]").join(" ");
    console.log("\n  bot: "+strip(m.text).split("\n").join("\n       ")+(kb?"\n       "+kb:""))}})'

say "fleet hub status"
fleet hub status
echo
echo "DEMO OK"
