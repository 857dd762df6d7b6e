#!/usr/bin/env bash
# whatif_accuracy.sh: every figure of docs/whatif.md "Accuracy on H200
# captures" and "Seed table", recomputed from the shipped traces.
#
#   scripts/whatif_accuracy.sh [OUTDIR [GPUMEMSIM]]
#
# Part 1 (accuracy): for traces/torch (resnet18, resnet50, mobilenet_v2,
# densenet121 at 16/32/64/128)
# every leave-one-out choice (fit on three, predict the fourth; 16 and 128
# are extrapolations), and for traces/cnn (vgg, resnet at 8..256) the
# choices listed in CNN_FITS. Each prediction is replayed under `pytorch`
# and compared with the replay of the captured trace at that batch and, for
# torch, with the real caching allocator's peaks recorded in
# traces/torch/truth/MODEL-bB-default.json (allocated_bytes.all.peak,
# reserved_bytes.all.peak). Both the whole run and the steady state (from
# the NVTX range "step 1" on, i.e. without cuDNN's autotuning step) are
# compared for the replays; the truth has only whole-run peaks.
# Each prediction also gets its bounds: `whatif batch --policy pytorch
# --json` gives peak_reserved_lo/_hi and peak_allocated_lo/_hi, bounds of
# the peak over every size of the unpredictable sites within their ranges
# (docs/whatif.md "Bounds of reserved memory": lo = live bytes at the low
# bounds; hi = the replay without the unpredictable requests plus one
# segment each at its high bound, where every such request is transient,
# else null: no bound), and the replays at the sites' bounds
# (replay_reserved_lo/_hi, no bound). A prediction outside 3% of its
# reference is counted "in interval" when the reference lies within the
# bounds; "no bound" when it has no upper bound. Widths: (hi - lo) / the
# prediction.
# Extrapolations are marked and summarised apart.
# Part 2 (seed table): `explain batch` over the CNN sweeps under `pytorch`
# and `cuda_malloc`.
#
# Writes OUTDIR/accuracy.tsv (one row per prediction), OUTDIR/pred/*.sites.tsv
# (per-site fit of every prediction: whatif batch --sites), OUTDIR/accuracy.md
# (the tables and the error summary), OUTDIR/explain-*.txt, and prints the
# Markdown on stdout. Needs jq and awk. Deterministic: same traces, same
# output.
set -eu
OUT=${1:-out/whatif-accuracy}
G=${2:-build/gpumemsim}
mkdir -p "$OUT/pred"
TSV="$OUT/accuracy.tsv"

# CNN fits: "FIT_BATCHES:PREDICT_BATCHES" (comma separated).
CNN_FITS="8,32,128:16,64,256 16,64,256:8,32,128 32,64,128:8,16,256 8,16,32:64 64,128,256:32"

# peak_allocated peak_reserved of a replay under pytorch; with --steady the
# peaks from the first "step 1" range on (engine flag --from-range).
peaks() {
	"$G" run "$1" --policy pytorch --no-db --json --quiet |
		jq -r '[.peak_allocated, .peak_reserved] | @tsv'
}

# steady-state peaks: the trace from the NVTX range "step 1" on (whatif
# steady), replayed; the whole-run replay cannot give them because the
# pytorch cache keeps the segments step 0 reserved.
steady() {
	local s
	s=$(mktemp --suffix=.trace.gz "$OUT/pred/steady.XXXXXX")
	"$G" whatif steady "$1" -o "$s"
	peaks "$s"
	rm -f "$s"
}

printf 'set\tmodel\tfit\tpredict\tkind\tunaligned\tsites\tpred_alloc\tpred_res\tcap_alloc\tcap_res\ttruth_alloc\ttruth_res\tpred_alloc_s\tpred_res_s\tcap_alloc_s\tcap_res_s\tbounded\tlo_alloc\tlo_res\thi_alloc\thi_res\treplay_lo_res\treplay_hi_res\n' > "$TSV"

