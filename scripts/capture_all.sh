#!/usr/bin/env bash
# capture_all.sh: the one recipe that remakes traces/cnn, traces/torch and
# traces/measurements on a GPU host (CUDA toolkit with cuDNN, python3 with
# torch + torchvision). Everything lands in OUTDIR, laid out like traces/:
#
#   OUTDIR/cnn/cnn-MODEL-bB.trace.gz            CUDA C CNN, --algo fastest, captured
#   OUTDIR/torch/torch-MODEL-bB.trace.gz        PyTorch, no caching allocator, captured
#   OUTDIR/torch/truth/MODEL-bB-default.*       caching allocator's own record (truth)
#   OUTDIR/measurements/...                     logs and json (see traces/README.md)
#
#   scripts/capture_all.sh OUTDIR
#
# It runs in phases so that what is timed runs on a quiet GPU:
#   1. build; CNN `fastest` sweep without capture (cuDNN times candidates, so
#      nothing else uses the GPU); then the CNN loss runs while the
#      torch.compile peaks start in the background (they only measure memory);
#   2. CNN heuristic/min-workspace sweeps (no timing involved), CNN captures
#      and the PyTorch recipe (capture + truth) for every model and batch,
#      four recipe lanes side by side (their step times are contended);
#   big. (inside phase 1, GPU still quiet) the three CNN sweeps again at
#      CNN_BIG_IMAGE (224) with CNN_BIG_STEPS (2) steps, no capture: larger
#      workspaces, closer to the 1 GiB workspace limit;
#   3. quiet again: ResNet-50 b32/b64 step times with the caching allocator,
#      without it, and without it under capture; capture/overhead.sh 3 times.
# Environment: CNN_IMAGE (64), CNN_STEPS (4), CNN_BATCHES ("8 16 32 64 128
# 256"), TORCH_BATCHES ("16 32 64 128"), PHASES ("1 big 2 3": which
# phases run), SKIP_ENV=1, DEADLINE_S (560: later phases are
# cut short so the whole run ends by then), SKIP_BUILD=1, PREBUILT (see
# below), PYTHON (python3).
set -u
if [ $# -ne 1 ]; then
	echo "usage: $0 OUTDIR" >&2
	exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
mkdir -p "$1" || exit 1
O=$(cd "$1" && pwd)
M=$O/measurements
mkdir -p "$O/cnn" "$O/torch/truth" "$M/cnn" "$M/torch" "$M/steps" "$M/compile" || exit 1
py=${PYTHON:-python3}
img=${CNN_IMAGE:-64}
steps=${CNN_STEPS:-4}
cnn_batches=${CNN_BATCHES:-8 16 32 64 128 256}
torch_batches=${TORCH_BATCHES:-16 32 64 128}
deadline=${DEADLINE_S:-560}
big=${CNN_BIG_IMAGE:-224}
big_steps=${CNN_BIG_STEPS:-2}
phases=" ${PHASES:-1 big 2 3} "
has() { case $phases in *" $1 "*) return 0;; esac; return 1; }
G=$root/build/gpumemsim
CNN=$root/build/cnn
start=$SECONDS

note() { # one line in the timeline (elapsed seconds, not a clock)
	printf '%4ds %s\n' $((SECONDS - start)) "$*" | tee -a "$M/timeline.txt"
}
left() { # seconds left before the deadline, at least 1
	local l=$((deadline - (SECONDS - start)))
	[ $l -gt 1 ] && echo $l || echo 1
}
lim() { # LIMIT: the smaller of LIMIT and what is left
	local l; l=$(left)
	[ "$1" -lt "$l" ] && echo "$1" || echo "$l"
}

