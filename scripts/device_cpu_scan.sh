#!/usr/bin/env bash
# device_cpu_scan.sh: which of this host's CPUs run at full speed (issue 15;
# docs/timing.md, "Fast and slow host periods").
#
#   scripts/device_cpu_scan.sh OUT
#
# The H200 hosts are KVM guests whose host-side speed comes and goes: a
# fixed pure-Python loop takes about 0.6 ms in some steps of a training
# process and twice that in others. ROUNDS (default 6) rounds, each timing
# the loop (train_torch.py's host probe: best of 3 runs of 200,000
# iterations) pinned to each CPU in turn, tell whether the speed belongs
# to the CPU (the same CPUs slow in every round) or to the moment.
# OUT gets cpu-scan.tgz with scan.tsv (round cpu probe_us), lscpu.txt,
# and fast_cpus: the CPUs whose median is within 15% of the fastest
# CPU's median, as a taskset list ("-" when fewer than 4 are).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/device_common.sh"
device_start "$@"
device_work cpu-scan
ROUNDS=${ROUNDS:-6}
{ lscpu; echo; lscpu -e; echo; grep MHz /proc/cpuinfo; echo; cat /proc/loadavg; } > "$W/lscpu.txt" 2>&1
probe='import time
def once():
    t0 = time.perf_counter(); acc = 0
    for i in range(200000): acc += i & 7
    return (time.perf_counter() - t0) * 1e6
print(round(min(once() for _ in range(3)), 1))'
printf 'round\tcpu\tprobe_us\n' > "$W/scan.tsv"
n=$(nproc)
for r in $(seq 1 "$ROUNDS"); do
	for c in $(seq 0 $((n - 1))); do
		printf '%s\t%s\t%s\n' "$r" "$c" "$(taskset -c "$c" "$py" -c "$probe" 2>/dev/null || echo -)" >> "$W/scan.tsv"
	done
done
"$py" - "$W/scan.tsv" > "$W/fast_cpus" <<'PY'
import statistics, sys
per = {}
for line in open(sys.argv[1]).read().splitlines()[1:]:
    r, c, us = line.split("\t")
    if us != "-":
        per.setdefault(int(c), []).append(float(us))
med = {c: statistics.median(v) for c, v in per.items()}
best = min(med.values())
fast = sorted(c for c, m in med.items() if m <= 1.15 * best)
print(",".join(map(str, fast)) if len(fast) >= 4 else "-")
for c in sorted(med):
    print("# cpu %d median %.0f us: %s" % (c, med[c], " ".join("%.0f" % x for x in per[c])), file=sys.stderr)
PY
note "fast CPUs: $(cat "$W/fast_cpus")"
cp "$W/fast_cpus" "$OUT/fast_cpus"
pack
