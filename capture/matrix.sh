#!/usr/bin/env bash
# matrix.sh: one small capture of each kind of program the capture must
# handle, each checked (trace validate, replay) and timed against the same
# command without capture (issue 12). Run on the GPU host from the
# repository root, after `make capture cnn`, alone on the GPU.
#
#   capture/matrix.sh [BUILD] [OUTDIR]          (defaults: build, traces/matrix)
#   OUTDIR=$OUT/matrix capture/matrix.sh build  (OUTDIR from the environment)
#
# Programs (MATRIX_PROGRAMS, default all, in this order):
#   cnn               the CUDA C CNN (build/cnn), resnet, batch 8, 64x64, 4 steps
#   torch-eager       capture/tests/torch_steps.py resnet18 b16, 2 warm-up + 5 steps, caching allocator
#   torch-compile     the same under torch.compile(model) (Inductor; compile workers)
#   torch-cudagraphs  torch.compile(model, mode="reduce-overhead"), 3 warm-up + 5 steps (CUDA graphs)
#   torch-nocaching   eager with PYTORCH_NO_CUDA_MEMORY_CACHING=1
#   torch-async       eager with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
#   jax-default       capture/jax/train_jax.py --alloc growth --autotune --model cnn
#                     (flax VGG-style CNN, b16, 32x32, 6 steps; XLA_FLAGS unset, so
#                     autotuning on; XLA_PYTHON_CLIENT_PREALLOCATE=false)
# Each program runs once without capture (timed: wall seconds of the whole
# process, and the median step the program prints) and once under `gpumemsim
# capture -o OUTDIR/NAME.trace.gz --label program=NAME ...`, with
# GPUMEMSIM_CAPTURE_VERBOSE=1. The two compile programs get a fresh, empty
# Inductor/Triton cache for each of the two runs (TORCHINDUCTOR_CACHE_DIR,
# TRITON_CACHE_DIR), so both compile from scratch and the compile workers
# run under capture. Before the first program, python imports torch and jax
# once (not timed) so that neither timed run pays a cold disk.
#
# Output:
#   OUTDIR/matrix.tsv    one row per program (written as each finishes):
#     program traces_written records dropped complete validates replays
#     replays_pytorch graph_kernels static_allocs static_frees uncaptured_s
#     captured_s wall_ratio uncaptured_step_ms captured_step_ms step_ratio
#     exit_uncaptured exit_captured result
#   OUTDIR/matrix.md     the same as a markdown table (also printed on stdout)
#   OUTDIR/NAME.trace.gz the capture; OUTDIR/NAME.trace.PID.gz: traces of the
#                        program's other processes (compile workers), if any
#   OUTDIR/logs/         per program: stdout, trimmed stderr (every `gpumemsim
#                        capture:` line + the last lines), checks; env.txt
# Columns: traces_written = the launcher's `gpumemsim capture: wrote` lines
# (one per process that did CUDA work; 1 expected); records/dropped/complete
# from `trace stats --json` of NAME.trace.gz; validates = `trace validate`
# (ok, or FAIL: its first error line); replays = `gpumemsim run --policy
# cuda_malloc` exit 0 (that policy replays any trace); replays_pytorch the
# same under `--policy pytorch` (reported, not a check); graph_kernels =
# `k` lines of `trace cat --trace` with a graph id (field 12, present when
# NF >= 13, not 0 or -); static_allocs / static_frees = `a` / `f` lines of
# memory kind 6 (device static: module globals); wall_ratio = captured_s /
# uncaptured_s (the compile programs include compilation); step_ratio the
# same for the median step (steps after warm-up; cnn and jax: steps 1..N-1).
# Exit status 1 when any program's trace is missing, does not validate, does
# not replay under cuda_malloc, or the two exit statuses differ or are not 0.
#
# The device tool returns at most 8 files, at most 2 folders below $OUT:
# point OUTDIR at a work folder and tar it into $OUT (scripts/device_issue12.sh
# does: OUTDIR=/tmp/... then tar -czf $OUT/matrix.tgz).
#
# Environment: MATRIX_PROGRAMS, PYTHON (python3; torch), JAX_PYTHON ($PYTHON),
# RUN_TIMEOUT (180 s per run), CNN_BATCH (8), CNN_STEPS (4), TORCH_MODEL
# (resnet18), TORCH_BATCH (16), TORCH_STEPS (5), JAX_BATCH (16), JAX_STEPS (6).
# Other GPUMEMSIM_CAPTURE_* variables (e.g. GPUMEMSIM_CAPTURE_SYNCS) pass
# through to the captures. About 4-5 minutes on an H200, most of it the two
# cold compiles of each compile program (30-45 s each).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u

