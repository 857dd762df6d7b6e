#!/usr/bin/env bash
# device_caching_cost.sh: the host cost of PyTorch's caching allocator per
# call, on real training runs' request streams (issue 15; docs/timing.md,
# "The caching allocator's own cost").
#
#   scripts/device_caching_cost.sh OUT
#
# Builds traces/timing/caching_cost.cpp against the installed torch, then
# for each traces/timing/caching_cost/*.req.gz (REQS= a subset), ROUNDS
# (default 2) rounds of, in one process each:
#   MODEL-torch-R.tsv     caching allocator, PyTorch's defaults (5 passes)
#   MODEL-expand-R.tsv    expandable_segments:True (3 passes)
#   MODEL-nocache-R.tsv   PYTORCH_NO_CUDA_MEMORY_CACHING=1 (2 passes)
#   MODEL-cuda-R.tsv      cudaMalloc/cudaFree alone (2 passes)
#   MODEL-py-R.tsv        caching_cost.py: raw calls and whole tensors (3 passes)
# (backend:cudaMallocAsync cannot run outside torch: c10 aborts, "Should
# never been called"; its pool calls are measured in captures, docs/timing.md)
# into OUT/caching-cost.tgz (repacked after each model) with phases.txt,
# env.txt and build.log.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/device_common.sh"
device_start "$@"
device_work caching-cost
ROUNDS=${ROUNDS:-2}
REQS=${REQS:-$(ls traces/timing/caching_cost/*.req.gz)}
device_torch_env
tdir=$("$py" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
abi=$("$py" -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
cuda=${CUDA_HOME:-/usr/local/cuda}
CXX=${CXX:-$(command -v g++ || command -v c++)}
"$CXX" -O2 -std=c++17 -D_GLIBCXX_USE_CXX11_ABI="$abi" -I"$tdir/include" -I"$cuda/include" \
	-o "$W/caching_cost" traces/timing/caching_cost.cpp \
	-L"$tdir/lib" -lc10_cuda -lc10 -L"$cuda/lib64" -lcudart -Wl,-rpath,"$tdir/lib" -Wl,-rpath,"$cuda/lib64" \
	> "$W/build.log" 2>&1
note "built rc $?"
cc=$W/caching_cost
run() { # NAME ENV... -- CMD...: one measurement, its rc noted
	local name=$1; shift
	env -u PYTORCH_NO_CUDA_MEMORY_CACHING -u PYTORCH_CUDA_ALLOC_CONF "$@" > "$W/$name.tsv" 2>> "$W/errors.log"
	note "$name rc $?"
}
for r in $(seq 1 "$ROUNDS"); do
	for q in $REQS; do
		m=$(basename "$q" .req.gz)
		zcat "$q" > "$W/req.txt"
		if [ -x "$cc" ]; then
			run "$m-torch-$r" timeout 60 "$cc" torch "$W/req.txt" 5
			run "$m-expand-$r" PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 60 "$cc" torch "$W/req.txt" 3
			run "$m-nocache-$r" PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 60 "$cc" torch "$W/req.txt" 2
			run "$m-cuda-$r" timeout 60 "$cc" cuda "$W/req.txt" 2
		fi
		run "$m-py-$r" timeout 90 "$py" traces/timing/caching_cost.py "$W/req.txt" 3
		rm -f "$W/req.txt"
		pack
	done
done
cp "$W/phases.txt" "$OUT/phases.txt"
pack
