#!/usr/bin/env bash
# profile_recipe.sh: the three inputs users already have, taken of the same
# training steps, imported and compared (docs/import.md):
#
#   capture/torch/profile_recipe.sh MODEL BATCH OUTDIR      # e.g. resnet18 32 out/prof
#
# Phases (each logs to OUTDIR/logs/PHASE.log; one failing does not stop the
# others that do not need its output):
#   capture     gpumemsim capture of train_torch.py --mode capture
#               (PYTORCH_NO_CUDA_MEMORY_CACHING=1: every tensor a cudaMalloc),
#               the capture half of recipe.sh         -> capture-M-bB.trace.gz
#   profile     train_torch.py --mode profile: torch.profiler, profile_memory,
#               every step; a separate run, not captured (torch.profiler and
#               the capture library both drive CUPTI) -> kineto-M-bB.json
#   snapshot    train_torch.py --mode snapshot: _record_memory_history, then
#               _dump_snapshot                      -> snapshot-M-bB.pickle
#   nohistory   the same without _record_memory_history -> snapshot-M-bB-nohistory.pickle
#   import-kineto     gpumemsim import kineto      -> kineto-M-bB.trace.gz
#   import-snapshot   gpumemsim import torch-snapshot --label batch=B -> snapshot-M-bB.trace.gz
#   import-nohistory  the same on the snapshot without history: must fail
#                     with "no allocation history" (the phase passes when it does)
#   compare     gpumemsim run --policy pytorch --json on each trace, trace
#               stats, allocations and kernels per step -> compare.tsv, compare.md
#
# Environment: STEPS (5), WARMUP (2), IMG (224), PYTHON (python3), GPUMEMSIM
# (build/gpumemsim), SKIP_CAPTURE=1 / SKIP_PROFILE=1 / SKIP_SNAPSHOT=1 to leave
# a torch run out, REUSE=1 to run no torch at all and import and compare what
# OUTDIR already holds (no torch needed then).
# Exit: 0 every phase passed, 1 a phase failed (the summary says which),
# 2 usage, or python3 without torch (and no REUSE=1).
set -euo pipefail

if [ $# -ne 3 ]; then
	echo "usage: $0 MODEL BATCH OUTDIR  (e.g. resnet18 32 out/prof)" >&2
	exit 2
fi
model=$1 batch=$2 outdir=$3
case $batch in ''|*[!0-9]*) echo "profile_recipe: BATCH '$batch' is not a number" >&2; exit 2;; esac
case $model in ''|*[!A-Za-z0-9_]*) echo "profile_recipe: MODEL '$model' is not a torchvision name" >&2; exit 2;; esac

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${GPUMEMSIM:-$root/build/gpumemsim}
py=${PYTHON:-python3}
steps=${STEPS:-5} warmup=${WARMUP:-2} img=${IMG:-224}
reuse=${REUSE:-0}

if [ ! -x "$bin" ]; then
	echo "profile_recipe: $bin not built (make; make capture)" >&2
	exit 1
fi
if ! command -v "$py" >/dev/null 2>&1; then
	echo "profile_recipe: $py not found (set PYTHON)" >&2
	exit 2
fi
if [ "$reuse" != 1 ] && ! "$py" -c 'import torch, torchvision' >/dev/null 2>&1; then
	echo "profile_recipe: $py has no torch/torchvision: the capture, the profile and the" >&2
	echo "profile_recipe: snapshots need them (and a GPU); REUSE=1 imports and compares" >&2
	echo "profile_recipe: what $outdir already holds" >&2
	exit 2
fi

mkdir -p "$outdir/logs"
outdir=$(cd "$outdir" && pwd)
logs=$outdir/logs
tag=$model-b$batch
common=(--model "$model" --batch "$batch" --img "$img" --steps "$steps" --warmup "$warmup")
labels=(--label workload=torch --label model="$model" --label batch="$batch")
cap=$outdir/capture-$tag.trace.gz
prof=$outdir/kineto-$tag.json
snap=$outdir/snapshot-$tag.pickle
nohist=$outdir/snapshot-$tag-nohistory.pickle
kin_trace=$outdir/kineto-$tag.trace.gz
snap_trace=$outdir/snapshot-$tag.trace.gz

