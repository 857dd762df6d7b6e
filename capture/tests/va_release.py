#!/usr/bin/env python3
"""va_release.py: what makes the CUDA context let go of its 414 MiB
(docs/policies.md, "Synthetic addresses": in every PyTorch run the range is
freed around cuDNN's first use; loading cuDNN and making a handle in the
probe did not free it).

    PYTORCH_NO_CUDA_MEMORY_CACHING=1 python3 va_release.py STEP

cudaMalloc 20 MiB and 2 MiB (the probe's start), then STEP, then cudaMalloc
300 MiB: if the 414 MiB are free it lands inside them (a released range
larger than its chunk, at the high end), else in fresh space below. STEP:
none; relu (a PyTorch element-wise kernel); conv (a cuDNN convolution,
cudnn.benchmark off); conv_native (the same without cuDNN); matmul (cuBLAS);
conv_bench (cudnn.benchmark on); relu_nosync, relu_sleep, relu_event (the
kernel, then no device synchronisation: none at all, a 200 ms sleep, an
event polled until the kernel is done); empty (a tensor made, no kernel);
small_malloc (a 4 KiB cudaMalloc, no PyTorch); randn, randint (a training
step's first kernels: the input batch and labels); randn_conv (randn, then a
cuDNN convolution). Every other STEP ends with
torch.cuda.synchronize(). Prints one JSON line: the three
addresses relative to the first, in MiB, and the tensors' own cudaMallocs
made in STEP (with the caching allocator off each tensor is one)."""
import ctypes
import json
import sys
import time

import torch

MiB = 1 << 20


def cudart():
    path = next((line.split()[-1] for line in open("/proc/self/maps") if "libcudart.so" in line),
                None)
    if path is None:
        sys.exit("va_release: no libcudart in this process")
    return ctypes.CDLL(path)


def main():
    step = sys.argv[1] if len(sys.argv) == 2 else ""
    steps = ("none", "relu", "conv", "conv_native", "matmul", "conv_bench", "relu_nosync",
             "relu_sleep", "relu_event", "empty", "small_malloc", "randn", "randn_conv",
             "randint")
    if step not in steps:
        sys.exit("usage: va_release.py %s" % "|".join(steps))
    torch.cuda.init()
    rt = cudart()

    def malloc(n):
        p = ctypes.c_void_p()
        rc = rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n))
        if rc:
            sys.exit("va_release: cudaMalloc(%d) failed: %d" % (n, rc))
        return p.value

    a = malloc(20 * MiB)
    b = malloc(2 * MiB)
    dev = torch.device("cuda")
    if step in ("randn", "randn_conv"):
        torch.randn(1024, device=dev)
        if step == "randn_conv":
            x = torch.ones(8, 16, 32, 32, device=dev)
            torch.nn.functional.conv2d(x, torch.ones(16, 16, 3, 3, device=dev), padding=1)
    elif step == "randint":
        torch.randint(0, 1000, (1024,), device=dev)
    elif step == "empty":
        torch.empty(1024, device=dev)
    elif step == "small_malloc":
        malloc(4096)
    elif step.startswith("relu"):
        torch.relu(torch.ones(1024, device=dev))
        if step == "relu_sleep":
            time.sleep(0.2)
        elif step == "relu_event":
            e = torch.cuda.Event()
            e.record()
            while not e.query():
                time.sleep(0.001)
    elif step in ("conv", "conv_native", "conv_bench"):
        torch.backends.cudnn.enabled = step != "conv_native"
        torch.backends.cudnn.benchmark = step == "conv_bench"
        x = torch.ones(8, 16, 32, 32, device=dev)
        w = torch.ones(16, 16, 3, 3, device=dev)
        torch.nn.functional.conv2d(x, w, padding=1)
    elif step == "matmul":
        m = torch.ones(256, 256, device=dev)
        m @ m
    if step not in ("relu_nosync", "relu_sleep", "relu_event"):
        torch.cuda.synchronize()
    c = malloc(300 * MiB)
    print(json.dumps({"step": step, "b": (b - a) / MiB, "c_300": (c - a) / MiB}))


if __name__ == "__main__":
    main()
