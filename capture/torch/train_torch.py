#!/usr/bin/env python3
"""train_torch.py: the PyTorch half of the capture recipe (see README.md).

Trains a torchvision model (SGD, momentum 0.9, random 224x224 images) for a
few steps in one of four modes:

  capture  run under `gpumemsim capture` with PYTORCH_NO_CUDA_MEMORY_CACHING=1,
           so every tensor is its own cudaMalloc/cudaFree (the framework's
           logical request stream); NVTX ranges mark each step, phase
           (forward, backward, optimizer) and, in forward, each leaf module.
           Writes the step times to --json.
  truth    the same steps with the caching allocator on, recording
           torch.cuda.memory._record_memory_history; writes the allocator's
           own trace (device_traces[0], one "action addr size stream time_us"
           per line, gzip) and a json of memory_stats() in the layout of
           shared/data/torch-allocator-truth, which `gpumemsim import
           torch-snapshot` and `gpumemsim validate torch-truth` read.
  profile  the same steps under torch.profiler.profile(activities=[CPU, CUDA],
           profile_memory=True), every step recorded (schedule active=STEPS,
           so each step is a "ProfilerStep#N" range), entered before the model
           is built; the Chrome trace goes to --out (gzip when it ends in .gz)
           for `gpumemsim import kineto`. Not under `gpumemsim capture`:
           torch.profiler's CUPTI session and the capture library's conflict.
  snapshot the same steps with the caching allocator on and
           torch.cuda.memory._record_memory_history(max_entries=...) from
           before the model exists, then torch.cuda.memory._dump_snapshot(--out):
           the real pickle, for `gpumemsim import torch-snapshot`. With
           --no-history the history is never recorded: a snapshot of segments
           only, which the import refuses with a clear message.

Step times are wall time around each step with torch.cuda.synchronize().
"""
import argparse
import gzip
import json
import os
import sys
import time

import torch
import torchvision

STAT_PREFIXES = ("active_bytes.all.", "allocated_bytes.all.",
                 "inactive_split_bytes.all.", "requested_bytes.all.",
                 "reserved_bytes.all.", "segment.all.")
STAT_KEYS = ("num_alloc_retries", "num_device_alloc", "num_device_free",
             "num_ooms", "num_sync_all_streams")


def conf_name(conf, fraction):
    """Run name suffix as in torch-allocator-truth: default, max_split_size_mb_64, ...-frac0.05."""
    name = "default" if not conf else conf.replace(":", "_").replace(",", "-")
    if fraction < 1.0:
        name += "-frac%g" % fraction
    return name


def nvtx_push(msg, on):
    if on:
        torch.cuda.nvtx.range_push(msg)


def nvtx_pop(on):
    if on:
        torch.cuda.nvtx.range_pop()


def add_layer_ranges(model):
    """NVTX range "NAME.fwd" around each leaf module's forward.

    Only forward: full backward hooks clash with torchvision's in-place ReLUs.
    """
    for name, mod in model.named_modules():
        if name == "" or any(True for _ in mod.children()):
            continue
        mod.register_forward_pre_hook(_push_hook(name + ".fwd"))
        mod.register_forward_hook(_pop_hook)


def _push_hook(label):
    # A pre-hook's non-None return replaces the module's input: return None.
    def hook(mod, inputs):
        torch.cuda.nvtx.range_push(label)
    return hook


def _pop_hook(mod, inputs, output):
    torch.cuda.nvtx.range_pop()


