#!/usr/bin/env python3
"""compile_peak.py: peak memory of eager vs torch.compile training steps.

Ground truth for operator fusion: for each batch size, a fresh torchvision
model (SGD momentum 0.9, random 224x224 images, caching allocator on) runs
--warmup steps (for the compiled model these include compilation), then the
peak statistics are reset and --steps more steps are measured:
torch.cuda.max_memory_allocated / max_memory_reserved and
memory_stats()['requested_bytes.all.peak']. Eager first, then compiled,
each after empty_cache() so the other's cached segments do not count.
One more step walks the autograd graph before backward and counts what
forward saved for it (distinct storages and their bytes): what AOTAutograd's
partitioner kept, the mechanism `whatif compile` models. A last step runs
under torch.profiler (CUDA activity only) for the kernels each mode runs.

--gpu-lock FILE: several of these processes compile at once (compilation is
host work) and take FILE (flock) for the GPU work that is measured, so each
measurement runs alone on the GPU; a compiled model's first step, which
compiles, runs outside the lock. --barrier DIR --barrier-n N: each process
compiles all its models first and waits for the N processes to be done
compiling, so no compilation slows the host of a measured step.

--modes pair: step times only, eager and compiled in one process on the
same parameters, in alternating blocks of --steps steps (--rounds of them,
the order swapped every round), so both run on the same host in the same
state: a host's speed varies up to 2x between processes of one call, which
separate processes cannot tell from the change torch.compile makes. Records
"pair": {"eager"|"compile": {"step_s", "host_s", "profile"}} and no peaks.

--snapshot DIR: one more step records the allocator's memory history
(Python stacks) into DIR/MODEL-bBATCH-MODE.pickle, for the batch sizes of
--snapshot-batch: what is live at a compiled program's peak.

Writes one json (rewritten after each measurement, so a run cut short by a
time limit keeps what it measured):
  {"model", "img", "torch", "gpu", "cudnn", "barrier_complete"?,
   "barrier_wait_s"?, "runs": [{"batch", "mode", "peak_allocated",
   "peak_reserved", "peak_requested", "step_s", "host_s" (time to launch
   the step: close to step_s when the host bounds it), "warmup_s",
   "compile_s", "saved_count", "saved_bytes", "profile", "snapshot"?,
   "error"?}]}

usage: python3 compile_peak.py --model resnet18 --batch 32 64 --json out.json
"""
import argparse
import contextlib
import fcntl
import gc
import json
import os
import sys
import time

import torch
import torchvision


# Where the step drops the previous step's gradients: "after-forward" is
# capture/torch/train_torch.py's order (the program the shipped captures
# recorded: the gradients are live through the forward pass, which moves the
# peak of a model whose peak is at the end of its forward); "before-forward"
# frees them first. Set by --zero-grad.
ZERO_GRAD = "after-forward"


def step(model, opt, loss_fn, batch, img, classes, dev):
    """One training step, launched but not waited for: returns the loss
    tensor (reading it would synchronise, and the host time of a step is
    measured as the time to launch it)."""
    x = torch.randn(batch, 3, img, img, device=dev)
    y = torch.randint(0, classes, (batch,), device=dev)
    if ZERO_GRAD == "before-forward":
        opt.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    if ZERO_GRAD == "after-forward":
        opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.detach()


