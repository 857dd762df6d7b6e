#!/usr/bin/env bash
# timing_runs.sh: on a GPU host, the measurements behind the CNN's step-time
# validation (issue 6, docs/timing.md): the CUDA C CNN without caching
# (--alloc malloc: a cudaMalloc/cudaFree per tensor) and with CUDA's pool
# (--alloc async), each run twice uncaptured, then each captured once.
#
#   capture/cnn/timing_runs.sh BUILD_DIR OUTDIR
#
# BUILD_DIR holds prebuilt cnn, gpumemsim and libgpumemsim_capture.so (the
# capture library is found next to gpumemsim, or via GPUMEMSIM_CAPTURE_LIB).
# OUTDIR gets:
#   steps.tsv                         model batch alloc run mean_step_ms (uncaptured)
#   cnn-MODEL-bB-ALLOC.trace.gz       the captures
#   logs/*.log                        every run's output (captured runs: *-capture.log)
# scripts/cnn_timing.sh OUTDIR turns them into the comparison table.
#
# Runs are sequential and alone on the GPU (nothing else should use it); the
# modes alternate so that a drift of the machine hits both alike. About
# 2-3 minutes on an H200: each run spends 1-3 s starting up and in its
# first step (cuDNN's algorithm search), the rest is STEPS x 20-60 ms.
# Environment: MODELS ("resnet vgg"), BATCHES ("32 64"), IMAGE (64),
# STEPS (12), RUNS (2 uncaptured runs per mode), RUN_TIMEOUT (120 s per run), CAPTURE_OPTS (extra `gpumemsim
# capture` options, e.g. --no-source: allocation calls then cost what they
# cost without capture).
set -u
if [ $# -ne 2 ]; then
	echo "usage: $0 BUILD_DIR OUTDIR" >&2
	exit 2
fi
B=$(cd "$1" && pwd) || exit 1
mkdir -p "$2/logs" || exit 1
O=$(cd "$2" && pwd) || exit 1
CNN=$B/cnn
G=$B/gpumemsim
for f in "$CNN" "$G"; do
	if [ ! -x "$f" ]; then
		echo "timing_runs.sh: $f: not an executable (BUILD_DIR must hold cnn and gpumemsim)" >&2
		exit 1
	fi
done
if [ -z "${GPUMEMSIM_CAPTURE_LIB:-}" ] && [ ! -f "$B/libgpumemsim_capture.so" ]; then
	echo "timing_runs.sh: $B/libgpumemsim_capture.so missing (or set GPUMEMSIM_CAPTURE_LIB)" >&2
	exit 1
fi
models=${MODELS:-resnet vgg}
batches=${BATCHES:-32 64}
img=${IMAGE:-64}
steps=${STEPS:-12}
tmo=${RUN_TIMEOUT:-120}
start=$SECONDS
fails=0

nvidia-smi -L 2>&1 | head -1 | tee "$O/logs/device.txt"
printf 'model\tbatch\talloc\trun\tmean_step_ms\n' > "$O/steps.tsv"

# The mean step (steps 1..N-1: the first carries cuDNN's algorithm search)
# from the program's own summary line.
mean_step() {
	sed -n 's/^cnn: first_step_ms [0-9.]* mean_step_ms \([0-9.]*\) .*/\1/p' "$1" | tail -1
}

args() { # MODEL BATCH ALLOC
	echo --model "$1" --batch "$2" --image "$img" --steps "$steps" --algo fastest \
		--print-every "$steps" --alloc "$3"
}

for m in $models; do
	for b in $batches; do
		for run in $(seq 1 "${RUNS:-2}"); do
			for a in malloc async; do
				log=$O/logs/cnn-$m-b$b-$a-run$run.log
				# shellcheck disable=SC2046
				timeout "$tmo" "$CNN" $(args "$m" "$b" "$a") > "$log" 2>&1
				rc=$?
				ms=$(mean_step "$log")
				printf '%4ds %s b%s %s run %s rc=%s mean_step_ms=%s\n' \
					$((SECONDS - start)) "$m" "$b" "$a" "$run" "$rc" "${ms:-?}"
				if [ $rc -ne 0 ] || [ -z "$ms" ]; then
					fails=$((fails + 1))
					tail -3 "$log"
					continue
				fi
				printf '%s\t%s\t%s\t%s\t%s\n' "$m" "$b" "$a" "$run" "$ms" >> "$O/steps.tsv"
			done
		done
		for a in malloc async; do
			tr=$O/cnn-$m-b$b-$a.trace.gz
			log=$O/logs/cnn-$m-b$b-$a-capture.log
			# shellcheck disable=SC2046
			# shellcheck disable=SC2086
			timeout "$tmo" "$G" capture ${CAPTURE_OPTS:-} --label workload=cnn --label model="$m" \
				--label batch="$b" --label alloc="$a" -o "$tr" -- \
				"$CNN" $(args "$m" "$b" "$a") > "$log" 2>&1
			rc=$?
			printf '%4ds %s b%s %s capture rc=%s captured mean_step_ms=%s\n' \
				$((SECONDS - start)) "$m" "$b" "$a" "$rc" "$(mean_step "$log")"
			if [ $rc -ne 0 ]; then
				fails=$((fails + 1))
				tail -3 "$log"
			fi
		done
	done
done
echo "timing_runs.sh: done in $((SECONDS - start)) s, $fails failed; $O/steps.tsv"
[ $fails -eq 0 ]