def train(args, nvtx, on_step=None):
    """Build the model and run the steps; returns (step_s, oom, host): host holds
    each step's host time (host_s, fwd_host_s). ON_STEP is
    called after each step (the profiler's step())."""
    torch.manual_seed(args.seed)
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    model = getattr(torchvision.models, args.model)(num_classes=args.classes).to(dev)
    model.train()
    if nvtx and args.layer_ranges:
        add_layer_ranges(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    step_s = []
    # host time of each step: from its start to the last launch (before
    # the final synchronize) and to the end of forward's launches; with the
    # caching allocator nothing in between waits for the GPU, so these are
    # the host's own speed (docs/timing.md, "Host speed and batch size")
    host_s, fwd_host_s = [], []
    # the host's speed at each step, measured between steps (outside the
    # timed step): a short pure-Python loop and the CPU time the hypervisor
    # took from this guest (steal) during the step. These hosts run at two
    # speeds that come and go (docs/timing.md, "Fast and slow host periods")
    probe_us, steal_ms = [], []
    # each step's own peaks as the caching allocator counts them (reset
    # before the step, outside the timed part; host-side counters only):
    # the real per-step figures `gpumemsim steps` is compared with
    peak_alloc, peak_res = [], []
    run_peaks = {}   # the whole run's peaks, kept across the resets
    oom = False
    try:
        for step in range(args.steps):
            torch.cuda.synchronize()
            keep_peaks(run_peaks)
            torch.cuda.reset_peak_memory_stats()
            steal0 = steal_jiffies()
            t0 = time.perf_counter()
            nvtx_push("step %d" % step, nvtx)
            # multi-scale training (--img-sizes): each step its own input
            # size, in turn; else every step --img
            img = args.img_sizes[step % len(args.img_sizes)] if args.img_sizes else args.img
            x = torch.randn(args.batch, 3, img, img, device=dev)
            y = torch.randint(0, args.classes, (args.batch,), device=dev)
            nvtx_push("forward", nvtx)
            out = model(x)
            loss = loss_fn(out, y)
            nvtx_pop(nvtx)
            fwd_host_s.append(time.perf_counter() - t0)
            nvtx_push("backward", nvtx)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nvtx_pop(nvtx)
            nvtx_push("optimizer", nvtx)
            opt.step()
            nvtx_pop(nvtx)
            del x, y, out, loss
            host_s.append(time.perf_counter() - t0)
            torch.cuda.synchronize()
            nvtx_pop(nvtx)
            step_s.append(time.perf_counter() - t0)
            peak_alloc.append(torch.cuda.max_memory_allocated())
            peak_res.append(torch.cuda.max_memory_reserved())
            steal_ms.append(jiffies_ms(steal_jiffies() - steal0))
            probe_us.append(host_probe_us(iters=20000, runs=3))
            print("train_torch: %s step %d %.1f ms%s" % (
                args.mode, step, step_s[-1] * 1e3,
                " (warm-up)" if step < args.warmup else ""), flush=True)
            if on_step:
                on_step()
    except torch.cuda.OutOfMemoryError as e:
        oom = True
        print("train_torch: out of memory at step %d: %s" % (len(step_s), str(e).splitlines()[0]),
              file=sys.stderr)
    keep_peaks(run_peaks)
    return step_s, oom, {"host_s": host_s, "fwd_host_s": fwd_host_s, "run_peaks": run_peaks,
                         "step_probe_us": probe_us, "step_steal_ms": steal_ms,
                         "step_peak_allocated": peak_alloc, "step_peak_reserved": peak_res}


def keep_peaks(keep):
    """Fold the allocator's current peak counters (every "*.peak" of
    memory_stats) into KEEP, before a per-step reset drops them: KEEP ends
    with the whole run's peaks, as memory_stats would give without resets."""
    for k, v in torch.cuda.memory_stats().items():
        if k.endswith(".peak") and v > keep.get(k, -1):
            keep[k] = v


def host_probe_us(iters=200000, runs=5):
    """The host's speed for this process: a fixed pure-Python loop (no CUDA,
    so nothing in a capture), the best of RUNS runs in microseconds. Two
    processes of one program on one host can run at different speeds; this
    tells a slow process from a slow program."""
    def once():
        t0 = time.perf_counter()
        acc = 0
        for i in range(iters):
            acc += i & 7
        return (time.perf_counter() - t0) * 1e6
    return round(min(once() for _ in range(runs)), 1)


def steal_jiffies():
    """The steal time of all CPUs so far (/proc/stat, the 8th field of the
    cpu line), in jiffies; 0 where there is none."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) if fields[0] == "cpu" and len(fields) > 8 else 0
    except (OSError, ValueError):
        return 0


def jiffies_ms(j):
    return round(j * 1000.0 / os.sysconf("SC_CLK_TCK"), 1)


def versions():
    return {"torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version(),
            "gpu": torch.cuda.get_device_name(0)}


def write_json_atomic(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
        f.write("\n")
    os.replace(tmp, path)


def mean_after_warmup(step_s, warmup):
    rest = step_s[warmup:]
    return sum(rest) / len(rest) if rest else None


def run_capture(args):
    if os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") != "1":
        print("train_torch: warning: PYTORCH_NO_CUDA_MEMORY_CACHING is not 1: "
              "the capture will show segments, not tensors", file=sys.stderr)
    # Initialise CUDA (cuInit loads the capture library) before the first
    # NVTX call, so torch's NVTX client finds CUPTI ready when it injects.
    torch.cuda.init()
    nvtx_kind = getattr(getattr(torch._C, "_nvtx", None), "__doc__", None)
    print("train_torch: torch %s, torch._C._nvtx: %s, NVTX_INJECTION64_PATH=%s" % (
        torch.__version__, nvtx_kind, os.environ.get("NVTX_INJECTION64_PATH", "(unset)")),
        flush=True)
    if args.fraction < 1.0:
        torch.cuda.set_per_process_memory_fraction(args.fraction)
    probe = [host_probe_us()]
    step_s, oom, host = train(args, nvtx=True)
    probe.append(host_probe_us())
    info = {"model": args.model, "batch": args.batch, "img": args.img, "img_sizes": args.img_sizes,
            "conf": "no_caching" if os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1"
            else (os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or "default"),
            "fraction": args.fraction, "oom": oom, "warmup": args.warmup,
            "step_s": step_s, "mean_step_s": mean_after_warmup(step_s, args.warmup),
            "nvtx": nvtx_kind, "host_probe_us": probe}
    info.update(host)
    info.update(versions())
    if args.json:
        write_json_atomic(args.json, info)
    return 1 if oom else 0


class MapsWatch:
    """Polls /proc/self/maps from a thread and keeps every change with its
    time in the allocator trace's clock (microseconds since the epoch):
    where the process's other mappings (libraries, thread stacks, the
    driver's own ranges) sit among the segments, and when they came."""

    def __init__(self):
        import threading
        self.events = []
        self.prev = set()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.poll()
        self.thread.start()

    def poll(self):
        with open("/proc/self/maps") as f:
            now = set(f.read().splitlines())
        if now != self.prev:
            self.events.append((time.time_ns() // 1000, sorted(now - self.prev),
                                sorted(self.prev - now)))
            self.prev = now

    def run(self):
        while not self.done.wait(0.0005):
            self.poll()

    def stop(self, path):
        self.done.set()
        self.thread.join()
        self.poll()
        with gzip.open(path, "wt") as f:
            for t, added, gone in self.events:
                f.write("T %d\n" % t)
                f.writelines("+ %s\n" % line for line in added)
                f.writelines("- %s\n" % line for line in gone)


def set_stack_limit(nbytes):
    """cudaDeviceSetLimit(cudaLimitStackSize) through the CUDA runtime torch
    loaded (no tensor is made: the allocator's record starts empty)."""
    import ctypes
    path = next((line.split()[-1] for line in open("/proc/self/maps")
                 if "libcudart.so" in line), None)
    if path is None:
        sys.exit("train_torch: --stack-limit: no libcudart in this process")
    rt = ctypes.CDLL(path)
    rc = rt.cudaDeviceSetLimit(ctypes.c_int(0), ctypes.c_size_t(nbytes))
    got = ctypes.c_size_t(0)
    rt.cudaDeviceGetLimit(ctypes.byref(got), ctypes.c_int(0))
    print("train_torch: stack limit %d bytes (cudaDeviceSetLimit returned %d)"
          % (got.value, rc), file=sys.stderr)
    if rc != 0:
        sys.exit("train_torch: --stack-limit %d failed (%d)" % (nbytes, rc))


def leave_free(nbytes):
    """A smaller GPU on a large one: cudaMalloc, outside PyTorch's
    allocator, all the free device memory but NBYTES (after the context is
    made, before the model), through the CUDA runtime torch loaded. What
    the process then has is what a device whose memory is NBYTES besides
    the context would give it (scripts/device_maxbatch.sh, docs/whatif.md).
    Returns (ballast bytes, free bytes after it)."""
    import ctypes
    path = next((line.split()[-1] for line in open("/proc/self/maps")
                 if "libcudart.so" in line), None)
    if path is None:
        sys.exit("train_torch: --leave-free: no libcudart in this process")
    rt = ctypes.CDLL(path)
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    rt.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total))
    ballast = free.value - nbytes
    if ballast <= 0:
        sys.exit("train_torch: --leave-free %d: only %d bytes free" % (nbytes, free.value))
    ptr = ctypes.c_void_p()
    rc = rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(ballast))
    if rc != 0:
        sys.exit("train_torch: --leave-free: cudaMalloc(%d) failed (%d)" % (ballast, rc))
    rt.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total))
    print("train_torch: ballast %d bytes, %d bytes free" % (ballast, free.value), file=sys.stderr)
    return ballast, free.value


