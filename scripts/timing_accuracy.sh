#!/usr/bin/env bash
# timing_accuracy.sh: how well `gpumemsim run --timing` (the timeline
# model, docs/timing.md) predicts UNCAPTURED step times on the H200, with
# no per-capture fitting (issue 15).
#
#   scripts/timing_accuracy.sh [GPUMEMSIM [TRACES_DIR [SET]]]
#
# Data: TRACES_DIR/SET, by default timing/h200 (traces/timing/README.md;
# timing/nosource is the same layout, captured with --no-source, both
# batch sizes of a model on one host): for each model and batch,
# four runs of the same 8 training steps (3 warm-up) interleaved on one
# host: uncaptured caching on / off, captured caching on / off
# (timing.tsv: the means; *-cap-*.trace.gz: the captures). And, for the
# batch fit of kernel time, the recipe captures TRACES_DIR/torch/
# torch-MODEL-bB.trace.gz (other hosts, no caching, 2 warm-up steps).
#
# Directions, each against the UNCAPTURED step of the same host and call:
#   nc->c   caching on   (--policy pytorch) from the no-caching capture
#   nc->nc  no caching   (--policy cuda_malloc) from the no-caching capture
#   c->c    caching on   from the caching capture
#   c->nc   no caching   from the caching capture, with the requests of
#           the no-caching capture of the same program (--requests)
# "before": the same runs under the previous model (--cost timeline=0: the
# fitted medians, the capture's host kept; c->nc had no requests).
# Other batch: the capture at batch B predicts batch B' with every GPU
# duration scaled by gpu_scale = fit(B')/fit(B), fit = a line through the
# GPU time per step of the recipe captures at batch sizes other than B'.
#
# The model's constants (device/timeline.c) were fitted once on ResNet-18
# and ResNet-50 (both batch sizes); MobileNet-V2 and DenseNet-121 are
# held out. The summary lines give both sets, and the predictions whose
# replayed step the GPU bounds (busy 90% or more of it) apart from those
# the host bounds.
#
# Also prints where each capture's step time goes (host gaps, launches,
# syncs, memory API calls, GPU busy, records, CUPTI callbacks, the capture
# cost the replay takes out and the one the real step implies) and each
# real figure's standard error (its steps' own noise).
#
# MODELS picks the models (default the four above; traces/timing/heldout:
# MODELS="vgg11 efficientnet_b0 vit_b_16 regnet_y_400mf"), each at the batch
# sizes of its captures in the set; every model but ResNet-18 and ResNet-50
# counts as held out. SIZE_SCALE=1 charges the other-batch predictions'
# device calls at B'/B times their size (the size_scale knob).
#
# Prints Markdown on stdout. Needs jq and awk. Deterministic.
set -u
G=${1:-build/gpumemsim}
T=${2:-traces}
H=$T/${3:-timing/h200}
R=$T/torch
W=3            # warm-up steps of the h200 runs
die() { echo "timing_accuracy.sh: $*" >&2; exit 1; }
[ -x "$G" ] || die "$G: not an executable (run make)"
command -v jq >/dev/null || die "needs jq"
[ -r "$H/timing.tsv" ] || die "$H/timing.tsv: missing"

