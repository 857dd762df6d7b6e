#!/usr/bin/env bash
# device_pool_cost.sh: the stream-ordered pool's host cost per call by the
# number of allocations live and the GPU's state (traces/timing/pool_cost.cu;
# issue 15, docs/timing.md "What an allocator setting costs").
#
#   scripts/device_pool_cost.sh OUT
#
# ROUNDS (default 3) runs of pool_cost into OUT/pool-cost.tgz (pool-R.tsv,
# repacked after each), with env.txt and phases.txt. Needs nvcc.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/device_common.sh"
device_start "$@"
device_work pool-cost
ROUNDS=${ROUNDS:-3}
device_torch_env
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
"$NVCC" -O2 -o "$W/pool_cost" traces/timing/pool_cost.cu > "$W/build.log" 2>&1 || { note "nvcc failed"; pack; exit 1; }
note "built"
for r in $(seq 1 "$ROUNDS"); do
	timeout 120 "$W/pool_cost" > "$W/pool-$r.tsv" 2>> "$W/errors.log"
	note "pool-$r rc $?"
	pack
done
cp "$W/phases.txt" "$OUT/phases.txt"
pack
