#!/usr/bin/env bash
# timing_noise.sh: the timeline model against six uncaptured processes of
# one program (traces/timing/noise, docs/timing.md "How far apart two runs
# of one program are"): per model, the uncaptured steps of every process,
# the captured ones, the prediction (`run --policy pytorch --timing`, caching
# on, the mean of steps 5-19) from each capture, and the median prediction
# against the median uncaptured step.
#
#   scripts/timing_noise.sh [GPUMEMSIM]
#   NOISE_DIR=traces/timing/noise/nocaching NOISE_COMMIT=REV scripts/timing_noise.sh
#     the same for no-caching captures (the nc->c prediction) against
#     uncaptured caching runs (session 9; that folder's README)
#
# The tree keeps the third round's captures; the first two are read from
# the commit that added them (NOISE_COMMIT, 0c68a85) when this is a git
# checkout that has it, else left out (said so). Prints Markdown. Needs jq.
set -u
cd "$(dirname "$0")/.." || exit 1
G=${1:-build/gpumemsim}
D=${NOISE_DIR:-traces/timing/noise}
C=${NOISE_COMMIT:-0c68a85}
W=5
die() { echo "timing_noise.sh: $*" >&2; exit 1; }
[ -x "$G" ] || die "$G: not an executable (run make)"
command -v jq > /dev/null || die "needs jq"
[ -r "$D/runs.tsv" ] || die "$D/runs.tsv: missing"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# the capture NAME: from the tree, else from commit C; prints its path
capture() {
	if [ -r "$D/$1.trace.gz" ]; then
		echo "$D/$1.trace.gz"
	elif git cat-file -e "$C:$D/$1.trace.gz" 2> /dev/null; then
		git show "$C:$D/$1.trace.gz" > "$tmp/$1.trace.gz" && echo "$tmp/$1.trace.gz"
	fi
}
med() { sort -g | awk '{ v[NR] = $1 } END { if (!NR) print "-"; else print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
echo "| model | uncaptured, mean step of each process (ms) | median | captured | prediction from each capture | median prediction vs median uncaptured |"
echo "|---|---|---|---|---|---|"
missing=0
for m in $(awk -F'\t' 'NR > 1 { print $2 }' "$D/runs.tsv" | sort -u); do
	real=$(awk -F'\t' -v m="$m" '$2 == m && $4 == 0 { print $7 }' "$D/runs.tsv" | sort -g)
	capd=$(awk -F'\t' -v m="$m" '$2 == m && $4 == 1 { print $7 }' "$D/runs.tsv" | sort -g)
	preds=""
	for n in $(awk -F'\t' -v m="$m" '$2 == m && $4 == 1 { print $1 }' "$D/runs.tsv"); do
		t=$(capture "$n")
		if [ -z "$t" ]; then missing=$((missing + 1)); continue; fi
		p=$("$G" run "$t" --policy pytorch --timing --no-db --json |
			jq -r --argjson w "$W" '.steps_ns[$w:] | add / length / 1e6') || die "run $t failed"
		preds="$preds $p"
	done
	rm_=$(printf '%s\n' $real | med)
	pm=$(printf '%s\n' $preds | sed '/^$/d' | med)
	err=$(awk -v p="$pm" -v r="$rm_" 'BEGIN { if (p == "-") print "-"; else printf "%+.0f%%", 100 * (p / r - 1) }')
	printf '| %s | %s | %.1f | %s | %s | %s |\n' "$m" "$(printf '%.1f ' $real)" "$rm_" \
		"$(printf '%.1f ' $capd)" "$(printf '%.1f ' $(printf '%s\n' $preds | sort -g))" "$err"
done
[ "$missing" = 0 ] || echo "
$missing captures were neither in the tree nor in commit $C: their predictions are left out."