B=${1:-build}
OUTDIR=${2:-${OUTDIR:-traces/matrix}}
here=$(cd "$(dirname "$0")" && pwd -P)
root=$(cd "$here/.." && pwd -P)
if [ ! -d "$B" ]; then
	echo "matrix.sh: $B: no such build folder" >&2
	exit 2
fi
B=$(cd "$B" && pwd -P)
G=$B/gpumemsim
if [ ! -x "$G" ]; then
	echo "matrix.sh: $G missing (make && make capture)" >&2
	exit 2
fi
mkdir -p "$OUTDIR/logs" || exit 1
O=$(cd "$OUTDIR" && pwd -P)
L=$O/logs
W=$(mktemp -d "${TMPDIR:-/tmp}/gpumemsim-matrix.XXXXXX") || exit 1
CHILD=""
trap 'rm -rf "$W"' EXIT
# TERM/INT (a caller's time limit): stop the run in progress (timeout passes
# the TERM on: the launcher forwards it, the capture writes its trailer),
# print the rows written so far, exit 143.
stopped() {
	trap - TERM INT
	note "terminated: stopping the run in progress${CHILD:+ (pid $CHILD)}"
	if [ -n "$CHILD" ]; then
		kill -TERM "$CHILD" 2> /dev/null
		wait "$CHILD"
	fi
	markdown
	exit 143
}
trap stopped TERM INT

PY=${PYTHON:-python3}
JPY=${JAX_PYTHON:-$PY}
tmo=${RUN_TIMEOUT:-180}
cbatch=${CNN_BATCH:-8}
csteps=${CNN_STEPS:-4}
tmodel=${TORCH_MODEL:-resnet18}
tbatch=${TORCH_BATCH:-16}
tsteps=${TORCH_STEPS:-5}
jbatch=${JAX_BATCH:-16}
jsteps=${JAX_STEPS:-6}
programs=${MATRIX_PROGRAMS:-cnn torch-eager torch-compile torch-cudagraphs torch-nocaching torch-async jax-default}
T0=$SECONDS

# Variables that would change what a program does, removed from every run;
# each program sets its own (ENVV). The capture's own variables are set by
# the launcher (a stale CUDA_INJECTION64_PATH would capture the plain run).
CLEAN=(-u CUDA_INJECTION64_PATH -u NVTX_INJECTION64_PATH
	-u PYTORCH_NO_CUDA_MEMORY_CACHING -u PYTORCH_CUDA_ALLOC_CONF
	-u XLA_FLAGS -u XLA_PYTHON_CLIENT_PREALLOCATE -u XLA_PYTHON_CLIENT_ALLOCATOR
	-u XLA_PYTHON_CLIENT_MEM_FRACTION -u TORCHINDUCTOR_CACHE_DIR -u TRITON_CACHE_DIR
	-u GPUMEMSIM_CAPTURE_VERBOSE)

note() { printf '[matrix %4ds] %s\n' $((SECONDS - T0)) "$*" >&2; }
now() { date +%s.%N; }
tabless() { tr '\t\n' '  ' | sed 's/  *$//'; }

