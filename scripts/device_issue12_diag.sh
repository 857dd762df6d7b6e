#!/usr/bin/env bash
# device_issue12_diag.sh: the before/after evidence for issue 12's capture
# fixes, on the GPU host (called by device_issue12.sh, phase diag).
#
#   scripts/device_issue12_diag.sh BUILD HEAD_LIB OUTDIR
#
# HEAD_LIB is the capture library built from the last commit before the
# fixes (the driver builds it from a copy of that commit's inject.c). For
# each library (head, new):
#   - gpu_probe_modules, REPEAT times: modules loaded and unloaded at run
#     time (a 6-parameter kernel's module, then a 1-parameter one, 3 times)
#     and a CUDA graph: exit status, `trace validate` verdict, verbose line;
#   - the JAX program of the matrix (autotuning on, growth allocator), once
#     with each way of recording syncs: exit status, validate verdict.
# Writes OUTDIR/diag.tsv (lib, program, mode, run, exit, validate) and
# OUTDIR/diag.log (the first error lines and verbose lines).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
B=$(cd "${1:-build}" && pwd -P)
HEAD_LIB=$2
O=$3
REPEAT=${DIAG_REPEAT:-5}
root=$(cd "$(dirname "$0")/.." && pwd -P)
mkdir -p "$O" || exit 1
W=$(mktemp -d /tmp/issue12-diag.XXXXXX) || exit 1
PY=${PYTHON:-python3}
printf 'lib\tprogram\tmode\trun\texit\tvalidate\n' > "$O/diag.tsv"
: > "$O/diag.log"

# one LIB PROGRAM MODE RUN CMD...: capture, validate, record
one() {
	local lib=$1 prog=$2 mode=$3 run=$4 libpath rc v
	shift 4
	libpath=$B/libgpumemsim_capture.so
	[ "$lib" = head ] && libpath=$HEAD_LIB
	rm -f "$W"/t.trace*.gz
	GPUMEMSIM_CAPTURE_LIB=$libpath GPUMEMSIM_CAPTURE_VERBOSE=1 GPUMEMSIM_CAPTURE_SYNCS=$mode \
		GPUMEMSIM_CAPTURE_DEBUG=${DIAG_DEBUG:-0} \
		timeout -k 10 120 "$B/gpumemsim" capture -o "$W/t.trace.gz" -- "$@" \
		> "$W/out" 2> "$W/err" < /dev/null
	rc=$?
	if [ -f "$W/t.trace.gz" ]; then
		v=$("$B/gpumemsim" trace validate "$W/t.trace.gz" 2>&1 | grep -v ': warning: ' | tail -1)
	else
		v="no trace"
	fi
	case $v in *": ok ("*) vs=ok ;; *) vs=FAIL ;; esac
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$lib" "$prog" "$mode" "$run" "$rc" "$vs" >> "$O/diag.tsv"
	# the capture's own lines (debug ones too) of the first run of each
	[ "$run" = 1 ] && grep 'gpumemsim capture' "$W/err" > "$O/err-$lib-$prog-$mode.txt"
	# the JAX traces are kept, to compare the two libraries and sync modes
	[ "$prog" = jax-default ] && [ -f "$W/t.trace.gz" ] && cp "$W/t.trace.gz" "$O/jax-$lib-$mode.trace.gz"
	{
		echo "== $lib $prog syncs=$mode run $run: exit $rc, validate: $v"
		grep -E 'gpumemsim capture|Segmentation|Aborted|Error|error' "$W/err" | head -8
		ls "$W"/t.trace*.gz 2> /dev/null | sed 's/^/   trace /'
	} >> "$O/diag.log"
}

for lib in ${DIAG_LIBS:-head new}; do
	for r in $(seq 1 "$REPEAT"); do
		one "$lib" modules activity "$r" "$B/gpu_probe_modules" "$W/expect"
	done
	for mode in activity callbacks; do
		XLA_PYTHON_CLIENT_PREALLOCATE=false one "$lib" jax-default "$mode" 1 \
			"$PY" "$root/capture/jax/train_jax.py" --alloc growth --autotune --model cnn \
			--batch 16 --image 32 --steps 3 --json "$W/jax.json"
	done
done
cat "$O/diag.tsv"
rm -rf "$W"
