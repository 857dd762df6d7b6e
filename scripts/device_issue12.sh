#!/usr/bin/env bash
# device_issue12.sh: issue 12's GPU-host run in one device call: build, the
# probe test, the capture matrix, the stress run and the overhead comparison,
# packing into OUT after every phase (a call cut short still returns the
# phases before). Run from anywhere; it works in the repository root.
#
#   scripts/device_issue12.sh OUT
#
# OUT gets at most 7 files (the device tool returns 8 at most):
#   timeline.txt      per phase: start and end (date +%s), seconds, exit status
#   env.txt           GPU, driver, nvcc, python, torch, jax versions
#   build.log         make -j16 && make capture && make cnn
#   gputest.log       make gpu-test
#   matrix.tgz        capture/matrix.sh's OUTDIR (matrix/: matrix.tsv, matrix.md,
#                     traces, logs/, run.out, run.err)
#   stress.tgz        capture/stress.sh's OUTDIR (stress/: stress.tsv, summary.txt,
#                     refs.tsv, verbose.txt, fail/, run.out, run.err)
#   overhead-b32.txt  CONFIGS="plain;default;GPUMEMSIM_CAPTURE_SYNCS=callbacks"
#                     sh capture/overhead.sh build 32 30 4
#   diag.tgz          scripts/device_issue12_diag.sh: the previous capture library
#                     (.prebuilt/libcapture_head.so, carried) against this one
# Environment: PHASES (default "build gputest diag matrix stress overhead": the
# phases to run, in that order), STRESS_N (20), PAR (4, stress), DEADLINE_S
# (540: every phase is limited so that the whole run ends by then, packing
# included; a phase that has less than its minimum left is skipped),
# WORK_DIR (/tmp/issue12), and what matrix.sh / stress.sh / overhead.sh read
# (PYTHON, MATRIX_PROGRAMS, ...).
# Expected on an H200 with 16 cores: build 40-90 s, gputest 15-30 s, matrix
# 4-5 min, stress about 2 min, overhead about 2 min: more than one 10-minute
# call holds; split it, e.g. PHASES="build gputest matrix" then
# PHASES="build stress overhead" (the build is quick when build/ is kept).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
if [ $# -ne 1 ]; then
	echo "usage: $0 OUT" >&2
	exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd -P)
cd "$root" || exit 1
mkdir -p "$1" || exit 1
OUT=$(cd "$1" && pwd -P)
phases=" ${PHASES:-build gputest diag matrix stress overhead} "
deadline=${DEADLINE_S:-540}
stress_n=${STRESS_N:-20}
W=${WORK_DIR:-/tmp/issue12}
rm -rf "$W"
mkdir -p "$W" || exit 1
T0=$(date +%s)
export PYTHONUNBUFFERED=1
status=0

has() { case $phases in *" $1 "*) return 0 ;; esac; return 1; }
elapsed() { echo $(($(date +%s) - T0)); }
say() { echo "[issue12 $(elapsed)s] $*"; }
# lim WANT: WANT seconds, or fewer so the run ends (30 s for packing) by the deadline
lim() {
	local l=$((deadline - $(elapsed) - 30))
	[ "$l" -lt 1 ] && l=1
	if [ "$1" -lt "$l" ]; then echo "$1"; else echo "$l"; fi
}
# begin NAME MIN: 0 if the phase runs (at least MIN seconds left), else 1 and noted
begin() {
	local left=$((deadline - $(elapsed) - 30))
	if [ "$left" -lt "$2" ]; then
		printf '%s\tskipped\t%s\tonly %s s left, needs %s\n' "$1" "$(date +%s)" "$left" "$2" >> "$OUT/timeline.txt"
		say "$1: skipped (only $left s left, needs $2)"
		status=1
		return 1
	fi
	PH_START=$(date +%s)
	printf '%s\tstart\t%s\t+%ss\n' "$1" "$PH_START" "$(elapsed)" >> "$OUT/timeline.txt"
	say "$1: start"
	return 0
}
end() { # NAME RC [NOTE]
	local t
	t=$(date +%s)
	printf '%s\tend\t%s\t%ss\trc=%s\t%s\n' "$1" "$t" $((t - PH_START)) "$2" "${3:-}" >> "$OUT/timeline.txt"
	say "$1: end, $((t - PH_START)) s, rc $2 ${3:-}"
	[ "$2" = 0 ] || status=1
}
# pack NAME: $W/NAME -> $OUT/NAME.tgz (under 16 MiB: the largest traces are
# left out, and listed in NAME/left-out.txt, when it would be larger)
pack() {
	local name=$1 max=$((15 * 1024 * 1024)) size
	[ -d "$W/$name" ] || return 0
	tar -czf "$W/$name.tgz" -C "$W" "$name" 2> "$W/$name.tar.err"
	size=$(stat -c %s "$W/$name.tgz" 2> /dev/null || echo 0)
	if [ "$size" -gt "$max" ]; then
		find "$W/$name" -name '*.gz' -size +2M -printf '%P %s\n' > "$W/$name/left-out.txt"
		tar -czf "$W/$name.tgz" -C "$W" --exclude-from=<(sed 's/ [0-9]*$//; s|^|'"$name"'/|' "$W/$name/left-out.txt") "$name"
		say "$name.tgz was $size bytes: left out $(wc -l < "$W/$name/left-out.txt") traces over 2 MiB"
	fi
	mv -f "$W/$name.tgz" "$OUT/$name.tgz"
}

