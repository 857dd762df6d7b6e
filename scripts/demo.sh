#!/bin/sh
# demo.sh: the main job on the shipped traces. Replays every trace in
# traces/ under every allocator policy and the settings users ask about,
# stores the runs in out/demo/results.db and prints the comparison table.
set -eu
cd "$(dirname "$0")/.."
bin=./build/gpumemsim
out=${DEMO_OUT:-out/demo}
mkdir -p "$out"
db=$out/results.db
rm -f "$db" "$db-wal" "$db-shm"

# policy|setting pairs: PyTorch's knobs, TensorFlow/JAX BFC, the CUDA pool,
# the simple references and the offline floor.
settings='cuda_malloc|
pytorch|
pytorch|expandable_segments:True
pytorch|max_split_size_mb:64
pytorch|roundup_power2_divisions:4
pytorch|garbage_collection_threshold:0.6,fraction:0.05
bfc|
bfc|allow_growth:true
bfc|preset:jax
cuda_async|
buddy|
optimal|'

n=0
for trace in $(find traces -name '*.trace.gz' -o -name '*.trace' | sort); do
	echo "$settings" | while IFS='|' read -r policy conf; do
		$bin run "$trace" --policy "$policy" --conf "$conf" --db "$db" --quiet >/dev/null
	done
	n=$((n + 1))
	printf '\rdemo: %d traces replayed' "$n" >&2
done
echo >&2
$bin table --db "$db"
echo "demo: results in $db (query with sqlite3; schema in docs/schema.md)" >&2
