#!/usr/bin/env bash
# timing_accuracy.sh: how well `run --timing` predicts step times, against
# the step times measured on the H200 (issue 6; docs/timing.md, "Validation").
#
#   scripts/timing_accuracy.sh [GPUMEMSIM [TRACES_DIR [QUIET_DIR]]]
#
# QUIET_DIR (default TRACES_DIR/torch/quiet) holds the no-caching captures
# torch-resnet50-bB*.trace.gz with their *.capture.json, and the uncaptured
# step times of the same host: steps.tsv (model batch conf mean_step_ms,
# conf caching or nocache) or resnet50-bB-{nocache,caching}-plain.json;
# without either, TRACES_DIR/measurements/steps. Given explicitly, only
# the quiet-capture section is printed for it (e.g. traces/torch/quiet2,
# traces/torch/quiet2/nosource).
#
# Prints Markdown on stdout. Needs jq and awk. Deterministic: same traces,
# same binary, same tables.
#
# Headline: the QUIET captures (traces/torch/quiet: ResNet-50 b32/b64, each
# captured alone on an idle H200, PYTORCH_NO_CUDA_MEMORY_CACHING=1, with
# empty_cache markers, 5 steps of which 2 warm-up). Their own captured step
# times (steps 3-5, *.capture.json) check the replay's consistency (round
# trip, no correction: host_scale is 1 by construction). The capture's own
# cost (CUPTI) is then taken out by ONE parameter fitted on ONE batch's
# uncaptured no-caching step time (measurements/steps/*-nocache-plain) and
# tested on the other batch (out of sample) and on the caching-on step
# (policy pytorch, *-caching-plain, never used by a fit). Three forms:
#   O  api_overhead_us: per kept API call and per device call;
#   S  host_scale: every recorded host interval and the device-call costs;
#   G  host_scale with scale_calls=0: host gaps and kept calls only, the
#      driver's cudaMalloc/cudaFree costs stay as fitted.
# Secondary: the contended captures (traces/torch, the old headline) and
# the CUDA C CNN captures against their own recorded NVTX steps.
set -u
. "$(dirname "$0")/timing_lib.sh"
G=${1:-build/gpumemsim}
T=${2:-traces}
M=$T/measurements/steps
Q=${3:-$T/torch/quiet}
ONLY_QUIET=${3:+1}

die() { echo "timing_accuracy.sh: $*" >&2; exit 1; }
[ -x "$G" ] || die "$G: not an executable (run make)"
command -v jq >/dev/null || die "needs jq"

# mean step time (ms, 3 decimals) of the run JSON on stdin, over the steps
# after the first WARM (default 1)
mean_steps() {
	jq -r --argjson w "${1:-1}" '.steps_ns[$w:] | add / length / 1e6 | . * 1000 | round / 1000'
}
# step time of TRACE under POLICY with cost KNOBS, after WARM steps
step() {
	local out
	out=$("$G" run "$1" --policy "$2" --cost "$3" --no-db --json) || die "run $1 $2 $3 failed"
	mean_steps "${4:-1}" <<<"$out"
}
# recorded step time (ms) of TRACE: the plain replay keeps recorded times
recorded() {
	local out
	out=$("$G" run "$1" --policy cuda_malloc --no-db --json) || die "run $1 failed"
	mean_steps "${2:-1}" <<<"$out"
}
jms() { jq -r '.mean_step_s * 1000 | . * 1000 | round / 1000' "$1"; }
measured() { jms "$M/$1"; }
# qtrace B / qcap B: the quiet folder's capture of batch B and its capture.json
qtrace() { local f; for f in "$Q"/torch-resnet50-b"$1".trace.gz "$Q"/torch-resnet50-b"$1"-*.trace.gz; do [ -r "$f" ] && { echo "$f"; return; }; done; echo "$Q/torch-resnet50-b$1.trace.gz"; }
qcap() { local t; t=$(qtrace "$1"); echo "${t%.trace.gz}.capture.json"; }
# qmeasured B CONF (nocache, caching): the uncaptured step (ms) next to
# the quiet captures (steps.tsv, then *-plain.json), else in $M
qmeasured() {
	if [ -r "$Q/steps.tsv" ]; then
		awk -F'\t' -v b="$1" -v c="$2" '!/^#/ && $1 == "resnet50" && $2 == b && $3 == c { v = $4 }
			END { if (v == "") exit 1; printf "%.3f\n", v }' "$Q/steps.tsv" && return
	fi
	if [ -r "$Q/resnet50-b$1-$2-plain.json" ]; then jms "$Q/resnet50-b$1-$2-plain.json"; return; fi
	measured "resnet50-b$1-$2-plain.json"
}
err() { tl_err "$@"; }

