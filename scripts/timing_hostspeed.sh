#!/usr/bin/env bash
# timing_hostspeed.sh: the host's own time per training step, uncaptured and
# captured, by model and batch (docs/timing.md, "Host speed and batch size").
#
#   scripts/timing_hostspeed.sh [DIR]     (default traces/timing/hostspeed)
#
# DIR holds train_torch.py JSONs (MODEL-bB-plain-caching.json,
# MODEL-bB-cap-caching.json) with `host_s`: each step's time from its start
# to its last launch, before the final synchronize. With the caching
# allocator nothing in between waits for the GPU, so it is the host's speed
# whether the step is host- or GPU-bound. Prints, per model and batch, the
# median over steps 3-7 and 8-12 (the capture's paused steps) of the step
# and of its host time (ms). Markdown; needs jq; deterministic.
set -eu
DIR=${1:-traces/timing/hostspeed}
[ -d "$DIR" ] || { echo "timing_hostspeed.sh: no such directory: $DIR" >&2; exit 2; }
command -v jq > /dev/null || { echo "timing_hostspeed.sh: needs jq" >&2; exit 2; }
# the median of .KEY[a:b] in ms
med() { jq -r --arg k "$2" --argjson a "$3" --argjson b "$4" \
	'.[$k][$a:$b] | sort | if length == 0 then "-" else (if length % 2 == 1 then .[length/2|floor] else (.[length/2-1] + .[length/2]) / 2 end) * 1000 * 10 | round / 10 end' "$1"; }
echo "| model | batch | plain: step | plain: host | captured: step | captured: host | paused: step | paused: host | host captured / paused |"
echo "|---|---|---|---|---|---|---|---|---|"
for p in "$DIR"/*-plain-caching.json; do
	stem=$(basename "$p" -plain-caching.json)
	c=$DIR/$stem-cap-caching.json
	[ -f "$c" ] || continue
	m=${stem%-b*} b=${stem##*-b}
	ch=$(med "$c" host_s 3 8) ph=$(med "$c" host_s 8 13)
	printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$m" "$b" \
		"$(med "$p" step_s 3 13)" "$(med "$p" host_s 3 13)" \
		"$(med "$c" step_s 3 8)" "$ch" "$(med "$c" step_s 8 13)" "$ph" \
		"$(awk -v a="$ch" -v b="$ph" 'BEGIN { printf "%.2f", a / b }')"
done | sort -t'|' -k2,2 -k3,3n
