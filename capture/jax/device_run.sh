#!/usr/bin/env bash
# device_run.sh: everything issue 8 needs from the GPU host, in one command,
# most important first, packing what it has after every phase (so a run cut
# short still returns its best part):
#   A. the JAX batch sweep captured with the platform allocator (request streams)
#   B. the same sweep with BFC allow_growth under capture (memory_stats, regions),
#      beside it PyTorch resnet18 with backend:cudaMallocAsync under capture
#   D. one run with JAX's default preallocation
#   C. the growth sweep again without capture, one run at a time: device-level
#      (NVML) used memory
#
#   capture/jax/device_run.sh OUTDIR      (run from the repository root)
# Environment: BUDGET_S (395: phases are cut so the whole run ends by then),
# BATCHES, MODEL (resnet), JAX_PYTHON / TORCH_PYTHON (searched when unset),
# SKIP_BUILD=1, ASYNC=0 (no torch cudaMallocAsync runs in B).
set -u
T0=$SECONDS
budget=${BUDGET_S:-395}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
mkdir -p "$1" || exit 1
OUT=$(cd "$1" && pwd)
W=/tmp/p18run
mkdir -p "$W/A" "$W/B/truth" "$W/B/async" "$W/C/truth" "$W/logs"
L=$W/logs
batches=${BATCHES:-8 12 16 24 32 48 64 96 128 192 256}
model=${MODEL:-resnet}
G=$root/build/gpumemsim

note() { printf '%4ds %s\n' $((SECONDS - T0)) "$*" | tee -a "$L/phases.txt"; }
lim() { # min(WANT, seconds left before the budget minus packing time), >= 1
	local l=$((budget - (SECONDS - T0) - 10))
	[ "$l" -lt 1 ] && l=1
	[ "$1" -lt "$l" ] && echo "$1" || echo "$l"
}
pack() { # pack PHASE: $OUT/p18-PHASE.tar.gz from $W/PHASE, logs always
	[ -d "$W/$1" ] && tar -czf "$OUT/p18-$1.tar.gz.tmp" -C "$W" "$1" &&
		mv "$OUT/p18-$1.tar.gz.tmp" "$OUT/p18-$1.tar.gz"
	tar -czf "$OUT/p18-logs.tar.gz.tmp" -C "$W" logs && mv "$OUT/p18-logs.tar.gz.tmp" "$OUT/p18-logs.tar.gz"
}
find_py() { # find_py CHECK CANDIDATES...: first python that runs CHECK
	local check=$1 c; shift
	for c in "$@"; do
		[ -n "$c" ] || continue
		command -v "$c" >/dev/null 2>&1 || [ -x "$c" ] || continue
		if "$c" -c "$check" >/dev/null 2>&1; then echo "$c"; return 0; fi
	done
	return 1
}

# ---- environment -------------------------------------------------------
note "env"
{
	nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
	ls -d /opt/* /opt/*/.venv 2>/dev/null
	command -v python3; python3 --version
} > "$L/env.txt" 2>&1
cands=(${JAX_PYTHON:-} python3 /opt/jax/.venv/bin/python /opt/*/.venv/bin/python /opt/*/bin/python3 /usr/local/bin/python3 /usr/bin/python3)
JPY=$(find_py "import jax, flax, optax; assert jax.devices()[0].platform == 'gpu'" "${cands[@]}") || JPY=
TPY=$(find_py "import torch, torchvision" ${TORCH_PYTHON:-} /opt/torch/.venv/bin/python "${cands[@]}") || TPY=
{
	echo "jax_python $JPY"; echo "torch_python $TPY"
	[ -n "$JPY" ] && "$JPY" -c "import jax, jaxlib, flax, optax; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, 'flax', flax.__version__, 'optax', optax.__version__); print(jax.devices())"
	[ -n "$JPY" ] && "$JPY" -m pip list 2>/dev/null | grep -i -E "jax|nvidia|flax|optax|pynvml|nvidia-ml"
} >> "$L/env.txt" 2>&1
note "jax python: ${JPY:-none}; torch python: ${TPY:-none}"