# bisect TRACE WARM TARGET KNOBS SENSE LO HI STEPS DIGITS: tl_bisect on
# cuda_malloc's step time of TRACE (steps after WARM) with cost KNOBS, '@'
# replaced by the parameter
bisect() {
	local tr=$1 w=$2 k=$4
	_ta_eval() { step "$tr" cuda_malloc "${k//@/$1}" "$w"; }
	tl_bisect _ta_eval "$3" "$5" "$6" "$7" "$8" "$9"
}

# the cost knobs of form F (o, s, g) with parameter X
knobs() {
	case $1 in
	o) echo "api_overhead_us=$2" ;;
	s) echo "host_scale=$2" ;;
	g) echo "host_scale=$2,scale_calls=0" ;;
	esac
}
# bisect the parameter of form F so that cuda_malloc's step time (steps
# after WARM) of TRACE hits TARGET; prints the value, with " !" when it sits
# on a bound (the target is out of the form's reach)
fitq() {
	local tr=$1 f=$2 target=$3 w=$4 lo hi
	# o: larger cuts more; s, g: larger is slower
	if [ "$f" = o ]; then
		read -r lo hi < <(bisect "$tr" "$w" "$target" "$(knobs o @)" down 0 200 22 6)
	else
		read -r lo hi < <(bisect "$tr" "$w" "$target" "$(knobs "$f" @)" up 0.05 1.5 22 6)
	fi
	awk -v a="$lo" -v b="$hi" -v f="$f" 'BEGIN {
		x = (a + b) / 2; bound = (f == "o") ? (x > 199.9) : (x < 0.0501 || x > 1.4999)
		printf "%.4f%s", x, bound ? " !" : "" }'
}

# ------------------------------------------------------------ quiet captures
declare -A QW QCAP QREC QRT PLAIN CACHE FP
for b in 32 64; do
	tr=$(qtrace "$b")
	cj=$(qcap "$b")
	[ -r "$tr" ] || die "$tr: missing"
	[ -r "$cj" ] || die "$cj: missing"
	QW[$b]=$(jq -r '.warmup' "$cj")
	QCAP[$b]=$(jms "$cj")
	QREC[$b]=$(recorded "$tr" "${QW[$b]}")
	QRT[$b]=$(step "$tr" cuda_malloc "" "${QW[$b]}")
	PLAIN[$b]=$(qmeasured "$b" nocache)
	CACHE[$b]=$(qmeasured "$b" caching)
done

echo "## ResNet-50, quiet captures ($Q)"
echo
echo "Steps after the capture's warm-up (steps 3-5). Measured: the capture's own"
if [ -r "$Q/steps.tsv" ]; then msrc="\`$Q/steps.tsv\` (the captures' host)"
elif [ -r "$Q/resnet50-b32-nocache-plain.json" ]; then msrc="\`$Q/resnet50-bB-{nocache,caching}-plain.json\` (the captures' host)"
else msrc="\`$M/resnet50-bB-{nocache,caching}-plain.json\`"; fi
echo "step times (*.capture.json) and, uncaptured on an idle H200, $msrc."
echo
echo "### Round trip (cuda_malloc, no correction)"
echo
echo "| batch | captured (measured) | trace's own steps (recorded) | round trip, predicted | error | earlier quiet capture, no trace | fitted cudaMalloc / cudaFree, small |"
echo "|---|---|---|---|---|---|---|"
for b in 32 64; do
	fc=$("$G" run "$(qtrace "$b")" --policy cuda_malloc --timing --no-db --json |
		jq -r '.timing | "\(.malloc_us * 100 | round / 100) / \(.free_us * 100 | round / 100) us"')
	echo "| $b | ${QCAP[$b]} ms | ${QREC[$b]} ms | ${QRT[$b]} ms | $(err "${QRT[$b]}" "${QCAP[$b]}") | $([ -n "$ONLY_QUIET" ] && echo - || echo "$(measured resnet50-b$b-nocache-capture.json) ms") | $fc |"
