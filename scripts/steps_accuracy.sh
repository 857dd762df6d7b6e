#!/usr/bin/env bash
# steps_accuracy.sh: each step's peaks from a capture's replay against the
# real caching allocator's own per-step peaks (users' question 10, `run
# --steps`; docs/steps.md).
#
#   scripts/steps_accuracy.sh [GPUMEMSIM] [DIR]   (build/gpumemsim, traces/torch/multiscale)
#
# DIR holds recipe captures (torch-MODEL-bB.trace.gz, no caching) and their
# truth runs (truth/MODEL-bB-default.json: step_peak_allocated and
# step_peak_reserved, torch.cuda.max_memory_* with the peaks reset before
# every step). Each capture is replayed under pytorch (synthetic addresses,
# as every what-if is); per step: real and predicted peak allocated and
# reserved and their relative errors ("(late)": the step's range was
# recorded late, `run --steps` says why); then the summary, with and
# without those steps. Prints Markdown; deterministic. Needs jq.
set -eu -o pipefail
. "$(dirname "$0")/median_awk.sh"
G=${1:-build/gpumemsim}
D=${2:-traces/torch/multiscale}
die() { echo "steps_accuracy.sh: $*" >&2; exit 1; }
[ -x "$G" ] || die "$G: not an executable (run make)"
command -v jq > /dev/null || die "needs jq"
ls "$D"/torch-*.trace.gz > /dev/null 2>&1 || die "$D: no captures"
echo "| model | batch | step | input | real allocated | predicted | error | real reserved | predicted | error | peak at |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
for t in "$D"/torch-*.trace.gz; do
	n=$(basename "$t" .trace.gz); n=${n#torch-}
	truth=$D/truth/$n-default.json
	[ -f "$truth" ] || die "$truth: missing"
	"$G" run "$t" --policy pytorch --no-db --steps --json > "$tmp/steps.json" 2> /dev/null ||
		die "run $t failed"
	jq -r --slurpfile tr "$truth" --arg n "$n" '
		def gib: (. / 1073741824 * 100 | round / 100 | tostring) + " GiB";
		def err(p; r): if r > 0 then ((p - r) / r * 1000 | round / 10) as $e |
			(if $e == 0 then "0" else ($e | tostring) end) + "%" else "-" end;
		($tr[0]) as $t |
		.steps.each | to_entries[] | .key as $i | .value as $s |
		($t.step_peak_allocated[$i]) as $ra | ($t.step_peak_reserved[$i]) as $rr |
		($t.img_sizes // [$t.img]) as $sz |
		"| \($n | split("-b")[0]) | \($n | split("-b")[1]) | \($s.name)\(if $s.late then " (late)" else "" end) | \($sz[$i % ($sz | length)]) | \($ra | gib) | \($s.peak_allocated | gib) | \(err($s.peak_allocated; $ra)) | \($rr | gib) | \($s.peak_reserved | gib) | \(err($s.peak_reserved; $rr)) | \($s.peak_at) |"' \
		"$tmp/steps.json"
done | tee "$tmp/rows"
awk -F'|' "$AWK_MEDIAN"'
function abs(x) { return x < 0 ? -x : x }
{ a = $8; r = $11; gsub(/[ %]/, "", a); gsub(/[ %]/, "", r)
  if (a != "-") { ea[++na] = abs(a + 0) } if (r != "-") { er[++nr] = abs(r + 0) }
  if ($4 !~ /late/) { if (a != "-") { oa[++noa] = abs(a + 0) } if (r != "-") { orr[++nor] = abs(r + 0) } } }
END {
	if (!na) exit 1
	ma = median(ea, na); xa = ea[na]; mr = median(er, nr); xr = er[nr]
	printf "\nper-step peak allocated: %d steps, |error| median %.1f%%, max %.1f%%\n", na, ma, xa
	printf "per-step peak reserved: %d steps, |error| median %.1f%%, max %.1f%%\n", nr, mr, xr
	if (noa < na) {
		ma = median(oa, noa); xa = oa[noa]; mr = median(orr, nor); xr = orr[nor]
		printf "without the %d step(s) whose range was recorded late: peak allocated |error| median %.1f%%, max %.1f%%; reserved median %.1f%%, max %.1f%% (%d steps)\n", na - noa, ma, xa, mr, xr, noa
	}
}' "$tmp/rows"