# define NAME: sets CMD (the command, @JSON@ = a per-run json path), ENVV
# (VAR=VALUE words), LABELS (extra capture labels), STEPS (how to read the
# step times from stdout: cnn, torch, jax) and FRESH (1: fresh Inductor cache).
define() {
	local ts=("$root/capture/tests/torch_steps.py" --model "$tmodel" --batch "$tbatch" --steps "$tsteps")
	ENVV=() FRESH=0
	LABELS=(model="$tmodel" batch="$tbatch")
	STEPS=torch
	case $1 in
	cnn)
		CMD=("$B/cnn" --model resnet --batch "$cbatch" --image 64 --steps "$csteps" --print-every 1)
		LABELS=(model=resnet batch="$cbatch" image=64 workload=cnn)
		STEPS=cnn ;;
	torch-eager)
		CMD=("$PY" "${ts[@]}" --warmup 2) ;;
	torch-nocaching)
		ENVV=(PYTORCH_NO_CUDA_MEMORY_CACHING=1)
		LABELS+=(alloc=no_caching)
		CMD=("$PY" "${ts[@]}" --warmup 2) ;;
	torch-async)
		ENVV=(PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync)
		LABELS+=(conf=backend:cudaMallocAsync)
		CMD=("$PY" "${ts[@]}" --warmup 2) ;;
	torch-compile)
		FRESH=1
		LABELS+=(compile=default)
		CMD=("$PY" "${ts[@]}" --warmup 2 --compile default) ;;
	torch-cudagraphs)
		FRESH=1
		LABELS+=(compile=reduce-overhead)
		CMD=("$PY" "${ts[@]}" --warmup 3 --compile reduce-overhead) ;;
	jax-default)
		ENVV=(XLA_PYTHON_CLIENT_PREALLOCATE=false)
		CMD=("$JPY" "$root/capture/jax/train_jax.py" --alloc growth --autotune --model cnn
			--batch "$jbatch" --image 32 --steps "$jsteps" --json @JSON@)
		LABELS=(model=jax-cnn batch="$jbatch" image=32 alloc=growth autotune=on)
		STEPS=jax ;;
	*)
		return 1 ;;
	esac
	return 0
}

# Median step time (ms) from a program's stdout, or empty.
step_ms() { # KIND FILE
	awk -v kind="$1" '
	function med(   i, j, t, m) {
		m = n; for (i = 2; i <= m; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
		return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
	}
	kind == "torch" && $1 == "step_ms" { last = $2 }
	# cnn: step N loss L mean_last_K M step_ms X live_mib Y  (N >= 1)
	kind == "cnn" && $1 == "cnn:" && $2 == "step" && $3 >= 1 {
		for (i = 4; i < NF; i++) if ($i == "step_ms") v[++n] = $(i + 1)
	}
	# train_jax: ALLOC bB step N X ms loss L  (N >= 1)
	kind == "jax" && $1 == "train_jax:" && $4 == "step" && $5 >= 1 && $7 == "ms" { v[++n] = $6 }
	END {
		if (kind == "torch") { if (last != "") print last }
		else if (n > 0) printf "%.3f\n", med()
	}' "$2" 2>/dev/null
}

ratio() { # A B -> B/A with 3 decimals, or -
	awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b != "" && b != "-") printf "%.3f", b / a; else printf "-" }'
}

