#!/usr/bin/env bash
# timing_paused.sh: issue 15's predictions on captures that measured their
# own cost (`capture --pause-at-step 8`, traces/timing/paused; docs/timing.md,
# "Measured in the capture itself").
#
#   scripts/timing_paused.sh [GPUMEMSIM [DIR]]
#
# Each model and batch ran four processes on one H200 host in one call
# (scripts/device_timing_paused.sh): uncaptured with and without the caching
# allocator (13 steps), captured with and without it (8 steps recorded, then
# 5 with the capture paused). Two uncaptured references per mode therefore:
# "plain", the uncaptured process (mean of steps 3-12), and "paused", the
# capture's own process after the pause (mean of steps 8-12). Predictions
# (mean of the replayed steps 3-7) with the capture mode's share (default)
# and with the share measured by the paused steps (`--cost calibrate=1`),
# each against both references:
#   nc->c   caching on from the no-caching capture (--policy pytorch)
#   c->nc   no caching from the caching capture with the no-caching
#           capture's requests (--policy cuda_malloc --requests)
# and the same-mode replays (c->c, nc->nc) against the plain run. Prints
# Markdown; needs jq. Deterministic.
set -u
G=${1:-build/gpumemsim}
D=${2:-traces/timing/paused}
die() { echo "timing_paused.sh: $*" >&2; exit 1; }
[ -x "$G" ] || die "$G: not an executable (run make)"
command -v jq > /dev/null || die "needs jq"
[ -r "$D/timing.tsv" ] || die "$D/timing.tsv: missing"
. "$(dirname "$0")/timing_lib.sh"

# mean (ms) of step_s[A:B] of a run's JSON
steps() { jq -r --argjson a "$2" --argjson b "$3" '.step_s[$a:$b] | add / length * 1000' "$1"; }
# pred TRACE POLICY KNOBS [ARGS...]: mean replayed step 3-7 (ms)
pred() {
	local t=$1 p=$2 k=$3
	shift 3
	tl_pred "$G" 3 "$t" "$p" "$k" "$@" || die "run $t $p $k failed"
}
# predb: pred's arguments; the mean replayed step and the GPU's busy share
predb() {
	local t=$1 p=$2 k=$3
	shift 3
	tl_pred_busy "$G" 3 "$t" "$p" "$k" "$@" || die "run $t $p $k failed"
}
share() { "$G" run "$1" --policy pytorch --cost calibrate=1 --no-db --json | jq -r '.timing | "\(.capture_share * 1000 | round / 1000)\(if .calibration.at_bound then " (bound)" else "" end)"'; }
f1() { awk -v x="$1" 'BEGIN { printf "%.1f", x }'; }

echo "| model | batch | caching | plain | paused | captured | captured / paused | measured share |"
echo "|---|---|---|---|---|---|---|---|"
for t in "$D"/*-cap-caching.trace.gz; do
	stem=${t%-cap-caching.trace.gz}
	base=$(basename "$stem")
	m=${base%-b*} b=${base##*-b}
	for mode in caching nocaching; do
		pl=$(steps "$stem-plain-$mode.json" 3 13)
		pa=$(steps "$stem-cap-$mode.json" 8 13)
		ca=$(steps "$stem-cap-$mode.json" 3 8)
		echo "| $m | $b | $([ $mode = caching ] && echo on || echo off) | $(f1 "$pl") | $(f1 "$pa") | $(f1 "$ca") | $(awk -v c="$ca" -v p="$pa" 'BEGIN { printf "%.2f", c / p }') | $(share "$stem-cap-$mode.trace.gz") |"
	done
done
echo
echo "Errors of the predictions (ms: the prediction with the mode's share; errors against the plain process / the paused steps of the other capture):"
echo
echo "| model | batch | nc->c | vs plain | vs paused | calibrated vs plain | c->nc | vs plain | vs paused | calibrated vs plain | c->c vs plain | calibrated | nc->nc vs plain | calibrated |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
E_DEF=() E_CAL=() E_PAU=() E_TWO=() E_GPU=() E_HOST=()
for t in "$D"/*-cap-caching.trace.gz; do
	stem=${t%-cap-caching.trace.gz}
	base=$(basename "$stem")
	m=${base%-b*} b=${base##*-b}
	c=$stem-cap-caching.trace.gz n=$stem-cap-nocaching.trace.gz
	plc=$(steps "$stem-plain-caching.json" 3 13) pln=$(steps "$stem-plain-nocaching.json" 3 13)
	pac=$(steps "$stem-cap-caching.json" 8 13) pan=$(steps "$stem-cap-nocaching.json" 8 13)
	read -r a fa <<<"$(predb "$n" pytorch timeline=1)"
	read -r r fr <<<"$(predb "$c" cuda_malloc timeline=1 --requests "$n")"
	read -r cc fc <<<"$(predb "$c" pytorch timeline=1)"
	read -r nn fn <<<"$(predb "$n" cuda_malloc timeline=1)"
	ak=$(pred "$n" pytorch calibrate=1) rk=$(pred "$c" cuda_malloc calibrate=1 --requests "$n")
	cck=$(pred "$c" pytorch calibrate=1) nnk=$(pred "$n" cuda_malloc calibrate=1)
	e1=$(tl_err "$a" "$plc") e2=$(tl_err "$a" "$pac") e3=$(tl_err "$ak" "$plc")
	e4=$(tl_err "$r" "$pln") e5=$(tl_err "$r" "$pan") e6=$(tl_err "$rk" "$pln")
	e7=$(tl_err "$cc" "$plc") e8=$(tl_err "$cck" "$plc") e9=$(tl_err "$nn" "$pln") e10=$(tl_err "$nnk" "$pln")
	E_DEF+=("$e1" "$e4" "$e7" "$e9") E_CAL+=("$e3" "$e6" "$e8" "$e10") E_PAU+=("$e2" "$e5")
	# against both uncaptured references of a mode at once (their mean)
	twc=$(awk -v a="$plc" -v b="$pac" 'BEGIN { print (a + b) / 2 }') twn=$(awk -v a="$pln" -v b="$pan" 'BEGIN { print (a + b) / 2 }')
	E_TWO+=("$(tl_err "$a" "$twc")" "$(tl_err "$r" "$twn")" "$(tl_err "$cc" "$twc")" "$(tl_err "$nn" "$twn")")
	# the mode's share against the plain processes, by what bounds the replay
	for x in "$e1 $fa" "$e4 $fr" "$e7 $fc" "$e9 $fn"; do
		set -- $x
		if awk -v f="$2" 'BEGIN { exit !(f >= 0.9) }'; then E_GPU+=("$1"); else E_HOST+=("$1"); fi
	done
	echo "| $m | $b | $(f1 "$a") | $e1 | $e2 | $e3 | $(f1 "$r") | $e4 | $e5 | $e6 | $e7 | $e8 | $e9 | $e10 |"
done
echo
echo "- mode's share, against the plain processes: $(tl_summary "${E_DEF[@]}")"
echo "- measured share (calibrate=1), against the plain processes: $(tl_summary "${E_CAL[@]}")"
echo "- mode's share, the two directions against the other capture's paused steps: $(tl_summary "${E_PAU[@]}")"
echo "- mode's share, against the plain processes, GPU-bound replays (GPU busy 90% or more of the step): $(tl_summary "${E_GPU[@]}")"
echo "- the same, host-bound replays: $(tl_summary "${E_HOST[@]}")"
echo "- mode's share, against the mean of a mode's two uncaptured references (the plain process, the capture's paused steps): $(tl_summary "${E_TWO[@]}")"
