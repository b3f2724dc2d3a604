#!/usr/bin/env bash
# Installs the agent CLIs the provider tests drive, at pinned versions, into
# a cache folder (default ~/.cache/agents-fleet/agent-clis), and prints the
# folder. Re-running it is cheap when the versions are already there.
#
#   scripts/install-agent-clis.sh            # install (or check) all three
#   eval "$(scripts/install-agent-clis.sh --env)"   # export FLEET_TEST_*_PATH
set -euo pipefail

dir="${AGENTS_FLEET_CLI_DIR:-$HOME/.cache/agents-fleet/agent-clis}"
pkgs=(
  "@anthropic-ai/claude-code@2.1.197"
  "@openai/codex@0.171.0"
  "@github/copilot@1.0.102"
)

want_env=0
[ "${1:-}" = "--env" ] && want_env=1

mkdir -p "$dir"
stamp="$dir/.installed"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "${pkgs[*]}" ]; then
  (
    cd "$dir"
    [ -f package.json ] || npm init -y >/dev/null
    npm install --no-audit --no-fund --loglevel=error "${pkgs[@]}" >&2
  )
  printf '%s' "${pkgs[*]}" >"$stamp"
fi

bin="$dir/node_modules/.bin"
for b in claude codex copilot; do
  [ -x "$bin/$b" ] || { echo "install-agent-clis: $bin/$b is missing after npm install" >&2; exit 1; }
done

if [ "$want_env" = 1 ]; then
  printf 'export FLEET_TEST_CLAUDE_PATH=%q\n' "$bin/claude"
  printf 'export FLEET_TEST_CODEX_PATH=%q\n' "$bin/codex"
  printf 'export FLEET_TEST_COPILOT_PATH=%q\n' "$bin/copilot"
else
  echo "$dir"
fi
