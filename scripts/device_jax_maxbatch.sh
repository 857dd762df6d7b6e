#!/usr/bin/env bash
# device_jax_maxbatch.sh: the largest batch that really fits, for
# `gpumemsim maxbatch` to be checked against (users' question 1, JAX).
# capture/jax/train_jax.py --model resnet with JAX's default preallocation
# capped by XLA_PYTHON_CLIENT_MEM_FRACTION, each batch of a range in its own
# process (8 at a time), 3 steps; a process that runs out of memory records
# ok=false. Packs after every fraction:
#   scripts/device_jax_maxbatch.sh OUTDIR      (from the repository root)
# Environment: PLAN ("FRACTION:FIRST:LAST:STEP ..."), JAX_PYTHON.
. "$(dirname "$0")/device_common.sh"; device_start "$@"
device_work jaxmb
device_jax_python
note "jax python: ${JPY:-none}"
[ -n "$JPY" ] || { pack; exit 1; }
for spec in ${PLAN:-0.005365:148:172:1 0.014305:424:456:2}; do
	IFS=: read -r frac first last step <<< "$spec"
	d=$W/f$frac
	mkdir -p "$d"
	note "fraction $frac: batches $first..$last step $step"
	b=$first
	while [ "$b" -le "$last" ]; do
		XLA_PYTHON_CLIENT_MEM_FRACTION=$frac timeout 120 "$JPY" capture/jax/train_jax.py \
			--alloc prealloc --model resnet --batch "$b" --steps 3 \
			--json "$d/b$b.json" > "$d/b$b.log" 2>&1 &
		b=$((b + step))
		while [ "$(jobs -r | wc -l)" -ge 8 ]; do sleep 0.5; done
	done
	wait
	note "fraction $frac done: $(grep -l '"ok": true' "$d"/*.json 2>/dev/null | wc -l) ok, $(grep -l '"ok": false' "$d"/*.json 2>/dev/null | wc -l) failed"
	pack
done
note "done"
pack
