#!/usr/bin/env bash
# Runs a Windows executable under Wine, headless, in the prefix
# scripts/install-wine.sh made: `go test -exec scripts/wine-exec.sh` with
# GOOS=windows runs a package's tests this way. The exit status is the
# program's.
set -euo pipefail
export WINEPREFIX="${WINEPREFIX:-${AGENTS_FLEET_WINE_DIR:-$HOME/.cache/agents-fleet/wine}/prefix}"
export WINEDEBUG=-all
unset DISPLAY
if [ ! -f "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" ]; then
	echo "wine-exec: no prefix with bcryptprimitives.dll at $WINEPREFIX: run scripts/install-wine.sh" >&2
	exit 1
fi
exec wine "$@"
