#!/usr/bin/env bash
# Makes this Linux machine run the Windows build of the fleet under Wine, for
# the Windows tests (docs/windows.md): Debian's wine and mingw-w64 at pinned
# versions (installed with apt when missing; needs root then), a
# bcryptprimitives.dll that Go 1.24+ executables need and Wine 8.0 lacks
# (built from scripts/wine/), and a Wine prefix with it, under a cache
# folder (default ~/.cache/agents-fleet/wine). Re-running it is cheap.
#
#   scripts/install-wine.sh                       # install (or check)
#   eval "$(scripts/install-wine.sh --env)"       # export WINEPREFIX, WINEDEBUG, FLEET_TEST_WINE_EXEC
#   GOOS=windows go test -exec "$FLEET_TEST_WINE_EXEC" ./registry
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
dir="${AGENTS_FLEET_WINE_DIR:-$HOME/.cache/agents-fleet/wine}"
pkgs=(wine=8.0~repack-4 wine64=8.0~repack-4 gcc-mingw-w64-x86-64-win32=12.2.0-14+deb12u1+25.2+b1)

want_env=0
[ "${1:-}" = "--env" ] && want_env=1

missing=0
for p in "${pkgs[@]}"; do
	[ "$(dpkg-query -W -f='${Version}' "${p%%=*}" 2>/dev/null || true)" = "${p#*=}" ] || missing=1
done
if [ "$missing" = 1 ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "install-wine: apt packages missing (${pkgs[*]}); run this as root once" >&2
		exit 1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${pkgs[@]}" >&2 || {
		apt-get update >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${pkgs[@]}" >&2
	}
fi

mkdir -p "$dir"
dll="$dir/bcryptprimitives.dll"
src="$here/wine/bcryptprimitives.c"
if [ ! -f "$dll" ] || [ "$src" -nt "$dll" ]; then
	x86_64-w64-mingw32-gcc -O2 -shared -s -o "$dll.tmp" "$src" "$here/wine/bcryptprimitives.def" -ladvapi32
	mv "$dll.tmp" "$dll"
fi

export WINEPREFIX="$dir/prefix" WINEDEBUG=-all
unset DISPLAY
if [ ! -f "$WINEPREFIX/system.reg" ]; then
	wineboot -i >/dev/null 2>&1 || true
	wineserver -w
	[ -f "$WINEPREFIX/system.reg" ] || { echo "install-wine: wineboot made no prefix in $WINEPREFIX" >&2; exit 1; }
fi
sys32="$WINEPREFIX/drive_c/windows/system32"
cmp -s "$dll" "$sys32/bcryptprimitives.dll" || cp "$dll" "$sys32/bcryptprimitives.dll"

if [ "$want_env" = 1 ]; then
	printf 'export WINEPREFIX=%q\n' "$WINEPREFIX"
	printf 'export WINEDEBUG=-all\n'
	printf 'export FLEET_TEST_WINE_EXEC=%q\n' "$here/wine-exec.sh"
else
	echo "$WINEPREFIX"
fi
