#!/usr/bin/env bash
# device_timing_noise.sh: how much one program's step time moves from one
# process to the next on the GPU host, captured and not, and whether pinning
# the process to the GPU's CPUs (taskset) takes that away (issue 15: a
# prediction cannot be closer to a run than two runs of it are to each other).
#   scripts/device_timing_noise.sh OUT
# For each of RUNS ("resnet18:32 mobilenet_v2:32"), REPS (3) rounds of the
# processes KINDS names, in order (default "plain-free plain-pin cap-pin
# cap-free": uncaptured, uncaptured pinned, captured pinned, captured;
# also nolinks-free: captured with --no-links, apioff-free: --api off
# --no-links, activity-free: --api activity); caching allocator on
# (CACHING=0: off), STEPS (20) steps, WARMUP (5).
# OUT: env.txt, build.log, timeline.txt, runs.tsv (one line a process: mean and
# median step, capture_json's host probe before/after), noise.tgz (jsons,
# logs, traces).
# Environment: PYTHON (python3), DEADLINE_S (560), PIN (the GPU's CPU list
# from nvidia-smi topo -m, else 0-7).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/device_common.sh"
device_start "$@"
T0=$(date +%s)
W=/tmp/timing-noise
left() { echo $((${DEADLINE_S:-560} - ($(date +%s) - T0))); }
log() { printf '+%ss\t%s\n' $(($(date +%s) - T0)) "$*" | tee -a "$OUT/timeline.txt"; }
rm -rf "$W" && mkdir -p "$W" || exit 1
{
	nvidia-smi topo -m; echo; lscpu; echo; numactl -H 2>&1 | head -5
	echo; cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>&1
	grep MHz /proc/cpuinfo | sort | uniq -c | head; uptime
} > "$OUT/env.txt" 2>&1
pin=${PIN:-$(nvidia-smi topo -m 2>/dev/null | awk '$1 == "GPU0" { for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$/ && $i ~ /-/) { print $i; exit } }')}
pin=${pin:-0-7}
# the whole machine is no pinning: take its lower half
[ "$pin" = "0-$(($(nproc) - 1))" ] && pin=0-$(($(nproc) / 2 - 1))
log "pin to CPUs $pin"
device_devdeps
make -j16 > "$OUT/build.log" 2>&1 && make capture >> "$OUT/build.log" 2>&1
log "build rc $?"
bin=$root/build/gpumemsim
steps=${STEPS:-20} warmup=${WARMUP:-5} caching=${CACHING:-1}
printf 'name\tmodel\tbatch\tcaptured\tpinned\trep\tmean_ms\tmedian_ms\tprobe_us_before\tprobe_us_after\trc\n' > "$OUT/runs.tsv"
# one process: MODEL BATCH KIND REP (KIND: plain|cap|nolinks|apioff|activity
# then -pin|-free)
timed() {
	local m=$1 b=$2 kind=$3 rep=$4
	local name=$m-b$b-$kind-$rep cap=1 pinned=0 opts=()
	case $kind in
	plain-*) cap=0 ;;
	nolinks-*) opts=(--no-links) ;;
	apioff-*) opts=(--api off --no-links) ;;
	activity-*) opts=(--api activity) ;;
	esac
	case $kind in *-pin) pinned=1 ;; esac
	local j=$W/$name.json
	local envs=(env -u PYTORCH_CUDA_ALLOC_CONF)
	[ "$caching" = 1 ] && envs+=(-u PYTORCH_NO_CUDA_MEMORY_CACHING) || envs+=(PYTORCH_NO_CUDA_MEMORY_CACHING=1)
	local pre=()
	[ "$pinned" = 1 ] && pre=(taskset -c "$pin")
	local run=("$py" capture/torch/train_torch.py --mode capture --model "$m" --batch "$b" --img 224 \
		--steps "$steps" --warmup "$warmup" --json "$j")
	if [ "$cap" = 1 ]; then
		"${envs[@]}" timeout $(($(left) - 15)) "${pre[@]}" "$bin" capture "${opts[@]}" --label workload=torch --label model="$m" \
			--label batch="$b" --label caching="$caching" -o "$W/$name.trace.gz" -- "${run[@]}" > "$W/$name.log" 2>&1
	else
		"${envs[@]}" timeout $(($(left) - 15)) "${pre[@]}" "${run[@]}" > "$W/$name.log" 2>&1
	fi
	local rc=$?
	local stats
	stats=$("$py" -c '
import json, statistics, sys
d = json.load(open(sys.argv[1])); s = d["step_s"][d["warmup"]:]; p = d.get("host_probe_us", ["-", "-"])
print("%.3f\t%.3f\t%s\t%s" % (1e3 * statistics.mean(s), 1e3 * statistics.median(s), p[0], p[-1]))' "$j" 2> /dev/null || printf -- '-\t-\t-\t-')
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$m" "$b" "$cap" "$pinned" "$rep" "$stats" "$rc" >> "$OUT/runs.tsv"
	log "$name rc $rc $stats"
	(cd "$W" && tar -czf "$OUT/noise.tgz" .)
}
for mb in ${RUNS:-resnet18:32 mobilenet_v2:32}; do
	m=${mb%%:*} b=${mb##*:}
	for rep in $(seq 1 "${REPS:-3}"); do
		for kind in ${KINDS:-plain-free plain-pin cap-pin cap-free}; do
			if [ "$(left)" -lt 40 ]; then log "$m b$b rep $rep skipped: $(left) s left"; break 2; fi
			timed "$m" "$b" "$kind" "$rep"
		done
	done
done
log done
