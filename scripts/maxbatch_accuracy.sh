#!/usr/bin/env bash
# maxbatch_accuracy.sh: `gpumemsim maxbatch` against the largest batch that
# really fit on the H200 under a memory fraction (users' question 1,
# PyTorch; docs/whatif.md "The largest batch against real runs").
#
#   scripts/maxbatch_accuracy.sh [GPUMEMSIM [DIR]]   (build/gpumemsim, traces/measurements/maxbatch)
#
# DIR/dev, DIR/heldout and DIR/capacity hold results.tsv of
# scripts/device_maxbatch.sh: per case (MODEL:LIMIT[:CONF]) the batch sizes
# a bisection ran, each a training process of 3 steps that ran out of
# memory or not, under torch.cuda.set_per_process_memory_fraction(LIMIT),
# or, LIMIT NGiB, on "a smaller GPU": all free memory but N GiB taken by a
# cudaMalloc outside PyTorch first. The real answer is the largest batch
# that fit, the next one having failed; where the bisection ran out of
# time it is a range ("190-191"), or a bound (">=239": the bracket's top
# was never tried), and the error is counted to the nearest end (0 inside).
# The prediction: `maxbatch --policy pytorch --margin 0` with `--conf
# [CONF,]fraction:F` at the device's total memory as PyTorch reports it,
# or `--capacity NGiB`, from the recipe captures of the model
# (traces/torch/torch-MODEL-b*.trace.gz, other hosts and days, no
# caching). "dev": the cases the workspace rule was worked out on;
# "heldout": run after it, not used for it; "capacity": the smaller GPUs,
# run after both, on which the cap at the free memory was then added.
# Prints Markdown; deterministic; about 1 minute.
set -eu -o pipefail
. "$(dirname "$0")/median_awk.sh"
G=${1:-build/gpumemsim}
D=${2:-traces/measurements/maxbatch}
die() { echo "maxbatch_accuracy.sh: $*" >&2; exit 1; }
[ -x "$G" ] || die "$G: not an executable (run make)"
command -v jq > /dev/null || die "needs jq"
total=$(jq -r .total_memory "$(ls "$D"/*/*.json | head -1)") || die "$D: no run's JSON for the total memory"
errs=$(mktemp)
trap 'rm -f "$errs"' EXIT

echo "| set | model | limit | setting | captures (batch) | largest that fit (real) | predicted | error |"
echo "|---|---|---|---|---|---|---|---|"
for set in dev heldout capacity; do
	r=$D/$set/results.tsv
	[ -r "$r" ] || die "$r: missing"
	for c in $(awk -F'\t' 'NR > 1 { print $1 }' "$r" | sort -u); do
		m=${c%%:*} rest=${c#*:}
		f=${rest%%:*} conf=
		[ "$rest" != "$f" ] && conf=${rest#*:}
		# the largest batch that fit, and the smallest that failed (0: none tried)
		read -r lo fail <<< "$(awk -F'\t' -v c="$c" '$1 == c {
			if ($3 == 0 && $2 > fit) fit = $2
			if ($3 == 1 && (fail == "" || $2 < fail)) fail = $2 }
			END { print fit + 0, fail + 0 }' "$r")"
		[ "$lo" -gt 0 ] || die "$c: no batch fit"
		hi=$((fail ? fail - 1 : 0))   # the largest that may fit; 0: no bound
		real=$lo
		[ "$hi" = 0 ] && real=">=$lo"
		[ "$hi" -gt "$lo" ] && real="$lo-$hi"
		caps=$(ls traces/torch/torch-"$m"-b*.trace.gz)
		batches=$(echo "$caps" | sed 's/.*-b//; s/\.trace\.gz//' | sort -n | paste -sd, -)
		case $f in
		*GiB) lim=(--conf "${conf:-}" --capacity "$f") ;;
		*) lim=(--conf "${conf:+$conf,}fraction:$f" --capacity "${total}B") ;;
		esac
		pred=$("$G" maxbatch --from $caps --policy pytorch "${lim[@]}" --margin 0 --max 4096 \
			2> /dev/null | awk '/^largest batch/ { print ($3 == "none:" ? 0 : $3) }')
		[ -n "$pred" ] || die "$c: maxbatch gave no answer"
		e=$(awk -v p="$pred" -v lo="$lo" -v hi="$hi" 'BEGIN {
			e = p < lo ? (p - lo) / lo : (hi && p > hi) ? (p - hi) / hi : 0
			printf "%+.1f", e * 100 }')
		echo "$set $e" >> "$errs"
		echo "| $set | $m | $f | ${conf:-default} | $batches | $real | $pred | $e% |"
	done
done
echo
awk "$AWK_MEDIAN"'
	function abs(v) { return v < 0 ? -v : v }
	{ v = abs($2 + 0); a[++n] = v; s[$1, ++k[$1]] = v; if ($2 + 0 > 0) over++ }
	END {
		for (set in k) { n2 = 0; split("", b); for (i = 1; i <= k[set]; i++) b[++n2] = s[set, i]
			printf "%s: %d cases, |error| median %.1f%%, max %.1f%%\n", set, n2, median(b, n2), b[n2] }
		printf "all: %d cases, |error| median %.1f%%, max %.1f%%; predicted above the real answer: %d\n",
			n, median(a, n), a[n], over + 0 }' "$errs" | sort