# run_prog MODE NAME: run the defined program (MODE plain or capture); sets
# RC and SECS; stdout/stderr in $W/NAME.MODE.{out,err}.
run_prog() {
	local mode=$1 name=$2 a t0 t1
	local cmd=() envx=() largs=()
	for a in "${CMD[@]}"; do
		[ "$a" = @JSON@ ] && a=$L/$name.$mode.json
		cmd+=("$a")
	done
	if [ "$FRESH" = 1 ]; then
		rm -rf "$W/cache"
		mkdir -p "$W/cache/triton"
		envx=(TORCHINDUCTOR_CACHE_DIR="$W/cache" TRITON_CACHE_DIR="$W/cache/triton")
	fi
	# In the background and waited for, so that a TERM to this script (a
	# caller's time limit) reaches the trap at once, which stops the run.
	t0=$(now)
	if [ "$mode" = plain ]; then
		timeout -k 10 "$tmo" env "${CLEAN[@]}" ${ENVV[@]+"${ENVV[@]}"} ${envx[@]+"${envx[@]}"} \
			"${cmd[@]}" > "$W/$name.$mode.out" 2> "$W/$name.$mode.err" < /dev/null &
	else
		for a in "${LABELS[@]}"; do largs+=(--label "$a"); done
		timeout -k 10 "$tmo" env "${CLEAN[@]}" ${ENVV[@]+"${ENVV[@]}"} ${envx[@]+"${envx[@]}"} \
			GPUMEMSIM_CAPTURE_VERBOSE=1 "$G" capture -o "$O/$name.trace.gz" --label program="$name" \
			"${largs[@]}" -- "${cmd[@]}" > "$W/$name.$mode.out" 2> "$W/$name.$mode.err" < /dev/null &
	fi
	CHILD=$!
	wait "$CHILD"
	RC=$?
	CHILD=""
	t1=$(now)
	SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
	rm -rf "$W/cache"
	# logs: stdout whole (small), stderr trimmed
	cp "$W/$name.$mode.out" "$L/$name.$mode.out"
	{
		echo "# exit $RC, ${SECS} s; command: ${ENVV[*]:-} ${cmd[*]}"
		grep '^gpumemsim capture:' "$W/$name.$mode.err"
		echo "# last 40 lines of stderr ($(wc -l < "$W/$name.$mode.err") in all):"
		tail -n 40 "$W/$name.$mode.err"
	} > "$L/$name.$mode.err"
}

markdown() { # matrix.tsv as a markdown table: OUTDIR/matrix.md and stdout
	awk -F'\t' '
	NR == 1 { h = "|"; s = "|"; for (i = 1; i <= NF; i++) { h = h " " $i " |"; s = s "---|" } print h; print s; next }
	{ r = "|"; for (i = 1; i <= NF; i++) { c = $i; gsub(/\|/, "\\|", c); r = r " " c " |" } print r }' "$O/matrix.tsv" > "$O/matrix.md"
	cat "$O/matrix.md"
}

HDR="program	traces_written	records	dropped	complete	validates	replays	replays_pytorch	graph_kernels	static_allocs	static_frees	uncaptured_s	captured_s	wall_ratio	uncaptured_step_ms	captured_step_ms	step_ratio	exit_uncaptured	exit_captured	result"
printf '%s\n' "$HDR" > "$O/matrix.tsv"
fails=0

# ---- environment and warm imports (not timed) --------------------------
{
	echo "date_utc $(date -u '+%Y-%m-%d %H:%M:%S')"
	nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader 2>&1 | sed 's/^/gpu /'
	echo "python $PY: $(command -v "$PY")"
	timeout 120 "$PY" -c 'import sys, torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "python", sys.version.split()[0]); import torch._inductor.compile_fx' 2>&1 | tail -3
	echo "jax python $JPY: $(command -v "$JPY")"
	timeout 120 env "${CLEAN[@]}" "$JPY" -c 'import jax, jaxlib, flax, optax; print("jax", jax.__version__, "jaxlib", jaxlib.__version__, "flax", flax.__version__, "optax", optax.__version__)' 2>&1 | tail -3
	echo "nproc $(nproc)"
} > "$L/env.txt" 2>&1
note "env: $(tr '\n' ';' < "$L/env.txt")"

