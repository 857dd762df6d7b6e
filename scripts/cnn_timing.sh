#!/usr/bin/env bash
# cnn_timing.sh: the CUDA C CNN's step-time validation table (issue 6,
# docs/timing.md): caching off (--alloc malloc) and on (--alloc async, CUDA's
# stream-ordered pool), measured uncaptured and predicted by `run --timing`
# from the capture of the OTHER mode.
#
#   scripts/cnn_timing.sh DIR [GPUMEMSIM]
#
# DIR is what capture/cnn/timing_runs.sh wrote: steps.tsv (model batch alloc
# run mean_step_ms, uncaptured) and cnn-MODEL-bB-ALLOC.trace.gz. A trace
# named cnn-MODEL-bB.trace.gz (traces/cnn) counts as a malloc capture unless
# its label alloc= says otherwise; missing pieces print as "-".
#
# Per model and batch (ms; mean step without the first, which carries
# cuDNN's algorithm search):
#   measured malloc / async    uncaptured, mean of the runs in steps.tsv
#   captured malloc / async    the capture's own recorded steps (plain replay)
#   round trip                 the capture under its own policy, --timing,
#                              error against its recorded steps
#   async -> malloc            the async capture under cuda_malloc --timing
#   malloc -> async            the malloc capture under cuda_async --timing
#                              (release_threshold as the CNN sets it)
# each cross prediction with its error against the measured step of that
# mode (the issue's target) and against that mode's captured step (the
# model without the capture's own overhead, which both captures carry).
#
# Table (a): no correction (or COST). Table (b): the capture's own cost
# taken out by docs/timing.md's form G (host_scale, scale_calls=0: host
# gaps and kept calls shrink, the fitted cudaMalloc/cudaFree costs stay),
# its host_scale bisected on ONE configuration, FIT (default
# resnet:32:malloc: that capture under its own policy gives its measured
# uncaptured step) and applied unchanged to every other figure (out of
# sample). Each table ends with the median and max |error| against the
# measured steps.
#
# Environment: COST (extra --cost knobs for every timed run of table (a),
# e.g. "host_scale=0.3,scale_calls=0"), FIT (MODEL:BATCH:ALLOC, "" for no
# table (b)), ASYNC_CONF (cuda_async's conf, default
# release_threshold:1TiB: the CNN keeps its pool). Needs jq and awk.
set -u
. "$(dirname "$0")/timing_lib.sh"
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: $0 DIR [GPUMEMSIM]" >&2
	exit 2
fi
D=$1
G=${2:-build/gpumemsim}
die() { echo "cnn_timing.sh: $*" >&2; exit 1; }
[ -d "$D" ] || die "$D: not a directory"
[ -x "$G" ] || die "$G: not an executable (run make)"
command -v jq >/dev/null || die "needs jq"
cost=${COST:-}
fit=${FIT-resnet:32:malloc}
aconf=${ASYNC_CONF:-release_threshold:1TiB}

# alloc mode of TRACE: the file name's suffix, else its alloc= label, else malloc
mode_of() {
	case $1 in
	*-async.trace.gz | *-async.trace) echo async; return ;;
	*-malloc.trace.gz | *-malloc.trace) echo malloc; return ;;
	esac
	local l
	l=$(gzip -cdf "$1" 2>/dev/null | sed -n '/^[^HLS#g]/q; s/^L alloc=//p' | head -1)
	echo "${l:-malloc}"
}

# model and batch from cnn-MODEL-bB[-ALLOC].trace[.gz]
key_of() {
	basename "$1" | sed -n 's/^cnn-\([a-z0-9]*\)-b\([0-9]*\)\(-[a-z]*\)\{0,1\}\.trace\(\.gz\)\{0,1\}$/\1 \2/p'
}

