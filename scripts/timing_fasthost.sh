#!/usr/bin/env bash
# timing_fasthost.sh: issue 15's four directions on captures whose steps
# carry the host's speed (train_torch.py's `step_probe_us`), scored on all
# steps and on the steps the host ran at full speed (docs/timing.md, "Fast
# and slow host periods").
#
#   scripts/timing_fasthost.sh [GPUMEMSIM [DIR...]]
#
# Each DIR (default traces/timing/probed and traces/timing/probed/pinned,
# one device call each) holds MODEL-bB-{plain,cap}-{caching,nocaching}
# from scripts/device_timing_paused.sh. A step is fast when the probes
# right before and right after it (a fixed pure-Python loop, timed between
# steps, outside the step) are within FAST (default 1.5) times the DIR's
# fastest probe: these hosts run that loop in about 0.6 ms or in twice
# that, switching from step to step. The filter looks at the probes only,
# never at a step's time or at a prediction.
# Real: the plain process's steps 3-12 (all, or the fast ones); predicted:
# the replay's steps 3-7 (all, or those whose captured step was fast), the
# capture's own policy and share, as scripts/timing_paused.sh. "-" where
# fewer than 2 steps are fast. Needs jq and awk.
set -u
G=${1:-build/gpumemsim}
shift $(($# > 0 ? 1 : 0))
DIRS=("$@")
[ ${#DIRS[@]} -gt 0 ] || DIRS=(traces/timing/probed traces/timing/probed/pinned)
FAST=${FAST:-1.5}
die() { echo "timing_fasthost.sh: $*" >&2; exit 1; }
[ -x "$G" ] || die "$G: not an executable (run make)"
command -v jq > /dev/null || die "needs jq"
. "$(dirname "$0")/timing_lib.sh"

# replay STEM-TRACE POLICY [ARGS]: the replay's steps (ms), space-separated
replay() {
	local t=$1 p=$2
	shift 2
	"$G" run "$t" --policy "$p" --cost timeline=1 "$@" --no-db --json |
		jq -r '.steps_ns | map(. / 1e6 | tostring) | join(" ")' || die "run $t $p failed"
}
count_fast() { awk -v m="$1" -v a="$2" -v b="$3" 'BEGIN { split(m, f, " "); for (i = a; i < b; i++) k += f[i + 1]; print k + 0 }'; }

E_ALL=() E_FAST=()
echo "| set | model | batch | direction | fast steps real / predicted | real all | real fast | predicted all | predicted fast | error all | error fast |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for D in "${DIRS[@]}"; do
	[ -r "$D/timing.tsv" ] || die "$D/timing.tsv: missing"
	lim=$(tl_probe_limit "$FAST" "$D"/*-plain-*.json "$D"/*-cap-*.json)
	[ -n "$lim" ] && [ "$lim" != 0 ] || die "$D: no step_probe_us in its JSONs"
	for t in "$D"/*-cap-caching.trace.gz; do
		stem=${t%-cap-caching.trace.gz}
		base=$(basename "$stem")
		m=${base%-b*} b=${base##*-b}
		c=$stem-cap-caching.trace.gz n=$stem-cap-nocaching.trace.gz
		[ -r "$n" ] || continue
		mc=$(tl_fast_mask "$stem-cap-caching.json" "$lim") mn=$(tl_fast_mask "$stem-cap-nocaching.json" "$lim")
		# direction, capture mask, replay, real plain JSON
		for dir in "nc->c" "c->nc" "c->c" "nc->nc"; do
			case $dir in
			"nc->c") cm=$mn steps=$(replay "$n" pytorch) pj=$stem-plain-caching.json ;;
			"c->nc") cm=$mc steps=$(replay "$c" cuda_malloc --requests "$n") pj=$stem-plain-nocaching.json ;;
			"c->c") cm=$mc steps=$(replay "$c" pytorch) pj=$stem-plain-caching.json ;;
			"nc->nc") cm=$mn steps=$(replay "$n" cuda_malloc) pj=$stem-plain-nocaching.json ;;
			esac
			rs=$(tl_steps_ms "$pj") rm=$(tl_fast_mask "$pj" "$lim")
			ra=$(tl_mean_masked "$rs" all 3 13) rf=$(tl_mean_masked "$rs" "$rm" 3 13)
			pa=$(tl_mean_masked "$steps" all 3 8) pf=$(tl_mean_masked "$steps" "$cm" 3 8)
			ea=$(tl_err "$pa" "$ra") ef=$(tl_err "$pf" "$rf")
			E_ALL+=("$ea") E_FAST+=("$ef")
			echo "| $(basename "$D") | $m | $b | $dir | $(count_fast "$rm" 3 13) / $(count_fast "$cm" 3 8) | $ra | $rf | $pa | $pf | $ea | $ef |"
		done
	done
done
echo
# under10 ERRORS...: "K of N" of the signed errors given ("-" ignored)
under10() { printf '%s\n' "$@" | tr -d '%+-' | awk '$1 != "" { n++; if ($1 < 10) k++ } END { print k + 0 " of " n + 0 }'; }
echo "- every step: $(tl_summary "${E_ALL[@]}"); under 10%: $(under10 "${E_ALL[@]}")"
echo "- fast steps: $(tl_summary "${E_FAST[@]}"); under 10%: $(under10 "${E_FAST[@]}")"
