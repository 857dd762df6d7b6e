#!/usr/bin/env bash
# timing_settings.sh: what an allocator setting costs in step time,
# predicted from one no-caching capture and measured on the same host in
# the same device call (users' question 8; docs/timing.md, "What an
# allocator setting costs").
#
#   scripts/timing_settings.sh [GPUMEMSIM [DIR...]]
#
# Each DIR (default traces/timing/settings and traces/timing/settings/pinned,
# one device call each, from scripts/device_timing_settings.sh) holds per
# model MODEL-bB-cap-nocaching.trace.gz and the uncaptured runs
# MODEL-bB-{default,expandable,async,gc}.json. Real: the mean of steps
# 3-12 (and of those the host ran at full speed, as timing_fasthost.sh
# tells them). Predicted: the capture replayed (steps 3-7) under
#   default     pytorch
#   expandable  pytorch expandable_segments:True
#   async       cuda_async release_threshold:max (the pool keeps its memory:
#               PyTorch's backend:cudaMallocAsync sets UINT64_MAX)
#   gc          pytorch garbage_collection_threshold:0.6 and the run's
#               fraction (timing.tsv)
# and the change against default, real and predicted. Needs jq and awk.
set -u
G=${1:-build/gpumemsim}
shift $(($# > 0 ? 1 : 0))
DIRS=("$@")
[ ${#DIRS[@]} -gt 0 ] || DIRS=(traces/timing/settings traces/timing/settings/pinned)
FAST=${FAST:-1.5}
die() { echo "timing_settings.sh: $*" >&2; exit 1; }
[ -x "$G" ] || die "$G: not an executable (run make)"
command -v jq > /dev/null || die "needs jq"
. "$(dirname "$0")/timing_lib.sh"

# real JSON LIMIT: the mean of steps 3-12 (ms), then of the fast ones ("-"
# with fewer than 2; without probes in the JSON, "-")
real() {
	local s k
	s=$(tl_steps_ms "$1") && k=$(tl_fast_mask "$1" "$2") || return
	echo "$(tl_mean_masked "$s" all 3 13) $(tl_mean_masked "$s" "$k" 3 13)"
}
pred() {
	local t=$1 p=$2 c=$3
	tl_pred_busy "$G" 3 "$t" "$p" timeline=1 ${c:+--conf "$c"} || die "run $t $p $c failed"
}
chg() { if [ "$1" = - ] || [ "$2" = - ]; then echo -; else tl_err "$1" "$2"; fi; }
f1() { if [ "$1" = - ]; then echo -; else awk -v x="$1" 'BEGIN { printf "%.1f", x }'; fi; }

E_CHG=() E_STEP=()
echo "| set | model | batch | setting | real (ms) | real, fast steps | predicted | GPU busy | real change | predicted change | step error |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for D in "${DIRS[@]}"; do
	[ -r "$D/timing.tsv" ] || die "$D/timing.tsv: missing"
	lim=$(tl_probe_limit "$FAST" "$D"/*.json)
	for t in "$D"/*-cap-nocaching.trace.gz; do
		stem=${t%-cap-nocaching.trace.gz}
		base=$(basename "$stem")
		m=${base%-b*} b=${base##*-b}
		frac=$(awk -v m="$m" -v b="$b" '$1 == m && $2 == b && $3 == "gc" { print $4 }' "$D/timing.tsv")
		rd=- pd=-
		for set in default expandable async gc; do
			case $set in
			default) pol=pytorch conf= ;;
			expandable) pol=pytorch conf=expandable_segments:True ;;
			async) pol=cuda_async conf=release_threshold:max ;;
			gc) pol=pytorch conf=garbage_collection_threshold:0.6,fraction:$frac ;;
			esac
			[ -r "$stem-$set.json" ] || continue
			out=$(real "$stem-$set.json" "$lim") || die "$stem-$set.json: unreadable"
			read -r ra rf <<<"$out"
			out=$(pred "$t" "$pol" "$conf") || exit 1
			read -r p busy <<<"$out"
			if [ $set = default ]; then rd=$ra pd=$p; fi
			rc=$(chg "$ra" "$rd") pc=$(chg "$p" "$pd") e=$(tl_err "$p" "$ra")
			[ $set = default ] || E_CHG+=("$(awk -v a="${rc%\%}" -v b="${pc%\%}" 'BEGIN { printf "%+.1f%%", b - a }')")
			E_STEP+=("$e")
			echo "| $(basename "$D") | $m | $b | $set | $(f1 "$ra") | $(f1 "$rf") | $(f1 "$p") | $(awk -v x="$busy" 'BEGIN { printf "%.0f%%", 100 * x }') | $rc | $pc | $e |"
		done
	done
done
echo
echo "- step time, every setting: $(tl_summary "${E_STEP[@]}")"
echo "- change against default, predicted minus real (percentage points): $(tl_summary "${E_CHG[@]}" | sed 's/%/ pp/g')"