def run_truth(args):
    if os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING"):
        print("train_torch: truth mode needs the caching allocator: unset "
              "PYTORCH_NO_CUDA_MEMORY_CACHING", file=sys.stderr)
        return 2
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    torch.cuda.init()
    if args.stack_limit:
        set_stack_limit(args.stack_limit)
    if args.fraction < 1.0:
        torch.cuda.set_per_process_memory_fraction(args.fraction)
    ballast = leave_free(args.leave_free) if args.leave_free else (0, None)
    # Record from an empty allocator, before the model exists.
    try:
        torch.cuda.memory._record_memory_history(enabled="all", context=None,
                                                 stacks="python", max_entries=2_000_000)
    except TypeError:
        torch.cuda.memory._record_memory_history(max_entries=2_000_000)
    watch = MapsWatch() if args.maps else None
    step_s, oom, host = train(args, nvtx=False)
    if watch:
        watch.stop(args.maps)
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    traces = snap.get("device_traces", [[]])
    entries = traces[0] if traces else []
    stats = torch.cuda.memory_stats()
    # the run's peaks: train() resets them at every step for the per-step
    # figures and keeps the run's own in run_peaks
    for k, v in host["run_peaks"].items():
        if v > stats.get(k, -1):
            stats[k] = v
    sub = {k: stats[k] for k in sorted(stats)
           if k.startswith(STAT_PREFIXES) or k in STAT_KEYS}
    free, total = torch.cuda.mem_get_info()
    name = "%s-b%d-%s" % (args.model, args.batch, conf_name(conf, args.fraction))
    base = os.path.join(args.outdir, name)
    info = {"model": args.model, "batch": args.batch, "img": args.img, "img_sizes": args.img_sizes,
            "conf": conf or "default", "fraction": args.fraction,
            "total_memory": torch.cuda.get_device_properties(0).total_memory,
            "oom": oom, "step_s": step_s, "stats": sub,
            "step_peak_allocated": host["step_peak_allocated"],
            "step_peak_reserved": host["step_peak_reserved"],
            "device_used": total - free,
            "ballast": ballast[0], "free_after_ballast": ballast[1]}
    info.update(versions())
    info["warmup"] = args.warmup
    info["mean_step_s"] = mean_after_warmup(step_s, args.warmup)
    if args.capture_json and os.path.exists(args.capture_json):
        with open(args.capture_json) as f:
            cap = json.load(f)
        info["nocache_step_s"] = cap.get("step_s")
        info["nocache_mean_step_s"] = cap.get("mean_step_s")
    tmp = base + ".trace.gz.tmp"
    with gzip.open(tmp, "wt") as f:
        for e in entries:
            f.write("%s %d %d %d %d\n" % (e.get("action", "?"), int(e.get("addr", 0)),
                                          int(e.get("size", 0)), int(e.get("stream", 0)),
                                          int(e.get("time_us", 0))))
    os.replace(tmp, base + ".trace.gz")
    write_json_atomic(base + ".json", info)
    print("train_torch: wrote %s.trace.gz (%d entries) and %s.json; peak reserved %d, "
          "peak allocated %d" % (base, len(entries), base,
                                 sub.get("reserved_bytes.all.peak", 0),
                                 sub.get("allocated_bytes.all.peak", 0)), flush=True)
    return 0