@contextlib.contextmanager
def gpu_lock(path):
    """Hold an exclusive flock on path (nothing when path is None)."""
    if not path:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def saved_for_backward(run_model, opt, loss_fn, batch, img, classes, dev):
    """(count, bytes) of the distinct storages one step's forward saved for backward.

    Walks the autograd graph from the loss before backward runs: eager nodes
    hold their saved tensors in _saved_* attributes, a compiled region is one
    node whose saved_tensors are what the partitioner kept. Parameters count
    in both modes. No hooks: saved_tensors_hooks would make dynamo recompile.
    """
    x = torch.randn(batch, 3, img, img, device=dev)
    y = torch.randint(0, classes, (batch,), device=dev)
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(run_model(x), y)
    seen, todo, done = {}, [loss.grad_fn], set()

    def note(v):
        if isinstance(v, torch.Tensor) and v.is_cuda:
            st = v.untyped_storage()
            seen[st.data_ptr()] = st.nbytes()
        elif isinstance(v, (tuple, list)):
            for u in v:
                note(u)

    while todo:
        node = todo.pop()
        if node is None or id(node) in done:
            continue
        done.add(id(node))
        for attr in dir(node):
            if attr.startswith("_saved_") or attr == "saved_tensors":
                try:
                    note(getattr(node, attr))
                except Exception:  # freed or not a tensor attribute
                    pass
        todo.extend(f for f, _ in getattr(node, "next_functions", ()))
    loss.backward()
    opt.step()
    torch.cuda.synchronize()
    return len(seen), sum(seen.values())


