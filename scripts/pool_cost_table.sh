#!/usr/bin/env bash
# pool_cost_table.sh: the stream-ordered pool's host cost per call, from
# scripts/device_pool_cost.sh's runs (docs/timing.md, "What an allocator
# setting costs").
#
#   scripts/pool_cost_table.sh [DIR]      (default traces/timing/pool_cost)
#
# Per number of live allocations and GPU state (idle; busy: work queued
# ahead; launch: busy with a kernel launched between the calls), the median
# over the rounds of each round's mean cudaMallocAsync and cudaFreeAsync
# (us). Prints Markdown; deterministic.
set -eu
. "$(dirname "$0")/median_awk.sh"
DIR=${1:-traces/timing/pool_cost}
[ -d "$DIR" ] || { echo "pool_cost_table.sh: no such directory: $DIR" >&2; exit 2; }
awk "$AWK_MEDIAN"'
/^#/ || NF < 5 { next }
{
	k = $1 SUBSEP $2
	if (!(k in A)) { order[++n] = k }
	A[k] = A[k] " " $3; F[k] = F[k] " " $4
}
END {
	print "| live allocations | GPU | cudaMallocAsync (us) | cudaFreeAsync (us) |"
	print "|---|---|---|---|"
	for (i = 1; i <= n; i++) {
		split(order[i], w, SUBSEP)
		printf "| %s | %s | %.2f | %.2f |\n", w[1], w[2], med(A[order[i]]) / 1000, med(F[order[i]]) / 1000
	}
}' "$DIR"/pool-[0-9]*.tsv