done
echo
echo "### What the trace says about the capture's own cost (steps 3-5, per step)"
echo
echo "| batch | API records | of them cudaMalloc/cudaFree | launch, median | cudaMalloc, 10th percentile | host gaps between API records | GPU busy | (captured - uncaptured step) / API records |"
echo "|---|---|---|---|---|---|---|---|"
for b in 32 64; do
	tr=$(qtrace "$b")
	last=$(jq -r '.step_s[-1] * 1e9 | round' "$(qcap "$b")")
	"$G" trace cat "$tr" | awk -v w="${QW[$b]}" -v cap="${QCAP[$b]}" -v plain="${PLAIN[$b]}" -v b="$b" -v last="$last" '
	# times have 19 digits, more than a double holds exactly: split them
	function tt(x,   n, hi) { n = length(x); if (n <= 15) return x + 0; hi = substr(x, 1, n - 15) + 0
		if (base == "") base = hi; return (hi - base) * 1e15 + substr(x, n - 14) }
	function med(a, n,   i, j, t) { for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t } return n ? a[int((n + 1) / 2)] : 0 }
	$1 == "r" && $4 ~ /^"step/ { ns++; st[ns] = tt($2); next }
	{ line[NR] = $0 }
	END {
		# the last step has no next start: it lasts what the capture measured
		lo = st[w + 1]; hi = st[ns] + last; nsteps = ns - w
		for (i = 1; i <= NR; i++) {
			if (!(i in line)) continue
			split(line[i], f, " ")
			if (f[1] !~ /^[kcmp]$/) continue
			f[2] = tt(f[2]); f[3] = tt(f[3])
			if (f[2] < lo || f[2] >= hi) continue
			if (f[1] == "k" || f[1] == "c" || f[1] == "m") {
				if (f[2] > gend) { busy += (gend > gs ? gend - gs : 0); gs = f[2]; gend = f[3] }
				else if (f[3] > gend) gend = f[3]
			}
			if (f[1] != "p") continue
			np++; d = f[3] - f[2]
			if (f[4] == "\"cudaMalloc\"" || f[4] == "\"cudaFree\"") nm++
			if (f[4] == "\"cudaMalloc\"") mal[++nmal] = d
			if (f[4] ~ /Launch/) lau[++nl] = d
			if (pe && f[2] > pe) gap += f[2] - pe
			pe = f[3]
		}
		busy += gend - gs
		med(mal, nmal) # sorts it
		m10 = mal[int(nmal / 10) + 1]
		printf "| %s | %.0f | %.0f | %.1f us | %.2f us | %.1f ms | %.1f ms | %.1f us |\n", b, np / nsteps, nm / nsteps,
			med(lau, nl) / 1e3, m10 / 1e3, gap / nsteps / 1e6, busy / nsteps / 1e6,
			(cap - plain) * 1e3 / (np / nsteps)
	}'
done
echo
echo "### Capture overhead fitted on one batch (uncaptured no-caching step)"
echo
echo "| form | knob | fitted on b32 | fitted on b64 |"
echo "|---|---|---|---|"
for f in o s g; do
	for b in 32 64; do
		FP[$f$b]=$(fitq "$(qtrace "$b")" "$f" "${PLAIN[$b]}" "${QW[$b]}")
	done
	case $f in
	o) n="O (per API call)"; k="api_overhead_us" ;;
	s) n="S (all host time)"; k="host_scale" ;;
	g) n="G (host gaps and kept calls only)"; k="host_scale, scale_calls=0" ;;
	esac
	echo "| $n | $k | ${FP[${f}32]} | ${FP[${f}64]} |"
