#!/usr/bin/env bash
# device_jax_requests.sh: the JAX batch sweep captured again with XLA's own
# request log beside each trace (issue 17: exact request sizes), plus one BFC
# growth run at b256 with the BFC's own log (which request grows a region).
# Packs after every phase:
#   scripts/device_jax_requests.sh OUTDIR      (from the repository root)
# Environment: BATCHES (8 12 16 24 32 48 64 96 128 192 256), JAX_PYTHON,
# SKIP_BUILD=1. Needs .devdeps (carry) to build.
. "$(dirname "$0")/device_common.sh"; device_start "$@"
W=/tmp/jaxreq
mkdir -p "$W/A" "$W/logs"
T0=$SECONDS
note() { printf '%4ds %s\n' $((SECONDS - T0)) "$*" | tee -a "$W/logs/phases.txt"; }
pack() { tar -czf "$OUT/jaxreq-$1.tgz.tmp" -C "$W" "$1" && mv "$OUT/jaxreq-$1.tgz.tmp" "$OUT/jaxreq-$1.tgz"; }
device_jax_python
note "jax python: ${JPY:-none}"
[ -n "$JPY" ] || { pack logs; exit 1; }
"$JPY" -c "import jax, jaxlib; print(jax.__version__, jaxlib.__version__, jax.devices())" > "$W/logs/env.txt" 2>&1
if [ "${SKIP_BUILD:-0}" != 1 ]; then
	device_devdeps
	make -j16 build/gpumemsim build/libgpumemsim_capture.so > "$W/logs/build.log" 2>&1 ||
		{ note "build failed"; pack logs; exit 1; }
fi
note "built"
export GPUMEMSIM=$root/build/gpumemsim PYTHON=$JPY
# A: the platform-allocator captures, side by side (as capture/jax/device_run.sh)
pids=()
for b in ${BATCHES:-8 12 16 24 32 48 64 96 128 192 256}; do
	timeout 200 capture/jax/recipe.sh resnet "$b" "$W/A" capture > "$W/logs/A-b$b.log" 2>&1 &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
note "A: $(ls "$W"/A/*.trace.gz 2>/dev/null | wc -l) traces, $(ls "$W"/A/*.xla.log.gz 2>/dev/null | wc -l) logs"
pack A; pack logs
# G: BFC growth at b256 with the BFC's request log (no capture), alone
note "G: growth b256 with the BFC log"
TF_CPP_MIN_LOG_LEVEL=0 TF_CPP_VMODULE=bfc_allocator=4 timeout 100 "$JPY" capture/jax/train_jax.py \
	--alloc growth --model resnet --batch 256 --steps 3 --json "$W/logs/growth-b256.json" 2>&1 |
	grep -E '\[mem-debug\]|Extending|train_jax' | sed 's/,\*\*\* Begin stack trace \*\*\*//' |
	gzip > "$W/logs/growth-b256.bfc.log.gz"
note "done"
pack logs