def caching_allocator_on(mode):
    if os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING"):
        print("train_torch: %s mode needs the caching allocator: unset "
              "PYTORCH_NO_CUDA_MEMORY_CACHING" % mode, file=sys.stderr)
        return False
    return True


def sibling_tmp(path):
    """A temporary name beside PATH that keeps its suffix (.json, .json.gz):
    export_chrome_trace compresses by the name."""
    d, b = os.path.split(path)
    return os.path.join(d, ".tmp-%d-%s" % (os.getpid(), b))


def run_profile(args):
    if not caching_allocator_on("profile"):
        return 2
    from torch.profiler import ProfilerActivity, profile, schedule
    torch.cuda.init()
    tmp = sibling_tmp(args.out)
    written = []

    def ready(prof):
        prof.export_chrome_trace(tmp)
        os.replace(tmp, args.out)
        written.append(args.out)

    # Every step recorded, each a ProfilerStep#N range (a schedule is what
    # makes torch.profiler mark steps); warmup=0 so nothing is left out.
    sched = schedule(wait=0, warmup=0, active=args.steps, repeat=1)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=sched,
                 on_trace_ready=ready, profile_memory=True, record_shapes=False,
                 with_stack=False) as prof:
        try:
            prof.add_metadata("torch_version", torch.__version__)
        except Exception as e:  # noqa: BLE001 - metadata is a nicety
            print("train_torch: no torch_version in the profile: %s" % e, file=sys.stderr)
        step_s, oom, _ = train(args, nvtx=False, on_step=prof.step)
    if not written:
        print("train_torch: the profiler wrote no trace", file=sys.stderr)
        return 1
    info = {"model": args.model, "batch": args.batch, "img": args.img, "img_sizes": args.img_sizes, "oom": oom,
            "warmup": args.warmup, "step_s": step_s,
            "mean_step_s": mean_after_warmup(step_s, args.warmup),
            "profile": args.out, "profile_bytes": os.path.getsize(args.out)}
    info.update(versions())
    if args.json:
        write_json_atomic(args.json, info)
    print("train_torch: wrote %s (%d bytes)" % (args.out, info["profile_bytes"]), flush=True)
    return 1 if oom else 0


