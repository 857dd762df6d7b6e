#!/usr/bin/env bash
# compile_accuracy.sh: how well `gpumemsim whatif compile` predicts what
# torch.compile does, against the H200 measurements of
# capture/torch/compile_peak.py (traces/measurements/compile/MODEL.json:
# eager and compiled, caching allocator on, each measured alone on the GPU)
# and the eager captures of the same models and batch sizes
# (traces/torch/torch-MODEL-bBATCH.trace.gz, capture/torch/recipe.sh).
#
#   scripts/compile_accuracy.sh [GPUMEMSIM]      (default build/gpumemsim)
#
# Prints one Markdown table: per model and batch, the real change of peak
# allocated (steady state, after warm-up) and the predicted one, their
# difference in percentage points; the same change of peak reserved; the GPU time of one step's kernels
# (real: torch.profiler in each mode; predicted: the model's); the real and
# predicted change of step time and the error of that change. Then the
# summary the README quotes. Needs jq.
set -eu
G=${1:-build/gpumemsim}
root=$(cd "$(dirname "$0")/.." && pwd)
M=$root/traces/measurements/compile
T=$root/traces/torch
die() { echo "compile_accuracy.sh: $*" >&2; exit 1; }
[ -x "$G" ] || die "$G: not an executable (run make)"
command -v jq > /dev/null || die "needs jq"
ls "$M"/*.json > /dev/null 2>&1 || die "$M: no measurements"

rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
printf '| model | batch | peak allocated eager -> compiled (real) | real change | predicted change | error | reserved change real / predicted | GPU per step eager -> compiled (real) | predicted | step eager -> compiled (real) | real change | predicted change | error |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|---|---|\n'
for j in "$M"/*.json; do
	model=$(jq -r .model "$j")
	for b in $(jq -r '[.runs[] | select(.error == null) | .batch] | unique | .[]' "$j"); do
		e=$(jq -c --argjson b "$b" '[.runs[] | select(.batch == $b and .mode == "eager" and .error == null)][0]' "$j")
		c=$(jq -c --argjson b "$b" '[.runs[] | select(.batch == $b and .mode == "compile" and .error == null)][0]' "$j")
		tr=$T/torch-$model-b$b.trace.gz
		[ "$e" != null ] && [ "$c" != null ] && [ -r "$tr" ] || continue
		p=$("$G" whatif compile "$tr" --json) || die "whatif compile $tr failed"
		jq -n -r --argjson e "$e" --argjson c "$c" --argjson p "$p" --arg m "$model" --argjson b "$b" '
			def pct(a; b): 100 * (a / b - 1);
			def med(v): (v | sort) as $s | $s[($s | length) / 2 | floor];
			def mib(x): (x / 1048576 | round | tostring) + " MiB";
			($e.peak_allocated) as $ea | ($c.peak_allocated) as $ca |
			pct($ca; $ea) as $rc |
			pct($p.peak_allocated_after; $p.peak_allocated_before) as $pc |
			(med($e.step_s) * 1000) as $es | (med($c.step_s) * 1000) as $cs |
			pct($cs; $es) as $rt |
			(if $p.step_time_before_ns then pct($p.step_time_after_ns; $p.step_time_before_ns) else null end) as $pt |
			[$m, ($b | tostring),
			 mib($ea) + " -> " + mib($ca), ($rc * 100 | round / 100 | tostring) + "%",
			 ($pc * 100 | round / 100 | tostring) + "%", (($pc - $rc) | fabs * 100 | round / 100 | tostring) + " pp",
			 ((pct($c.peak_reserved; $e.peak_reserved) * 10 | round / 10 | tostring) + "% / " + (pct($p.peak_reserved_after; $p.peak_reserved_before) * 10 | round / 10 | tostring) + "%"),
			 (if $e.profile and $c.profile then (($e.profile.gpu_us / 100 | round / 10 | tostring) + " -> " + ($c.profile.gpu_us / 100 | round / 10 | tostring) + " ms") else "-" end),
			 (if $p.gpu_time_per_step_before_ns then (($p.gpu_time_per_step_before_ns / 1e5 | round / 10 | tostring) + " -> " + ($p.gpu_time_per_step_after_ns / 1e5 | round / 10 | tostring) + " ms") else "-" end),
			 (($es * 10 | round / 10 | tostring) + " -> " + ($cs * 10 | round / 10 | tostring) + " ms"),
			 ($rt * 10 | round / 10 | tostring) + "%",
			 (if $pt == null then "-" else ($pt * 10 | round / 10 | tostring) + "%" end),
			 (if $pt == null then "-" else (($pt - $rt) | fabs * 10 | round / 10 | tostring) + " pp" end),
			 (($pc - $rc) | fabs), (if $pt == null then -1 else (($pt - $rt) | fabs) end)] |
			"| " + (.[0:13] | join(" | ")) + " |\t" + (.[13] | tostring) + "\t" + (.[14] | tostring)' |
			tee -a "$rows" | cut -f1
	done
done
[ -s "$rows" ] || die "no model has both a measurement and a capture"
echo
awk -F'\t' '
	{ m[NR] = $2; if ($2 > mx) mx = $2; if ($2 <= 2) ok++; if ($3 >= 0) { t[++nt] = $3; if ($3 > tx) tx = $3; if ($3 < 15) tok++ } }
	function median(a, n,   i, j, x) { for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j > 0 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
	END {
		printf "peak allocated change: %d of %d pairs within 2 percentage points; error median %.2f pp, max %.2f pp\n", ok, NR, median(m, NR), mx
		if (nt) printf "step time change: %d of %d within 15 percentage points; error median %.1f pp, max %.1f pp\n", tok, nt, median(t, nt), tx
	}' "$rows"
