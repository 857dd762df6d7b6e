#!/usr/bin/env bash
# capture_own_time.sh: how much of a capture's host time is the injection
# library's own work, from the `p` records' own_ns/own_cbs fields
# (traces/FORMAT.md; written by captures since session 8), per step after
# the warm-up: the captured step, the library's own time, the kept calls
# that carry it, own time per call.
#
#   scripts/capture_own_time.sh [-w WARMUP] TRACE...     (WARMUP: 5)
#
# Prints TSV on stdout: trace, steps, step_ms, own_ms, own_share_pct,
# calls, own_ns_per_call. A trace without the fields prints "-" for them.
set -u
G=${GPUMEMSIM:-build/gpumemsim}
w=5
if [ "${1:-}" = -w ]; then w=$2; shift 2; fi
[ $# -ge 1 ] || { echo "usage: $0 [-w WARMUP] TRACE..." >&2; exit 2; }
printf 'trace\tsteps\tstep_ms\town_ms\town_share_pct\tcalls\town_ns_per_call\n'
for t in "$@"; do
	"$G" trace cat "$t" | awk -v n="$(basename "$t" .trace.gz)" -v w="$w" '
		$1 == "r" && $4 == "\"step" && $6 == 0 { k = $5; gsub(/[^0-9]/, "", k); if (k + 0 >= w) { s[++ns] = $2; e[ns] = $3 } }
		$1 == "p" { np++; ps[np] = $2; own[np] = NF >= 7 ? $6 : -1 }
		END {
			for (j = 1; j <= ns; j++) wall += e[j] - s[j]
			for (i = 1; i <= np; i++) {
				for (j = 1; j <= ns; j++) if (ps[i] >= s[j] && ps[i] <= e[j]) break
				if (j > ns || own[i] < 0) continue
				o += own[i]; c++
			}
			if (!ns) { printf "%s\t0\t-\t-\t-\t-\t-\n", n; exit }
			if (!c) { printf "%s\t%d\t%.2f\t-\t-\t-\t-\n", n, ns, wall / ns / 1e6; exit }
			printf "%s\t%d\t%.2f\t%.3f\t%.1f\t%d\t%.0f\n", n, ns, wall / ns / 1e6, o / ns / 1e6,
				100 * o / wall, c / ns, o / c }' || exit 1
done