declare -A status=()
order=()

# phase NAME CMD...: run CMD with its output in logs/NAME.log (and on
# stderr), record ok or FAILED; never stops the script.
phase() {
	local name=$1
	shift
	order+=("$name")
	echo "profile_recipe: [$name] $*" >&2
	local start=$SECONDS rc
	# errexit inside the phase (its commands stop it), not around it
	set +e
	(set -e; "$@") 2>&1 | tee "$logs/$name.log" >&2
	rc=${PIPESTATUS[0]}
	set -e
	if [ "$rc" = 0 ]; then
		status[$name]=ok
	else
		status[$name]="FAILED (exit $rc, see logs/$name.log)"
	fi
	echo "profile_recipe: [$name] ${status[$name]} in $((SECONDS - start)) s" >&2
}

skip() {
	order+=("$1")
	status[$1]="skipped: $2"
	echo "profile_recipe: [$1] skipped: $2" >&2
}

# ------------------------------------------------------------ torch runs

# A phase that fails must not leave an earlier run's file to be imported or
# compared as if it were this one's.
if [ "$reuse" != 1 ]; then
	[ "${SKIP_CAPTURE:-0}" = 1 ] || rm -f "$cap"
	[ "${SKIP_PROFILE:-0}" = 1 ] || rm -f "$prof"
	[ "${SKIP_SNAPSHOT:-0}" = 1 ] || rm -f "$snap" "$nohist"
fi
rm -f "$kin_trace" "$snap_trace" "$outdir/compare.md" "$outdir/compare.tsv"

if [ "$reuse" = 1 ]; then
	skip capture "REUSE=1"
	skip profile "REUSE=1"
	skip snapshot "REUSE=1"
	skip nohistory "REUSE=1"
else
	if [ "${SKIP_CAPTURE:-0}" = 1 ]; then
		skip capture "SKIP_CAPTURE=1"
	else
		phase capture env -u PYTORCH_CUDA_ALLOC_CONF PYTORCH_NO_CUDA_MEMORY_CACHING=1 \
			"$bin" capture "${labels[@]}" -o "$cap" -- \
			"$py" "$here/train_torch.py" --mode capture "${common[@]}" \
			--json "$outdir/capture-$tag.json"
	fi
	if [ "${SKIP_PROFILE:-0}" = 1 ]; then
		skip profile "SKIP_PROFILE=1"
	else
		phase profile env -u PYTORCH_NO_CUDA_MEMORY_CACHING -u PYTORCH_CUDA_ALLOC_CONF \
			"$py" "$here/train_torch.py" --mode profile "${common[@]}" --out "$prof" \
			--json "$outdir/kineto-$tag.info.json"
	fi
	if [ "${SKIP_SNAPSHOT:-0}" = 1 ]; then
		skip snapshot "SKIP_SNAPSHOT=1"
		skip nohistory "SKIP_SNAPSHOT=1"
	else
		phase snapshot env -u PYTORCH_NO_CUDA_MEMORY_CACHING -u PYTORCH_CUDA_ALLOC_CONF \
			"$py" "$here/train_torch.py" --mode snapshot "${common[@]}" --out "$snap"
		phase nohistory env -u PYTORCH_NO_CUDA_MEMORY_CACHING -u PYTORCH_CUDA_ALLOC_CONF \
			"$py" "$here/train_torch.py" --mode snapshot --no-history "${common[@]}" \
			--out "$nohist"
	fi
fi

# --------------------------------------------------------------- imports

if [ -f "$prof" ]; then
	phase import-kineto "$bin" import kineto "$prof" -o "$kin_trace" "${labels[@]}"
else
	skip import-kineto "no $prof"
