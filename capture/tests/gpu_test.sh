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
"$B/gpumemsim" capture -o "$OUT/probe-syncs.trace.gz" --syncs callbacks --label test=probe -- \
	"$B/gpu_probe" "$OUT/syncs.expect" >/dev/null || exit 1
"$B/gpu_probe_check" "$OUT/probe-syncs.trace.gz" "$OUT/syncs.expect" || { echo "gpu-test: FAIL (syncs from callbacks)"; exit 1; }
# Modules loaded and unloaded at run time and a CUDA graph
# (gpu_probe_modules.cu): every load's global is freed at its unload, the
# graph's kernels, memset and copy carry its id, the trace validates and
# replays. With both ways of recording syncs.
for mode in activity callbacks; do
	T="$OUT/modules-$mode.trace.gz"
	GPUMEMSIM_CAPTURE_VERBOSE=1 GPUMEMSIM_CAPTURE_DEBUG=1 "$B/gpumemsim" capture -o "$T" --syncs $mode -- \
		"$B/gpu_probe_modules" "$OUT/modules.expect" >/dev/null 2>"$OUT/modules-$mode.err" ||
		{ cat "$OUT/modules-$mode.err"; echo "gpu-test: FAIL (gpu_probe_modules, syncs $mode)"; exit 1; }
	grep 'gpumemsim capture' "$OUT/modules-$mode.err"
	"$B/gpumemsim" trace validate "$T" || { echo "gpu-test: FAIL (modules trace does not validate)"; exit 1; }
	"$B/gpumemsim" run "$T" --policy cuda_malloc >/dev/null ||
		{ echo "gpu-test: FAIL (modules trace does not replay)"; exit 1; }
	"$B/gpumemsim" trace cat --trace "$T" | awk -v expect="$OUT/modules.expect" '
	BEGIN { while ((getline l < expect) > 0) { split(l, f, " "); want[f[1]] = f[2] } }
	$1 == "a" && $6 == 6 { sa[$4]++ }
	$1 == "f" && $6 == 6 { sf[$4]++ }
	$1 == "k" && NF >= 13 && $12 != 0 { gk++; gid[$12] = 1 }
	$1 == "c" && NF >= 9 && $8 != 0 { gc++ }
	$1 == "m" && NF >= 8 && $7 != 0 { gm++ }
	$1 == "a" && $3 ~ /^0xfff0/ { gp++ }
	END {
		n = want["module_loads"] / 2; bad = 0
		for (s in gid) ngraphs++
		printf "modules: wide global %d allocs %d frees; narrow %d allocs %d frees (want %d each)\n", \
			sa[want["wide_global"]], sf[want["wide_global"]], sa[want["narrow_global"]], sf[want["narrow_global"]], n
		printf "graph: %d kernels, %d copies, %d memsets from %d graph id(s) (want %d, %d, %d from 1)\n", \
			gk, gc, gm, ngraphs, want["graph_launches"] * want["graph_kernels_per_launch"], \
			want["graph_launches"] * want["graph_copies_per_launch"], want["graph_launches"] * want["graph_memsets_per_launch"]
		if (sa[want["wide_global"]] != n || sf[want["wide_global"]] != n) bad = 1
		if (sa[want["narrow_global"]] != n || sf[want["narrow_global"]] != n) bad = 1
		if (gk != want["graph_launches"] * want["graph_kernels_per_launch"] || ngraphs != 1) bad = 1
		if (gc != want["graph_launches"] * want["graph_copies_per_launch"]) bad = 1
		if (gm != want["graph_launches"] * want["graph_memsets_per_launch"]) bad = 1
		printf "graph memory pools (allocations CUPTI gives no address): %d (want 1)\n", gp
		if (gp != 1) bad = 1
		exit bad
	}' || { echo "gpu-test: FAIL (modules/graph records, syncs $mode)"; exit 1; }
done
# --pause-at-step (capture/inject_pause.c): the CUDA C CNN (make cnn) paused
# at step 3 of 6 writes a trace that validates and replays, whose steps 3-5
# are `uncaptured` ranges with no other record starting inside them, and
# whose replay has the 3 recorded steps.
if [ -x "$B/cnn" ]; then
	T="$OUT/cnn-paused.trace.gz"
	"$B/gpumemsim" capture -o "$T" --pause-at-step 3 -- "$B/cnn" --steps 6 --batch 8 >/dev/null ||
		{ echo "gpu-test: FAIL (cnn under --pause-at-step)"; exit 1; }
	"$B/gpumemsim" trace validate "$T" || { echo "gpu-test: FAIL (paused trace does not validate)"; exit 1; }
	"$B/gpumemsim" run "$T" --policy cuda_malloc --timing --no-db >"$OUT/cnn-paused.run" ||
		{ echo "gpu-test: FAIL (paused trace does not replay)"; exit 1; }
	grep -q '^uncaptured steps 3,' "$OUT/cnn-paused.run" || { cat "$OUT/cnn-paused.run"; echo "gpu-test: FAIL (paused steps)"; exit 1; }
	# (frees may follow: the module globals the capture frees at exit)
	"$B/gpumemsim" trace cat "$T" | awk '
	$1 == "r" && $NF == "uncaptured" { if (!t0 || $2 < t0) t0 = $2; if ($4 == "\"step") nu++; next }
	$1 ~ /^[akcmyp]$/ { last = $2 > last ? $2 : last; if ($1 == "k") nk++ }
	END {
		printf "pause: %d uncaptured step ranges (want 3), %d kernels, last record at %s, pause at %s\n", nu, nk, last, t0
		exit !(nu == 3 && nk > 0 && t0 && last < t0)
	}' || { echo "gpu-test: FAIL (records after the pause)"; exit 1; }
else
	echo "gpu-test: pause check not run ($B/cnn missing: make cnn needs nvcc and cuDNN)"
fi
echo "gpu-test: PASS"