# ---- environment --------------------------------------------------------
[ "${SKIP_ENV:-0}" = 1 ] || {
	echo "date_utc $(date -u +%Y-%m-%d)"
	echo "host_kernel $(uname -r)"
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu /'
	echo "nvcc $( (/usr/local/cuda/bin/nvcc --version 2>/dev/null || echo none) | grep -o 'release [0-9.]*' | head -1)"
	"$py" -c 'import torch, torchvision, sys; print("python", sys.version.split()[0]); print("torch", torch.__version__); print("torchvision", torchvision.__version__); print("torch_cuda", torch.version.cuda); print("torch_cudnn", torch.backends.cudnn.version())' 2>&1
	for f in /usr/include/x86_64-linux-gnu/cudnn_version*.h /usr/include/cudnn_version*.h /usr/local/cuda/include/cudnn_version.h; do
		[ -f "$f" ] && awk '/define CUDNN_(MAJOR|MINOR|PATCHLEVEL) /{v=v $3 "."} END{print "system_cudnn_header " substr(v,1,length(v)-1)}' "$f" && break
	done
} > "$M/env.txt" 2>&1
[ -f "$M/env.txt" ] && note "env: $(tr '\n' ';' < "$M/env.txt")"

# ---- build --------------------------------------------------------------
if [ "${SKIP_BUILD:-0}" != 1 ]; then
	make -j"$(nproc)" > "$M/build.log" 2>&1 || { note "make FAILED"; tail -20 "$M/build.log"; }
	make build/libgpumemsim_capture.so >> "$M/build.log" 2>&1 || { note "capture library build FAILED"; tail -20 "$M/build.log"; }
	make cnn > "$M/build-cnn.log" 2>&1 || { note "make cnn FAILED"; tail -20 "$M/build-cnn.log"; }
fi
# PREBUILT=DIR: binaries built elsewhere for this host, used for whatever
# the build did not produce (gpumemsim, libgpumemsim_capture.so, cnn).
for f in gpumemsim libgpumemsim_capture.so cnn; do
	if [ ! -e "$root/build/$f" ] && [ -n "${PREBUILT:-}" ] && [ -e "$PREBUILT/$f" ]; then
		mkdir -p "$root/build" && cp "$PREBUILT/$f" "$root/build/$f" && note "using prebuilt $f"
	fi
done
[ -x "$G" ] && [ -f "$root/build/libgpumemsim_capture.so" ] || { note "no build/gpumemsim or capture library"; exit 1; }
[ -x "$CNN" ] || note "no build/cnn: CNN parts will fail"
note "build done"

cnn_run() { # LOGNAME ARGS...: the CNN without capture
	local name=$1; shift
	timeout "$(lim 90)" "$CNN" "$@" > "$M/cnn/$name.log" 2>&1
	echo "rc $?" >> "$M/cnn/$name.log"
}
cnn_sweep() { # ALGO: both models, every batch, no capture
	local model b
	for model in vgg resnet; do
		for b in $cnn_batches; do
			cnn_run "$model-b$b-$1" --model "$model" --batch "$b" --image "$img" \
				--steps "$steps" --print-every 1 --algo "$1"
		done
	done
}

# ---- phase 1 ------------------------------------------------------------
cnn_big_sweep() { # the same three modes at a larger image, fewer steps
	local algo model b
	mkdir -p "$M/cnn-i$big"
	for algo in fastest min-workspace heuristic; do
		for b in $cnn_batches; do
			for model in vgg resnet; do
				timeout "$(lim 60)" "$CNN" --model "$model" --batch "$b" --image "$big" \
					--steps "$big_steps" --print-every 1 --algo "$algo" \
					> "$M/cnn-i$big/$model-b$b-$algo.log" 2>&1
				echo "rc $?" >> "$M/cnn-i$big/$model-b$b-$algo.log"
			done
		done
	done
}
cpids=()
if has 1; then
	note "phase 1: CNN fastest sweep"
	cnn_sweep fastest
fi
if has big && [ "$big" -gt 0 ]; then
	note "phase big: CNN sweeps at image $big, $big_steps steps"
	cnn_big_sweep
fi
if has 1; then
	note "phase 1: CNN loss runs with the compile peaks in the background"
	export TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-4}
	for model in resnet18 resnet50; do
		timeout "$(lim 270)" "$py" capture/torch/compile_peak.py --model "$model" --batch 32 64 \
			--json "$M/compile/$model.json" > "$M/compile/$model.log" 2>&1 &
		cpids+=($!)
	done
	cnn_run loss-resnet-b32-i64 --model resnet --batch 32 --image 64 --steps 30 --print-every 5
	cnn_run loss-vgg-b32-i64 --model vgg --batch 32 --image 64 --steps 30 --print-every 5
	cnn_run loss-vgg16-b32-i224 --model vgg16 --batch 32 --image 224 --steps 10 --print-every 1
	note "phase 1 done"