fi
if [ -f "$snap" ]; then
	phase import-snapshot "$bin" import torch-snapshot "$snap" -o "$snap_trace" "${labels[@]}"
else
	skip import-snapshot "no $snap"
fi

# The snapshot without history must be refused, with the message that says
# how to record one, and leave no trace.
expect_no_history() {
	local out=$outdir/.nohistory-$$.trace.gz rc=0 msg
	msg=$("$bin" import torch-snapshot "$nohist" -o "$out" --label batch="$batch" 2>&1) || rc=$?
	echo "$msg"
	if [ "$rc" = 0 ]; then
		rm -f "$out"
		echo "profile_recipe: the snapshot without history was imported: expected a refusal"
		return 1
	fi
	if [ -e "$out" ]; then
		echo "profile_recipe: a refused import left $out"
		return 1
	fi
	if [ "$rc" != 1 ] || ! grep -q "no allocation history" <<<"$msg"; then
		echo "profile_recipe: exit $rc, but not the 'no allocation history' message"
		return 1
	fi
	echo "profile_recipe: refused as expected (exit $rc)"
}
if [ -f "$nohist" ]; then
	phase import-nohistory expect_no_history
else
	skip import-nohistory "no $nohist"
fi

# --------------------------------------------------------------- compare

# Allocations and kernels per "step N" range (steps do not overlap; the
# train loop synchronises inside each, so a step's kernels end inside it).
# In python: the times are 19-digit nanoseconds, beyond awk's doubles.
per_step() {
	"$bin" trace cat --trace "$1" | "$py" -c '
import sys
names, steps, counts = {}, [], {}
for line in sys.stdin:
    f = line.split(" ")
    t = f[0]
    if t == "S":
        names[f[1]] = " ".join(f[2:]).rstrip("\n")
    elif t == "r":
        n = names.get(f[3], "")
        w = n.split(" ")
        if len(w) == 2 and w[0] == "step" and w[1].isdigit():
            steps.append((int(f[1]), int(f[2]), n))
            counts[n] = [0, 0]
    elif t in ("a", "k"):
        at = int(f[1])
        for b, e, n in reversed(steps):
            if b <= at < e:
                counts[n][0 if t == "a" else 1] += 1
                break
for b, e, n in steps:
    print("%s\t%d\t%d" % (n, counts[n][0], counts[n][1]))
'
}

compare() {
	local any=0 t src
	local -a extra
	for src in capture kineto snapshot; do
		extra=()
		case $src in
		capture)
			t=$cap
			extra=(--allocator-source libc10_cuda)
			;;
		kineto) t=$kin_trace ;;
		snapshot) t=$snap_trace ;;
		esac
		rm -f "$outdir/run-$src.json" "$outdir/stats-$src.json" "$outdir/steps-$src.tsv"
		[ -f "$t" ] || { echo "compare: no $t"; continue; }
		any=1
		# the capture: memory outside PyTorch's allocator (cuBLAS, cuDNN,
		# module globals) beside the policy, as in the real run
		"$bin" run "$t" --policy pytorch --json --no-db --quiet "${extra[@]}" \
			>"$outdir/run-$src.json"
		"$bin" trace stats "$t" --json >"$outdir/stats-$src.json"
		per_step "$t" >"$outdir/steps-$src.tsv"
	done
	[ "$any" = 1 ] || { echo "compare: no trace to compare"; return 1; }
	"$py" - "$outdir" "$model" "$batch" <<'PY'
import json, os, sys
out, model, batch = sys.argv[1], sys.argv[2], sys.argv[3]
srcs = [s for s in ("capture", "kineto", "snapshot") if os.path.exists(os.path.join(out, "run-%s.json" % s))]
run = {s: json.load(open(os.path.join(out, "run-%s.json" % s))) for s in srcs}
stats = {s: json.load(open(os.path.join(out, "stats-%s.json" % s))) for s in srcs}
steps = {}
for s in srcs:
    steps[s] = {}
    for line in open(os.path.join(out, "steps-%s.tsv" % s)):
        name, a, k = line.rstrip("\n").split("\t")
        steps[s][name] = (int(a), int(k))
