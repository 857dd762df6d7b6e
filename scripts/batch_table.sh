#!/usr/bin/env bash
# batch_table.sh: the batch-size table for the seed's question ("memory looks
# smaller at a larger batch size"), from the CNN logs that
# scripts/capture_all.sh leaves in traces/measurements and the CNN traces in
# traces/cnn. Prints Markdown on stdout; a value smaller than the one at the
# next smaller batch is marked with a "v" (non-monotonic point).
#
#   scripts/batch_table.sh [MEASUREMENTS_DIR [TRACES_DIR [GPUMEMSIM]]]
#
# Table 1 (one per image size found): peak of live bytes (the CNN's own count
# of its cudaMallocs, MiB) per network, algorithm mode and batch, the
# largest workspace one convolution got (MiB), and what `fastest` costs over
# `min-workspace` (the memory due to the algorithm choice and its search);
# then, per batch step, the convolutions whose chosen workspace shrank.
# Table 2 (fastest, captured): the captured trace's peak of live device bytes
# (kind 3) against the CNN's own count in the same run, and the peak from the
# start of step 1 on (steady state, without the algorithm search).
set -u
M=${1:-traces/measurements}
T=${2:-traces/cnn}
G=${3:-build/gpumemsim}
models="vgg resnet"
algos="fastest heuristic min-workspace"

# PEAK_BYTES MAXWS_BYTES of one CNN log, or "- -" when the run failed.
log_figures() {
	awk '/^cnn: peak_live_bytes/ {p = $3}
	     /^cnn: algo / {for (i = 8; i <= 12; i += 2) if ($i + 0 > w) w = $i + 0}
	     END {if (p == "") print "- -"; else printf "%s %.0f\n", p, w}' "$1" 2>/dev/null || echo "- -"
}
mib() { awk -v b="$1" 'BEGIN {if (b == "-") print "-"; else printf "%.1f", b / 1048576}'; }

