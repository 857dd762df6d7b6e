#!/usr/bin/env python3
"""va_replay.py: the segment sequence of recorded PyTorch runs, as
capture/tests/va_probe.cu's replay files (issue 17: does the driver place a
real run's segments the same way without PyTorch, cuDNN and cuBLAS in the
process, and does device/va_place.c?).

    scripts/va_replay.py [--load-at-pause] OUTDIR TRACE...

TRACE: a run of ../shared/data/torch-allocator-truth (the allocator's own
trace: "action addr size stream time_us") or a gpumemsim trace with 'g'
records (traces/torch/truth); GPUMEMSIM (build/gpumemsim) reads the latter.
Writes OUTDIR/NAME.replay: "m SIZE ADDR T" per segment allocation (ADDR the
recorded address and T its time in ns, which the probe ignores) and "f K T"
per segment free (K the allocation's ordinal). Runs with expandable segments (map/unmap) are
skipped: they place no cudaMalloc. --load-at-pause: an "l" line (load cuDNN
and cuBLAS) before the first allocation that follows a pause of 50 ms or
more, where a PyTorch run loads them (docs/policies.md)."""
import gzip
import os
import subprocess
import sys


def events(path):
    """(op, addr, size) of each segment event, in order."""
    with gzip.open(path, "rt") as f:
        first = f.readline()
        if first.startswith("gpumemsim-trace"):
            g = os.environ.get("GPUMEMSIM", "build/gpumemsim")
            out = subprocess.run([g, "trace", "cat", path], check=True, capture_output=True,
                                 text=True).stdout
            for line in out.splitlines():
                t = line.split()
                if t and t[0] == "g":
                    yield t[2], int(t[3], 0), int(t[4]), int(t[1])
            return
        for line in [first] + list(f):
            t = line.split()
            if len(t) >= 5 and t[0].startswith("segment_"):
                yield t[0][len("segment_"):], int(t[1], 0), int(t[2]), int(t[4]) * 1000


def replay_lines(ev, load=False):
    """The probe's lines for segment events EV ((op, addr, size, t_ns) as
    events() yields them), each with its time: [(t_ns, line)]. "m SIZE ADDR
    T" per allocation, "f K T" per free of the K-th, and with LOAD an "l"
    before the first allocation after a pause of 50 ms or more."""
    live, n, out, last, loaded = {}, 0, [], None, not load
    for op, addr, size, t in ev:
        if op == "alloc":
            if not loaded and last is not None and t - last >= 50_000_000:
                out.append((t, "l"))
                loaded = True
            last = t
            live[addr] = n
            out.append((t, "m %d 0x%x %d" % (size, addr, t)))
            n += 1
        elif op == "free" and addr in live:
            out.append((t, "f %d %d" % (live.pop(addr), t)))
    return out


def main():
    args = sys.argv[1:]
    load = bool(args) and args[0] == "--load-at-pause"
    if load:
        args = args[1:]
    if len(args) < 2:
        sys.exit("usage: va_replay.py [--load-at-pause] OUTDIR TRACE...")
    outdir = args[0]
    os.makedirs(outdir, exist_ok=True)
    for path in args[1:]:
        name = os.path.basename(path).replace(".trace.gz", "")
        ev = list(events(path))
        if any(op in ("map", "unmap") for op, _, _, _ in ev):
            print("va_replay: %s: expandable segments, skipped" % name, file=sys.stderr)
            continue
        lines = [line for _, line in replay_lines(ev, load)]
        n = sum(line.startswith("m ") for line in lines)
        with open(os.path.join(outdir, name + ".replay"), "w") as f:
            f.write("# %s: %d segment allocations\n" % (path, n))
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
