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
	local s="$OUT/pred/steady.trace.gz"
	"$G" whatif steady "$1" -o "$s"
	peaks "$s"
	rm -f "$s"
}

printf 'set\tmodel\tfit\tpredict\tkind\tunaligned\tsites\tpred_alloc\tpred_res\tcap_alloc\tcap_res\ttruth_alloc\ttruth_res\tpred_alloc_s\tpred_res_s\tcap_alloc_s\tcap_res_s\n' > "$TSV"

one() { # SET MODEL FITLIST PREDICT CAPTURE_PATTERN TRUTH_JSON_OR_-
	local set=$1 model=$2 fit=$3 b=$4 pat=$5 truth=$6 from=() f
	for f in ${fit//,/ }; do from+=("${pat//@/$f}"); done
	local pred="$OUT/pred/$set-$model-b$b-from-${fit//,/_}.trace.gz"
	local rep
	rep=$("$G" whatif batch --max-unaligned 100 --json --from "${from[@]}" --batch "$b" -o "$pred" \
		--sites "${pred%.trace.gz}.sites.tsv")
	local un sites kind
	un=$(jq -r .unaligned <<<"$rep")
	sites=$(jq -r .sites <<<"$rep")
	kind=$(jq -r 'if .extrapolation > 0 then "extrapolation" else "interpolation" end' <<<"$rep")
	local pa pr ca cr ta=- tr=-
	read -r pa pr < <(peaks "$pred")
	read -r ca cr < <(peaks "${pat//@/$b}")
	if [ "$truth" != - ]; then
		ta=$(jq -r '.stats["allocated_bytes.all.peak"]' "$truth")
		tr=$(jq -r '.stats["reserved_bytes.all.peak"]' "$truth")
	fi
	local pas prs cas crs
	read -r pas prs < <(steady "$pred")
	read -r cas crs < <(steady "${pat//@/$b}")
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
		"$set" "$model" "$fit" "$b" "$kind" "$un" "$sites" "$pa" "$pr" "$ca" "$cr" "$ta" "$tr" \
		"$pas" "$prs" "$cas" "$crs" >> "$TSV"
}

for m in resnet18 resnet50 mobilenet_v2 densenet121; do
	all="16 32 64 128"
	for b in $all; do
		fit=$(for x in $all; do [ "$x" = "$b" ] || printf '%s,' "$x"; done)
		one torch "$m" "${fit%,}" "$b" "traces/torch/torch-$m-b@.trace.gz" \
			"traces/torch/truth/$m-b$b-default.json"
	done
done
for m in vgg resnet; do
	for c in $CNN_FITS; do
		fit=${c%%:*}
		for b in ${c#*:}; do
			for bb in ${b//,/ }; do
				one cnn "$m" "$fit" "$bb" "traces/cnn/cnn-$m-b@.trace.gz" -
			done
		done
	done
done

# ---------------------------------------------------------------- tables
awk -F'\t' '
function mib(x) { return x == "-" ? "-" : sprintf("%.1f", x / 1048576) }
function pct(p, r) { return r == "-" || r == 0 ? "-" : sprintf("%+.2f%%", 100 * (p - r) / r) }
function add(name, p, r) { if (r == "-" || r == 0) return; e = 100 * (p - r) / r; if (e < 0) e = -e; n[name]++; v[name, n[name]] = e }
NR == 1 { next }
{
	ext = $5 == "extrapolation" ? " (extrap.)" : ""
	if (!hdr[$1]++) {
		if ($1 == "torch")
			print "\n| model | fit on | predict | unaligned sites | pred alloc MiB | pred reserved MiB | vs captured replay (alloc / reserved) | vs real recorded (alloc / reserved) | steady: vs captured (alloc / reserved) |\n|---|---|---|---|---|---|---|---|---|"
		else
			print "\n| model | fit on | predict | unaligned sites | pred alloc MiB | pred reserved MiB | vs captured replay (alloc / reserved) | steady: vs captured (alloc / reserved) |\n|---|---|---|---|---|---|---|---|"
	}
	row = "| " $2 " | " $3 " | " $4 ext " | " $6 "/" $7 " | " mib($8) " | " mib($9) " | " pct($8, $10) " / " pct($9, $11)
	if ($1 == "torch") row = row " | " pct($8, $12) " / " pct($9, $13)
	row = row " | " pct($14, $16) " / " pct($15, $17) " |"
	print row
	add($1 " whole-run vs captured replay", $8, $10); add($1 " whole-run vs captured replay", $9, $11)
	add($1 " steady vs captured replay", $14, $16); add($1 " steady vs captured replay", $15, $17)
	add($1 " alloc vs captured replay", $8, $10); add($1 " reserved vs captured replay", $9, $11)
	if ($1 == "torch") {
		add("torch vs real recorded", $8, $12); add("torch vs real recorded", $9, $13)
		add("torch alloc vs real recorded", $8, $12); add("torch reserved vs real recorded", $9, $13)
		add("torch captured replay vs real recorded", $10, $12); add("torch captured replay vs real recorded", $11, $13)
	}
}
END {
	print "\n| comparison | figures | median abs error | p90 | max |\n|---|---|---|---|---|"
	PROCINFO["sorted_in"] = "@ind_str_asc"
	for (k in n) {
		m = n[k]
		for (i = 1; i <= m; i++) a[i] = v[k, i]
		# insertion sort (portable awk)
		for (i = 2; i <= m; i++) { x = a[i]; j = i - 1; while (j > 0 && a[j] > x) { a[j + 1] = a[j]; j-- } a[j + 1] = x }
		med = m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
		p90 = a[int(0.9 * (m - 1)) + 1]
		printf "| %s | %d | %.2f%% | %.2f%% | %.2f%% |\n", k, m, med, p90, a[m]
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
