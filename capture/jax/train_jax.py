#!/usr/bin/env python3
"""train_jax.py: the JAX half of gpumemsim's capture recipes (see README.md).

Trains a small CNN (flax.linen + optax SGD with momentum, random images made
on the host) for a few steps under one of XLA's GPU allocators, chosen with
--alloc before jax is imported:

  platform  XLA_PYTHON_CLIENT_ALLOCATOR=platform: every XLA buffer is its own
            cuMemAlloc/cuMemFree, so a `gpumemsim capture` of this run is
            XLA's request stream;
  growth    XLA_PYTHON_CLIENT_PREALLOCATE=false: the BFC allocator with
            allow_growth (ground truth for `validate jax-truth`);
  prealloc  JAX's default: the BFC allocator takes 75% of the GPU at start.

Writes --json: the run's settings, versions, step times,
jax.devices()[0].memory_stats() after every step, and the device-level used
memory (what nvidia-smi shows) before jax started and at the end.

Autotuning is off by default (--xla_gpu_autotune_level=0): with it on, XLA
times convolution algorithms, so two runs of the same program may pick
different algorithms (different workspaces), and the captured request
stream would not be the one the ground-truth run made.
"""
import argparse
import os
import subprocess
import sys
import time

from run_record import run_and_record

ALLOC_ENV = {
    "platform": {"XLA_PYTHON_CLIENT_ALLOCATOR": "platform",
                 "XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
    "growth": {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
    "prealloc": {},
}


def nvidia_smi(query, per_app=False):
    """Rows of `nvidia-smi --query-*` as lists of ints (MiB), or None."""
    flag = "--query-compute-apps" if per_app else "--query-gpu"
    try:
        out = subprocess.run(["nvidia-smi", "%s=%s" % (flag, query),
                              "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout
    except Exception:  # no nvidia-smi: the caller records None
        return None
    rows = []
    for line in out.strip().splitlines():
        try:
            rows.append([int(v.strip()) for v in line.split(",")])
        except ValueError:
            continue
    return rows


def device_used():
    """Device-level memory: used/total bytes of GPU 0 and per-process rows.

    NVML through pynvml when it is installed, else nvidia-smi (MiB)."""
    res = {"source": None}
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        mi = pynvml.nvmlDeviceGetMemoryInfo(h)
        res.update(source="pynvml", used_bytes=int(mi.used), total_bytes=int(mi.total))
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
        res["procs"] = [[int(p.pid), int(p.usedGpuMemory or 0)] for p in procs]
        return res
    except Exception as e:
        res["pynvml_error"] = str(e)[:200]
    rows = nvidia_smi("memory.used,memory.total")
    if rows:
        res.update(source="nvidia-smi", used_bytes=rows[0][0] << 20,
                   total_bytes=rows[0][1] << 20)
        apps = nvidia_smi("pid,used_memory", per_app=True) or []
        res["procs"] = [[r[0], r[1] << 20] for r in apps if len(r) == 2]
    return res


def own_proc_bytes(dev):
    for pid, used in dev.get("procs") or []:
        if pid == os.getpid():
            return used
    return None


def build_model(nn, jnp, name, width, classes):
    """A ResNet-style net (residual blocks, GroupNorm, 3 stages) or a plain CNN."""

    class Block(nn.Module):
        width: int
        stride: int = 1

        @nn.compact
        def __call__(self, x):
            s = (self.stride, self.stride)
            y = nn.Conv(self.width, (3, 3), strides=s, padding="SAME", use_bias=False)(x)
            y = nn.relu(nn.GroupNorm(num_groups=8)(y))
            y = nn.Conv(self.width, (3, 3), padding="SAME", use_bias=False)(y)
            y = nn.GroupNorm(num_groups=8)(y)
            if x.shape[-1] != self.width or self.stride != 1:
                x = nn.Conv(self.width, (1, 1), strides=s, use_bias=False)(x)
            return nn.relu(x + y)

    class ResNet(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.relu(nn.Conv(width, (3, 3), padding="SAME", use_bias=False)(x))
            for i, w in enumerate((width, 2 * width, 4 * width)):
                for j in range(2):
                    x = Block(w, 2 if (i > 0 and j == 0) else 1)(x)
            return nn.Dense(classes)(jnp.mean(x, axis=(1, 2)))

    class Plain(nn.Module):
        @nn.compact
        def __call__(self, x):
            for w in (width, 2 * width, 4 * width):
                x = nn.relu(nn.Conv(w, (3, 3), padding="SAME")(x))
                x = nn.relu(nn.Conv(w, (3, 3), padding="SAME")(x))
                x = nn.max_pool(x, (2, 2), strides=(2, 2))
            return nn.Dense(classes)(x.reshape((x.shape[0], -1)))

    return ResNet() if name == "resnet" else Plain()


def run(args, info):
    import numpy as np
    import jax
    import jax.numpy as jnp
    import flax
    import flax.linen as nn
    import optax

    info["versions"] = {"jax": jax.__version__, "flax": flax.__version__,
                        "optax": optax.__version__, "numpy": np.__version__}
    try:
        import jaxlib
        info["versions"]["jaxlib"] = jaxlib.__version__
    except Exception:
        pass
    dev = jax.devices()[0]
    info["device"] = {"kind": dev.device_kind, "platform": dev.platform}

    def stats():
        try:
            st = dev.memory_stats()
            return {k: int(v) for k, v in st.items()} if st else None
        except Exception as e:  # the platform allocator may have none
            return {"error": str(e)[:200]}

    model = build_model(nn, jnp, args.model, args.width, args.classes)
    tx = optax.sgd(0.01, momentum=0.9)
    shape = (args.batch, args.image, args.image, 3)

    def loss_fn(params, x, y):
        logits = model.apply({"params": params}, x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    def step_fn(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    train_step = jax.jit(step_fn, donate_argnums=(0, 1))
    t0 = time.perf_counter()
    params = jax.jit(model.init)(jax.random.PRNGKey(args.seed),
                                 jnp.zeros((1,) + shape[1:], jnp.float32))["params"]
    opt_state = jax.jit(tx.init)(params)
    jax.block_until_ready(opt_state)
    info["init_s"] = time.perf_counter() - t0
    info["param_count"] = int(sum(int(np.prod(p.shape)) for p in jax.tree_util.tree_leaves(params)))
    info["stats_after_init"] = stats()
    rng = np.random.default_rng(args.seed)
    info["step_s"], info["stats_per_step"], info["loss"] = [], [], []
    for step in range(args.steps):
        t0 = time.perf_counter()
        x = jax.device_put(rng.standard_normal(shape, dtype=np.float32))
        y = jax.device_put(rng.integers(0, args.classes, args.batch).astype(np.int32))
        params, opt_state, loss = train_step(params, opt_state, x, y)
        loss = float(loss)
        del x, y
        info["step_s"].append(time.perf_counter() - t0)
        info["loss"].append(loss)
        info["stats_per_step"].append(stats())
        print("train_jax: %s b%d step %d %.1f ms loss %.4f" % (
            args.alloc, args.batch, step, info["step_s"][-1] * 1e3, loss), flush=True)
    jax.block_until_ready((params, opt_state))
    info["memory_stats"] = stats()
    info["device_end"] = device_used()
    info["proc_used_bytes"] = own_proc_bytes(info["device_end"])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--alloc", choices=sorted(ALLOC_ENV), required=True)
    p.add_argument("--model", choices=("resnet", "cnn"), default="resnet")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--image", type=int, default=32)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--autotune", action="store_true",
                   help="leave XLA's autotuning on (runs may then differ)")
    p.add_argument("--json", required=True, help="where to write the results")
    args = p.parse_args()
    if args.batch < 1 or args.steps < 1 or args.image < 8 or args.width < 8:
        p.error("need --batch >= 1, --steps >= 1, --image >= 8, --width >= 8")
    # Before jax is imported: these are read when the backend starts.
    for k, v in ALLOC_ENV[args.alloc].items():
        os.environ[k] = v
    if args.alloc != "platform":
        os.environ.pop("XLA_PYTHON_CLIENT_ALLOCATOR", None)
    if args.alloc == "prealloc":
        os.environ.pop("XLA_PYTHON_CLIENT_PREALLOCATE", None)
    if not args.autotune and "xla_gpu_autotune_level" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   " --xla_gpu_autotune_level=0").strip()
    info = {"workload": "jax", "model": args.model, "batch": args.batch,
            "image": args.image, "width": args.width, "classes": args.classes,
            "steps": args.steps, "seed": args.seed, "alloc": args.alloc, "pid": os.getpid(),
            "env": {k: os.environ[k] for k in sorted(os.environ)
                    if k.startswith(("XLA_", "JAX_", "TF_", "CUDA_VISIBLE"))},
            "device_start": device_used(), "ok": False}
    rc = run_and_record(args.json, info, lambda i: run(args, i))
    ms = info.get("memory_stats") or {}
    print("train_jax: %s b%d ok=%s peak_pool_bytes=%s peak_bytes_in_use=%s proc_used=%s" % (
        args.alloc, args.batch, info["ok"], ms.get("peak_pool_bytes"),
        ms.get("peak_bytes_in_use"), info.get("proc_used_bytes")), flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
