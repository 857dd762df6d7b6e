#!/usr/bin/env python3
"""va_host_events.py: a watched truth run's segment calls and the process's
other mappings, as one va_probe replay file (docs/policies.md, "The
process's address space": does the driver alone, given the same host
mappings at the same points, place the segments as the PyTorch run did?).

    scripts/va_host_events.py RUN.trace.gz OUT.replay [--at start|seen]

RUN.trace.gz: a truth run of capture/torch/train_torch.py with RUN.maps.gz
beside it (--maps). OUT.replay: "m SIZE ADDR T" / "f K T" per segment allocation
and free (scripts/va_replay.py's lines), "h SIZE" where the process's host-side
occupancy grew by a contiguous range (a library, a malloc arena, a thread
stack) and "u K" where the K-th such range went away, in time order. Host
mappings are those that are not the driver's: file-backed ones other than
/dev/*, anonymous read-write ones, and the reserved tail of a malloc arena
(a PROT_NONE range right after a read-write one that together make a 64 MiB
arena starting on a 64 MiB boundary). A change seen at a snapshot happened
between it and the one before: --at start puts it at the earlier end
(default), --at seen at the snapshot."""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import va_maps  # noqa: E402  (the maps reader)
import va_replay  # noqa: E402  (the segment events and their replay lines)

MiB = 1 << 20
ARENA = 64 * MiB


def host_ranges(state, top):
    """Merged [lo, hi) ranges of the host's own mappings in STATE below TOP
    (the device region: the libraries mapped before the run sit above it,
    the brk heap and the stack are not placed by mmap)."""
    vmas = sorted(va_maps.parse(line) for line in state)
    host = []
    for i, (lo, hi, perm, name) in enumerate(vmas):
        if name.startswith("/dev/") or name.startswith("["):
            continue
        if name == "" and perm == "---p":
            prev = vmas[i - 1] if i else None
            tail = (prev and prev[1] == lo and prev[3] == "" and prev[2] == "rw-p"
                    and prev[0] % ARENA == 0 and hi - prev[0] == ARENA)
            if not tail:
                continue
        if lo < top:
            host.append([lo, hi])
    merged = []
    for lo, hi in host:
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return merged


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("out")
    ap.add_argument("--at", choices=("start", "seen"), default="start")
    a = ap.parse_args()
    if not a.run.endswith(".trace.gz"):
        sys.exit("va_host_events: %s: expected RUN.trace.gz" % a.run)
    try:
        seg_events = list(va_replay.events(a.run))
        snaps = va_maps.read_maps(a.run[:-len(".trace.gz")] + ".maps.gz")
    except (OSError, ValueError, subprocess.CalledProcessError) as e:
        sys.exit("va_host_events: %s: %s" % (a.run, e))
    allocs = [e for e in seg_events if e[0] == "alloc"]
    if not allocs or not snaps:
        sys.exit("va_host_events: %s: no segments or no maps" % a.run)
    t_first = allocs[0][3] // 1000
    top = allocs[0][1] + 1024 * MiB
    events = []  # (time_ns, order at equal times, replay line)
    state, prev_ranges, prev_t = set(), None, None
    live = {}    # host range (lo, hi) -> its h ordinal
    nh = 0
    for t, added, gone in snaps:
        state |= set(added)
        state -= set(gone)
        ranges = [tuple(r) for r in host_ranges(state, top)]
        if prev_ranges is not None and t >= t_first:
            when = prev_t if a.at == "start" else t
            old, new = set(prev_ranges), set(ranges)
            for r in sorted(new - old, reverse=True):
                # a range that grew or joined others: only what is new
                covered = sum(max(0, min(r[1], o[1]) - max(r[0], o[0])) for o in old)
                size = r[1] - r[0] - covered
                if size > 0:
                    live[r] = nh
                    nh += 1
                    events.append((when * 1000, 1, "h %d" % size))
            # gone: not held in any range now (one that merged into a
            # larger range keeps its h)
            for r in list(live):
                if r not in new and not any(o[0] <= r[0] and r[1] <= o[1] for o in new):
                    events.append((when * 1000, 0, "u %d" % live.pop(r)))
        prev_ranges, prev_t = ranges, t

    seg_lines = va_replay.replay_lines(seg_events)
    events += [(t, 2, line) for t, line in seg_lines]
    k = len(allocs)
    events.sort(key=lambda e: (e[0], e[1]))
    with open(a.out, "w") as f:
        for _, _, text in events:
            f.write(text + "\n")
    print("va_host_events: %s: %d segment allocations, %d host ranges" % (a.out, k, nh),
          file=sys.stderr)


if __name__ == "__main__":
    main()