done
echo
echo "\" !\": on the search bound, the target is out of reach of the form."
echo
echo "| batch | what | measured | correction | sample | predicted | error |"
echo "|---|---|---|---|---|---|---|"
for b in 32 64; do
	tr=$(qtrace "$b")
	w=${QW[$b]}
	p=$(step "$tr" pytorch "" "$w")
	echo "| $b | (a) caching on, pytorch | ${CACHE[$b]} ms | none | - | $p ms | $(err "$p" "${CACHE[$b]}") |"
	echo "| $b | (b) no caching, cuda_malloc | ${PLAIN[$b]} ms | none | - | ${QRT[$b]} ms | $(err "${QRT[$b]}" "${PLAIN[$b]}") |"
	for f in o s g; do
		for fb in 32 64; do
			v=${FP[$f$fb]% !}
			k=$(knobs "$f" "$v")
			fu=$(tr a-z A-Z <<<"$f")
			for pol in pytorch cuda_malloc; do
				if [ $pol = pytorch ]; then what="(a) caching on, pytorch"; ms=${CACHE[$b]}; smp="out"
				else what="(b) no caching, cuda_malloc"; ms=${PLAIN[$b]}; smp=$([ "$fb" = "$b" ] && echo "in (fitted on it)" || echo out); fi
				p=$(step "$tr" "$pol" "$k" "$w")
				echo "| $b | $what | $ms ms | $fu of b$fb | $smp | $p ms | $(err "$p" "$ms") |"
			done
		done
	done
done
echo
echo "Transfer: everything fitted on b32 (G's host_scale and b32's fitted"
echo "cudaMalloc/cudaFree cost curves) replayed on the b64 trace:"
echo
echo "| batch | what | measured | correction | sample | predicted | error |"
echo "|---|---|---|---|---|---|---|"
cc=$("$G" run "$(qtrace 32)" --policy cuda_malloc --timing --no-db --json |
	jq -r '.timing | "malloc_us=\(.malloc_us),malloc_large_us=\(.malloc_large_us),malloc_us_per_mib=\(.malloc_us_per_mib),free_us=\(.free_us),free_large_us=\(.free_large_us),free_us_per_mib=\(.free_us_per_mib)"')
k="$(knobs g "${FP[g32]% !}"),$cc"
for pol in cuda_malloc pytorch; do
	if [ $pol = pytorch ]; then what="(a) caching on, pytorch"; ms=${CACHE[64]}
	else what="(b) no caching, cuda_malloc"; ms=${PLAIN[64]}; fi
	p=$(step "$(qtrace 64)" "$pol" "$k" "${QW[64]}")
	echo "| 64 | $what | $ms ms | G and call costs of b32 | out | $p ms | $(err "$p" "$ms") |"
done
echo
[ -n "$ONLY_QUIET" ] && exit 0
# ------------------------------------------------------------ contended captures
# bisect KNOB of "host_scale=S,api_overhead_us=O" (KNOB is s or o) so that
# cuda_malloc's step time hits TARGET; both shrink the step as they grow
# (s: host faster as it shrinks, so the sense is flipped)
fit() {
	local tr=$1 knob=$2 target=$3 s=$4 lo hi
	if [ "$knob" = s ]; then
		read -r lo hi < <(bisect "$tr" 1 "$target" "host_scale=@,api_overhead_us=0" up 0.05 1.5 18 5)
	else
		read -r lo hi < <(bisect "$tr" 1 "$target" "host_scale=$s,api_overhead_us=@" down 0 60 18 5)
	fi
	awk -v a="$lo" -v b="$hi" 'BEGIN { printf "%.4f", (a + b) / 2 }'
}

