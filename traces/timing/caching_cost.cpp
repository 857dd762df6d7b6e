// caching_cost.cpp: the host cost of PyTorch's caching allocator per call,
// on a real training run's request stream (issue 15: the timeline model's
// `hit_us`, until now an assumed 1 us).
//
//   caching_cost torch|cuda REQUESTS [PASSES]
//
// REQUESTS (caching_requests.sh): a no-caching capture's tensors in their
// order, "a ID BYTES" / "f ID". Each pass replays the whole stream and then
// frees what is still live (untimed), PASSES times (default 5) in one
// process, timing every call alone:
//   torch  c10::cuda::CUDACachingAllocator::raw_alloc / raw_delete, i.e. the
//          allocator PyTorch's tensors use, without Python or the dispatcher.
//          Pass 1 makes the segments; later passes are served from the cache,
//          as a training step after the first is. The environment decides
//          the allocator (PYTORCH_NO_CUDA_MEMORY_CACHING=1: every call a
//          cudaMalloc/cudaFree through PyTorch; PYTORCH_CUDA_ALLOC_CONF).
//   cuda   cudaMalloc / cudaFree directly, the same stream (PyTorch's
//          uncached path minus this is PyTorch's own part of it).
// Prints TSV, one row per pass and kind: pass kind n mean_ns p50_ns p90_ns
// slow (calls over 10 us: device calls) mean_fast_ns (the calls under 10
// us), every figure less the clock's own cost (the first comment line).
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using clk = std::chrono::steady_clock;

struct Req {
	bool alloc;
	size_t id;
	size_t bytes;
};

long long ns_between(clk::time_point a, clk::time_point b)
{
	return std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count();
}

// The median cost of reading the clock twice around nothing.
long long clock_cost()
{
	std::vector<long long> v(10000);
	for (auto &x : v) {
		auto t0 = clk::now();
		auto t1 = clk::now();
		x = ns_between(t0, t1);
	}
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

void row(int pass, const char *kind, std::vector<long long> v, long long clock)
{
	if (v.empty())
		return;
	for (auto &x : v)
		x = x > clock ? x - clock : 0;
	std::sort(v.begin(), v.end());
	double sum = 0, fast = 0;
	size_t slow = 0;
	for (auto x : v) {
		sum += x;
		if (x > 10000)
			slow++;
		else
			fast += x;
	}
	size_t nf = v.size() - slow;
	std::printf("%d\t%s\t%zu\t%.0f\t%lld\t%lld\t%zu\t%.0f\n", pass, kind, v.size(), sum / v.size(),
		    v[v.size() / 2], v[v.size() * 9 / 10], slow, nf ? fast / nf : 0.0);
}

bool read_requests(const char *path, std::vector<Req> &out, size_t &ids)
{
	FILE *f = std::fopen(path, "r");
	if (!f) {
		std::perror(path);
		return false;
	}
	char op;
	size_t id, bytes = 0;
	int line = 0;
	ids = 0;
	while (std::fscanf(f, " %c %zu", &op, &id) == 2) {
		line++;
		if (op == 'a' && std::fscanf(f, " %zu", &bytes) != 1) {
			std::fprintf(stderr, "%s:%d: an 'a' line needs ID BYTES\n", path, line);
			std::fclose(f);
			return false;
		}
		if (op != 'a' && op != 'f') {
			std::fprintf(stderr, "%s:%d: expected 'a' or 'f'\n", path, line);
			std::fclose(f);
			return false;
		}
		out.push_back({op == 'a', id, bytes});
		ids = std::max(ids, id + 1);
	}
	std::fclose(f);
	return true;
}

} // namespace

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 4 || (std::strcmp(argv[1], "torch") && std::strcmp(argv[1], "cuda"))) {
		std::fprintf(stderr, "usage: %s torch|cuda REQUESTS [PASSES]\n", argv[0]);
		return 2;
	}
	bool torch = !std::strcmp(argv[1], "torch");
	int passes = argc == 4 ? std::atoi(argv[3]) : 5;
	std::vector<Req> reqs;
	size_t ids;
	if (!read_requests(argv[2], reqs, ids) || passes < 1)
		return 1;
	if (cudaSetDevice(0) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
		std::fprintf(stderr, "no CUDA device\n");
		return 1;
	}
	if (torch)
		c10::cuda::CUDACachingAllocator::init(1);
	long long clock = clock_cost();
	const char *nc = std::getenv("PYTORCH_NO_CUDA_MEMORY_CACHING");
	const char *conf = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
	std::printf("# %s, %zu requests, clock %lld ns, PYTORCH_NO_CUDA_MEMORY_CACHING=%s PYTORCH_CUDA_ALLOC_CONF=%s\n",
		    argv[1], reqs.size(), clock, nc ? nc : "", conf ? conf : "");
	std::printf("# pass\tkind\tn\tmean_ns\tp50_ns\tp90_ns\tslow\tmean_fast_ns\n");
	std::vector<void *> ptr(ids, nullptr);
	for (int p = 1; p <= passes; p++) {
		std::vector<long long> al, fr;
		al.reserve(reqs.size());
		fr.reserve(reqs.size());
		for (const Req &r : reqs) {
			if (r.alloc) {
				if (ptr[r.id])
					continue; // an ID reused while live: not in a valid stream
				void *q = nullptr;
				auto t0 = clk::now();
				if (torch)
					q = c10::cuda::CUDACachingAllocator::raw_alloc(r.bytes);
				else if (cudaMalloc(&q, r.bytes) != cudaSuccess)
					q = nullptr;
				auto t1 = clk::now();
				if (!q) {
					std::fprintf(stderr, "allocation of %zu bytes failed\n", r.bytes);
					return 1;
				}
				ptr[r.id] = q;
				al.push_back(ns_between(t0, t1));
			} else if (ptr[r.id]) {
				auto t0 = clk::now();
				if (torch)
					c10::cuda::CUDACachingAllocator::raw_delete(ptr[r.id]);
				else
					cudaFree(ptr[r.id]);
				auto t1 = clk::now();
				ptr[r.id] = nullptr;
				fr.push_back(ns_between(t0, t1));
			}
		}
		for (auto &q : ptr) { // the run's live tensors at its end
			if (q && torch)
				c10::cuda::CUDACachingAllocator::raw_delete(q);
			else if (q)
				cudaFree(q);
			q = nullptr;
		}
		row(p, "alloc", al, clock);
		row(p, "free", fr, clock);
		std::fflush(stdout);
	}
	return 0;
}
