#!/bin/sh
# va_probe.sh: measure the driver's virtual-address placement on a GPU host
# (capture/tests/va_probe.cu; the model it checks: device/va_place.h,
# docs/policies.md "Synthetic addresses"). Builds the probe with nvcc, runs
# each sequence in a fresh process and writes OUTDIR/va_probe.tsv (one row per
# call: seq step op size addr delta_mib align_log2) and OUTDIR/va_probe.env
# (driver, GPU, nvcc). Takes a few seconds. SEQS: the sequences to run
# (default all). Each REPLAY file
# (scripts/va_replay.py: a recorded run's segment calls) is replayed too, in
# its own process, after the sequences.
#   sh capture/va_probe.sh OUTDIR [REPLAY...]
set -eu
out=${1:?usage: sh capture/va_probe.sh OUTDIR [REPLAY...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
nvcc=${NVCC:-$cuda/bin/nvcc}
command -v "$nvcc" >/dev/null 2>&1 || nvcc=nvcc
mkdir -p "$out"
"$nvcc" -O2 -o "$out/va_probe" "$here/tests/va_probe.cu" -lcuda -ldl
tsv=$out/va_probe.tsv
printf 'seq\tstep\top\tsize\taddr\tdelta_mib\talign_log2\n' >"$tsv"
{
	echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu /'
	"$nvcc" --version | tail -1 | sed 's/^/nvcc /'
} >"$out/va_probe.env"
for s in ${SEQS:-sizes interleave bottom smallbig reuse churn vmm lmem heap_a heap_f heap_m}; do
	rc=0
	timeout 30 "$out/va_probe" "$s" "$tsv" || rc=$?
	[ "$rc" -eq 77 ] && { echo "va_probe: no GPU" >&2; exit 77; }
	[ "$rc" -eq 0 ] || echo "va_probe: sequence $s exited $rc" >&2
done
for r in "$@"; do
	timeout 60 "$out/va_probe" "replay:$r" "$tsv" || echo "va_probe: replay $r exited $?" >&2
done
echo "va_probe: $(($(wc -l <"$tsv") - 1)) rows in $tsv" >&2
