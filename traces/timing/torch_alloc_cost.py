"""torch_alloc_cost.py: PyTorch's host time for one tensor made and dropped,
by size, with or without the caching allocator (as the environment sets
PYTORCH_NO_CUDA_MEMORY_CACHING), printed as TSV: lo_bytes hi_bytes
alloc_ns free_ns n (means without the top 1%).

Without caching a tensor costs a cudaMalloc and a cudaFree plus PyTorch's
own work around each; alloc_cost.cu measures the device calls alone on the
same host, so the difference is the framework's part (the timeline model's
`dev_call_us`, docs/timing.md), measured instead of fitted. The GPU is
idle (a cudaFree does not wait). Sizes inside a bin come from a fixed seed.

    python3 torch_alloc_cost.py [REPS]
"""
import os
import random
import sys
import time

import torch


def trimmed_mean(v):
    v = sorted(v)
    k = len(v) - len(v) // 100
    return sum(v[:k]) / k


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    rnd = random.Random(1)
    torch.cuda.init()
    torch.empty(1, device='cuda')
    torch.cuda.synchronize()
    caching = os.environ.get('PYTORCH_NO_CUDA_MEMORY_CACHING') != '1'
    print('# PyTorch %s, %s, caching allocator %s, PYTORCH_CUDA_ALLOC_CONF=%s' % (
        torch.__version__, torch.cuda.get_device_name(0), 'on' if caching else 'off',
        os.environ.get('PYTORCH_CUDA_ALLOC_CONF') or '(unset)'))
    print('# lo_bytes\thi_bytes\talloc_ns\tfree_ns\tn')
    lo, hi = 0, 1 << 20
    while hi <= (1 << 30):
        n = reps if hi <= (64 << 20) else max(reps // 4, 2)
        al, fr = [], []
        prev = None
        for _ in range(n):
            sz = rnd.randrange(lo or 512, hi)
            t0 = time.perf_counter_ns()
            x = torch.empty(sz, dtype=torch.uint8, device='cuda')
            t1 = time.perf_counter_ns()
            al.append(t1 - t0)
            if prev is not None:
                t0 = time.perf_counter_ns()
                del prev
                t1 = time.perf_counter_ns()
                fr.append(t1 - t0)
            prev = x
        del prev, x
        print('%d\t%d\t%.0f\t%.0f\t%d' % (lo, hi, trimmed_mean(al), trimmed_mean(fr), n), flush=True)
        lo, hi = hi, hi * 2


main()
