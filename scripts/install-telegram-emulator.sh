#!/usr/bin/env bash
# Installs the Telegram Bot API emulator the hub tests drive
# (telegram-test-api, pinned) into a cache folder (default
# ~/.cache/agents-fleet/telegram-emulator), and prints the folder. Re-running
# it is cheap when the version is already there. scripts/telegram-emulator.js
# starts it.
#
#   scripts/install-telegram-emulator.sh                  # install (or check)
#   eval "$(scripts/install-telegram-emulator.sh --env)"  # export FLEET_TEST_TELEGRAM_EMULATOR
set -euo pipefail

dir="${AGENTS_FLEET_TGEMU_DIR:-$HOME/.cache/agents-fleet/telegram-emulator}"
pkg="telegram-test-api@4.2.1"

want_env=0
[ "${1:-}" = "--env" ] && want_env=1

mkdir -p "$dir"
stamp="$dir/.installed"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$pkg" ] || [ ! -f "$dir/node_modules/telegram-test-api/package.json" ]; then
  (
    cd "$dir"
    [ -f package.json ] || npm init -y >/dev/null
    npm install --no-audit --no-fund --loglevel=error "$pkg" >&2
  )
  printf '%s' "$pkg" >"$stamp"
fi

[ -f "$dir/node_modules/telegram-test-api/package.json" ] || {
  echo "install-telegram-emulator: $dir/node_modules/telegram-test-api is missing after npm install" >&2; exit 1
}

if [ "$want_env" = 1 ]; then
  printf 'export FLEET_TEST_TELEGRAM_EMULATOR=%q\n' "$dir"
else
  echo "$dir"
fi