def gpu_kernels(run_model, opt, loss_fn, batch, img, classes, dev):
    """One step under torch.profiler (CUDA only): the GPU time and count of
    its kernels, by name, so the compiled program's kernels can be compared
    with what `whatif compile` predicts (triton_* are Inductor's)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step(run_model, opt, loss_fn, batch, img, classes, dev)
        torch.cuda.synchronize()
    kern = {}
    for ev in prof.events():
        if ev.device_type.name != "CUDA":
            continue
        k = kern.setdefault(ev.name, [0, 0.0])
        k[0] += 1
        k[1] += ev.time_range.elapsed_us()
    total = sum(v[1] for v in kern.values())
    top = sorted(kern.items(), key=lambda kv: -kv[1][1])
    return {"gpu_us": total, "kernels": sum(v[0] for v in kern.values()),
            "names": len(kern),
            "by_name": [{"name": n[:200], "count": c, "us": round(t, 1)} for n, (c, t) in top]}


def prepare(args, batch, mode, dev):
    """A fresh model for (batch, mode); a compiled one has run its first
    step (which compiles: host work, outside the lock). Returns the state
    measure() takes."""
    torch.manual_seed(0)
    model = getattr(torchvision.models, args.model)(num_classes=args.classes).to(dev)
    model.train()
    compiled = mode in ("compile", "pair")
    run_model = torch.compile(model, dynamic=False) if compiled else model
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    st = {"model": model, "run": run_model, "opt": opt, "loss": torch.nn.CrossEntropyLoss(),
          "rec": {"batch": batch, "mode": mode}, "warmup": args.warmup}
    if compiled:
        t0 = time.perf_counter()
        step(run_model, opt, st["loss"], batch, args.img, args.classes, dev)
        torch.cuda.synchronize()
        st["rec"]["compile_s"] = time.perf_counter() - t0
        st["warmup"] -= 1
        torch.cuda.empty_cache()  # hold no cached blocks while others compile
    return st


def measure(args, st, dev):
    """Measure a prepare()d model alone on the GPU; returns a dict for runs[]."""
    rec, run_model, opt, loss_fn = st["rec"], st["run"], st["opt"], st["loss"]
    batch = rec["batch"]
    with gpu_lock(args.gpu_lock):
        torch.cuda.empty_cache()
        t0 = time.perf_counter()
        for _ in range(st["warmup"]):
            step(run_model, opt, loss_fn, batch, args.img, args.classes, dev)
        torch.cuda.synchronize()
        rec["warmup_s"] = time.perf_counter() - t0
        torch.cuda.reset_peak_memory_stats()
        times, host = [], []
        for _ in range(args.steps):
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            loss = step(run_model, opt, loss_fn, batch, args.img, args.classes, dev)
            t2 = time.perf_counter()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t1)
            host.append(t2 - t1)
        rec["loss"] = float(loss)
        stats = torch.cuda.memory_stats()
        rec["peak_allocated"] = torch.cuda.max_memory_allocated()
        rec["peak_reserved"] = torch.cuda.max_memory_reserved()
        rec["peak_requested"] = stats.get("requested_bytes.all.peak", 0)
        rec["step_s"] = times
        # the host's share: when it is close to step_s the step is host-bound
        rec["host_s"] = host
        rec["saved_count"], rec["saved_bytes"] = saved_for_backward(
            run_model, opt, loss_fn, batch, args.img, args.classes, dev)
        try:
            rec["profile"] = gpu_kernels(run_model, opt, loss_fn, batch, args.img,
                                         args.classes, dev)
        except Exception as e:  # the measurement stands without it
            rec["profile_error"] = "%s: %s" % (type(e).__name__, str(e)[:200])
        if args.snapshot and batch in args.snapshot_batch:
            rec["snapshot"] = memory_snapshot(args, st, dev)
        torch.cuda.empty_cache()
    return rec


def measure_pair(args, st, dev):
    """--modes pair: eager and compiled step times in alternating blocks on
    the same model, alone on the GPU; returns a dict for runs[]."""
    rec, opt, loss_fn = st["rec"], st["opt"], st["loss"]
    batch = rec["batch"]
    runs = {"eager": st["model"], "compile": st["run"]}
    res = {m: {"step_s": [], "host_s": []} for m in runs}
    with gpu_lock(args.gpu_lock):
        torch.cuda.empty_cache()
        for m in ("eager", "compile"):
            for _ in range(max(st["warmup"], 2)):
                step(runs[m], opt, loss_fn, batch, args.img, args.classes, dev)
        torch.cuda.synchronize()
        for r in range(args.rounds):
            for m in (("eager", "compile") if r % 2 == 0 else ("compile", "eager")):
                step(runs[m], opt, loss_fn, batch, args.img, args.classes, dev)  # settle
                for _ in range(args.steps):
                    torch.cuda.synchronize()
                    t1 = time.perf_counter()
                    step(runs[m], opt, loss_fn, batch, args.img, args.classes, dev)
                    t2 = time.perf_counter()
                    torch.cuda.synchronize()
                    res[m]["step_s"].append(time.perf_counter() - t1)
                    res[m]["host_s"].append(t2 - t1)
        for m in runs:
            try:
                res[m]["profile"] = gpu_kernels(runs[m], opt, loss_fn, batch, args.img,
                                                args.classes, dev)
            except Exception as e:
                res[m]["profile_error"] = "%s: %s" % (type(e).__name__, str(e)[:200])
        torch.cuda.empty_cache()
    rec["pair"] = res
    rec["rounds"] = args.rounds
    return rec


def memory_snapshot(args, st, dev):
    """One more step under the caching allocator's memory history (Python
    stacks), dumped as a pickle (torch.cuda.memory._snapshot format, readable
    at pytorch.org/memory_viz): which blocks are live at the peak. After the
    timed steps, so the recording does not slow them."""
    rec = st["rec"]
    os.makedirs(args.snapshot, exist_ok=True)
    path = os.path.join(args.snapshot, "%s-b%d-%s.pickle" % (args.model, rec["batch"], rec["mode"]))
    torch.cuda.memory._record_memory_history(max_entries=200000, stacks="python")
    try:
        torch.cuda.reset_peak_memory_stats()
        step(st["run"], st["opt"], st["loss"], rec["batch"], args.img, args.classes, dev)
        torch.cuda.synchronize()
        torch.cuda.memory._dump_snapshot(path)
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    return {"file": os.path.basename(path), "peak_allocated": torch.cuda.max_memory_allocated()}


def barrier(path, n, timeout_s):
    """Wait until N processes have reached PATH (a directory): compilation,
    host work that would slow every measurement, is then over everywhere.
    Returns (every process arrived, seconds waited)."""
    os.makedirs(path, exist_ok=True)
    open(os.path.join(path, str(os.getpid())), "w").close()
    t0 = time.time()
    while len(os.listdir(path)) < n and time.time() - t0 < timeout_s:
        time.sleep(0.2)
    return len(os.listdir(path)) >= n, time.time() - t0


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet18")
    p.add_argument("--batch", type=int, nargs="+", default=[32, 64])
    p.add_argument("--img", type=int, default=224)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=3, help="at least 2")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--modes", nargs="+", default=["eager", "compile"],
                   choices=["eager", "compile", "pair"])
    p.add_argument("--rounds", type=int, default=4,
                   help="--modes pair: alternating blocks of --steps steps per mode (4)")
    p.add_argument("--gpu-lock", metavar="FILE",
                   help="flock FILE around the measured GPU work")
    p.add_argument("--barrier", metavar="DIR",
                   help="compile every (batch, mode) first, then wait until "
                        "--barrier-n processes reached DIR before measuring")
    p.add_argument("--barrier-n", type=int, default=1)
    p.add_argument("--barrier-timeout", type=float, default=300)
    p.add_argument("--snapshot", metavar="DIR",
                   help="after measuring, record one step's memory history "
                        "into DIR/MODEL-bBATCH-MODE.pickle")
    p.add_argument("--snapshot-batch", type=int, nargs="+", default=[32],
                   help="the batch sizes --snapshot records (32)")
    p.add_argument("--zero-grad", choices=["after-forward", "before-forward"],
                   default="after-forward",
                   help="where a step frees the previous gradients (after-forward: "
                        "train_torch.py's order, the captured program's)")
    p.add_argument("--json", required=True)
    args = p.parse_args()
    global ZERO_GRAD
    ZERO_GRAD = args.zero_grad
    if not hasattr(torchvision.models, args.model):
        p.error("unknown torchvision model %s" % args.model)
    if args.warmup < 2:
        p.error("--warmup must be at least 2 (the first step of a compiled model compiles)")
    if not torch.cuda.is_available():
        print("compile_peak: no CUDA device", file=sys.stderr)
        return 1
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    out = {"model": args.model, "img": args.img, "warmup": args.warmup,
           "zero_grad": args.zero_grad,
           "steps": args.steps, "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(),
           "gpu": torch.cuda.get_device_name(0), "runs": []}
    rc = 0
    todo = [(b, m) for b in args.batch for m in args.modes]
    ready = {}
    if args.barrier:  # compile everything first, then measure with the host quiet
        for key in todo:
            try:
                ready[key] = prepare(args, key[0], key[1], dev)
            except Exception as e:
                ready[key] = e
        # a measurement taken while another process still compiled is not a
        # clean step time: say so in the json
        out["barrier_complete"], out["barrier_wait_s"] = barrier(
            args.barrier, args.barrier_n, args.barrier_timeout)
    for batch, mode in todo:
        try:
            st = ready.pop((batch, mode), None) or prepare(args, batch, mode, dev)
            if isinstance(st, Exception):
                raise st
            rec = (measure_pair if mode == "pair" else measure)(args, st, dev)
            del st
            gc.collect()
            torch.cuda.empty_cache()
        except Exception as e:  # keep the other measurements
            rec = {"batch": batch, "mode": mode,
                   "error": "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")}
            rc = 1
        out["runs"].append(rec)
        write_json(args.json, out)
        med = lambda v: 1e3 * sorted(v)[len(v) // 2]
        if "error" in rec:
            what = rec["error"]
        elif "pair" in rec:
            what = "step eager %.1f ms, compiled %.1f ms" % (
                med(rec["pair"]["eager"]["step_s"]), med(rec["pair"]["compile"]["step_s"]))
        else:
            what = "peak allocated %d reserved %d (warm-up %.1f s, step %.1f ms)" % (
                rec["peak_allocated"], rec["peak_reserved"], rec["warmup_s"], med(rec["step_s"]))
        print("compile_peak: %s b%d %s: %s" % (args.model, batch, mode, what), flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
