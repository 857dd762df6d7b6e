# timing_lib.sh: shell helpers shared by scripts/timing_accuracy.sh,
# scripts/timing_paused.sh and scripts/cnn_timing.sh (issues 6 and 15,
# docs/timing.md): a replay's mean step, relative errors, their median and
# max, and the bisection that fits one cost knob to a measured step time.
# Sourced, not run; sources median_awk.sh.

. "$(dirname "${BASH_SOURCE[0]:-$0}")/median_awk.sh"

# err PREDICTED MEASURED: signed relative error, "+1.2%"; "-" when either is "-"
tl_err() {
	if [ "$1" = - ] || [ "$2" = - ]; then echo -; return; fi
	awk -v p="$1" -v m="$2" 'BEGIN { printf "%+.1f%%", (p - m) / m * 100 }'
}

# tl_pred_busy GPUMEMSIM WARMUP TRACE POLICY KNOBS [ARGS...]: the mean step
# (ms) after WARMUP steps of `run TRACE --policy POLICY --cost KNOBS ARGS
# --json` (0 when there are none) and, after a space, the GPU's busy share
# of those steps (`steps_gpu_busy_ns`; 0.90 or more: the replay's step is
# GPU-bound, docs/timing.md "GPU-bound and host-bound"); fails when jq
# does or the run printed nothing (a run that failed)
tl_pred_busy() {
	local g=$1 w=$2 t=$3 p=$4 k=$5 out
	shift 5
	out=$("$g" run "$t" --policy "$p" --cost "$k" "$@" --no-db --json |
		jq -r --argjson w "$w" '(.steps_ns[$w:] | add // 0) as $s | (.steps_gpu_busy_ns[$w:] | add // 0) as $g
			| if $s == 0 then "0 0" else "\($s / (.steps_ns[$w:] | length) / 1e6) \($g / $s)" end') || return
	[ -n "$out" ] || return 1
	echo "$out"
}

# tl_pred: tl_pred_busy's arguments; the mean step alone, with its status
tl_pred() {
	local out
	out=$(tl_pred_busy "$@") || return
	echo "${out%% *}"
}

# The host's speed at each step (train_torch.py's step_probe_us, a short
# loop timed between steps; docs/timing.md, "Fast and slow host periods"):
# tl_probe_limit FACTOR JSON...: FACTOR times the fastest probe in the
# JSONs (0 when none has probes)
tl_probe_limit() {
	local f=$1
	shift
	jq -s '[.[].step_probe_us[]?] | min // 0' "$@" | awk -v f="$f" '{ print $1 * f }'
}
# tl_fast_mask JSON LIMIT: one 0/1 a step, 1 when both probes around it are
# under LIMIT (step 0 has no probe before it: never fast; no probes: empty)
tl_fast_mask() {
	jq -r --argjson lim "$2" '(.step_probe_us // []) as $p
		| [range(0; ($p | length)) | if . > 0 and $p[. - 1] <= $lim and $p[.] <= $lim then 1 else 0 end]
		| map(tostring) | join(" ")' "$1"
}
# tl_steps_ms JSON: a train_torch JSON's step times (ms), space-separated
tl_steps_ms() { jq -r '.step_s | map(. * 1000 | tostring) | join(" ")' "$1"; }
# tl_mean_masked VALUES MASK A B: the mean of the values in [A, B) whose
# mask is 1 ("all" as MASK: every one); "-" with fewer than 2
tl_mean_masked() {
	awk -v v="$1" -v m="$2" -v a="$3" -v b="$4" 'BEGIN {
		n = split(v, x, " "); if (m != "all") split(m, f, " ")
		for (i = a; i < b && i < n; i++) if (m == "all" || f[i + 1] == 1) { s += x[i + 1]; k++ }
		if (k < 2) print "-"; else printf "%.3f", s / k }'
}

# tl_summary ERRORS...: "median |error| M%, max N% (K figures)" of the
# signed errors given ("+1.2%", "-" ignored)
tl_summary() {
	printf '%s\n' "$@" | tr -d '%+' | awk "$AWK_MEDIAN"'
		$1 != "-" && $1 != "" { v[++n] = ($1 < 0 ? -$1 : $1) }
		END {
			if (!n) { print "no figures"; exit }
			m = median(v, n)
			printf "median |error| %.1f%%, max %.1f%% (%d figures)\n", m, v[n], n
		}'
}

# tl_bisect FN TARGET SENSE LO HI STEPS DIGITS: the X in [LO, HI] (STEPS
# halvings, mid points rounded to DIGITS decimals) at which `FN X` (a shell
# function printing a step time) hits TARGET. SENSE: up when FN grows with
# X, down when it shrinks. Prints the final interval, "LO HI".
tl_bisect() {
	local fn=$1 target=$2 sense=$3 lo=$4 hi=$5 n=$6 d=$7 mid v i
	for i in $(seq 1 "$n"); do
		mid=$(awk -v a="$lo" -v b="$hi" -v d="$d" 'BEGIN { printf "%." d "f", (a + b) / 2 }')
		v=$("$fn" "$mid")
		if awk -v v="$v" -v t="$target" -v s="$sense" 'BEGIN { exit !(s == "up" ? v < t : v > t) }'
		then lo=$mid; else hi=$mid; fi
	done
	echo "$lo $hi"
}

# tl_mid "LO HI" BOUND_LO BOUND_HI: the interval's middle, 4 decimals, with
# " !" when it sits on a search bound (the target is out of reach)
tl_mid() {
	local lo hi
	read -r lo hi <<<"$1"
	awk -v a="$lo" -v b="$hi" -v l="$2" -v h="$3" 'BEGIN {
		x = (a + b) / 2; e = (h - l) / 1000
		printf "%.4f%s", x, (x < l + e || x > h - e) ? " !" : "" }'
}