def gib(v):
    return "" if v is None or v == "" else "%.3f" % (int(v) / 2**30)
rows = [
    ("allocations ('a' records)", lambda s: run[s]["allocs"]),
    ("frees", lambda s: run[s]["frees"]),
    ("peak requested, GiB (live bytes)", lambda s: gib(run[s]["peak_requested"])),
    ("pytorch replay: peak allocated, GiB", lambda s: gib(run[s]["peak_allocated"])),
    ("pytorch replay: peak reserved, GiB", lambda s: gib(run[s]["peak_reserved"])),
    ("memory outside the allocator (capture), GiB",
     lambda s: gib(run[s].get("foreign", {}).get("peak_foreign")) if "foreign" in run[s] else ""),
    ("real allocator: peak allocated, GiB (kineto Total Allocated)",
     lambda s: gib(run[s]["labels"].get("kineto_peak_allocated", ""))),
    ("real allocator: peak reserved, GiB (kineto Total Reserved)",
     lambda s: gib(run[s]["labels"].get("kineto_peak_reserved", ""))),
    ("live before the trace starts, GiB", lambda s: gib(run[s]["labels"].get("kineto_before_profile", ""))),
    ("kernels", lambda s: stats[s]["kernels"]),
    ("memcpys", lambda s: stats[s]["memcpys"]),
    ("memsets", lambda s: stats[s]["memsets"]),
    ("step ranges", lambda s: len(steps[s])),
    ("trace duration, s", lambda s: "%.3f" % (stats[s]["duration_ns"] / 1e9)),
]
names = sorted({n for s in srcs for n in steps[s]}, key=lambda n: int(n.split()[1]))
for n in names:
    rows.append(("%s: allocations" % n, lambda s, n=n: steps[s].get(n, ("", ""))[0]))
    rows.append(("%s: kernels" % n, lambda s, n=n: steps[s].get(n, ("", ""))[1]))
table = [(label, [str(f(s)) for s in srcs]) for label, f in rows]
with open(os.path.join(out, "compare.tsv.tmp"), "w") as f:
    f.write("metric\t" + "\t".join(srcs) + "\n")
    for label, vals in table:
        f.write(label + "\t" + "\t".join(vals) + "\n")
os.replace(os.path.join(out, "compare.tsv.tmp"), os.path.join(out, "compare.tsv"))
with open(os.path.join(out, "compare.md.tmp"), "w") as f:
    f.write("# %s batch %s: capture vs torch.profiler (kineto) vs memory snapshot\n\n" % (model, batch))
    f.write("`gpumemsim run --policy pytorch --json` on each import (the capture with "
            "`--allocator-source libc10_cuda`), `trace stats`, and allocations and kernels "
            "inside each `step N` range. The capture ran with "
            "PYTORCH_NO_CUDA_MEMORY_CACHING=1 (requested sizes); the profile's and the "
            "snapshot's requests come from the caching allocator (block sizes, multiples of "
            "512 B). A snapshot has no kernels and no steps.\n\n")
    f.write("| metric | " + " | ".join(srcs) + " |\n")
    f.write("|---|" + "---:|" * len(srcs) + "\n")
    for label, vals in table:
        f.write("| " + label + " | " + " | ".join(vals) + " |\n")
os.replace(os.path.join(out, "compare.md.tmp"), os.path.join(out, "compare.md"))
print(open(os.path.join(out, "compare.md")).read())
PY
}
phase compare compare

# --------------------------------------------------------------- summary

fail=0
echo "profile_recipe: summary ($outdir)" >&2
for name in "${order[@]}"; do
	printf 'profile_recipe:   %-17s %s\n' "$name" "${status[$name]}" >&2
	case ${status[$name]} in FAILED*) fail=1 ;; esac
done
[ -f "$outdir/compare.md" ] && echo "profile_recipe: comparison: $outdir/compare.md" >&2
exit $fail
