#!/bin/sh
# demo.sh: the main job on the shipped traces. Replays every trace under
# traces/ under every allocator policy and the settings users ask about (a
# resumable parallel sweep), stores the runs in out/demo/results.db and
# prints the comparison table, then writes the report with its figures.
set -eu
cd "$(dirname "$0")/.."
bin=./build/gpumemsim
out=${DEMO_OUT:-out/demo}
mkdir -p "$out"
db=$out/results.db

# traces/matrix/ is the capture's coverage set (one small run per kind of
# program, capture/matrix.sh): validated and replayed by the tests, not a
# batch sweep, so it stays out of the report's model groups.
traces=$(find traces \( -path traces/torch/truth -prune \) -o \( -path traces/matrix -prune \) -o \( -name '*.trace.gz' -o -name '*.trace' \) -print | sort)
# PyTorch's knobs, TensorFlow/JAX BFC, the CUDA pool, the references and the
# offline floor. GC acts only under a memory fraction (here 5% of 140 GiB).
$bin sweep --traces $traces \
	--policies cuda_malloc pytorch bfc cuda_async buddy optimal \
	--confs 'pytorch=' 'pytorch=expandable_segments:True' 'pytorch=max_split_size_mb:64' \
		'pytorch=roundup_power2_divisions:4' \
		'pytorch=garbage_collection_threshold:0.6,fraction:0.05' \
		'bfc=' 'bfc=allow_growth:true' 'bfc=preset:jax' \
	--capacities default 8GiB \
	--db "$db" -j 2
$bin table --db "$db"
$bin report --db "$db" -o "$out/report"
echo "demo: results in $db (query with sqlite3; schema in docs/schema.md)" >&2
echo "demo: report in $out/report/report.html (and report.md)" >&2