printf 'phase\tevent\tepoch\tinfo\n' > "$OUT/timeline.txt"
printf 'all\tstart\t%s\tphases:%s deadline %s s\n' "$T0" "$phases" "$deadline" >> "$OUT/timeline.txt"
{
	echo "date_utc $(date -u '+%Y-%m-%d %H:%M:%S')"
	echo "host_kernel $(uname -r)"
	echo "nproc $(nproc)"
	nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader 2>&1 | sed 's/^/gpu /'
	echo "nvcc $( ("${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" --version 2> /dev/null || echo none) | grep -o 'release [0-9.]*' | head -1)"
	py=${PYTHON:-python3}
	echo "python $(command -v "$py") $("$py" --version 2>&1)"
	timeout 120 "$py" -c 'import torch, torchvision, triton; print("torch", torch.__version__, "torchvision", torchvision.__version__, "triton", triton.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1 | tail -2
	timeout 120 "${JAX_PYTHON:-$py}" -c 'import jax, jaxlib, flax, optax; print("jax", jax.__version__, "jaxlib", jaxlib.__version__, "flax", flax.__version__, "optax", optax.__version__)' 2>&1 | tail -2
} > "$OUT/env.txt" 2>&1
say "env: $(tr '\n' ';' < "$OUT/env.txt")"

# ---- build ----------------------------------------------------------------
if has build && begin build 30; then
	# Debian packages carried in .devdeps/ (headers the image lacks), if any
	if ls .devdeps/*.deb > /dev/null 2>&1; then
		mkdir -p /opt/dd && for f in .devdeps/*.deb; do dpkg -x "$f" /opt/dd; done
		export CPATH=/opt/dd/usr/include${CPATH:+:$CPATH}
		export LIBRARY_PATH=/opt/dd/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}
		export LD_LIBRARY_PATH=/opt/dd/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	fi
	{
		echo "== make -j16"
		timeout "$(lim 300)" make -j16
		echo "== rc $?"
		echo "== make capture"
		timeout "$(lim 120)" make capture
		echo "== rc $?"
		echo "== make cnn"
		timeout "$(lim 180)" make cnn
		echo "== rc $?"
		ls -la build/gpumemsim build/libgpumemsim_capture.so build/cnn
	} > "$OUT/build.log" 2>&1
	# fall back on binaries built on the CPU host (.prebuilt/, carried)
	for f in gpumemsim gpu_probe_check; do
		if [ ! -x "build/$f" ] && [ -x ".prebuilt/$f" ]; then
			cp ".prebuilt/$f" "build/$f" && echo "using .prebuilt/$f" >> "$OUT/build.log"
		fi
	done
	rc=0
	[ -x build/gpumemsim ] && [ -f build/libgpumemsim_capture.so ] || rc=1
	[ -x build/cnn ] || rc=2
	end build "$rc" "$(grep '^== rc' "$OUT/build.log" | tr '\n' ' ')"
fi

# ---- gputest --------------------------------------------------------------
if has gputest && begin gputest 30; then
	timeout -k 10 "$(lim 180)" make gpu-test > "$OUT/gputest.log" 2>&1
	rc=$?
	end gputest "$rc" "$(grep -E '^gpu-test: ' "$OUT/gputest.log" | tail -1)"
fi

# ---- diag: the capture library of the last commit before issue 12 against
# this one, on the module probe and the JAX program (both sync modes)
if has diag && begin diag 60; then
	mkdir -p "$W/diag"
	timeout -k 10 "$(lim 240)" bash scripts/device_issue12_diag.sh build .prebuilt/libcapture_head.so \
		"$W/diag" > "$W/diag/run.out" 2>&1
	rc=$?
	cat "$W/diag/run.out"
	pack diag
	end diag "$rc"
fi

# ---- matrix ---------------------------------------------------------------
if has matrix && begin matrix 90; then
	mkdir -p "$W/matrix"
	timeout -k 20 "$(lim 360)" bash capture/matrix.sh build "$W/matrix" \
		> "$W/matrix/run.out" 2> "$W/matrix/run.err"
	rc=$?
	cat "$W/matrix/run.out"
	pack matrix
	end matrix "$rc" "$(awk -F'\t' 'NR > 1 { n++; if ($NF == "ok") k++ } END { printf "%d/%d programs ok", k, n }' "$W/matrix/matrix.tsv" 2> /dev/null)"
fi

# ---- stress ---------------------------------------------------------------
if has stress && begin stress 60; then
	mkdir -p "$W/stress"
	timeout -k 25 "$(lim 300)" bash capture/stress.sh build "$stress_n" "$W/stress" \
		> "$W/stress/run.out" 2> "$W/stress/run.err"
	rc=$?
	cat "$W/stress/run.out"
	pack stress
	end stress "$rc" "$(tr '\n' ' ' < "$W/stress/summary.txt" 2> /dev/null)"
fi

# ---- overhead -------------------------------------------------------------
if has overhead && begin overhead 110; then
	CONFIGS="plain;default;GPUMEMSIM_CAPTURE_SYNCS=callbacks" timeout -k 10 "$(lim 300)" \
		sh capture/overhead.sh build 32 30 4 > "$OUT/overhead-b32.txt" 2>&1
	rc=$?
	cat "$OUT/overhead-b32.txt"
	end overhead "$rc"
fi

printf 'all\tend\t%s\t%ss\tstatus=%s\n' "$(date +%s)" "$(elapsed)" "$status" >> "$OUT/timeline.txt"
say "done, status $status; $(find "$OUT" -type f | wc -l) files in $OUT"
exit "$status"
