#!/bin/sh
# overhead.sh: capture overhead on a PyTorch training step (run on the GPU
# host after `make capture`, alone on the GPU). Times the median ResNet-50
# training step (caching allocator on) without capture and under each
# capture configuration, in REPEATS interleaved rounds (one run of every
# configuration per round, so a slow period of the host hits all of them),
# and prints each configuration's median over the rounds and its ratio to
# the uncaptured median.
#
# usage: sh capture/overhead.sh [BUILD_DIR] [BATCH] [STEPS] [REPEATS]
# CONFIGS (env): which captures, ';'-separated capture options, "plain" =
# no capture. Default: plain; the default capture; --no-links; --api
# activity (CUPTI records every API call, the old way); --api off
# --no-links (kernels, memory, syncs, NVTX only); the same without kernels
# (what recording kernels costs). A configuration may begin with
# VAR=VALUE words: they are exported for that configuration's runs only,
# the rest are its capture options, e.g. "GPUMEMSIM_CAPTURE_SYNCS=callbacks"
# (the default capture with syncs from the sync calls' callbacks),
# "GPUMEMSIM_CAPTURE_SYNCS=activity --no-links", or "VAR=VALUE plain" (no
# capture, with VAR set).
B=${1:-build}
BATCH=${2:-32}
STEPS=${3:-20}
REPEATS=${4:-3}
CONFIGS=${CONFIGS:-"plain;default;--no-links;--api activity;--api off --no-links;--api off --no-links --record memory,syncs,nvtx"}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
T=${TMPDIR:-/tmp}/gpumemsim-overhead.$$
mkdir -p "$T" || exit 1
ARGS="$HERE/tests/torch_steps.py --model resnet50 --batch $BATCH --steps $STEPS --warmup 5"

one() { # config -> median step ms on stdout
	(
		# leading VAR=VALUE words: exported in this subshell, for this run
		set -f
		# shellcheck disable=SC2086 # the configuration is a list of words
		set -- $1
		set +f
		while [ $# -gt 0 ]; do
			case ${1%%=*} in
			"$1" | "" | [!A-Za-z_]* | *[!A-Za-z0-9_]*) break ;;
			esac
			export "${1?}" || exit 1
			shift
		done
		case "$*" in
		plain) $PY $ARGS 2>"$T/err" ;;
		"" | default) "$B/gpumemsim" capture -o "$T/t.trace.gz" -- $PY $ARGS 2>"$T/err" ;;
		*) "$B/gpumemsim" capture -o "$T/t.trace.gz" "$@" -- $PY $ARGS 2>"$T/err" ;;
		esac
	) | awk '/^step_ms/ {print $2}'
}

r=1
while [ "$r" -le "$REPEATS" ]; do
	echo "$CONFIGS" | tr ';' '\n' | while read -r c; do
		ms=$(one "$c")
		if [ -z "$ms" ]; then echo "overhead: '$c' failed:" >&2; cat "$T/err" >&2; exit 1; fi
		printf '%s\t%s\t%s\n' "$r" "$c" "$ms" >>"$T/runs.tsv"
	done || exit 1
	r=$((r + 1))
done
echo "resnet50 batch $BATCH, median step of $STEPS (after 5 warm-up), $REPEATS interleaved rounds (ms):"
awk -F'\t' '
{ n[$2]++; v[$2, n[$2]] = $3; if (!($2 in seen)) { seen[$2] = 1; order[++k] = $2 } }
function med(c,   i, j, t, a, m) {
	m = n[c]; for (i = 1; i <= m; i++) a[i] = v[c, i]
	for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
	return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
END {
	base = med("plain")
	for (i = 1; i <= k; i++) {
		c = order[i]; runs = ""
		for (j = 1; j <= n[c]; j++) runs = runs (j > 1 ? " " : "") v[c, j]
		printf "%-28s median %8.3f  x%.3f  (runs: %s)\n", c, med(c), med(c) / base, runs
	}
}' "$T/runs.tsv"
rm -rf "$T"