# ---- build -------------------------------------------------------------
if [ "${SKIP_BUILD:-0}" != 1 ]; then
	note "build"
	mkdir -p /opt/dd && for f in .devdeps/*.deb; do dpkg -x "$f" /opt/dd; done
	export CPATH=/opt/dd/usr/include LIBRARY_PATH=/opt/dd/usr/lib/x86_64-linux-gnu
	export LD_LIBRARY_PATH=/opt/dd/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	timeout "$(lim 150)" make -j16 build/gpumemsim > "$L/build.log" 2>&1 || echo "make gpumemsim failed" >> "$L/build.log"
	timeout "$(lim 60)" make build/libgpumemsim_capture.so >> "$L/build.log" 2>&1 || echo "make capture lib failed" >> "$L/build.log"
	if [ ! -x "$G" ] && [ -x capture/jax/prebuilt-gpumemsim ]; then
		echo "using capture/jax/prebuilt-gpumemsim" >> "$L/build.log"
		cp capture/jax/prebuilt-gpumemsim "$G"
	fi
	ls -la build/gpumemsim build/libgpumemsim_capture.so >> "$L/build.log" 2>&1
fi
note "build done"
pack logs
if [ -z "$JPY" ]; then
	note "no python with jax, flax and optax: JAX phases skipped"
fi
export GPUMEMSIM=$G GPUMEMSIM_CAPTURE_VERBOSE=1 PYTHON=$JPY

# ---- A: platform-allocator captures, all batches side by side ---------
if [ -n "$JPY" ]; then
	note "A: platform captures ($batches)"
	pids=()
	for b in $batches; do
		timeout "$(lim 120)" capture/jax/recipe.sh "$model" "$b" "$W/A" capture \
			> "$L/A-b$b.log" 2>&1 &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p"; done
	note "A done: $(ls "$W"/A/*.trace.gz 2>/dev/null | wc -l) traces"
	pack A
fi

# ---- B: BFC growth truth under capture | torch cudaMallocAsync -------
note "B: growth truth + torch async"
pids=()
if [ -n "$JPY" ]; then
	for b in $batches; do
		timeout "$(lim 120)" capture/jax/recipe.sh "$model" "$b" "$W/B" truth \
			> "$L/B-b$b.log" 2>&1 &
		pids+=($!)
	done
fi
if [ -n "$TPY" ] && [ "${ASYNC:-1}" != 0 ]; then
	for b in 16 32 64; do
		timeout "$(lim 120)" "$G" capture --label workload=torch-async --label model=resnet18 \
			--label batch="$b" --label conf=backend:cudaMallocAsync \
			-o "$W/B/async/resnet18-b$b-async.trace.gz" -- \
			"$TPY" capture/jax/torch_async_truth.py --model resnet18 --batch "$b" \
			--json "$W/B/async/resnet18-b$b-async.json" > "$L/B-async-b$b.log" 2>&1 &
		pids+=($!)
	done
fi
for p in "${pids[@]}"; do wait "$p"; done
note "B done: $(ls "$W"/B/truth/*.json "$W"/B/async/*.json 2>/dev/null | wc -l) json"
pack B

# ---- D: default preallocation, once ------------------------------------
if [ -n "$JPY" ]; then
	note "D: prealloc b64"
	timeout "$(lim 60)" capture/jax/recipe.sh "$model" 64 "$W/C" prealloc > "$L/D-b64.log" 2>&1
	pack C
	# ---- C: device-level memory, one run at a time ------------------
	note "C: nvml sweep"
	for b in 8 256 64 32 128 16 192 96 48 24 12; do
		case " $batches " in *" $b "*) ;; *) continue;; esac
		[ "$(lim 100)" -lt 15 ] && { note "C: out of time before b$b"; break; }
		timeout "$(lim 40)" capture/jax/recipe.sh "$model" "$b" "$W/C" nvml > "$L/C-b$b.log" 2>&1
		note "C b$b rc $?"
		pack C
	done
fi
note "all done"
pack C
