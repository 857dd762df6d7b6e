#!/usr/bin/env python3
"""launch_cost.py: the host's cost of one kernel launch from torch.compile's
generated code, measured on small programs that are not any model.

`gpumemsim whatif compile` predicts a compiled step's time from an eager
capture; a compiled program is often bound by its host (Inductor's wrapper
launches every kernel from Python), so the step needs the host cost of each
launch. That cost belongs to the host, the driver and torch, not to a model,
so it is measured here once per host (and shipped as data, like the
cudaMalloc cost table) instead of fitted to the models it predicts.

Programs, each called with nothing else running, host time per call (the
time to return, no synchronisation inside; the GPU is idle between calls):
  pointwise N: N element-wise ops on tensors of N distinct sizes, compiled:
               N generated kernels (distinct sizes never fuse), each with its
               output allocated by the wrapper;
  extern N:    N matrix products of distinct shapes, compiled: N extern
               calls (cuBLAS through ATen, as Inductor calls convolutions);
  eager N:     the pointwise program uncompiled: N ATen operators.
The cost of one launch is the slope between N=1 and N=--n; the N=1 time is
the fixed cost of calling a compiled graph (guards, the runtime wrapper).
Kernels per call are counted with torch.profiler to check the slope counts
what it should.

usage: python3 launch_cost.py --json out.json [--n 200] [--iters 60]
"""
import argparse
import json
import statistics
import sys
import time

import torch


def host_time(fn, args, iters):
    """Median host time of fn(args) in seconds: returned, not finished."""
    for _ in range(5):
        fn(args)
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(args)
        ts.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return statistics.median(ts)


def kernels_per_call(fn, args):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(args)
        torch.cuda.synchronize()
    return sum(1 for ev in prof.events() if ev.device_type.name == "CUDA")


def pointwise(xs):
    return [torch.sin(x) * 2.0 for x in xs]


def matmuls(ws):
    return [w @ w for w in ws]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--iters", type=int, default=60)
    p.add_argument("--json", required=True)
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("launch_cost: no CUDA device", file=sys.stderr)
        return 1
    dev = torch.device("cuda")
    out = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "n": a.n,
           "iters": a.iters, "programs": {}}
    progs = {
        "pointwise": (pointwise, lambda n: [torch.randn(4096 + 64 * i, device=dev) for i in range(n)], True),
        "extern": (matmuls, lambda n: [torch.randn(64 + i, 64 + i, device=dev) for i in range(n)], True),
        "eager": (pointwise, lambda n: [torch.randn(4096 + 64 * i, device=dev) for i in range(n)], False),
    }
    for name, (fn, make, compiled) in progs.items():
        rec = {}
        for n in (1, a.n):
            torch._dynamo.reset()
            f = torch.compile(fn, dynamic=False) if compiled else fn
            args = make(n)
            t0 = time.perf_counter()
            f(args)
            torch.cuda.synchronize()
            rec["compile_s_%d" % n] = time.perf_counter() - t0
            rec["host_us_%d" % n] = 1e6 * host_time(f, args, a.iters)
            rec["kernels_%d" % n] = kernels_per_call(f, args)
        dk = rec["kernels_%d" % a.n] - rec["kernels_1"]
        rec["per_launch_us"] = (rec["host_us_%d" % a.n] - rec["host_us_1"]) / (a.n - 1)
        rec["per_kernel_us"] = (rec["host_us_%d" % a.n] - rec["host_us_1"]) / dk if dk > 0 else None
        rec["fixed_us"] = rec["host_us_1"] - rec["per_launch_us"]
        out["programs"][name] = rec
        print("launch_cost: %s: %.2f us a launch, %.1f us fixed, %d kernels for %d" % (
            name, rec["per_launch_us"], rec["fixed_us"], rec["kernels_%d" % a.n], a.n), flush=True)
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=1)
            fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
