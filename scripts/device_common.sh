# device_common.sh: what every device script (scripts/device_*.sh) starts
# with, sourced after its `exec bash` line:
#   . "$(dirname "$0")/device_common.sh"; device_start "$@"
# device_start OUT: the one argument (else the usage, exit 2); the working
#   directory the repository root ($root); OUT made, absolute ($OUT);
#   py=${PYTHON:-python3}; set -u.
# device_jax_python: $JPY, the first python that imports jax, flax and optax
#   ($JAX_PYTHON first), or empty.
# device_devdeps: SQLite's and zlib's headers and libraries from
#   .devdeps/*.deb (the device has no package manager; carry .devdeps with
#   the run), for a build there.
device_start() {
	set -u
	[ $# -eq 1 ] || { echo "usage: $0 OUT" >&2; exit 2; }
	root=$(cd "$(dirname "$0")/.." && pwd -P)
	cd "$root" || exit 1
	mkdir -p "$1" && OUT=$(cd "$1" && pwd -P) || exit 1
	py=${PYTHON:-python3}
}

device_devdeps() {
	ls .devdeps/*.deb > /dev/null 2>&1 || return 0
	mkdir -p /opt/dd && for f in .devdeps/*.deb; do dpkg -x "$f" /opt/dd; done
	export CPATH=/opt/dd/usr/include${CPATH:+:$CPATH}
	export LIBRARY_PATH=/opt/dd/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}
	export LD_LIBRARY_PATH=/opt/dd/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
}

device_jax_python() {
	JPY=
	local c
	for c in ${JAX_PYTHON:-} /opt/jax/.venv/bin/python /opt/*/.venv/bin/python python3; do
		[ -x "$c" ] || command -v "$c" >/dev/null 2>&1 || continue
		"$c" -c "import jax, flax, optax" >/dev/null 2>&1 && { JPY=$c; return 0; }
	done
}
