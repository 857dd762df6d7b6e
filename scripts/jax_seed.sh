#!/usr/bin/env bash
# jax_seed.sh: the seed answer of issue 8 for JAX, reproduced from the
# captures in traces/jax: reserved (BFC pool) and device-level memory of the
# JAX ResNet batch sweep, real against simulated, and the same request
# streams replayed under the other policies. Writes OUT/jax-seed.tsv,
# OUT/jax-seed.md (the Markdown table, also printed) and OUT/jax-seed.png
# (gnuplot, plots/jax_seed.gp); nothing in OUT changes unless all succeed.
#
#   scripts/jax_seed.sh [TRACES_DIR [OUT_DIR [GPUMEMSIM]]]
#   (defaults: traces/jax docs/figures build/gpumemsim)
#
# Real figures: TRACES_DIR/truth/*-growth.nvml.json (growth run alone on the
# GPU: memory_stats peak_pool_bytes, largest_alloc_size; NVML
# proc_used_bytes). Simulated BFC: `validate jax-truth --json` (allow_growth,
# the run's bytes_limit). The other policies replay the same request stream
# validate replays: gpumemsim reads the captures as XLA's requests (2 MiB
# granules at their lower bound; allocations never freed, library handles
# outside XLA's allocator, beside the policy; docs/policies.md), so the
# sweep runs on the captures as they are; the script checks that its BFC
# replay equals validate's, byte for byte.
# Device-level simulated = simulated pool + the overhead of the real runs
# (NVML process memory - peak pool: CUDA context, modules, library handles),
# the median over the runs.
set -euo pipefail
T=${1:-traces/jax}
O=${2:-docs/figures}
G=${3:-build/gpumemsim}
GP=$(dirname "$0")/../plots/jax_seed.gp
MIB=1048576

die() { echo "jax_seed.sh: $*" >&2; exit 1; }
for tool in gnuplot jq sqlite3 awk; do
	command -v "$tool" >/dev/null || die "$tool not found (needed to build the table/figure)"
done
[ -x "$G" ] || die "$G: not an executable (run make first)"
[ -d "$T/truth" ] || die "$T/truth: no such directory (the ground truth)"
[ -f "$GP" ] || die "$GP: missing"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 1. validate jax-truth: real and simulated BFC figures per run.
"$G" validate jax-truth "$T" --json > "$tmp/validate.jsonl"
jq -r 'select(.run) | [.run, .peak_pool_bytes_sim, .peak_in_use_sim] | @tsv' \
	"$tmp/validate.jsonl" > "$tmp/sim_bfc.tsv"
[ -s "$tmp/sim_bfc.tsv" ] || die "validate jax-truth $T gave no runs"

# 2. The truth of each run, and the one bytes_limit of the sweep.
: > "$tmp/truth.tsv"
for f in "$T"/truth/jax-*-growth.nvml.json; do
	[ -f "$f" ] || die "$T/truth: no *-growth.nvml.json"
	jq -r '[.batch, .memory_stats.peak_pool_bytes, .memory_stats.largest_alloc_size,
		.proc_used_bytes, .memory_stats.bytes_limit, .memory_stats.peak_bytes_in_use]
		| map(tostring) | join("\t")' "$f" >> "$tmp/truth.tsv" ||
		die "$f: cannot read memory_stats/proc_used_bytes"
done
sort -n -o "$tmp/truth.tsv" "$tmp/truth.tsv"
limit=$(cut -f5 "$tmp/truth.tsv" | sort -u)
[ "$(echo "$limit" | wc -l)" -eq 1 ] || die "runs differ in bytes_limit: $(echo $limit)"

