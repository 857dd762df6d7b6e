"""torch_steps.py: a few training steps of a torchvision model, for capture
tests and the overhead measurement (capture/overhead.sh).

Each step is an NVTX range "step" (nested inside "train"), pushed after CUDA
is initialised. Prints the median step time in ms (after --warmup steps) as
"step_ms <value>" on stdout.
usage: python3 torch_steps.py [--model resnet18] [--batch 16] [--steps 3] [--warmup 1]
"""
import argparse
import statistics
import time

import torch
import torchvision


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = getattr(torchvision.models, a.model)(num_classes=1000).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(a.batch, 3, 224, 224, device=dev)
    y = torch.randint(0, 1000, (a.batch,), device=dev)
    loss_fn = torch.nn.CrossEntropyLoss()
    times = []
    torch.cuda.nvtx.range_push("train")
    for i in range(a.warmup + a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.cuda.nvtx.range_push("step")
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        if i >= a.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    torch.cuda.nvtx.range_pop()
    print("step_ms %.3f" % statistics.median(times), flush=True)


if __name__ == "__main__":
    main()