declare -A trace_of
keys=""
for t in "$D"/cnn-*.trace.gz "$D"/cnn-*.trace; do
	[ -f "$t" ] || continue
	k=$(key_of "$t")
	[ -n "$k" ] || continue
	m=$(mode_of "$t")
	trace_of["$k $m"]=$t
	case " $keys " in *" ${k/ /:} "*) ;; *) keys="$keys ${k/ /:}" ;; esac
done
if [ -f "$D/steps.tsv" ]; then
	for k in $(awk -F'\t' 'NR > 1 { print $1 ":" $2 }' "$D/steps.tsv" | sort -u); do
		case " $keys " in *" $k "*) ;; *) keys="$keys $k" ;; esac
	done
fi
keys=$(for k in $keys; do echo "$k"; done | sort -t: -k1,1 -k2,2n)
[ -n "$keys" ] || die "$D: no cnn-MODEL-bB*.trace.gz and no steps.tsv"

# mean uncaptured step (ms) of MODEL BATCH ALLOC over the runs in steps.tsv
measured() {
	[ -f "$D/steps.tsv" ] || { echo -; return; }
	awk -F'\t' -v m="$1" -v b="$2" -v a="$3" '
		NR > 1 && $1 == m && $2 == b && $3 == a { s += $5; n++ }
		END { if (n) printf "%.2f", s / n; else print "-" }' "$D/steps.tsv"
}

# step time (ms) of `run TRACE --policy POLICY [--conf CONF] [--timing]`:
# json's step_time_ns (the mean without the first step)
step_ms() { # TRACE POLICY CONF TIMED
	local args=(run "$1" --policy "$2" --no-db --json) out
	[ -n "$3" ] && args+=(--conf "$3")
	if [ "$4" = 1 ]; then
		args+=(--timing)
		[ -n "$cost" ] && args+=(--cost "$cost")
	fi
	out=$("$G" "${args[@]}" 2>/dev/null) || { echo -; return; }
	jq -r 'if .step_count > 1 then .step_time_ns else "-" end' <<<"$out" |
		awk '$1 == "-" { print; next } { printf "%.2f\n", $1 / 1e6 }'
}

err() { tl_err "$@"; } # PREDICTED REFERENCE

# policy and conf that replay a capture of ALLOC as recorded
own_policy() { [ "$1" = async ] && echo cuda_async || echo cuda_malloc; }
own_conf() { [ "$1" = async ] && echo "$aconf" || echo ""; }

