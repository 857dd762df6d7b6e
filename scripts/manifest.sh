#!/usr/bin/env bash
# manifest.sh: keep traces/MANIFEST.tsv listing every shipped trace.
#
#   scripts/manifest.sh [--check] [GPUMEMSIM]
#
# The shipped traces are the *.trace.gz files git tracks under traces/
# (every *.trace.gz there when the tree is not a git checkout). A row made
# at capture time is kept as it is (its date and command say how the file
# was made); a trace without a row gets one from the file itself: labels
# (workload, model, batch, image, steps, algo), header (gpu, driver, cuda,
# cudnn, command), `gpumemsim trace stats` (records, allocs, kernels, NVTX
# ranges, kernel-buffer links, peak live bytes), the file's size, the torch
# version from the JSON written beside it by the recipe (NAME.capture.json
# or NAME.json), and the date git added it. Rows of files that are gone are
# dropped. Rows are sorted by file.
#
# --check: change nothing; list the traces without a row and the rows
# without a file on stderr and exit 1 if there are any.
# Needs jq. Exit: 0 ok, 1 missing rows (--check) or an error, 2 usage.
set -u
cd "$(dirname "$0")/.." || exit 1
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
case ${1:-} in -*) echo "usage: $0 [--check] [GPUMEMSIM]" >&2; exit 2 ;; esac
G=${1:-build/gpumemsim}
M=traces/MANIFEST.tsv
[ -r "$M" ] || { echo "manifest: $M: missing" >&2; exit 1; }

if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
	files=$(git ls-files 'traces/*.trace.gz' | sed 's|^traces/||' | sort)
else
	files=$(cd traces && find . -name '*.trace.gz' | sed 's|^\./||' | sort)
fi
listed=$(sed 1d "$M" | cut -f1 | sort)
missing=$(comm -23 <(printf '%s\n' "$files") <(printf '%s\n' "$listed") | sed '/^$/d')
gone=$(comm -13 <(printf '%s\n' "$files") <(printf '%s\n' "$listed") | sed '/^$/d')

if [ "$check" = 1 ]; then
	[ -z "$missing" ] && [ -z "$gone" ] && exit 0
	for f in $missing; do echo "manifest: not in $M: traces/$f" >&2; done
	for f in $gone; do echo "manifest: in $M but not shipped: traces/$f" >&2; done
	echo "manifest: run scripts/manifest.sh to update $M" >&2
	exit 1
fi

[ -x "$G" ] || { echo "manifest: $G: not an executable (run make)" >&2; exit 1; }
command -v jq > /dev/null || { echo "manifest: needs jq" >&2; exit 1; }
# one row for traces/F from the file itself
row() {
	local f=$1 p=traces/$1 stats torch=- j= date
	for j in "${p%.trace.gz}.capture.json" "${p%.trace.gz}.json" ""; do
		[ -r "$j" ] && break
	done
	[ -n "$j" ] && torch=$(jq -r '.torch // "-"' "$j" 2> /dev/null || echo -)
	date=$(git log --diff-filter=A --format=%cs -1 -- "$p" 2> /dev/null)
	if ! zcat "$p" 2> /dev/null | head -1 | grep -q '^gpumemsim-trace '; then
		# the recipe's truth half: the caching allocator's own record
		# ("action addr size stream time_us") beside its memory_stats()
		# JSON, as the torch-truth rows: records = its entries, peak =
		# allocated_bytes.all.peak
		[ -n "$j" ] || { echo "manifest: $p: not a trace and no JSON beside it" >&2; return 1; }
		jq -r --arg f "$f" --arg date "${date:--}" --arg bytes "$(wc -c < "$p")" \
			--arg n "$(zcat "$p" | wc -l)" '
			[$f, "torch-truth", .model, .batch, .img, "-", "-", .gpu, "-", "-", .cudnn,
			 .torch // "-", $n, "-", "-", "-", "-", .stats["allocated_bytes.all.peak"],
			 $bytes, $date, "capture/torch/recipe.sh (truth half: caching allocator record)"]
			| map(. // "-" | tostring) | join("\t")' "$j"
		return
	fi
	stats=$("$G" trace stats --json "$p") || { echo "manifest: $p: unreadable" >&2; return 1; }
	jq -r --arg f "$f" --arg torch "$torch" --arg date "${date:--}" --arg bytes "$(wc -c < "$p")" '
		def l(k): .labels[k] // "-";
		def h(k): .header[k] // "-" | tostring | gsub("[\t\n]"; " ");
		[$f, l("workload"), l("model"), l("batch"), l("image"), l("steps"), l("algo"),
		 h("gpu"), h("driver"), h("cuda"), h("cudnn"), $torch, .records, .allocs, .kernels,
		 .markers, .kernel_buffer_links, .peak_live_bytes, $bytes, $date, h("command")]
		| map(tostring) | join("\t")' <<< "$stats"
}
tmp=$(mktemp "$M.XXXXXX") && rows=$(mktemp) || exit 1
trap 'rm -f "$tmp" "$rows"' EXIT
sed 1d "$M" | awk -F'\t' 'NR == FNR { gone[$1] = 1; next } !($1 in gone)' <(printf '%s\n' "$gone") - > "$rows" || exit 1
for f in $missing; do
	row "$f" >> "$rows" || exit 1
done
{ head -1 "$M"; sort -t "$(printf '\t')" -k1,1 "$rows"; } > "$tmp" || exit 1
mv "$tmp" "$M" || exit 1
trap 'rm -f "$rows"' EXIT
echo "manifest: $M: $(printf '%s\n' $missing | sed '/^$/d' | wc -l) rows added, $(printf '%s\n' $gone | sed '/^$/d' | wc -l) dropped" >&2
