#!/usr/bin/env bash
# device_maxbatch.sh: the largest batch that really fits under a memory
# fraction, for `gpumemsim maxbatch --policy pytorch --conf fraction:F` to be
# checked against (users' question 1, PyTorch; docs/whatif.md "The largest
# batch against real runs").
#
#   scripts/device_maxbatch.sh OUT
#
# For each CASE "MODEL:LIMIT:LO:HI[:CONF]" of CASES (all at once, one process
# per case at a time; one case after another with SEQUENTIAL=1), a
# bisection on the batch size between LO (taken to fit) and HI (taken to
# fail): each candidate is one process of capture/torch/train_torch.py
# --mode truth (3 steps, 1 warm-up, cudnn.benchmark on; LIMIT a fraction:
# torch.cuda.set_per_process_memory_fraction(LIMIT); LIMIT NGiB: a smaller
# GPU, all free memory but N GiB taken first by a cudaMalloc outside
# PyTorch, --leave-free, which needs the GPU to itself: SEQUENTIAL=1;
# the allocator's history recorded; PYTORCH_CUDA_ALLOC_CONF=CONF when
# given, e.g. expandable_segments:True), OOM or not. Every run's JSON and
# allocator trace is kept under OUT/maxbatch.tgz (repacked after each
# case ends); results.tsv: case, batch, oom, peak reserved, allocator
# OOMs (num_ooms: the ones PyTorch caught, e.g. cuDNN's search workspace
# retried at half size).
# Environment: PYTHON (python3), DEADLINE_S (560).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/device_common.sh"
device_start "$@"
device_work maxbatch
device_torch_env
CASES=${CASES:-"resnet50:0.08:66:144 resnet50:0.04:10:70 resnet18:0.04:109:275 vgg11:0.08:90:178 mobilenet_v2:0.04:45:78 densenet121:0.08:75:97 efficientnet_b0:0.08:103:142 vit_b_16:0.08:75:92"}
printf 'case\tbatch\toom\tpeak_reserved\tpeak_allocated\tnum_ooms\tseconds\n' > "$W/results.tsv"

# one run: prints 0 when it fit, 1 when it ran out of memory (or failed)
try_batch() {
	local m=$1 f=$2 b=$3 conf=$4 d=$W/$1-f$2${4:+-${4//[:,]/_}} t0=$SECONDS
	mkdir -p "$d"
	local limit=(--fraction "$f")
	case $f in *GiB) limit=(--leave-free $((${f%GiB} << 30)));; esac
	PYTORCH_CUDA_ALLOC_CONF=$conf timeout 200 "$py" capture/torch/train_torch.py --mode truth --model "$m" --batch "$b" \
		--steps 3 --warmup 1 "${limit[@]}" --outdir "$d" > "$d/b$b.log" 2>&1
	local j
	j=$(ls "$d"/"$m"-b"$b"-*.json 2>/dev/null | head -1)
	local row
	row=$("$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); s=d["stats"]
print("%d\t%d\t%d\t%d" % (d["oom"], s.get("reserved_bytes.all.peak", -1), s.get("allocated_bytes.all.peak", -1), s.get("num_ooms", -1)))' "$j" 2>/dev/null || printf '1\t-1\t-1\t-1')
	printf '%s:%s%s\t%s\t%s\t%s\n' "$m" "$f" "${conf:+:$conf}" "$b" "$row" "$((SECONDS - t0))" >> "$W/results.tsv"
	[ "${row%%	*}" = 0 ]
}

bisect_case() {
	local m f lo hi mid conf
	IFS=: read -r m f lo hi conf <<< "$1"
	while [ $((hi - lo)) -gt 1 ] && [ "$(device_left)" -gt 60 ]; do
		mid=$(((lo + hi) / 2))
		if try_batch "$m" "$f" "$mid" "$conf"; then lo=$mid; else hi=$mid; fi
	done
	note "case $1: largest that fit $lo, smallest that failed $hi"
}

for c in $CASES; do
	if [ "${SEQUENTIAL:-0}" = 1 ]; then bisect_case "$c"; pack; else bisect_case "$c" & fi
done
wait
note "all cases done"
cp "$W/results.tsv" "$OUT/results.tsv"
cp "$W/phases.txt" "$OUT/phases.txt"
pack