# 3. The captures themselves: gpumemsim reads a JAX platform capture (labels
#    workload=jax, alloc=platform) as XLA's request stream, as validate
#    does (sim_options.xla_requests, traces/xla_requests.h): never-freed
#    allocations beside the policy; the sizes XLA asked for (label
#    xla_sizes, `gpumemsim import xla-sizes`), or else whole-granule
#    requests at their lower bound. Check that each capture is read so.
n=0
for tr in "$T"/jax-*.trace.gz; do
	[ -f "$tr" ] || die "$T: no jax-*.trace.gz"
	"$G" run "$tr" --policy bfc --conf "preset:jax_growth,memory_limit:$limit" --no-db --json |
		jq -e '.xla_requests.outside > 0' >/dev/null ||
		die "$tr: not read as XLA's request stream (labels workload=jax, alloc=platform?)"
	n=$((n + 1))
done

# 4. The sweep: every policy on the same streams.
"$G" sweep --traces "$T"/jax-*.trace.gz \
	--policies bfc pytorch cuda_async cuda_malloc optimal \
	--confs "bfc=preset:jax_growth,memory_limit:$limit" pytorch= \
		pytorch=expandable_segments:True \
	--db "$tmp/r.db" -j 2 --no-progress > /dev/null
sqlite3 -separator '	' "$tmp/r.db" "
	SELECT CAST(l.value AS INTEGER), r.policy || CASE WHEN r.conf LIKE 'expandable%' THEN '_es' ELSE '' END,
	       r.peak_reserved, r.num_ooms
	FROM runs r JOIN run_labels l ON l.run_id = r.id AND l.key = 'batch'
	ORDER BY 1, 2" > "$tmp/sweep.tsv"
[ "$(wc -l < "$tmp/sweep.tsv")" -eq $((n * 6)) ] || die "sweep stored $(wc -l < "$tmp/sweep.tsv") runs, expected $((n * 6))"
awk -F'\t' '$4 != 0 {print "jax_seed.sh: batch " $1 " " $2 ": simulated OOM"; bad = 1} END {exit bad}' \
	"$tmp/sweep.tsv" >&2 || exit 1

# The sweep's BFC must be validate's BFC (same stream, same settings).
sed 's/^jax-resnet-b\([0-9]*\)\t/\1\t/' "$tmp/sim_bfc.tsv" | sort -n > "$tmp/sim_bfc_b.tsv"
awk -F'\t' 'NR == FNR {v[$1] = $2; next} $2 == "bfc" && v[$1] != $3 {
	printf "jax_seed.sh: batch %s: sweep bfc %s != validate %s\n", $1, $3, v[$1]; bad = 1}
	END {exit bad}' "$tmp/sim_bfc_b.tsv" "$tmp/sweep.tsv" >&2 || exit 1

# 5. The table. Overhead = median over runs of NVML process memory - pool.
overhead=$(awk -F'\t' '{print $4 - $2}' "$tmp/truth.tsv" | sort -n |
	awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')
ovrange=$(awk -F'\t' -v m=$MIB '{o = ($4 - $2) / m; if (NR == 1 || o < lo) lo = o; if (o > hi) hi = o}
	END {printf "%.1f-%.1f", lo, hi}' "$tmp/truth.tsv")
awk -F'\t' -v m=$MIB -v ov="$overhead" '
	FILENAME ~ /truth/ {pool[$1] = $2; big[$1] = $3; dev[$1] = $4; use[$1] = $6; next}
	FILENAME ~ /sim_bfc/ {sim[$1] = $2; next}
	{x[$1, $2] = $3; b[$1] = 1}
	END {
		print "batch\treal_pool\treal_device\treal_in_use\tlargest_request\tsim_bfc_pool\tsim_device\tpytorch\tpytorch_expandable\tcuda_async\tcuda_malloc\toptimal\treal_regions"
		for (k in b) if (!(k in pool)) { printf "jax_seed.sh: batch %s: no truth\n", k > "/dev/stderr"; exit 1 }
		for (k in pool) if (!(k in sim)) { printf "jax_seed.sh: batch %s: no capture\n", k > "/dev/stderr"; exit 1 }
		for (k in pool) {
			# the regions are distinct powers of two: the bits of the pool in MiB
			r = ""; p = int(pool[k] / m + 0.5)
			for (bit = 1; bit <= p; bit *= 2) if (int(p / bit) % 2) r = r (r == "" ? "" : "+") bit
			printf "%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%s\n", k,
				pool[k] / m, dev[k] / m, use[k] / m, big[k] / m, sim[k] / m, (sim[k] + ov) / m,
				x[k, "pytorch"] / m, x[k, "pytorch_es"] / m, x[k, "cuda_async"] / m,
				x[k, "cuda_malloc"] / m, x[k, "optimal"] / m, r
		}
	}' "$tmp/truth.tsv" "$tmp/sim_bfc_b.tsv" "$tmp/sweep.tsv" > "$tmp/body.tsv" || exit 1
{ head -1 "$tmp/body.tsv"; tail -n +2 "$tmp/body.tsv" | sort -n; } > "$tmp/jax-seed.tsv"

# Falls (a value below the one at the next smaller batch) per column, and
# the steps of the real pool with the request that made the last region.
awk -F'\t' 'NR > 1 {for (c = 2; c <= 12; c++) {if (NR > 2 && $c + 0 < p[c]) {
	printf "%s %s: %.1f after %.1f MiB\n", h[c], $1, $c, p[c]}; p[c] = $c}}
	NR == 1 {for (c = 1; c <= NF; c++) h[c] = $c}' "$tmp/jax-seed.tsv" > "$tmp/falls.txt"