def run_snapshot(args):
    if not caching_allocator_on("snapshot"):
        return 2
    torch.cuda.init()
    if not args.no_history:
        # from an empty allocator, before the model exists, as truth mode
        torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
    step_s, oom, _ = train(args, nvtx=False)
    tmp = sibling_tmp(args.out)
    torch.cuda.memory._dump_snapshot(tmp)
    os.replace(tmp, args.out)
    if not args.no_history:
        torch.cuda.memory._record_memory_history(enabled=None)
    print("train_torch: wrote %s (%d bytes, %s history)" % (
        args.out, os.path.getsize(args.out), "no" if args.no_history else "with"), flush=True)
    return 1 if oom else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=("capture", "truth", "profile", "snapshot"), required=True)
    p.add_argument("--model", default="resnet18")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--img", type=int, default=224)
    p.add_argument("--img-sizes", type=lambda v: [int(x) for x in v.split(",")], default=None,
                   help="multi-scale training: step k uses the k-th of these input sizes "
                        "(cycled), e.g. 160,224,320; the steps' shapes vary")
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--steps", type=int, default=5, help="steps in all (default 5)")
    p.add_argument("--warmup", type=int, default=2,
                   help="first steps left out of mean_step_s (default 2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fraction", type=float, default=1.0,
                   help="set_per_process_memory_fraction (truth and capture modes)")
    p.add_argument("--no-layer-ranges", dest="layer_ranges", action="store_false",
                   help="capture: no per-module NVTX ranges")
    p.add_argument("--json", help="capture: where to write step times")
    p.add_argument("--capture-json", help="truth: capture json to fold in")
    p.add_argument("--outdir", default=".", help="truth: output folder")
    p.add_argument("--maps", help="truth: write every change of /proc/self/maps "
                   "while recording (a thread polls it) to this .gz: lines "
                   "'T time_us', then '+ LINE' / '- LINE' (docs/policies.md)")
    p.add_argument("--stack-limit", type=int, default=0,
                   help="truth: cudaDeviceSetLimit(cudaLimitStackSize, BYTES) "
                   "before recording: the driver reserves local memory for it at "
                   "once instead of growing it at launches (docs/policies.md)")
    p.add_argument("--leave-free", type=int, default=0,
                   help="truth: take all the device's free memory but BYTES with a "
                   "cudaMalloc outside PyTorch's allocator before the model: a "
                   "smaller GPU (the largest batch that fits one)")
    p.add_argument("--out", help="profile: the Chrome trace to write; snapshot: the pickle")
    p.add_argument("--no-history", action="store_true",
                   help="snapshot: do not record the allocation history")
    p.add_argument("--max-entries", type=int, default=2_000_000,
                   help="snapshot: _record_memory_history(max_entries=...)")
    args = p.parse_args()
    if args.mode in ("profile", "snapshot") and not args.out:
        p.error("--mode %s needs --out PATH" % args.mode)
    if args.batch < 1 or args.steps < 1 or args.img < 32 or not 0 < args.fraction <= 1:
        p.error("need --batch >= 1, --steps >= 1, --img >= 32, 0 < --fraction <= 1")
    if args.img_sizes is not None and (not args.img_sizes or min(args.img_sizes) < 32):
        p.error("need --img-sizes of sizes >= 32")
    if not hasattr(torchvision.models, args.model):
        p.error("unknown torchvision model %s" % args.model)
    if not torch.cuda.is_available():
        print("train_torch: no CUDA device", file=sys.stderr)
        return 1
    run = {"capture": run_capture, "truth": run_truth, "profile": run_profile,
           "snapshot": run_snapshot}[args.mode]
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