# table (a): every figure with $cost
table_a() {
	local k model batch tm ta mm ma cm ca rm ra pm pa rme rae errs=()
	echo "| model | batch | measured malloc | measured async | captured malloc | captured async | round trip malloc | round trip async | async -> malloc | vs measured | vs captured | malloc -> async | vs measured | vs captured |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	for k in $keys; do
		model=${k%%:*}
		batch=${k##*:}
		tm=${trace_of["$model $batch malloc"]:-}
		ta=${trace_of["$model $batch async"]:-}
		mm=$(measured "$model" "$batch" malloc)
		ma=$(measured "$model" "$batch" async)
		cm=- ca=- rm=- ra=- pm=- pa=-
		if [ -n "$tm" ]; then
			cm=$(step_ms "$tm" cuda_malloc "" 0)
			rm=$(step_ms "$tm" cuda_malloc "" 1)
			pa=$(step_ms "$tm" cuda_async "$aconf" 1)
		fi
		if [ -n "$ta" ]; then
			ca=$(step_ms "$ta" cuda_async "$aconf" 0)
			ra=$(step_ms "$ta" cuda_async "$aconf" 1)
			pm=$(step_ms "$ta" cuda_malloc "" 1)
		fi
		rme=$(err "$rm" "$cm")
		rae=$(err "$ra" "$ca")
		[ "$rm" = - ] || rm="$rm ($rme)"
		[ "$ra" = - ] || ra="$ra ($rae)"
		errs+=("$(err "$pm" "$mm")" "$(err "$pa" "$ma")")
		echo "| $model | $batch | $mm | $ma | $cm | $ca | $rm | $ra | $pm | $(err "$pm" "$mm") | $(err "$pm" "$cm") | $pa | $(err "$pa" "$ma") | $(err "$pa" "$ca") |"
	done
	echo
	echo "ms per step, mean without the first; cuda_async conf: $aconf; cost knobs: ${cost:-none (fitted)}."
	echo "Cross predictions against the measured step: $(tl_summary "${errs[@]}")."
}

# table (b): host_scale (scale_calls=0) fitted on $fit, applied to all;
# with an argument (1) only one summary row for the sensitivity table
table_b() {
	local brief=${1:-0}
	local fm=${fit%%:*} fb fa ft target hs k key model batch tm ta mm ma v e r row
	local ein=() eout=() ecross=()
	fb=${fit#*:}; fb=${fb%%:*}; fa=${fit##*:}
	ft=${trace_of["$fm $fb $fa"]:-}
	target=$(measured "$fm" "$fb" "$fa")
	if [ -z "$ft" ] || [ "$target" = - ]; then
		echo "(b): no capture or no measured step for FIT=$fit"
		return
	fi
	_cnn_eval() { cost="host_scale=$1,scale_calls=0" step_ms "$ft" "$(own_policy "$fa")" "$(own_conf "$fa")" 1; }
	hs=$(tl_mid "$(tl_bisect _cnn_eval "$target" up 0.05 1.5 20 6)" 0.05 1.5)
	k="host_scale=${hs% !},scale_calls=0"
	[ "$brief" = 1 ] || {
	echo "### (b) G correction fitted on $fm b$fb $fa"
	echo
	echo "host_scale = $hs (scale_calls=0): $fm b$fb's $fa capture under $(own_policy "$fa") --timing gives its measured uncaptured $fa step, $target ms. Every other figure is out of sample."
	echo
	echo "| model | batch | measured malloc | measured async | malloc capture -> malloc | error | async capture -> async | error | async -> malloc | error | malloc -> async | error |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
	}
	for key in $keys; do
		model=${key%%:*}
		batch=${key##*:}
		tm=${trace_of["$model $batch malloc"]:-}
		ta=${trace_of["$model $batch async"]:-}
		mm=$(measured "$model" "$batch" malloc)
		ma=$(measured "$model" "$batch" async)
		row="| $model | $batch | $mm | $ma"
		# capture mode, policy mode: round trips, then cross predictions
		for r in "malloc malloc" "async async" "async malloc" "malloc async"; do
			set -- $r
			local tr=$tm ms=$mm
			[ "$1" = async ] && tr=$ta
			[ "$2" = async ] && ms=$ma
			v=-
			[ -n "$tr" ] && v=$(cost=$k step_ms "$tr" "$(own_policy "$2")" "$(own_conf "$2")" 1)
			e=$(err "$v" "$ms")
			if [ "$model:$batch:$1" = "$fit" ] && [ "$1" = "$2" ]; then
				e="$e (fitted)"
			elif [ "$1" = "$2" ]; then
				ein+=("$e")
			else
				ecross+=("$e")
			fi
			row="$row | $v | $e"
		done
		[ "$brief" = 1 ] || echo "$row |"
	done
	eout=("${ein[@]}" "${ecross[@]}")
	if [ "$brief" = 1 ]; then
		echo "| $fm b$fb $fa | $hs | $(tl_summary "${ecross[@]}") | $(tl_summary "${eout[@]}") |"
		return
	fi
	echo
	echo "Out of sample, against the measured steps: cross predictions $(tl_summary "${ecross[@]}"); same-policy $(tl_summary "${ein[@]}"); all $(tl_summary "${eout[@]}")."
}

echo "### (a) No correction"
echo
table_a
echo
[ -n "$fit" ] || exit 0
table_b
echo
echo "### (b) for every choice of the one fitted configuration"
echo
echo "| fitted on | host_scale | cross predictions, out of sample | all out of sample |"
echo "|---|---|---|---|"
for key in $keys; do
	for a in malloc async; do
		fit="${key}:$a"
		table_b 1
	done
done
