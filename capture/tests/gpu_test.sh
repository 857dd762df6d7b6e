#!/bin/sh
# gpu_test.sh: run gpu_probe under `gpumemsim capture` and check its trace
# exactly (make gpu-test). Prints SKIP and succeeds where there is no GPU.
# usage: sh capture/tests/gpu_test.sh BUILD_DIR
B=${1:-build}
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "gpu-test: SKIP (no GPU: nvidia-smi missing or failing)"
	exit 0
fi
OUT=${GPU_TEST_OUT:-$B/gpu-test}
mkdir -p "$OUT" || exit 1
rm -f "$OUT/probe.trace.gz" "$OUT/probe.expect"
GPUMEMSIM_CAPTURE_VERBOSE=1 "$B/gpumemsim" capture -o "$OUT/probe.trace.gz" --label test=probe \
	-- "$B/gpu_probe" "$OUT/probe.expect"
rc=$?
if [ $rc -eq 77 ]; then
	echo "gpu-test: SKIP (cudaGetDeviceCount found no device)"
	exit 0
fi
[ $rc -eq 0 ] || { echo "gpu-test: FAIL (gpu_probe exited $rc)"; exit 1; }
"$B/gpu_probe_check" "$OUT/probe.trace.gz" "$OUT/probe.expect" || { echo "gpu-test: FAIL"; exit 1; }
# The same program with links off: no kernel may carry links.
"$B/gpumemsim" capture -o "$OUT/probe-nolinks.trace.gz" --no-links -- "$B/gpu_probe" "$OUT/nolinks.expect" >/dev/null || exit 1
"$B/gpumemsim" trace cat --trace "$OUT/probe-nolinks.trace.gz" 2>/dev/null | awk '$1=="k" && NF>10 && $11!="-" {n++} END {if (n) {print "gpu-test: FAIL (" n " kernels with links under --no-links)"; exit 1}}' || exit 1
# Syncs from the sync calls' callbacks (GPUMEMSIM_CAPTURE_SYNCS=callbacks):
# the same exact checks, the stream sync's stream included.
GPUMEMSIM_CAPTURE_SYNCS=callbacks "$B/gpumemsim" capture -o "$OUT/probe-syncs.trace.gz" -- \
	"$B/gpu_probe" "$OUT/syncs.expect" >/dev/null || exit 1
"$B/gpu_probe_check" "$OUT/probe-syncs.trace.gz" "$OUT/syncs.expect" || { echo "gpu-test: FAIL (syncs from callbacks)"; exit 1; }
echo "gpu-test: PASS"
