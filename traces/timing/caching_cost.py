"""caching_cost.py: the same measurement as caching_cost.cpp from Python, as
a check on it and for the framework's part: the request stream of a
no-caching capture (caching_requests.sh) replayed PASSES times in one
process, timing every call, three ways:

  raw     torch._C's raw_alloc / raw_delete (the allocator and one Python
          call), less a builtin call of the same arguments (max), so about
          the allocator alone;
  tensor  torch.empty(BYTES, dtype=uint8, device='cuda') and dropping it:
          what a tensor costs the host in all (dispatcher, TensorImpl,
          Python object, allocator).

Prints TSV rows as caching_cost.cpp does: pass kind n mean_ns p50_ns p90_ns
slow mean_fast_ns (kinds raw_alloc, raw_free, tensor_alloc, tensor_free).

    python3 caching_cost.py REQUESTS [PASSES]
"""
import os
import sys
import time

import torch


def read_requests(path):
    out = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            w = line.split()
            if len(w) == 3 and w[0] == 'a':
                out.append((True, int(w[1]), int(w[2])))
            elif len(w) == 2 and w[0] == 'f':
                out.append((False, int(w[1]), 0))
            elif w:
                sys.exit('%s:%d: expected "a ID BYTES" or "f ID"' % (path, n))
    return out


def row(p, kind, v, base):
    if not v:
        return
    v = sorted(max(x - base, 0) for x in v)
    fast = [x for x in v if x <= 10000]
    print('%d\t%s\t%d\t%.0f\t%d\t%d\t%d\t%.0f' % (
        p, kind, len(v), sum(v) / len(v), v[len(v) // 2], v[len(v) * 9 // 10],
        len(v) - len(fast), sum(fast) / len(fast) if fast else 0), flush=True)


def baseline(stream):
    """The median cost of a builtin call like raw_alloc's, clock included."""
    v = []
    pc = time.perf_counter_ns
    for _ in range(20000):
        t0 = pc()
        max(4096, stream)
        v.append(pc() - t0)
    v.sort()
    return v[len(v) // 2]


def main():
    reqs = read_requests(sys.argv[1])
    passes = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    torch.cuda.init()
    torch.empty(1, device='cuda')
    torch.cuda.synchronize()
    stream = torch.cuda.current_stream().cuda_stream
    base = baseline(stream)
    print('# PyTorch %s, %s, %d requests, call baseline %d ns, PYTORCH_NO_CUDA_MEMORY_CACHING=%s '
          'PYTORCH_CUDA_ALLOC_CONF=%s' % (torch.__version__, torch.cuda.get_device_name(0), len(reqs),
                                          base, os.environ.get('PYTORCH_NO_CUDA_MEMORY_CACHING', ''),
                                          os.environ.get('PYTORCH_CUDA_ALLOC_CONF', '')))
    print('# pass\tkind\tn\tmean_ns\tp50_ns\tp90_ns\tslow\tmean_fast_ns')
    ralloc = torch._C._cuda_cudaCachingAllocator_raw_alloc
    rfree = torch._C._cuda_cudaCachingAllocator_raw_delete
    pc = time.perf_counter_ns
    u8 = torch.uint8
    for p in range(1, passes + 1):
        live, al, fr = {}, [], []
        for is_alloc, i, nbytes in reqs:
            if is_alloc:
                t0 = pc()
                q = ralloc(nbytes, stream)
                al.append(pc() - t0)
                live[i] = q
            elif i in live:
                q = live.pop(i)
                t0 = pc()
                rfree(q)
                fr.append(pc() - t0)
        for q in live.values():
            rfree(q)
        row(p, 'raw_alloc', al, base)
        row(p, 'raw_free', fr, base)
    for p in range(1, passes + 1):
        live, al, fr = {}, [], []
        for is_alloc, i, nbytes in reqs:
            if is_alloc:
                t0 = pc()
                live[i] = torch.empty(nbytes, dtype=u8, device='cuda')
                al.append(pc() - t0)
            elif i in live:
                t0 = pc()
                del live[i]
                fr.append(pc() - t0)
        live.clear()
        row(p, 'tensor_alloc', al, 0)
        row(p, 'tensor_free', fr, 0)


main()