fi

# ---- phase 2 ------------------------------------------------------------
cnn_lane() {
	cnn_sweep heuristic
	cnn_sweep min-workspace
	local model b
	for model in vgg resnet; do
		for b in $cnn_batches; do
			timeout "$(lim 120)" "$G" capture --label workload=cnn --label model="$model" \
				--label batch="$b" --label image="$img" --label algo=fastest \
				--label steps="$steps" -o "$O/cnn/cnn-$model-b$b.trace.gz" -- \
				"$CNN" --model "$model" --batch "$b" --image "$img" --steps "$steps" \
				--print-every 1 --algo fastest > "$M/cnn/capture-$model-b$b.log" 2>&1
			echo "rc $?" >> "$M/cnn/capture-$model-b$b.log"
		done
	done
}
torch_lane() { # MODEL BATCH...: recipe (capture + truth) for each batch
	local model=$1 b; shift
	for b in "$@"; do
		local raw=$O/torch/truth
		STEPS=5 WARMUP=2 GPUMEMSIM=$G PYTHON=$py timeout "$(lim 240)" \
			capture/torch/recipe.sh "$model" "$b" "$raw" > "$M/torch/recipe-$model-b$b.log" 2>&1
		echo "rc $?" >> "$M/torch/recipe-$model-b$b.log"
		[ -f "$raw/torch-$model-b$b.trace.gz" ] && mv "$raw/torch-$model-b$b.trace.gz" "$O/torch/"
		[ -f "$raw/torch-$model-b$b.capture.json" ] && mv "$raw/torch-$model-b$b.capture.json" "$M/steps/"
	done
}
if has 2; then
	note "phase 2: CNN heuristic/min-workspace sweeps + CNN captures | 4 PyTorch recipe lanes"
	pids=()
	cnn_lane & pids+=($!)
	set -- $torch_batches
	torch_lane resnet18 "$1" "$4" & pids+=($!)
	torch_lane resnet18 "$2" "$3" & pids+=($!)
	torch_lane resnet50 "$1" "$4" & pids+=($!)
	torch_lane resnet50 "$2" "$3" & pids+=($!)
	for p in "${pids[@]}"; do wait "$p"; done
	note "phase 2 done"
fi
for p in "${cpids[@]}"; do wait "$p"; done

# ---- phase 3 (quiet) ----------------------------------------------------
if has 3; then
	note "phase 3: step times and capture overhead on a quiet GPU"
	for b in 32 64; do
		args=(capture/torch/train_torch.py --mode capture --model resnet50 --batch "$b" --steps 8 --warmup 3)
		env -u PYTORCH_NO_CUDA_MEMORY_CACHING timeout "$(lim 90)" "$py" "${args[@]}" \
			--json "$M/steps/resnet50-b$b-caching-plain.json" > "$M/steps/resnet50-b$b-caching-plain.log" 2>&1
		PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout "$(lim 90)" "$py" "${args[@]}" \
			--json "$M/steps/resnet50-b$b-nocache-plain.json" > "$M/steps/resnet50-b$b-nocache-plain.log" 2>&1
		rm -f "/tmp/p11-steps-$b.trace.gz"
		PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout "$(lim 120)" "$G" capture -o "/tmp/p11-steps-$b.trace.gz" -- \
			"$py" "${args[@]}" --json "$M/steps/resnet50-b$b-nocache-capture.json" \
			> "$M/steps/resnet50-b$b-nocache-capture.log" 2>&1
		note "step times resnet50 b$b done"
	done
	for i in 1 2 3; do
		timeout "$(lim 120)" sh capture/overhead.sh build 32 20 >> "$M/overhead.txt" 2>&1
		note "overhead run $i: $(grep 'overhead ratio' "$M/overhead.txt" | tail -1)"
	done
fi

# ---- summary ------------------------------------------------------------
for t in "$O"/cnn/*.trace.gz "$O"/torch/*.trace.gz; do
	[ -f "$t" ] && "$G" trace stats --json "$t" >> "$M/trace-stats.jsonl" 2>> "$M/trace-stats.err"
done
note "all done"