awk -F'\t' 'NR == 1 {print "batch\treal_pool\tregion\trequest"}
	NR > 2 && $2 + 0 > pp {
	n = split($13, r, "+"); top = r[n]
	printf "%s\t%s\tregion %s MiB\tlargest request %.0f MiB\n", $1, $2, top, $5} NR > 1 {pp = $2}' \
	"$tmp/jax-seed.tsv" > "$tmp/steps.tsv"

# 6. Markdown.
{
	echo "| batch | real pool | real device (NVML) | real in use | largest request | sim bfc pool | sim device | pytorch | pytorch expandable | cuda_async | cuda_malloc | optimal | real regions |"
	echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
	awk -F'\t' 'NR > 1 {row = "| " $1; for (c = 2; c <= 12; c++) {
		mk = (NR > 2 && $c + 0 < p[c]) ? " v" : ""; up = (c == 2 && NR > 2 && $c + 0 > p[c]) ? " **^**" : ""
		row = row " | " $c mk up; p[c] = $c}
		print row " | " $13 " |"}' "$tmp/jax-seed.tsv"
	echo
	echo "MiB; peaks per run. Real: growth runs alone on an H200 (memory_stats, NVML process memory)."
	echo "Simulated device = simulated pool + $(awk -v o="$overhead" -v m=$MIB 'BEGIN {printf "%.1f", o / m}') MiB, the median of real NVML - real pool (range $ovrange MiB)."
	echo "**^** = a step of the real pool (a region doubled to fit the largest request); v = a fall (memory smaller at a larger batch)."
	if [ -s "$tmp/falls.txt" ]; then
		echo "Falls: $(paste -sd';' "$tmp/falls.txt")."
	else
		echo "Falls: none, in any column."
	fi
} > "$tmp/jax-seed.md"

# 7. The figure.
nfalls=$(wc -l < "$tmp/falls.txt")
gnuplot -e "data='$tmp/jax-seed.tsv'; steps='$tmp/steps.tsv'; out='$tmp/jax-seed.png'; overhead_mib=$(awk -v o="$overhead" -v m=$MIB 'BEGIN {printf "%.1f", o / m}'); nfalls=$nfalls" "$GP"

mkdir -p "$O"
for f in jax-seed.tsv jax-seed.md jax-seed.png; do
	cp "$tmp/$f" "$O/$f.tmp" && mv "$O/$f.tmp" "$O/$f"
done
cat "$O/jax-seed.md"
echo "written: $O/jax-seed.tsv $O/jax-seed.md $O/jax-seed.png" >&2
