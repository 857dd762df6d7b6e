#!/usr/bin/env bash
# alloc_cost_table.sh: the cudaMalloc / cudaFree cost measurements of
# scripts/device_alloc_cost.sh side by side (docs/timing.md, "Cost table").
#
#   scripts/alloc_cost_table.sh [DIR]     (default traces/timing/alloc_cost)
#
# Per size bin, the median over the rounds of each configuration's mean
# cost per call (us): uncaptured with 256 live allocations (plain) and with
# none (live0), under `capture --no-source` and `capture`, and PyTorch's
# torch.empty + del with caching off and on. Prints Markdown; deterministic.
set -eu
. "$(dirname "$0")/median_awk.sh"
DIR=${1:-traces/timing/alloc_cost}
[ -d "$DIR" ] || { echo "alloc_cost_table.sh: no such directory: $DIR" >&2; exit 2; }
awk -v OFS=' | ' "$AWK_MEDIAN"'
function human(b) {
	return b >= 1073741824 ? b / 1073741824 " GiB" : b >= 1048576 ? b / 1048576 " MiB" : b / 1024 " KiB"
}
FNR == 1 {
	f = FILENAME; sub(/.*\//, "", f); sub(/-[0-9]+\.tsv$/, "", f); cfg = f
	torch = (cfg ~ /^torch/)
}
/^#/ || NF < 5 { next }
{
	bin = $1; lo[bin] = $1; hi[bin] = $2
	if (!(bin in bins)) order[++n] = bin	# the files list their bins in size order
	if (torch) { m = $3; fr = $4 } else { m = $3; fr = $5 }
	if (m >= 0) M[cfg, bin] = M[cfg, bin] " " m
	if (fr >= 0) F[cfg, bin] = F[cfg, bin] " " fr
	bins[bin] = 1
}
END {
	ncfg = split("plain live0 nosource source torch-nocaching torch-caching", C, " ")
	for (w = 1; w <= 2; w++) {
		print "\n" (w == 1 ? "cudaMalloc / torch.empty" : "cudaFree / del") " (us per call, median of the round means)\n"
		hdr = "| size"; sep = "|---"
		for (c = 1; c <= ncfg; c++) { hdr = hdr " | " C[c]; sep = sep "|---" }
		print hdr " |"; print sep "|"
		for (i = 1; i <= n; i++) {
			b = order[i]; line = "| " human(lo[b]) "-" human(hi[b])
			for (c = 1; c <= ncfg; c++) {
				v = w == 1 ? M[C[c], b] : F[C[c], b]
				line = line " | " (v == "" ? "-" : sprintf("%.1f", med(v) / 1000))
			}
			print line " |"
		}
	}
}' "$DIR"/*-[0-9].tsv