. "$(dirname "$0")/timing_lib.sh"
# pred TRACE POLICY KNOBS [--requests FILE]
pred() {
	local tr=$1 pol=$2 k=$3
	shift 3
	tl_pred "$G" "$W" "$tr" "$pol" "$k" "$@" || die "run $tr $pol $k failed"
}
# predb: pred's arguments; prints the mean step and the GPU's busy share
predb() {
	local tr=$1 pol=$2 k=$3
	shift 3
	tl_pred_busy "$G" "$W" "$tr" "$pol" "$k" "$@" || die "run $tr $pol $k failed"
}
# real MODEL BATCH CAPTURED CACHING: the mean step (ms) of timing.tsv
real() { awk -v m="$1" -v b="$2" -v c="$3" -v k="$4" '$1 == m && $2 == b && $3 == c && $4 == k { print $5 }' "$H/timing.tsv"; }
# err PRED REAL: signed error in %
err() { awk -v p="$1" -v r="$2" 'BEGIN { printf "%+.1f", 100 * (p / r - 1) }'; }
# gpu_ms TRACE WARM: GPU time (kernels, copies, memsets) per step after WARM
gpu_ms() {
	"$G" trace cat "$1" | awk -v w="$2" '
		$1 == "r" && $4 == "\"step" && $5 ~ /^[0-9]+"$/ && $NF != "uncaptured" { n = $5; gsub(/[^0-9]/, "", n); if (n + 0 >= w) { s[++ns] = $2; e[ns] = $3 } }
		$1 == "k" || $1 == "c" || $1 == "m" { gs[++ng] = $2; ge[ng] = $3 }
		END {
			for (i = 1; i <= ng; i++) for (j = 1; j <= ns; j++)
				if (gs[i] >= s[j] && gs[i] <= e[j]) { tot += ge[i] - gs[i]; break }
			printf "%.4f\n", ns ? tot / ns / 1e6 : 0 }'
}

# noise MODEL BATCH CACHING: the uncaptured run's own noise, in % of its
# mean step: "SD SE" (SD of steps W.., standard error of their mean)
noise() {
	local j=$H/$1-b$2-plain-$([ "$3" = 1 ] && echo caching || echo nocaching).json
	[ -r "$j" ] || { echo "- -"; return; }
	jq -r --argjson w "$W" '.step_s[$w:] | (add / length) as $m | (map((. - $m) * (. - $m)) | add / (length - 1) | sqrt) as $sd
		| "\(100 * $sd / $m) \(100 * $sd / $m / (length | sqrt))"' "$j" | awk '{ printf "%.1f %.1f\n", $1, $2 }'
}
# breakdown TRACE: per step after the warm-up (ms unless said): wall, host
# gaps between API records, time in launches (kernels, copies, memsets),
# syncs, cudaMalloc/cudaFree, GPU busy, API records, CUPTI callbacks (the
# correlation ids the step spans: every runtime and driver call CUPTI saw,
# kept or not)
breakdown() {
	"$G" trace cat "$1" | awk -v w="$W" '
		$1 == "r" && $4 == "\"step" && $5 ~ /^[0-9]+"$/ && $NF != "uncaptured" { n = $5; gsub(/[^0-9]/, "", n); if (n + 0 >= w) { s[++ns] = $2; e[ns] = $3 } next }
		$1 == "p" { np++; ps[np] = $2; pe[np] = $3; pn[np] = $4; pc[np] = $5; next }
		$1 == "k" || $1 == "c" || $1 == "m" { ng++; gs[ng] = $2; ge[ng] = $3 }
		END {
			for (j = 1; j <= ns; j++) wall += e[j] - s[j]
			for (i = 1; i <= np; i++) {
				for (j = 1; j <= ns; j++) if (ps[i] >= s[j] && ps[i] <= e[j]) break
				if (j > ns) { last = 0; continue }
				rec++; d = pe[i] - ps[i]
				if (pn[i] ~ /Launch|Memcpy|Memset/) tl += d
				else if (pn[i] ~ /Synchron/) ts += d
				else if (pn[i] == "\"cudaMalloc\"" || pn[i] == "\"cudaFree\"") tm += d
				else to += d
				if (last && ps[i] > hend) gap += ps[i] - hend
				if (last && pc[i] > lc) cb += pc[i] - lc
				if (!last || pe[i] > hend) hend = pe[i]
				if (!last || pc[i] > lc) lc = pc[i]
				if (!last) { hend = pe[i]; lc = pc[i] }
				last = 1
			}
			for (i = 1; i <= ng; i++) for (j = 1; j <= ns; j++)
				if (gs[i] >= s[j] && gs[i] <= e[j]) { gpu += ge[i] - gs[i]; break }
			if (!ns) ns = 1
			printf "%.2f %.2f %.2f %.2f %.2f %.2f %d %d\n", wall / ns / 1e6, gap / ns / 1e6, tl / ns / 1e6,
				ts / ns / 1e6, tm / ns / 1e6, gpu / ns / 1e6, rec / ns, cb / ns }'
}