one() { # ROWFILE SET MODEL FITLIST PREDICT CAPTURE_PATTERN TRUTH_JSON_OR_-
	local row=$1
	shift
	local set=$1 model=$2 fit=$3 b=$4 pat=$5 truth=$6 from=() f
	for f in ${fit//,/ }; do from+=("${pat//@/$f}"); done
	local pred="$OUT/pred/$set-$model-b$b-from-${fit//,/_}.trace.gz"
	local rep
	# the prediction, replayed under pytorch with its interval
	rep=$("$G" whatif batch --max-unaligned 100 --json --policy pytorch --from "${from[@]}" \
		--batch "$b" -o "$pred" --sites "${pred%.trace.gz}.sites.tsv")
	local un sites kind
	un=$(jq -r .unaligned <<<"$rep")
	sites=$(jq -r .sites <<<"$rep")
	kind=$(jq -r 'if .extrapolation > 0 then "extrapolation" else "interpolation" end' <<<"$rep")
	local pa pr ca cr ta=- tr=-
	read -r pa pr < <(jq -r '[.peak_allocated, .peak_reserved] | @tsv' <<<"$rep")
	read -r ca cr < <(peaks "${pat//@/$b}")
	if [ "$truth" != - ]; then
		ta=$(jq -r '.stats["allocated_bytes.all.peak"]' "$truth")
		tr=$(jq -r '.stats["reserved_bytes.all.peak"]' "$truth")
	fi
	local pas prs cas crs
	read -r pas prs < <(steady "$pred")
	read -r cas crs < <(steady "${pat//@/$b}")
	# the interval: the replays at the unpredictable sites' bounds
	local nb la lr ha hr rlr rhr
	read -r nb la lr ha hr rlr rhr < <(jq -r '[.interval_sites, .peak_allocated_lo, .peak_reserved_lo,
		(.peak_allocated_hi // "none"), (.peak_reserved_hi // "none"), .replay_reserved_lo,
		.replay_reserved_hi] | @tsv' <<<"$rep")
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
		"$set" "$model" "$fit" "$b" "$kind" "$un" "$sites" "$pa" "$pr" "$ca" "$cr" "$ta" "$tr" \
		"$pas" "$prs" "$cas" "$crs" "$nb" "$la" "$lr" "$ha" "$hr" "$rlr" "$rhr" > "$row"
}

# the rows run in parallel (JOBS at a time), each into its own file, and are
# concatenated in the order listed: the output does not depend on JOBS
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
mkdir -p "$OUT/rows"
rm -f "$OUT"/rows/*.tsv
nrow=0
job() {
	nrow=$((nrow + 1))
	while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
	one "$(printf '%s/rows/%04d.tsv' "$OUT" "$nrow")" "$@" &
}

for m in resnet18 resnet50 mobilenet_v2 densenet121; do
	all="16 32 64 128"
	for b in $all; do
		fit=$(for x in $all; do [ "$x" = "$b" ] || printf '%s,' "$x"; done)
		job torch "$m" "${fit%,}" "$b" "traces/torch/torch-$m-b@.trace.gz" \
			"traces/torch/truth/$m-b$b-default.json"
	done
done
for m in vgg resnet; do
	for c in $CNN_FITS; do
		fit=${c%%:*}
		for b in ${c#*:}; do
			for bb in ${b//,/ }; do
				job cnn "$m" "$fit" "$bb" "traces/cnn/cnn-$m-b@.trace.gz" -
			done
		done
	done
done

wait
for i in $(seq 1 "$nrow"); do
	f=$(printf '%s/rows/%04d.tsv' "$OUT" "$i")
	[ -s "$f" ] || { echo "whatif_accuracy: row $i failed (see the messages above)" >&2; exit 1; }
	cat "$f" >> "$TSV"
done

# ---------------------------------------------------------------- tables
awk -F'\t' '
function mib(x) { return x == "-" ? "-" : sprintf("%.1f", x / 1048576) }
function pct(p, r) { return r == "-" || r == 0 ? "-" : sprintf("%+.2f%%", 100 * (p - r) / r) }
function key(name) { if (!(name in n)) { keys[++nk] = name; n[name] = 0 } }
function add(name, p, r) { key(name); if (r == "-" || r == 0) return; e = 100 * (p - r) / r; if (e < 0) e = -e; n[name]++; v[name, n[name]] = e }
function mn(a, b, c) { m = a + 0; if (b + 0 < m) m = b + 0; if (c + 0 < m) m = c + 0; return m }
function mx(a, b, c) { m = a + 0; if (b + 0 > m) m = b + 0; if (c + 0 > m) m = c + 0; return m }
# within 3% of the reference, else inside the interval [lo, hi] (the
# prediction and the replays of its bounds), else a miss; counted per NAME
function verdict(name, p, lo, hi, r,   e) {
	if (r == "-" || r == 0) return "-"
	e = 100 * (p - r) / r; if (e < 0) e = -e
	vk[name]++
	if (e <= 3) { v3[name]++; return "ok" }
	if (nb > 0 && hi == "none") { vn[name]++; return (r >= lo ? "no bound" : "MISS (below)") }
	if (nb > 0 && r >= lo && r <= hi) { vi[name]++; return "in interval" }
	vm[name]++; return "MISS"
}
function ivl(lo, hi) { return nb > 0 ? mib(lo) "-" (hi == "none" ? "none" : mib(hi)) : "-" }
# the width of the bounds relative to the prediction, per NAME
function width(name, p, lo, hi) {
	if (nb == 0 || hi == "none" || p == 0) return "-"
	wn[name]++; wv[name, wn[name]] = 100 * (hi - lo) / p
	return sprintf("%.0f%%", 100 * (hi - lo) / p)
}
BEGIN {
	# the summary rows, in this order (those with no figures are left out)
	split("torch vs real recorded|torch vs real recorded, interpolation|torch vs real recorded, extrapolation|" \
	      "torch vs real recorded, ResNets (resnet18, resnet50)|torch vs real recorded, held out (mobilenet_v2, densenet121)|" \
	      "torch alloc vs real recorded|torch reserved vs real recorded|torch captured replay vs real recorded|" \
	      "torch whole-run vs captured replay|torch alloc vs captured replay|torch reserved vs captured replay|" \
	      "torch steady vs captured replay|cnn whole-run vs captured replay|cnn whole-run vs captured replay, interpolation|" \
	      "cnn whole-run vs captured replay, extrapolation|cnn alloc vs captured replay|cnn reserved vs captured replay|" \
	      "cnn reserved vs captured replay, interpolation|cnn reserved vs captured replay, extrapolation|" \
	      "cnn vgg whole-run vs captured replay|cnn resnet whole-run vs captured replay|cnn steady vs captured replay", pre, "|")
	for (q = 1; q in pre; q++) key(pre[q])
}
NR == 1 { next }
{
	ext = $5 == "extrapolation" ? " (extrap.)" : ""
	part = $5 == "extrapolation" ? "extrapolation" : "interpolation"
	nb = $18
	loa = mn($8, $19, $19); hia = $21 == "none" ? "none" : mx($8, $21, $21)
	lor = mn($9, $20, $20); hir = $22 == "none" ? "none" : mx($9, $22, $22)
	if (!hdr[$1]++) {
		if ($1 == "torch")
			print "\n| model | fit on | predict | unaligned sites | pred alloc MiB | pred reserved MiB | vs captured replay (alloc / reserved) | vs real recorded (alloc / reserved) | steady: vs captured (alloc / reserved) | bounded sites | bounds reserved MiB | reserved width | vs real: within 3% or in bounds (alloc / reserved) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|"
		else
			print "\n| model | fit on | predict | unaligned sites | pred alloc MiB | pred reserved MiB | vs captured replay (alloc / reserved) | steady: vs captured (alloc / reserved) | bounded sites | bounds alloc MiB | bounds reserved MiB | reserved width | replays at the site bounds MiB | within 3% or in bounds (alloc / reserved) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	}
	row = "| " $2 " | " $3 " | " $4 ext " | " $6 "/" $7 " | " mib($8) " | " mib($9) " | " pct($8, $10) " / " pct($9, $11)
	if ($1 == "torch") row = row " | " pct($8, $12) " / " pct($9, $13)
	row = row " | " pct($14, $16) " / " pct($15, $17) " | " nb
	if ($1 == "torch")
		row = row " | " ivl(lor, hir) " | " width("torch reserved", $9, lor, hir) " | " verdict("torch alloc", $8, loa, hia, $12) " / " verdict("torch reserved", $9, lor, hir, $13) " |"
	else
		row = row " | " ivl(loa, hia) " | " ivl(lor, hir) " | " width("cnn reserved", $9, lor, hir) " | " (nb > 0 ? mib($23) "-" mib($24) : "-") " | " verdict("cnn alloc", $8, loa, hia, $10) " / " verdict("cnn reserved", $9, lor, hir, $11) " |"
	print row
	add($1 " whole-run vs captured replay", $8, $10); add($1 " whole-run vs captured replay", $9, $11)
	add($1 " whole-run vs captured replay, " part, $8, $10); add($1 " whole-run vs captured replay, " part, $9, $11)
	add($1 " steady vs captured replay", $14, $16); add($1 " steady vs captured replay", $15, $17)
	add($1 " alloc vs captured replay", $8, $10); add($1 " reserved vs captured replay", $9, $11)
	if ($1 == "cnn") {
		add("cnn reserved vs captured replay, " part, $9, $11)
		add("cnn " $2 " whole-run vs captured replay", $8, $10); add("cnn " $2 " whole-run vs captured replay", $9, $11)
	}
	if ($1 == "torch") {
		grp = $2 ~ /^resnet/ ? "ResNets (resnet18, resnet50)" : "held out (mobilenet_v2, densenet121)"
		add("torch vs real recorded", $8, $12); add("torch vs real recorded", $9, $13)
		add("torch vs real recorded, " part, $8, $12); add("torch vs real recorded, " part, $9, $13)
		add("torch vs real recorded, " grp, $8, $12); add("torch vs real recorded, " grp, $9, $13)
		add("torch alloc vs real recorded", $8, $12); add("torch reserved vs real recorded", $9, $13)
		add("torch captured replay vs real recorded", $10, $12); add("torch captured replay vs real recorded", $11, $13)
	}
}
END {
	print "\n| comparison | figures | median abs error | p90 | max |\n|---|---|---|---|---|"
	for (q = 1; q <= nk; q++) {
		k = keys[q]
		m = n[k]
		if (!m) continue
		for (i = 1; i <= m; i++) a[i] = v[k, i]
		# insertion sort (portable awk)
		for (i = 2; i <= m; i++) { x = a[i]; j = i - 1; while (j > 0 && a[j] > x) { a[j + 1] = a[j]; j-- } a[j + 1] = x }
		med = m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
		p90 = a[int(0.9 * (m - 1)) + 1]
		printf "| %s | %d | %.2f%% | %.2f%% | %.2f%% |\n", k, m, med, p90, a[m]
	}
	print "\n| predictions | figures | within 3% | outside 3%, inside the bounds | outside 3%, no upper bound | outside the bounds |\n|---|---|---|---|---|---|"
	split("cnn alloc|cnn reserved|torch alloc|torch reserved", vs, "|")
	for (q = 1; q <= 4; q++) {
		k = vs[q]
		printf "| %s%s | %d | %d | %d | %d | %d |\n", k, k ~ /^torch/ ? " (vs real recorded)" : " (vs captured replay)", vk[k], v3[k], vi[k], vn[k], vm[k]
	}
	print "\n| bounds of reserved, width (hi - lo) / prediction | with an upper bound | median | max |\n|---|---|---|---|"
	split("cnn reserved|torch reserved", ws, "|")
	for (q = 1; q <= 2; q++) {
		k = ws[q]; m = wn[k]
		if (!m) { printf "| %s | 0 | - | - |\n", k; continue }
		for (i = 1; i <= m; i++) a[i] = wv[k, i]
		for (i = 2; i <= m; i++) { x = a[i]; j = i - 1; while (j > 0 && a[j] > x) { a[j + 1] = a[j]; j-- } a[j + 1] = x }
		med = m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
		printf "| %s | %d | %.0f%% | %.0f%% |\n", k, m, med, a[m]
	}
}' "$TSV" > "$OUT/accuracy.md"
cat "$OUT/accuracy.md"

# ------------------------------------------------------------ seed table
for m in vgg resnet; do
	for p in pytorch cuda_malloc; do
		files=()
		for b in 8 16 32 64 128 256; do files+=("traces/cnn/cnn-$m-b$b.trace.gz"); done
		"$G" explain batch "${files[@]}" --policy "$p" > "$OUT/explain-$m-$p.txt"
		"$G" explain batch "${files[@]}" --policy "$p" --steady > "$OUT/explain-$m-$p-steady.txt"
		printf '\n$ gpumemsim explain batch traces/cnn/cnn-%s-b{8..256}.trace.gz --policy %s\n' "$m" "$p"
		cat "$OUT/explain-$m-$p.txt"
		printf '\n$ ... --steady\n'
		cat "$OUT/explain-$m-$p-steady.txt"
	done
done
