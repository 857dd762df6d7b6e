#!/usr/bin/env bash
# caching_requests.sh: a no-caching capture's request stream as the input of
# caching_cost.cpp / caching_cost.py: one line per request, "a ID BYTES" or
# "f ID", in the trace's order (every tensor of a PyTorch run made with
# PYTORCH_NO_CUDA_MEMORY_CACHING=1 is its own a/f record).
#
#   traces/timing/caching_requests.sh GPUMEMSIM TRACE > REQUESTS
set -eu
[ $# -eq 2 ] || { echo "usage: $0 GPUMEMSIM TRACE" >&2; exit 2; }
"$1" trace cat "$2" | awk '
	$1 == "a" { id[$3] = ++n; print "a", n, $4; next }
	$1 == "f" && ($3 in id) { print "f", id[$3]; delete id[$3] }'
