#!/usr/bin/env python3
"""make_cost_table.py: the cudaMalloc / cudaFree host cost by size, from the
API records of no-caching captures (docs/timing.md, "Cost table").

  python3 traces/timing/make_cost_table.py GPUMEMSIM CAPTURE.trace.gz... > TABLE.tsv

Each p cudaMalloc / cudaFree is paired with its a / f record (same
correlation id) for its size. A cudaFree's own cost is its duration minus
the wait for GPU work launched before it (work with a smaller correlation
id that ends inside the call). Samples are pooled over the captures and
binned by size (powers of two from 1 MiB; one bin below 1 MiB: the
driver's small pool); each bin gives the mean without its top 1%
(a step pays the sum of its calls: the mean, not the median), less the capture's cost
inside a recorded call (CAP_IN_CALL_NS, the 10th percentile of zero-byte
cudaMalloc calls, which do no driver work). Deterministic: same inputs,
same bytes.
"""
import re, subprocess, sys

CAP_IN_CALL_NS = None  # measured below

def records(g, path):
    out = subprocess.run([g, 'trace', 'cat', path], capture_output=True, text=True, check=True).stdout
    for ln in out.splitlines():
        if ln and ln[0] in 'pkcmaf' and ln[1] == ' ':
            yield re.findall(r'"(?:[^"\\]|\\.)*"|\S+', ln)

def samples(g, path, mal, fre, zero):
    pend = {}       # corr -> (kind, start, end)
    frees = []      # (start, end, corr, bytes)
    gpu = []        # (corr, end)
    for r in records(g, path):
        t = r[0]
        if t == 'p':
            nm = r[3].strip('"')
            if nm in ('cudaMalloc', 'cudaFree'):
                pend[int(r[4])] = (nm, int(r[1]), int(r[2]))
        elif t in 'kcm':
            corr = int(r[9]) if t == 'k' else int(r[6]) if t == 'c' else int(r[5])
            gpu.append((corr, int(r[2])))
        elif t in 'af':
            corr = int(r[7]) if len(r) > 7 else 0
            if corr in pend:
                nm, s, e = pend.pop(corr)
                b = int(r[3])
                if t == 'a' and nm == 'cudaMalloc':
                    mal.append((b, e - s))
                elif t == 'f' and nm == 'cudaFree' and b:
                    frees.append((s, e, corr, b))
    # zero-byte mallocs: cudaMalloc calls without an 'a'
    for corr, (nm, s, e) in pend.items():
        if nm == 'cudaMalloc':
            zero.append(e - s)
    gpu.sort()
    import bisect
    corrs = [c for c, _ in gpu]
    # prefix max of GPU ends by correlation id
    pmax = []
    m = 0
    for _, e in gpu:
        m = max(m, e)
        pmax.append(m)
    for s, e, corr, b in frees:
        i = bisect.bisect_left(corrs, corr)
        busy = pmax[i - 1] if i else 0
        busy = min(busy, e)
        wait = busy - s if busy > s else 0
        fre.append((b, e - s - wait))

def mean(v):
    # the expected cost: a step pays the sum of its calls, so the mean,
    # not the median (cudaFree's time is heavy-tailed); the top 1% (page
    # faults, the odd multi-millisecond stall) is left out
    v = sorted(v)
    k = len(v) - len(v) // 100
    return sum(v[:k]) / k

def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2

STAT = mean

def main():
    g = sys.argv[1]
    mal, fre, zero = [], [], []
    for p in sys.argv[2:]:
        samples(g, p, mal, fre, zero)
    z = sorted(zero)
    cap = z[len(z) // 10] if z else 0
    bins = [(0, 1 << 20)]
    lo = 1 << 20
    while lo < (1 << 40):
        bins.append((lo, lo * 2))
        lo *= 2
    print('# cudaMalloc / cudaFree host cost by size (ns), NVIDIA H200, driver 580.159.04, CUDA 13.0')
    print('# from: ' + ' '.join(p.split('/')[-1] for p in sys.argv[2:]))
    print('# capture cost inside a recorded call (10th percentile of %d zero-byte cudaMalloc): %d ns, taken off' % (len(z), cap))
    print('# lo_bytes\thi_bytes\tmalloc_ns\tmalloc_n\tfree_ns\tfree_n')
    for lo, hi in bins:
        ms = [d for b, d in mal if lo <= b < hi]
        fs = [d for b, d in fre if lo <= b < hi]
        if not ms and not fs:
            continue
        mm = max(0, round(STAT(ms) - cap)) if ms else -1
        fm = max(0, round(STAT(fs) - cap)) if fs else -1
        print('%d\t%d\t%d\t%d\t%d\t%d' % (lo, hi, mm, len(ms), fm, len(fs)))

main()
