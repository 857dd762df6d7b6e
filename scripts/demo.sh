#!/bin/sh
# demo.sh: the main job on the shipped traces. Replays the shipped batch
# sweeps under every allocator policy and the settings users ask about (a
# resumable parallel sweep, with predicted step times), stores the runs in
# out/demo/results.db and prints the comparison table, then writes the
# report (report.html, report.md, runs.csv) with its figures.
#
# GPUMEMSIM=PATH runs another build (default ./build/gpumemsim); DEMO_OUT=DIR
# writes elsewhere (default out/demo). `scripts/demo.sh --list` prints the
# traces it would sweep and stops (a test checks each is a gpumemsim trace).
set -eu
cd "$(dirname "$0")/.."
bin=${GPUMEMSIM:-./build/gpumemsim}
out=${DEMO_OUT:-out/demo}
db=$out/results.db

# What the report compares: the batch sweeps, one capture per workload,
# model and batch size, each trace labelled workload=... model=... batch=...
# (traces/torch-truth has no workload label: the report groups it by model
# alone and says so). Left out, each for a reason:
# - traces/matrix: the capture's coverage set (one small run per kind of
#   program, capture/matrix.sh), not a batch sweep;
# - traces/torch/truth, traces/jax/truth, traces/jax/cnn/truth: what an allocator did (PyTorch's
#   segments, the BFC's regions), the ground truth `validate` compares
#   against, not a request stream to replay under other allocators;
# - traces/jax/async: torch-async ground truth captured on a shared GPU:
#   its 132 GiB peak is cuDNN's benchmark probing whatever the GPU had
#   free at the time, not what the model needs (validate async-truth);
# - traces/torch/quiet*, traces/torch/samehost*, traces/cnn/timing: step-time
#   validation captures (docs/timing.md, docs/fusion.md) that repeat batch
#   sizes of traces/torch and traces/cnn; two traces of one workload, model
#   and batch would make two points at one batch in a group;
# - traces/torch/multiscale: multi-scale training, each step its own input
#   size (`run --steps`, docs/steps.md), not one batch's point; its truth/
#   is an allocator's record as above.
traces=$(find traces/cnn traces/jax traces/torch traces/torch-truth \
	\( -path traces/torch/truth -o -path traces/jax/truth -o -path traces/jax/cnn/truth \
	   -o -path traces/jax/async -o -path 'traces/torch/quiet*' -o -path 'traces/torch/samehost*' \
	   -o -path traces/cnn/timing -o -path traces/torch/multiscale \) -prune \
	-o \( -name '*.trace.gz' -o -name '*.trace' \) -print | sort)
if [ "${1:-}" = --list ]; then
	printf '%s\n' $traces
	exit 0
fi
mkdir -p "$out"
# PyTorch's knobs, TensorFlow/JAX BFC, the CUDA pool, the references and the
# offline floor. GC acts only under a memory fraction (here 5% of 140 GiB).
# --timing: predicted step times (the cost in time of each setting) where
# the trace has the API records to fit its cudaMalloc/cudaFree costs.
$bin sweep --traces $traces \
	--policies cuda_malloc pytorch bfc cuda_async buddy optimal \
	--confs 'pytorch=' 'pytorch=expandable_segments:True' 'pytorch=max_split_size_mb:64' \
		'pytorch=roundup_power2_divisions:4' \
		'pytorch=garbage_collection_threshold:0.6,fraction:0.05' \
		'bfc=' 'bfc=allow_growth:true' 'bfc=preset:jax' \
	--capacities default 8GiB \
	--timing \
	--db "$db" -j 2
$bin table --db "$db"
$bin report --db "$db" -o "$out/report"
echo "demo: results in $db (query with sqlite3; schema in docs/schema.md)" >&2
echo "demo: report in $out/report/report.html (and report.md, runs.csv)" >&2
