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
# difference in percentage points, and which program order the real pair
# ran in (after-forward, the captured program's, where both modes were
# measured so; else before-forward, see traces/measurements/compile/README.md);
# the real eager peak in the captured program's order against the capture's
# replay; the change of peak reserved; the GPU time of one step's kernels
# (real: torch.profiler in each mode; predicted: the model's); the real and
# predicted change of step time (eager and compiled of one device call) and
# the error of that change. Then the summary the README quotes. Needs jq.
# Step times come from one process that ran both (compile_peak.py --modes
# pair): a host's speed varies up to 2x between processes, more than most
# changes torch.compile makes.
set -eu
. "$(dirname "$0")/median_awk.sh"
G=${1:-build/gpumemsim}
root=$(cd "$(dirname "$0")/.." && pwd)
M=$root/traces/measurements/compile
# the captures: taken alone on the host, the batch-32 ones on the host and
# in the device call of the step times they are compared with (call 8;
# CAPTURES=traces/torch/samehost9: call 9, a third host)
T=${CAPTURES:-$root/traces/torch/samehost}
# the device call whose pair runs were timed on the captures' host (the
# folder's pair_call); a batch without a pair run in that call takes the
# latest one
pc=$(cat "$T/pair_call" 2> /dev/null || echo null)
die() { echo "compile_accuracy.sh: $*" >&2; exit 1; }
[ -x "$G" ] || die "$G: not an executable (run make)"
command -v jq > /dev/null || die "needs jq"
ls "$M"/*.json > /dev/null 2>&1 || die "$M: no measurements"

rows=$(mktemp)
pairf=$(mktemp)
trap 'rm -f "$rows" "$pairf"' EXIT
printf '| model | batch | order | peak allocated eager -> compiled (real) | real change | predicted change | error | capture vs real eager | reserved change real / predicted | GPU per step eager -> compiled (real) | predicted | step eager -> compiled (real) | real change | predicted change | error |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n'
for j in "$M"/*.json; do
	model=$(jq -r '.model // empty' "$j")
	[ -n "$model" ] || continue  # launch_cost-N.json
	for b in $(jq -r '[.runs[] | select(.error == null) | .batch] | unique | .[]' "$j"); do
		tr=$T/torch-$model-b$b.trace.gz
		[ -r "$tr" ] || continue
		# memory: the latest valid pair of one program order, the captured
		# program's (after-forward) first; step time: the latest "pair" run
		# (eager and compiled alternating in one process), else the latest
		# call with both
		jq -c --argjson b "$b" --argjson pc "$pc" '
			[.runs[] | select(.batch == $b and .error == null)] as $r |
			def latest(o; m): [$r[] | select(.zero_grad == o and .mode == m and .peak_invalid == null)] | max_by(.call);
			(if latest("after-forward"; "compile") then "after-forward" else "before-forward" end) as $o |
			([$r[] | select(.mode == "compile") | .call] | max) as $sc |
			([$r[] | select(.mode == "pair")]) as $prs |
			(([$prs[] | select(.call == $pc)] | max_by(.call)) // ($prs | max_by(.call))) as $pr |
			{order: $o, e: latest($o; "eager"), c: latest($o; "compile"),
			 cap: latest($o; "eager"), other: latest(if $o == "after-forward" then "before-forward" else "after-forward" end; "eager"),
			 se: (if $pr then $pr.pair.eager else [$r[] | select(.mode == "eager" and .call == $sc)][0] end),
			 sc: (if $pr then $pr.pair.compile else [$r[] | select(.mode == "compile" and .call == $sc)][0] end)}' "$j" > "$pairf"
		[ "$(jq -r '.e != null and .c != null' "$pairf")" = true ] || continue
		# the prediction is for the measured program: its zero_grad order
		zg=as-captured other=before-forward
		if [ "$(jq -r .order "$pairf")" = before-forward ]; then zg=before-forward other=as-captured; fi
		p=$("$G" whatif compile "$tr" --zero-grad $zg --json) || die "whatif compile $tr failed"
		# the eager peak in the other order, against the capture transformed so
		po=$("$G" whatif compile "$tr" --zero-grad $other --no-timing --json) || die "whatif compile $tr failed"
		jq -n -r --slurpfile q "$pairf" --argjson p "$p" --argjson po "$po" --arg m "$model" --argjson b "$b" '
			$q[0] as $q |
			def pct(a; b): 100 * (a / b - 1);
			def med(v): (v | sort) as $s | $s[($s | length) / 2 | floor];
			def mib(x): (x / 1048576 | round | tostring) + " MiB";
			def r1(x): (x * 10 | round / 10 | tostring);
			def r2(x): (x * 100 | round / 100 | tostring);
			$q.e as $e | $q.c as $c |
			pct($c.peak_allocated; $e.peak_allocated) as $rc |
			pct($p.peak_allocated_after; $p.peak_allocated_before) as $pc |
			(med($q.se.step_s) * 1000) as $es | (med($q.sc.step_s) * 1000) as $cs |
			pct($cs; $es) as $rt |
			(if $p.step_time_before_ns then pct($p.step_time_after_ns; $p.step_time_before_ns) else null end) as $pt |
			[$m, ($b | tostring), $q.order,
			 mib($e.peak_allocated) + " -> " + mib($c.peak_allocated), r2($rc) + "%",
			 r2($pc) + "%", r2(($pc - $rc) | fabs) + " pp",
			 (if $q.cap then r2(pct($p.peak_allocated_before; $q.cap.peak_allocated)) + "%" else "-" end),
			 (r1(pct($c.peak_reserved; $e.peak_reserved)) + "% / " + r1(pct($p.peak_reserved_after; $p.peak_reserved_before)) + "%"),
			 (if $q.se.profile and $q.sc.profile then (r1($q.se.profile.gpu_us / 1000) + " -> " + r1($q.sc.profile.gpu_us / 1000) + " ms") else "-" end),
			 (if $p.gpu_time_per_step_before_ns then (r1($p.gpu_time_per_step_before_ns / 1e6) + " -> " + r1($p.gpu_time_per_step_after_ns / 1e6) + " ms") else "-" end),
			 (r1($es) + " -> " + r1($cs) + " ms"), r1($rt) + "%",
			 (if $pt == null then "-" else r1($pt) + "%" end),
			 (if $pt == null then "-" else r1(($pt - $rt) | fabs) + " pp" end),
			 (($pc - $rc) | fabs), (if $pt == null then -1 else (($pt - $rt) | fabs) end),
			 (if $q.cap then pct($p.peak_allocated_before; $q.cap.peak_allocated) | fabs else -1 end),
			 (if $pt == null then -1 else pct($p.step_time_after_ns / 1e6; $cs) | fabs end),
			 (if $pt == null then -1 elif $p.host_launch_time_min_ns <= med($q.sc.host_s) * 1e9 then 1 else 0 end),
			 (if $q.other then pct($po.peak_allocated_before; $q.other.peak_allocated) | fabs else -1 end),
			 # launch-bound: the launch time is the step and the GPU is idle a fifth of it
			 (if $pt == null or ($q.sc.profile | not) then -1
			  else ((med($q.sc.host_s) >= 0.9 * med($q.sc.step_s) and
				 $q.sc.profile.gpu_us / 1e6 < 0.8 * med($q.sc.step_s)) == $p.host_bound | if . then 1 else 0 end) end),
			 # the eager step itself: the timeline model of issue 15 (caching
			 # on, from the no-caching capture) against the eager step of the pair
			 (if $p.step_time_before_ns then pct($p.step_time_before_ns / 1e6; $es) else "none" end)] |
			"| " + (.[0:15] | join(" | ")) + " |\t" + (.[15:23] | map(tostring) | join("\t"))' |
			tee -a "$rows" | cut -f1
	done
done
[ -s "$rows" ] || die "no model has both a measurement and a capture"
echo
awk -F'\t' "$AWK_MEDIAN"'
	{ m[NR] = $2; if ($2 > mx) mx = $2; if ($2 <= 2) ok++; if ($3 >= 0) { t[++nt] = $3; if ($3 > tx) tx = $3; if ($3 < 15) tok++ }
	  if ($4 >= 0) { nc++; if ($4 > cx) cx = $4 }
	  if ($5 >= 0) { s[++ns] = $5; if ($5 > sx) sx = $5 }
	  if ($6 >= 0) { nh++; hok += $6 }
	  if ($7 >= 0) { no++; if ($7 > ox) ox = $7 }
	  if ($8 >= 0) { nb++; bok += $8 }
	  if ($9 != "none") { e = $9 < 0 ? -$9 : $9; ea[++ne] = e; if (e < 10) eok++
		if (ne == 1 || $9 < elo) elo = $9; if (ne == 1 || $9 > ehi) ehi = $9 } }
	END {
		printf "peak allocated change: %d of %d pairs within 2 percentage points; error median %.2f pp, max %.2f pp\n", ok, NR, median(m, NR), mx
		if (nc) printf "eager peak of the capture vs the same program measured: %d pairs, max %.2f%%; in the other zero_grad order: %d, max %.2f%%\n", nc, cx, no, ox
		if (ns) printf "compiled step time itself (not the change): error median %.1f%%, max %.1f%%\n", median(s, ns), sx
		if (nh) printf "host launch lower bound at or below the real compiled step'"'"'s launch time: %d of %d\n", hok, nh
		if (nb) printf "host_bound says whether the real compiled step was launch-bound: %d of %d\n", bok, nb
		if (nt) printf "step time change: %d of %d within 15 percentage points; error median %.1f pp, max %.1f pp\n", tok, nt, median(t, nt), tx
		if (ne) printf "eager step (the timeline model from the no-caching capture) vs the pair'"'"'s eager step: %d of %d within 10%%; |error| median %.1f%%, from %+.1f%% to %+.1f%%\n", eok, ne, median(ea, ne), elo, ehi
	}' "$rows"
