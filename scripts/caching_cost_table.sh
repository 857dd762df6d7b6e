#!/usr/bin/env bash
# caching_cost_table.sh: PyTorch's caching allocator's own host cost per
# call, from scripts/device_caching_cost.sh's runs (docs/timing.md, "The
# caching allocator's own cost").
#
#   scripts/caching_cost_table.sh [DIR]   (default traces/timing/caching_cost/runs)
#
# Per request stream (a no-caching capture's tensors, replayed), the median
# over rounds and passes 2 on (every call served from the cache) of the
# pass's mean cost of a call under 10 us (us): the allocator alone from C++
# (PyTorch's defaults, expandable_segments:True), through one Python call,
# and a whole torch.empty / del; then the uncached path's own part, PyTorch
# with caching off less cudaMalloc/cudaFree alone (all calls, passes 1-2).
# Last, the medians over the streams. Prints Markdown; deterministic.
set -eu
. "$(dirname "$0")/median_awk.sh"
DIR=${1:-traces/timing/caching_cost/runs}
[ -d "$DIR" ] || { echo "caching_cost_table.sh: no such directory: $DIR" >&2; exit 2; }
awk "$AWK_MEDIAN"'
function us(v) { return v == "" ? "-" : sprintf("%.2f", v / 1000) }
FNR == 1 {
	f = FILENAME; sub(/.*\//, "", f); sub(/\.tsv$/, "", f)
	n = split(f, w, "-"); cfg = w[n - 1]; stream = w[1]
	for (i = 2; i < n - 1; i++) stream = stream "-" w[i]
	if (!(stream in seen)) { seen[stream] = 1; order[++ns] = stream }
}
/^#/ || NF < 8 { next }
cfg == "nocache" || cfg == "cuda" { S[stream, cfg, $2] += $4 * $3; N[stream, cfg, $2] += $3; next }
$1 >= 2 { V[stream, cfg, $2] = V[stream, cfg, $2] " " $8 }
END {
	split("torch:alloc torch:free expand:alloc expand:free py:raw_alloc py:raw_free py:tensor_alloc py:tensor_free", K, " ")
	print "| request stream | alloc | free | expandable: alloc | free | via Python: alloc | free | torch.empty | del | uncached path: alloc | free |"
	print "|---|---|---|---|---|---|---|---|---|---|---|"
	for (s = 1; s <= ns; s++) {
		st = order[s]; line = "| " st
		for (k = 1; k <= 8; k++) {
			split(K[k], c, ":"); v = med(V[st, c[1], c[2]])
			line = line " | " us(v); if (v != "") ALL[k] = ALL[k] " " v
		}
		for (k = 1; k <= 2; k++) {
			op = k == 1 ? "alloc" : "free"
			if (N[st, "nocache", op] && N[st, "cuda", op]) {
				v = S[st, "nocache", op] / N[st, "nocache", op] - S[st, "cuda", op] / N[st, "cuda", op]
				line = line " | " us(v); ALL[8 + k] = ALL[8 + k] " " v
			} else line = line " | -"
		}
		print line " |"
	}
	line = "| median of " ns
	for (k = 1; k <= 10; k++) line = line " | " us(med(ALL[k]))
	print line " |"
	a = med(ALL[1]); f = med(ALL[2])
	printf "\ncaching allocator, a call served from the cache: alloc %s us, free %s us, mean %s us\n", us(a), us(f), us((a + f) / 2)
}' "$DIR"/*-[0-9].tsv