for name in $programs; do
	if ! define "$name"; then
		note "$name: unknown program (known: cnn torch-eager torch-compile torch-cudagraphs torch-nocaching torch-async jax-default)"
		fails=$((fails + 1))
		continue
	fi
	T=$O/$name.trace.gz
	rm -f "$T" "$O/$name".trace.*.gz "$L/$name".*
	note "$name: uncaptured"
	run_prog plain "$name"
	urc=$RC usecs=$SECS
	note "$name: uncaptured exit $urc, $usecs s; captured"
	run_prog capture "$name"
	crc=$RC csecs=$SECS
	note "$name: captured exit $crc, $csecs s"

	nw=$(grep -c '^gpumemsim capture: wrote ' "$W/$name.capture.err")
	records=- dropped=- complete=- validates=- replays=- replays_pt=- gk=- sa=- sf=-
	ck=$L/$name.checks.txt
	: > "$ck"
	if [ -f "$T" ]; then
		st=$("$G" trace stats --json "$T" 2>> "$ck")
		printf '%s\n' "$st" >> "$ck"
		records=$(printf '%s' "$st" | sed -n 's/.*"records":\([0-9]*\).*/\1/p')
		dropped=$(printf '%s' "$st" | sed -n 's/.*"dropped":\([0-9]*\).*/\1/p')
		complete=$(printf '%s' "$st" | sed -n 's/.*"complete":\([a-z]*\).*/\1/p')
		vout=$("$G" trace validate "$T" 2>&1)
		vrc=$?
		printf '%s\n' "$vout" | head -20 >> "$ck"
		if [ $vrc -eq 0 ]; then
			validates=ok
		else
			validates="FAIL: $(printf '%s\n' "$vout" | grep -v ': ok (' | head -1 | tabless)"
		fi
		for pol in cuda_malloc pytorch; do
			"$G" run "$T" --policy "$pol" --json --no-db > "$W/replay.json" 2> "$W/replay.err"
			prc=$?
			{
				echo "# run --policy $pol: exit $prc"
				head -5 "$W/replay.err"
				# the summary fields, not the timeline
				sed -n 's/.*\("peak_allocated":[0-9]*\).*\("peak_reserved":[0-9]*\).*\("oom":[a-z]*\).*/\1 \2 \3/p' "$W/replay.json"
			} >> "$ck"
			if [ $prc -eq 0 ]; then r=ok; else r="FAIL: $(head -1 "$W/replay.err" | tabless)"; fi
			if [ "$pol" = cuda_malloc ]; then replays=$r; else replays_pt=$r; fi
		done
		# graph kernels, static allocations and frees (memory kind 6)
		read -r gk sa sf < <("$G" trace cat --trace "$T" 2>> "$ck" | awk '
			$1 == "k" && NF >= 13 && $12 != "0" && $12 != "-" { g++ }
			$1 == "a" && NF >= 6 && $6 == "6" { a++ }
			$1 == "f" && NF >= 6 && $6 == "6" { f++ }
			END { print g + 0, a + 0, f + 0 }')
		gk=${gk:-0} sa=${sa:-0} sf=${sf:-0}
	else
		echo "no trace $T" >> "$ck"
	fi
	# the other processes' traces (FILE.<pid>.gz): one stats line each
	for x in "$O/$name".trace.*.gz; do
		[ -f "$x" ] || continue
		echo "# other process: $x" >> "$ck"
		"$G" trace stats --json "$x" >> "$ck" 2>&1
	done
	ums=$(step_ms "$STEPS" "$W/$name.plain.out")
	cms=$(step_ms "$STEPS" "$W/$name.capture.out")

	why=""
	[ -f "$T" ] || why="$why,no-trace"
	[ "$validates" = ok ] || why="$why,validate"
	[ "$replays" = ok ] || why="$why,replay"
	[ "$urc" = "$crc" ] || why="$why,exit-differs"
	[ "$urc" = 0 ] && [ "$crc" = 0 ] || why="$why,exit-nonzero"
	if [ -z "$why" ]; then result=ok; else result="FAIL(${why#,})"; fails=$((fails + 1)); fi

	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
		"$name" "$nw" "${records:--}" "${dropped:--}" "${complete:--}" "$validates" "$replays" "$replays_pt" \
		"$gk" "$sa" "$sf" "$usecs" "$csecs" "$(ratio "$usecs" "$csecs")" "${ums:--}" "${cms:--}" \
		"$(ratio "${ums:-0}" "${cms:--}")" "$urc" "$crc" "$result" >> "$O/matrix.tsv"
	note "$name: $result (traces written $nw, records ${records:--}, validate $validates, replay $replays)"
done

markdown
note "done in $((SECONDS - T0)) s, $fails program(s) failed; $O/matrix.tsv"
[ $fails -eq 0 ]