# Every directory of CNN logs: cnn (image 64 by default) and cnn-iN.
for dir in "$M"/cnn "$M"/cnn-i*; do
	[ -d "$dir" ] || continue
	first=$(ls "$dir"/*-fastest.log 2>/dev/null | head -1)
	[ -n "$first" ] || continue
	img=$(sed -n 's/^cnn: model=.* image=\([0-9]*\) .*/\1/p' "$first" | head -1)
	nsteps=$(sed -n 's/^cnn: model=.* steps=\([0-9]*\) .*/\1/p' "$first" | head -1)
	batches=$(ls "$dir" | sed -n 's/^vgg-b\([0-9]*\)-fastest\.log$/\1/p' | sort -n | tr '\n' ' ')
	echo "#### Image ${img}x${img}, ${nsteps} steps, peak of live bytes in MiB (largest single-convolution workspace in MiB)"
	echo
	hdr="| batch |"; sep="|---:|"
	for m in $models; do for a in $algos; do hdr="$hdr $m $a |"; sep="$sep---:|"; done; done
	for m in $models; do hdr="$hdr $m fastest - min-workspace |"; sep="$sep---:|"; done
	echo "$hdr"; echo "$sep"
	declare -A prev=() prevws=() pk=() prevd=()
	for b in $batches; do
		row="| $b |"
		for m in $models; do
			for a in $algos; do
				set -- $(log_figures "$dir/$m-b$b-$a.log")
				p=$1 w=$2 mark="" wmark=""
				if [ "$p" != "-" ] && [ -n "${prev[$m$a]:-}" ] && [ "$p" -lt "${prev[$m$a]}" ]; then mark=" v"; fi
				if [ "$w" != "-" ] && [ -n "${prevws[$m$a]:-}" ] && [ "$w" -lt "${prevws[$m$a]}" ]; then wmark=" v"; fi
				[ "$p" != "-" ] && prev[$m$a]=$p
				[ "$w" != "-" ] && prevws[$m$a]=$w
				row="$row $(mib "$p")$mark ($(mib "$w")$wmark) |"
				pk[$m$a]=$p
			done
		done
		for m in $models; do
			d=- mark=""
			if [ "${pk[${m}fastest]}" != "-" ] && [ "${pk[${m}min-workspace]}" != "-" ]; then
				d=$((pk[${m}fastest] - pk[${m}min-workspace]))
				[ -n "${prevd[$m]:-}" ] && [ "$d" -lt "${prevd[$m]}" ] && mark=" v"
				prevd[$m]=$d
			fi
			row="$row $(mib "$d")$mark |"
		done
		echo "$row"
	done
	unset prev prevws pk prevd
	echo
	echo "Convolution directions whose chosen workspace shrinks from one batch to the next (count; largest drop: layer direction, algorithm and MiB before -> after):"
	echo
	echo "| model | mode | batch | shrinking | largest drop |"
	echo "|---|---|---|---:|---|"
	for m in $models; do
		for a in fastest heuristic; do
			pb=""
			for b in $batches; do
				if [ -n "$pb" ] && [ -f "$dir/$m-b$pb-$a.log" ] && [ -f "$dir/$m-b$b-$a.log" ]; then
					awk -v pb="$pb" -v b="$b" -v m="$m" -v a="$a" '
					BEGIN {split("fwd bwd_data bwd_filter", dn, " ")}
					FNR == NR && /^cnn: algo / {for (d = 0; d < 3; d++) {A[$3, d] = $(7 + 2 * d); W[$3, d] = $(8 + 2 * d)}; next}
					/^cnn: algo / {for (d = 0; d < 3; d++) if ($(8 + 2 * d) + 0 < W[$3, d] + 0) {
						n++; drop = W[$3, d] - $(8 + 2 * d)
						if (drop > best) {best = drop; what = sprintf("%s %s: %s %.1f -> %s %.1f", $3, dn[d + 1],
							A[$3, d], W[$3, d] / 1048576, $(7 + 2 * d), $(8 + 2 * d) / 1048576)}}}
					END {printf "| %s | %s | %s -> %s | %d | %s |\n", m, a, pb, b, n, n ? what : "-"}' \
						"$dir/$m-b$pb-$a.log" "$dir/$m-b$b-$a.log"
				fi
				pb=$b
			done
		done
	done
	echo
done

# Table 2: the captured fastest runs.
[ -x "$G" ] || { echo "(no $G: table 2 needs gpumemsim)"; exit 0; }
echo "#### Captured runs (fastest): trace against the CNN's own count, steady state, MiB"
echo
echo "| model | batch | CNN peak | trace peak (device, kind 3) | difference | trace peak from step 1 on | trace peak_live_bytes (all kinds) |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for m in $models; do
	pst=""
	for b in $(ls "$T" 2>/dev/null | sed -n "s/^cnn-$m-b\([0-9]*\)\.trace\.gz$/\1/p" | sort -n); do
		t=$T/cnn-$m-b$b.trace.gz
		cnnp=$(awk '/^cnn: peak_live_bytes/ {print $3}' "$M/cnn/capture-$m-b$b.log" 2>/dev/null)
		set -- $("$G" trace cat "$t" | awk '
			$1 == "r" && $4 == "\"step" && $5 == "1\"" {steady = 1}
			$1 == "a" && $6 == 3 {sz[$3] = $4; live += $4; if (live > peak) peak = live
			                      if (steady && live > sp) sp = live}
			$1 == "f" && ($3 in sz) {live -= sz[$3]; delete sz[$3]}
			END {printf "%.0f %.0f\n", peak, sp}')
		tp=$1 sp=$2
		all=$("$G" trace stats --json "$t" | sed 's/.*"peak_live_bytes":\([0-9]*\).*/\1/')
		mark=""
		[ -n "$pst" ] && [ "$sp" -lt "$pst" ] && mark=" v"
		pst=$sp
		echo "| $m | $b | $(mib "${cnnp:--}") | $(mib "$tp") | $(mib $((tp - ${cnnp:-0}))) | $(mib "$sp")$mark | $(mib "$all") |"
	done
done
