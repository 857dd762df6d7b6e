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

Those programs launch one kernel per output. A training step launches
kernels with several operands, cuDNN convolutions, autograd's gradient
accumulation and the optimizer: --train also times the training steps of
a small CNN defined here (not a torchvision model: the models
compile_peak.py measures are what the cost is checked against), eager and
compiled, at batch 2 (the GPU work is small, the host bounds the step), at
6 and 24 blocks: host time per step / kernels per step, and the slope
between the depths (the cost of one more kernel of a real training graph)
with what is left at zero kernels (the fixed cost of a step).

usage: python3 launch_cost.py --json out.json [--n 200] [--iters 60] [--train | --train-only]
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


class SmallCNN(torch.nn.Module):
    """Conv-BN-ReLU blocks (3x3, two of them strided), a residual add,
    global pooling and a linear layer: the operators of the CNNs the cost
    is for, in a network none of them is."""

    def __init__(self, width=32, blocks=6, classes=10):
        super().__init__()
        layers, c = [], 3
        for i in range(blocks):
            o = width * (2 if i >= blocks // 2 else 1)
            layers.append(torch.nn.Sequential(
                torch.nn.Conv2d(c, o, 3, stride=2 if i in (1, blocks // 2) else 1, padding=1,
                                bias=False),
                torch.nn.BatchNorm2d(o), torch.nn.ReLU(inplace=True)))
            c = o
        self.blocks = torch.nn.ModuleList(layers)
        self.fc = torch.nn.Linear(c, classes)

    def forward(self, x):
        for i, b in enumerate(self.blocks):
            y = b(x)
            x = y + x if y.shape == x.shape else y
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1))


def train_cost(dev, iters, compiled, blocks=6):
    """Host time and kernels of one training step of SmallCNN (the step of
    compile_peak.py: zero_grad after the forward pass, SGD momentum)."""
    torch.manual_seed(0)
    model = SmallCNN(blocks=blocks).to(dev).train()
    run = torch.compile(model, dynamic=False) if compiled else model
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(2, 3, 64, 64, device=dev)
    y = torch.randint(0, 10, (2,), device=dev)

    def step(_):
        loss = loss_fn(run(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    t0 = time.perf_counter()
    step(None)
    torch.cuda.synchronize()
    rec = {"compile_s": time.perf_counter() - t0,
           "host_us": 1e6 * host_time(step, None, iters),
           "kernels": kernels_per_call(step, None)}
    rec["per_kernel_us"] = rec["host_us"] / rec["kernels"] if rec["kernels"] else None
    return rec


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--iters", type=int, default=60)
    p.add_argument("--train", action="store_true",
                   help="also time SmallCNN's training step, eager and compiled")
    p.add_argument("--train-only", action="store_true",
                   help="time only SmallCNN's training steps")
    p.add_argument("--json", required=True)
    a = p.parse_args()
    a.train = a.train or a.train_only
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
        if a.train_only:
            break
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
    # Two depths: the slope is the cost of one more kernel of a training
    # graph, the rest what a step costs whatever its size (the compiled
    # graph's guards and runtime wrappers, autograd's engine, the optimizer).
    for name, compiled in (("train_eager", False), ("train_compiled", True)):
        if not a.train:
            break
        rec = {}
        for blocks in (6, 24):
            torch._dynamo.reset()
            rec[blocks] = train_cost(dev, a.iters, compiled, blocks)
            print("launch_cost: %s, %d blocks: %.2f us a kernel (%d kernels, %.0f us a step)" % (
                name, blocks, rec[blocks]["per_kernel_us"] or 0, rec[blocks]["kernels"],
                rec[blocks]["host_us"]), flush=True)
        out["programs"][name] = dict(rec[6])
        dk = rec[24]["kernels"] - rec[6]["kernels"]
        out["programs"][name]["deep"] = rec[24]
        if dk > 0:
            slope = (rec[24]["host_us"] - rec[6]["host_us"]) / dk
            out["programs"][name]["slope_us"] = slope
            out["programs"][name]["fixed_us"] = rec[6]["host_us"] - slope * rec[6]["kernels"]
            print("launch_cost: %s: %.2f us a kernel more, %.0f us fixed" % (
                name, slope, out["programs"][name]["fixed_us"]), flush=True)
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=1)
            fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
