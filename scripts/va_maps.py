#!/usr/bin/env python3
"""va_maps.py: a truth run's segments among the process's other mappings
(docs/policies.md, "The process's address space").

    scripts/va_maps.py RUN.trace.gz --at K [K ...]   the mappings around the
        segments just before segment allocation K (0-based), each with the
        live segments it holds
    scripts/va_maps.py RUN.trace.gz --between K1 K2  the segment events and
        the mappings made or removed (1 MiB or more) from allocation K1 to K2

RUN.trace.gz is a truth run of capture/torch/train_torch.py ("action addr
size stream time_us") with RUN.maps.gz beside it (train_torch.py --maps:
"T time_us", then "+ LINE" / "- LINE" of /proc/self/maps). Addresses are
printed in MiB relative to the first segment; --span MIB (default 12000)
limits the view to that far below it."""
import argparse
import gzip
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import va_replay  # noqa: E402  (the runs' segment events)

MiB = 1 << 20


def read_run(path):
    """(time_us, op, addr, size) of the run's segment events."""
    return [(t // 1000, op, addr, size) for op, addr, size, t in va_replay.events(path)]


def read_maps(path):
    """[(time_us, added lines, removed lines)]"""
    events, cur = [], None
    with gzip.open(path, "rt") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("T "):
                cur = (int(line[2:]), [], [])
                events.append(cur)
            elif cur and line[:2] in ("+ ", "- "):
                cur[1 if line[0] == "+" else 2].append(line[2:])
    return events


def parse(line):
    p = line.split(None, 5)
    lo, hi = (int(x, 16) for x in p[0].split("-"))
    name = p[5].strip() if len(p) > 5 else ""
    if name.startswith("/") and not name.startswith("/dev/"):
        name = name.rsplit("/", 1)[-1]
    return lo, hi, p[1], name


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--at", type=int, nargs="+", default=[])
    ap.add_argument("--between", type=int, nargs=2)
    ap.add_argument("--span", type=float, default=12000)
    a = ap.parse_args()
    maps_path = a.run[:-len(".trace.gz")] + ".maps.gz" if a.run.endswith(".trace.gz") else None
    try:
        segs = read_run(a.run)
        events = read_maps(maps_path)
    except (OSError, ValueError, TypeError, subprocess.CalledProcessError) as e:
        sys.exit("va_maps: %s: %s" % (a.run, e))
    allocs = [s for s in segs if s[1] == "alloc"]
    if not allocs or not events:
        sys.exit("va_maps: %s: no segments or no maps" % a.run)
    base = allocs[0][2]

    def rel(x):
        return (x - base) / MiB

    def near(lo, hi):
        return hi > base - a.span * MiB and lo < base + 1024 * MiB

    for k in a.at:
        if not 0 <= k < len(allocs):
            sys.exit("va_maps: no segment allocation %d (the run has %d)" % (k, len(allocs)))
        t = allocs[k][0]
        state = set()
        for te, added, gone in events:
            if te > t:
                break
            state |= set(added)
            state -= set(gone)
        live, n = {}, 0
        for ts, op, addr, size in segs:
            if ts >= t and op == "alloc" and n == k:
                break
            if op == "alloc":
                live[n] = addr
                n += 1
            else:
                live = {i: x for i, x in live.items() if x != addr}
        print("before segment %d (%d MiB at %+.0f)" % (k, allocs[k][3] // MiB, rel(allocs[k][2])))
        for lo, hi, perm, name in sorted(parse(line) for line in state):
            if not near(lo, hi):
                continue
            inside = [str(i) for i, x in live.items() if lo <= x < hi]
            print("  %+10.1f .. %+10.1f %9.1f MiB %s %s%s" % (
                rel(lo), rel(hi), (hi - lo) / MiB, perm, name,
                "  segments " + ",".join(inside) if inside else ""))
    if a.between:
        k1, k2 = a.between
        if not 0 <= k1 <= k2 < len(allocs):
            sys.exit("va_maps: --between needs 0 <= K1 <= K2 < %d" % len(allocs))
        t1, t2 = allocs[k1][0], allocs[k2][0]
        out = [(ts, "segment %s %d MiB at %+.0f" % (op, size // MiB, rel(addr)))
               for ts, op, addr, size in segs if t1 <= ts <= t2]
        for te, added, gone in events:
            if not t1 <= te <= t2:
                continue
            for sign, lines in (("+", added), ("-", gone)):
                for lo, hi, perm, name in map(parse, lines):
                    if hi - lo >= MiB and near(lo, hi):
                        out.append((te, "%s %+10.1f .. %+10.1f %9.1f MiB %s %s" % (
                            sign, rel(lo), rel(hi), (hi - lo) / MiB, perm, name)))
        for ts, text in sorted(out, key=lambda x: x[0]):
            print("%+9.1f ms  %s" % ((ts - t1) / 1000, text))


if __name__ == "__main__":
    main()
