#!/usr/bin/env python3
"""snapshot_make.py: write the torch memory-snapshot pickles the tests read.

What torch.cuda.memory._dump_snapshot(PATH) writes in torch 2.11 is
pickle.dump(torch.cuda.memory._snapshot(), f) at the default protocol (4 up
to Python 3.13): a dict of builtins only. This makes the same structure by
hand (no torch needed):

  snapshot_history.pickle     after _record_memory_history(): segments with
                              blocks, and device_traces[0] with alloc,
                              free_requested/free_completed, segment_alloc and
                              segment_free entries carrying frames, a side
                              stream whose handle is a large pointer value
  snapshot_no_history.pickle  the same program without _record_memory_history():
                              segments and blocks only, device_traces [[]]

usage: snapshot_make.py OUTDIR [--protocol N]
"""
import os
import pickle
import sys

BASE = 0x7F2A00000000
SIDE_STREAM = 94558418436096          # a cudaStream_t as torch prints it
T0 = 1759300000000000                  # time_us


def frames(name, line):
    return [{"name": name, "filename": "/work/train.py", "line": line},
            {"name": "<module>", "filename": "/work/train.py", "line": 90}]


def entry(action, addr, size, stream, t, where=("forward", 12)):
    return {"action": action, "addr": addr, "size": size, "stream": stream,
            "time_us": t, "frames": frames(*where), "compile_context": "N/A",
            "user_metadata": ""}


def history():
    small, large = BASE, BASE + (2 << 20)
    t = T0
    ev = []
    ev.append(entry("segment_alloc", small, 2 << 20, 0, t))
    ev.append(entry("alloc", small, 512, 0, t + 1))
    ev.append(entry("segment_alloc", large, 20 << 20, 0, t + 2, ("backward", 40)))
    ev.append(entry("alloc", large, 5 << 20, 0, t + 3, ("backward", 40)))
    ev.append(entry("alloc", large + (5 << 20), 4 << 20, SIDE_STREAM, t + 4, ("backward", 41)))
    ev.append(entry("free_requested", large, 5 << 20, 0, t + 5, ("backward", 44)))
    ev.append(entry("free_completed", large, 5 << 20, 0, t + 5, ("backward", 44)))
    ev.append(entry("free_requested", large + (5 << 20), 4 << 20, SIDE_STREAM, t + 6))
    ev.append(entry("free_completed", large + (5 << 20), 4 << 20, SIDE_STREAM, t + 7))
    # torch.cuda.empty_cache(): every wholly free segment released
    ev.append(entry("segment_free", large, 20 << 20, 0, t + 8, ("step", 60)))
    ev.append(entry("alloc", small + 512, 1024, 0, t + 9))
    return ev


def segments():
    small = BASE
    return [{
        "device": 0, "address": small, "total_size": 2 << 20, "allocated_size": 1536,
        "active_size": 1536, "requested_size": 1500, "stream": 0, "segment_type": "small",
        "segment_pool_id": (0, 0), "is_expandable": False, "frames": frames("forward", 12),
        "blocks": [
            {"address": small, "size": 512, "requested_size": 500,
             "state": "active_allocated", "frames": frames("forward", 12)},
            {"address": small + 512, "size": 1024, "requested_size": 1000,
             "state": "active_allocated", "frames": frames("forward", 12)},
            {"address": small + 1536, "size": (2 << 20) - 1536, "requested_size": 0,
             "state": "inactive", "frames": []},
        ]}]


def settings():
    return {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
            "garbage_collection_threshold": 0.0, "expandable_segments": False,
            "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
            "pinned_use_cuda_host_register": False,
            "roundup_power2_divisions": {"1": 0, "2": 0, "4": 0, "8": 0}}


def main(argv):
    args = argv[1:]
    proto = 4
    if "--protocol" in args:
        k = args.index("--protocol")
        proto = int(args[k + 1])
        del args[k:k + 2]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out = args[0]
    with_hist = {"segments": segments(), "device_traces": [history()],
                 "allocator_settings": settings(), "external_annotations": []}
    without = {"segments": segments(), "device_traces": [[]],
               "allocator_settings": settings(), "external_annotations": []}
    for name, snap in (("snapshot_history.pickle", with_hist),
                       ("snapshot_no_history.pickle", without)):
        with open(os.path.join(out, name), "wb") as f:
            pickle.dump(snap, f, protocol=proto)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