declare -A S O CAP CPLAIN CCACHE
for b in 32 64; do
	tr=$T/torch/torch-resnet50-b$b.trace.gz
	[ -r "$tr" ] || die "$tr: missing"
	CAP[$b]=$(measured resnet50-b$b-nocache-capture.json)
	CPLAIN[$b]=$(measured resnet50-b$b-nocache-plain.json)
	CCACHE[$b]=$(measured resnet50-b$b-caching-plain.json)
	S[$b]=$(fit "$tr" s "${CAP[$b]}" 1)
	O[$b]=$(fit "$tr" o "${CPLAIN[$b]}" "${S[$b]}")
done

echo "## Secondary: ResNet-50, contended captures (traces/torch)"
echo
echo "Captured while three other capture lanes shared the host: host_scale takes"
echo "the contention out (fitted to the earlier quiet captured step), then"
echo "api_overhead_us the profiler (fitted to the uncaptured step)."
echo
echo "| batch | trace's own steps (recorded) | round trip, no correction | host_scale | api_overhead_us |"
echo "|---|---|---|---|---|"
for b in 32 64; do
	tr=$T/torch/torch-resnet50-b$b.trace.gz
	echo "| $b | $(recorded "$tr") ms | $(step "$tr" cuda_malloc "") ms | ${S[$b]} | ${O[$b]} |"
done
echo
# crow TRACE BATCH POLICY WHAT KNOBS CORRECTIONS MEASURED: one row below
crow() {
	local p
	p=$(step "$1" "$3" "$5")
	echo "| $2 | $4 | $6 | $7 ms | $p ms | $(err "$p" "$7") |"
}
echo "| batch | what | corrections | measured | predicted | error |"
echo "|---|---|---|---|---|---|"
for b in 32 64; do
	tr=$T/torch/torch-resnet50-b$b.trace.gz
	other=$([ "$b" = 32 ] && echo 64 || echo 32)
	k0="host_scale=${S[$b]},api_overhead_us=0"
	kb="host_scale=${S[$b]},api_overhead_us=${O[$b]}"
	kx="host_scale=${S[$b]},api_overhead_us=${O[$other]}"
	a="(a) caching on, pytorch"
	n="(b) no caching, cuda_malloc"
	crow "$tr" "$b" pytorch "$a" "" none "${CCACHE[$b]}"
	crow "$tr" "$b" pytorch "$a" "$k0" "contention only" "${CCACHE[$b]}"
	crow "$tr" "$b" pytorch "$a" "$kb" "own batch" "${CCACHE[$b]}"
	crow "$tr" "$b" pytorch "$a" "$kx" "overhead of b$other" "${CCACHE[$b]}"
	crow "$tr" "$b" cuda_malloc "$n" "" none "${CPLAIN[$b]}"
	crow "$tr" "$b" cuda_malloc "$n" "$kb" "own batch (fitted on it)" "${CPLAIN[$b]}"
	crow "$tr" "$b" cuda_malloc "$n" "$kx" "overhead of b$other" "${CPLAIN[$b]}"
done
echo
echo "## CUDA C CNN (traces/cnn): recorded NVTX steps vs cuda_malloc --timing"
echo
echo "The captures ran next to other GPU work: their steps after the first"
echo "vary by up to 2x, so the fastest one is shown too."
echo
echo "| trace | recorded steps 2-4 (mean) | fastest of them | predicted | error vs mean | error vs fastest |"
echo "|---|---|---|---|---|---|"
for tr in "$T"/cnn/cnn-*.trace.gz; do
	out=$("$G" run "$tr" --policy cuda_malloc --no-db --json) || die "run $tr failed"
	r=$(jq -r '.step_time_ns / 1e6 | . * 1000 | round / 1000' <<<"$out")
	f=$(jq -r '.steps_ns[1:] | min / 1e6 | . * 1000 | round / 1000' <<<"$out")
	p=$(step "$tr" cuda_malloc "")
	echo "| $(basename "$tr" .trace.gz) | $r ms | $f ms | $p ms | $(err "$p" "$r") | $(err "$p" "$f") |"
done
