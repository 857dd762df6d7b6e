#!/bin/sh
# install-deps.sh: install the Debian packages gpumemsim needs to build,
# test and plot, only those missing. Needs root (or sudo) the first time.
#   --browser   also Chromium and its driver, which `make report-check` (and
#               its test) renders the report in
set -e
pkgs="gcc make libsqlite3-dev zlib1g-dev libcriterion-dev gnuplot-nox sqlite3 python3 jq"
[ "${1:-}" = --browser ] && pkgs="$pkgs chromium chromium-driver"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "install-deps: installing$missing" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "install-deps: missing$missing, and not root nor sudo to install them" >&2
		exit 1
	fi
	SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq $missing >&2
