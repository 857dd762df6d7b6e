#!/usr/bin/env python3
"""torch_async_truth.py: ground truth for the cuda_async policy.

Runs capture/torch/train_torch.py's training steps (same model, optimiser,
random data, cudnn.benchmark) with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync,
so every tensor is a cudaMallocAsync/cudaFreeAsync on the device's memory
pool, and reads the pool's own counters through the driver API
(cuMemPoolGetAttribute: RESERVED_MEM_HIGH/CURRENT, USED_MEM_HIGH/CURRENT,
RELEASE_THRESHOLD) plus torch.cuda.memory_stats(). Run it under
`gpumemsim capture` and the trace holds the very request stream the pool
served (`a`/`f` records with the ASYNC|POOL flags).
"""
import argparse
import ctypes
import os
import sys

from run_record import run_and_record

ATTRS = {"reserved_mem_current": 5, "reserved_mem_high": 6,
         "used_mem_current": 7, "used_mem_high": 8, "release_threshold": 4}


def pool_attrs():
    """The default and current memory pools' attributes of device 0."""
    cuda = ctypes.CDLL("libcuda.so.1")
    out = {}
    for fn in ("cuDeviceGetDefaultMemPool", "cuDeviceGetMemPool"):
        pool = ctypes.c_void_p()
        rc = getattr(cuda, fn)(ctypes.byref(pool), ctypes.c_int(0))
        d = {"rc": rc, "handle_nonzero": bool(pool.value)}
        if rc == 0:
            for name, attr in ATTRS.items():
                v = ctypes.c_uint64()
                r = cuda.cuMemPoolGetAttribute(pool, ctypes.c_int(attr), ctypes.byref(v))
                d[name] = int(v.value) if r == 0 else "error %d" % r
        out[fn] = d
    return out


def measure(args, info):
    """The training steps, then the pool's and torch's own figures, into INFO."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "..", "torch"))
    import torch
    import train_torch
    torch.cuda.init()
    info["backend"] = torch.cuda.get_allocator_backend()
    targs = argparse.Namespace(model=args.model, batch=args.batch, img=args.img,
                               classes=1000, steps=args.steps, warmup=args.warmup,
                               seed=0, layer_ranges=False, mode="async")
    info["step_s"], info["oom"] = train_torch.train(targs, nvtx=False)
    torch.cuda.synchronize()
    info["pool"] = pool_attrs()
    st = torch.cuda.memory_stats()
    info["stats"] = {k: st[k] for k in sorted(st)
                     if k.startswith(("reserved_bytes.all.", "allocated_bytes.all.",
                                      "active_bytes.all.", "num_"))}
    free, total = torch.cuda.mem_get_info()
    info["total_memory"] = int(total)
    info["device_used"] = int(total - free)
    info.update(train_torch.versions())


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet18")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--img", type=int, default=224)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--json", required=True)
    args = p.parse_args()
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"
    os.environ.pop("PYTORCH_NO_CUDA_MEMORY_CACHING", None)
    info = {"workload": "torch-async", "model": args.model, "batch": args.batch,
            "img": args.img, "steps": args.steps, "conf": "backend:cudaMallocAsync",
            "ok": False}
    rc = run_and_record(args.json, info, lambda i: measure(args, i))
    pl = (info.get("pool") or {}).get("cuDeviceGetDefaultMemPool", {})
    print("torch_async_truth: %s b%d ok=%s reserved_high=%s used_high=%s" % (
        args.model, args.batch, info["ok"], pl.get("reserved_mem_high"),
        pl.get("used_mem_high")), flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