# MODELS (default the four of the fit and held-out sets); a model's batch
# sizes are those its caching capture in the set has
models=${MODELS:-"resnet18 resnet50 mobilenet_v2 densenet121"}
batches_of() {
	local f b out=""
	for f in "$H/$1"-b*-cap-caching.trace.gz; do
		[ -r "$f" ] || continue
		b=${f##*-b}
		out="$out ${b%-cap-caching.trace.gz}"
	done
	printf '%s\n' $out | sort -n | tr '\n' ' '
}
# the constants were fitted on ResNet-18 and ResNet-50: every other model is held out
heldout() { case $1 in resnet18|resnet50) echo 0 ;; *) echo 1 ;; esac; }
ERRS=$(mktemp)
trap 'rm -f "$ERRS"' EXIT

first=$(ls "$H"/*-cap-nocaching.trace.gz 2>/dev/null | head -1)
[ -n "$first" ] || die "$H: no *-cap-nocaching.trace.gz"
k0=$("$G" run "$first" --policy pytorch --timing --no-db --json | jq -c '.timing | {cost_table, capture_mode, capture_share, dev_call_us, cap_api_us, cap_call_us, cap_mem_us, cap_range_us, launch_latency_us, hit_us}')
echo "# Step time: timeline model vs uncaptured steps (H200)"
echo
echo "Constants in use (\`run --json\` .timing of a callbacks-mode capture): \`$k0\`"
echo
echo "## Same batch: both directions"
echo
echo "\"SE\": the standard error of the real mean step (steps 3-7 of the uncaptured run), in %."
echo
echo "| model | batch | real caching | SE | real no caching | SE | nc->c | err | before | nc->nc | err | before | c->c | err | before | c->nc | err | before |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for m in $models; do
	batches=$(batches_of "$m")
	for b in $batches; do
		nc=$H/$m-b$b-cap-nocaching.trace.gz
		ca=$H/$m-b$b-cap-caching.trace.gz
		[ -r "$nc" ] && [ -r "$ca" ] || continue
		rc=$(real "$m" "$b" 0 1)
		rn=$(real "$m" "$b" 0 0)
		read -r a fa <<<"$(predb "$nc" pytorch "")"
		a0=$(pred "$nc" pytorch timeline=0)
		read -r bb fb <<<"$(predb "$nc" cuda_malloc "")"
		b0=$(pred "$nc" cuda_malloc timeline=0)
		read -r c fc <<<"$(predb "$ca" pytorch "")"
		c0=$(pred "$ca" pytorch timeline=0)
		read -r d fd <<<"$(predb "$ca" cuda_malloc "" --requests "$nc")"
		d0=$(pred "$ca" cuda_malloc timeline=0)
		ho=$(heldout "$m")
		read -r _ sec <<<"$(noise "$m" "$b" 1)"
		read -r _ sen <<<"$(noise "$m" "$b" 0)"
		for x in "$a $rc $a0 $sec $fa" "$bb $rn $b0 $sen $fb" "$c $rc $c0 $sec $fc" "$d $rn $d0 $sen $fd"; do
			set -- $x
			echo "same $ho $(err "$1" "$2") $(err "$3" "$2") $4 $5" >>"$ERRS"
		done
		printf '| %s | %s | %.1f | %s | %.1f | %s | %.1f | %s%% | %s%% | %.1f | %s%% | %s%% | %.1f | %s%% | %s%% | %.1f | %s%% | %s%% |\n' \
			"$m" "$b" "$rc" "$sec" "$rn" "$sen" "$a" "$(err "$a" "$rc")" "$(err "$a0" "$rc")" \
			"$bb" "$(err "$bb" "$rn")" "$(err "$b0" "$rn")" "$c" "$(err "$c" "$rc")" "$(err "$c0" "$rc")" \
			"$d" "$(err "$d" "$rn")" "$(err "$d0" "$rn")"
	done
done

echo
echo "## Where the time goes (captures, per step after the warm-up)"
echo
echo "From the trace (ms a step): the captured step, the host gaps between API"
echo "records, the time in launches (kernels, copies, memsets), syncs and"
echo "cudaMalloc/cudaFree, GPU busy, the API records kept and the CUPTI"
echo "callbacks (correlation ids spanned: every runtime and driver call CUPTI"
echo "saw, kept or not). From the replay under the capture's own policy"
echo "(pytorch for caching, cuda_malloc for no caching): the prediction, and"
echo "\"removed\", what taking the capture's cost out saves (the prediction with"
echo "host_scale=1 minus it). \"needed\": the captured step minus the real one"
echo "(meaningful where the real step is host-bound: caching b32), also per"
echo "callback. \"launch p50\": the median cudaLaunchKernel call (us), a"
echo "measure of how fast the captured host ran."
echo
echo "| model | batch | caching | captured | host gaps | launches | syncs | malloc/free | GPU busy | API records | callbacks | launch p50 | real | predicted | removed | needed | needed / callback (us) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for m in $models; do
	batches=$(batches_of "$m")
	for b in $batches; do
		for k in 1 0; do
			tr=$H/$m-b$b-cap-$([ $k = 1 ] && echo caching || echo nocaching).trace.gz
			[ -r "$tr" ] || continue
			pol=$([ $k = 1 ] && echo pytorch || echo cuda_malloc)
			r=$(real "$m" "$b" 0 "$k")
			p=$(pred "$tr" "$pol" "")
			p1=$(pred "$tr" "$pol" "host_scale=1")
			lp=$("$G" trace cat "$tr" | awk '$1 == "p" && $4 == "\"cudaLaunchKernel\"" { print $3 - $2 }' | sort -n |
				awk '{ v[NR] = $1 } END { printf "%.1f", NR ? v[int((NR + 1) / 2)] / 1e3 : 0 }')
			read -r wl gp tl ts tm gb nr cb <<<"$(breakdown "$tr")"
			printf '| %s | %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %d | %d | %s | %.1f | %.1f | %.1f | %.1f | %.2f |\n' \
				"$m" "$b" "$([ $k = 1 ] && echo on || echo off)" "$wl" "$gp" "$tl" "$ts" "$tm" "$gb" "$nr" "$cb" "$lp" \
				"$r" "$p" "$(awk -v a="$p1" -v b="$p" 'BEGIN { print a - b }')" \
				"$(awk -v a="$wl" -v b="$r" 'BEGIN { print a - b }')" \
				"$(awk -v a="$wl" -v b="$r" -v c="$cb" 'BEGIN { print c ? (a - b) * 1000 / c : 0 }')"
		done
	done
done
echo
echo "## Another batch size: kernel time from the batch fit"
echo
echo "gpu_scale = fit(B')/fit(B), the fit a line through the GPU time per step"
echo "of the recipe captures (traces/torch) at the batch sizes other than B'."
if [ "${SIZE_SCALE:-0}" = 1 ]; then
	echo "The requests keep batch B's sizes; their device calls cost what calls B'/B"
	echo "times larger would (SIZE_SCALE=1: size_scale)."
else
	echo "No-caching what-ifs keep batch B's request sizes."
fi
echo
echo "| model | from B | to B' | fit on | gpu_scale | real caching B' | real no caching B' | nc->c | err | nc->nc | err | c->c | err | c->nc | err |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for m in $models; do
	batches=$(batches_of "$m")
	for b in $batches; do
		for b2 in $batches; do
			[ "$b" = "$b2" ] && continue
			nc=$H/$m-b$b-cap-nocaching.trace.gz
			ca=$H/$m-b$b-cap-caching.trace.gz
			[ -r "$nc" ] && [ -r "$ca" ] || continue
			rc=$(real "$m" "$b2" 0 1)
			rn=$(real "$m" "$b2" 0 0)
			[ -n "$rc" ] && [ -n "$rn" ] || continue
			# the batch fit: recipe captures at sizes other than B'
			xs="" ys=""
			for f in "$R"/torch-"$m"-b*.trace.gz; do
				fb=${f##*-b}
				fb=${fb%.trace.gz}
				[ "$fb" = "$b2" ] && continue
				xs="$xs $fb"
				ys="$ys $(gpu_ms "$f" 2)"
			done
			[ -n "$xs" ] || continue
			sc=$(awk -v xs="$xs" -v ys="$ys" -v b="$b" -v b2="$b2" 'BEGIN {
				n = split(xs, x, " "); split(ys, y, " ")
				for (i = 1; i <= n; i++) { sx += x[i]; sy += y[i]; sxx += x[i] * x[i]; sxy += x[i] * y[i] }
				k = (n * sxy - sx * sy) / (n * sxx - sx * sx); a = (sy - k * sx) / n
				printf "%.4f\n", (a + k * b2) / (a + k * b) }')
			k="gpu_scale=$sc"
			# SIZE_SCALE=1: the device calls at the target's sizes too
			# (size_scale B'/B; evaluated, not the default: docs/timing.md)
			[ "${SIZE_SCALE:-0}" = 1 ] &&
				k="$k,size_scale=$(awk -v a="$b2" -v b="$b" 'BEGIN { printf "%.4f", a / b }')"
			read -r a fa <<<"$(predb "$nc" pytorch "$k")"
			read -r bb fb <<<"$(predb "$nc" cuda_malloc "$k")"
			read -r c fc <<<"$(predb "$ca" pytorch "$k")"
			read -r d fd <<<"$(predb "$ca" cuda_malloc "$k" --requests "$nc")"
			ho=$(heldout "$m")
			read -r _ sec <<<"$(noise "$m" "$b2" 1)"
			read -r _ sen <<<"$(noise "$m" "$b2" 0)"
			for x in "$a $rc $sec $fa" "$bb $rn $sen $fb" "$c $rc $sec $fc" "$d $rn $sen $fd"; do
				set -- $x
				echo "batch $ho $(err "$1" "$2") - $3 $4" >>"$ERRS"
			done
			printf '| %s | %s | %s | %s | %s | %.1f | %.1f | %.1f | %s%% | %.1f | %s%% | %.1f | %s%% | %.1f | %s%% |\n' \
				"$m" "$b" "$b2" "$(echo $xs | tr ' ' ',')" "$sc" "$rc" "$rn" \
				"$a" "$(err "$a" "$rc")" "$bb" "$(err "$bb" "$rn")" "$c" "$(err "$c" "$rc")" "$d" "$(err "$d" "$rn")"
		done
	done
done

echo
echo "## Summary (|error|)"
echo
echo "\"within 2 SE\": errors no larger than twice the standard error of the real"
echo "mean step (the uncaptured run's own step-to-step noise)."
echo
echo "| set | predictions | median | max | under 10% | within 2 SE | before: median | before: max |"
echo "|---|---|---|---|---|---|---|---|"
summ() {
	awk -v sel="$1" -v ho="$2" -v name="$3" "$AWK_MEDIAN"'
		function abs(v) { return v < 0 ? -v : v }
		($1 == sel || sel == "all" || (sel == "gpu" && $6 >= 0.9) || (sel == "host" && $6 < 0.9)) &&
		(ho == "any" || $2 == ho) {
			n++; e[n] = abs($3); f[n] = abs($4); if (abs($3) < 10) u++; if ($5 != "-" && abs($3) <= 2 * $5) q++ }
		END {
			if (!n) exit
			me = median(e, n); mx = e[n]; mf = median(f, n); xf = f[n]
			if (sel != "same") { mf = "-"; xf = "-" } else { mf = sprintf("%.1f%%", mf); xf = sprintf("%.1f%%", xf) }
			printf "| %s | %d | %.1f%% | %.1f%% | %d of %d | %d of %d | %s | %s |\n", name, n, me, mx, u + 0, n, q + 0, n, mf, xf }' "$ERRS"
}
summ same 0 "same batch, fit set (ResNet-18, ResNet-50)"
summ same 1 "same batch, held out (the other models)"
summ batch 0 "other batch, fit set"
summ batch 1 "other batch, held out"
summ all any "everything"
# by what bounds the replayed step (docs/timing.md, "GPU-bound and host-bound")
summ gpu any "GPU-bound replays (GPU busy 90% or more of the step)"
summ host any "host-bound replays (GPU busy under 90%)"
