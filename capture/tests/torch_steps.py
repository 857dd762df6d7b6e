"""torch_steps.py: a few training steps of a torchvision model, for capture
tests and the overhead measurement (capture/overhead.sh).

Each step is an NVTX range "step" (nested inside "train"), pushed after CUDA
is initialised. Prints the median step time in ms (after --warmup steps) as
"step_ms <value>" on stdout.

--compile default|reduce-overhead runs the model under torch.compile (the
default mode, or "reduce-overhead": Inductor with CUDA graphs); the loss and
the optimizer step stay eager. Compilation happens in the warm-up steps
(give reduce-overhead 3: CUDA graph trees run the first call eagerly, record
on the second and replay from the third), which are not timed. With
--compile two more lines come before "step_ms": "warmup_s <seconds>" (all
warm-up steps together, compilation included) and, for reduce-overhead,
"cudagraph_skips <n>" (Inductor's count of graphs it ran without CUDA
graphs; -1 when the counter cannot be read).
usage: python3 torch_steps.py [--model resnet18] [--batch 16] [--steps 3] [--warmup 1]
                              [--compile none|default|reduce-overhead]
"""
import argparse
import statistics
import time

import torch
import torchvision


def cudagraph_skips():
    """Inductor's count of graphs that ran without CUDA graphs, or -1."""
    try:
        from torch._dynamo.utils import counters
        return int(counters["inductor"]["cudagraph_skips"])
    except Exception:  # private API: absent or renamed in this torch
        return -1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--compile", default="none", choices=["none", "default", "reduce-overhead"],
                    help="run the model under torch.compile in this mode (default: eager)")
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = getattr(torchvision.models, a.model)(num_classes=1000).to(dev)
    run_model = model
    if a.compile == "default":
        run_model = torch.compile(model)
    elif a.compile == "reduce-overhead":
        run_model = torch.compile(model, mode="reduce-overhead")
    graphs = a.compile == "reduce-overhead"
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(a.batch, 3, 224, 224, device=dev)
    y = torch.randint(0, 1000, (a.batch,), device=dev)
    loss_fn = torch.nn.CrossEntropyLoss()
    times = []
    torch.cuda.nvtx.range_push("train")
    t_start = time.perf_counter()
    warmup_s = 0.0
    for i in range(a.warmup + a.steps):
        torch.cuda.synchronize()
        if i == a.warmup:
            warmup_s = time.perf_counter() - t_start
        t0 = time.perf_counter()
        torch.cuda.nvtx.range_push("step")
        if graphs:
            # a new iteration: outputs of the previous replay may be overwritten
            torch.compiler.cudagraph_mark_step_begin()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(run_model(x), y)
        loss.backward()
        opt.step()
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        if i >= a.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    torch.cuda.nvtx.range_pop()
    if a.compile != "none":
        print("warmup_s %.3f" % warmup_s, flush=True)
        if graphs:
            print("cudagraph_skips %d" % cudagraph_skips(), flush=True)
    print("step_ms %.3f" % statistics.median(times), flush=True)


if __name__ == "__main__":
    main()
