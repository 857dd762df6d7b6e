/*
 * va_probe.cu: where does the driver place cudaMalloc and cuMemMap ranges?
 *
 * The synthetic addresses of the simulator (device/va_place.c) are a model
 * of this placement learnt from PyTorch's recorded segments; this probe
 * measures it directly, one sequence per process so each starts from a
 * fresh context (capture/va_probe.sh runs them all and writes one TSV).
 *
 *   va_probe SEQ OUT.tsv
 *
 * Every line: seq step op size addr delta_mib align_log2, where op is
 * malloc, free, reserve, create_map, unmap_release, info; delta_mib is the
 * address minus the first address of the sequence, in MiB (negative: below
 * it); align_log2 the largest power of two dividing the address.
 * Sequences (each names the question it answers):
 *   sizes      512 B .. 1 GiB, all kept: granule, alignment, growth direction
 *   interleave 8 x 20 MiB, free every other one, then 20, 10, 40 MiB:
 *              which freed range is reused (lowest, highest, last freed), at
 *              which end, and whether neighbours coalesce
 *   bottom     free the lowest range, then allocate: back to fresh space?
 *   smallbig   200 x 2 MiB, then 1 GiB and 4 x 256 MiB: do small and large
 *              ranges share one region; is a large range aligned more
 *   reuse      64+64 MiB, free the first, then 32, 32, 48 MiB: split of a
 *              freed range; best fit or first fit
 *   churn      a fixed pseudo-random mix (seeded) of allocs and frees of
 *              2..300 MiB, 400 steps: the model is checked on this
 *   lmem       20 + 2 MiB, then kernels needing more and more local memory
 *              per thread (64 B .. 16 KiB; a row "lmem" names each), a 2 MiB
 *              malloc after each: does the driver grow the local-memory
 *              pool in the same address space, leaving holes between
 *              segments (the holes of PyTorch runs no cudaMalloc explains)
 *   heap_a, heap_f, heap_m
 *              20 + 2 MiB, then the first launch of a plain kernel and of
 *              kernels that may call assert (a), printf (f) or malloc (m),
 *              in three orders (the letter first), a 2 MiB malloc after
 *              each launch (a row "launch" names the kernel): what the
 *              driver sets aside for the device-side printf buffer and
 *              malloc heap, and when
 *   vmm        cuMemAddressReserve of 2 MiB .. 1 GiB (with and without an
 *              alignment), cuMemCreate + cuMemMap of 2 MiB granules, mixed
 *              with cudaMalloc: one address space or two
 *   replay:FILE  the cudaMalloc/cudaFree sequence of FILE, one call a line:
 *              "m SIZE" (the k-th m line is allocation k) or "f K"
 *              (scripts/va_replay.py writes them from recorded PyTorch runs'
 *              segments): the driver's placement of a real run's segments,
 *              without PyTorch in the process; a line "l" loads cuDNN and
 *              cuBLAS there and makes a handle of each (dlopen of
 *              $VA_PROBE_CUDNN and $VA_PROBE_CUBLAS; a row "load" says
 *              which did), as a PyTorch run does at its first convolution
 * With VA_PROBE_MAPS=FILE set, /proc/self/maps is appended to FILE after
 * every row whenever it changed ("S seq step" and the maps' lines): where
 * the driver's reservations lie and when they are unmapped.
 * Exit 77 when there is no GPU. A run on an H200 (driver 580) ships in
 * traces/va_probe/; docs/policies.md reads the model off it.
 */
#include <assert.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <sys/mman.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *out;
static const char *seq;
static int step;
static uint64_t first;

#define MiB (1ull << 20)

/* /proc/self/maps after a row, when it changed (VA_PROBE_MAPS). */
static void maps_dump(void)
{
	static char *prev;
	static size_t prevlen;
	const char *path = getenv("VA_PROBE_MAPS");
	if (!path)
		return;
	FILE *in = fopen("/proc/self/maps", "r");
	if (!in)
		return;
	size_t cap = 1 << 16, len = 0, n;
	char *buf = (char *)malloc(cap);
	while (buf && (n = fread(buf + len, 1, cap - len, in)) > 0) {
		len += n;
		if (len == cap) {
			char *b = (char *)realloc(buf, cap *= 2);
			if (!b) {
				free(buf);
				buf = NULL;
			}
			buf = b;
		}
	}
	fclose(in);
	if (!buf)
		return;
	if (prev && prevlen == len && !memcmp(prev, buf, len)) {
		free(buf);
		return;
	}
	FILE *o = fopen(path, "a");
	if (o) {
		fprintf(o, "S %s %d\n", seq, step - 1);
		fwrite(buf, 1, len, o);
		fclose(o);
	}
	free(prev);
	prev = buf;
	prevlen = len;
}

static void row(const char *op, uint64_t size, uint64_t addr)
{
	if (!first && addr)
		first = addr;
	int al = 0;
	while (addr && al < 63 && !(addr & (1ull << al)))
		al++;
	fprintf(out, "%s\t%d\t%s\t%llu\t0x%llx\t%.1f\t%d\n", seq, step++, op, (unsigned long long)size,
		(unsigned long long)addr,
		((double)(int64_t)(addr - first)) / (double)MiB, addr ? al : -1);
	maps_dump();
}

static uint64_t m(uint64_t size)
{
	void *p = NULL;
	cudaError_t e = cudaMalloc(&p, size);
	if (e != cudaSuccess) {
		fprintf(stderr, "va_probe %s: cudaMalloc(%llu): %s\n", seq, (unsigned long long)size,
			cudaGetErrorString(e));
		row("malloc_failed", size, 0);
		return 0;
	}
	row("malloc", size, (uint64_t)(uintptr_t)p);
	return (uint64_t)(uintptr_t)p;
}

static void f(uint64_t addr, uint64_t size)
{
	if (!addr)
		return;
	cudaFree((void *)(uintptr_t)addr);
	row("free", size, addr);
}

static void seq_sizes(void)
{
	static const uint64_t sz[] = {512, 4096, 65536, 1 * MiB, 2 * MiB, 3 * MiB, 4 * MiB,
				      10 * MiB, 20 * MiB, 26 * MiB, 32 * MiB, 50 * MiB, 64 * MiB,
				      100 * MiB, 128 * MiB, 256 * MiB, 600 * MiB, 1024 * MiB};
	uint64_t a[sizeof sz / sizeof sz[0]];
	for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++)
		a[i] = m(sz[i]);
	for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++)
		f(a[i], sz[i]);
	for (size_t i = 0; i < 4; i++) /* after freeing everything */
		a[i] = m(20 * MiB);
	for (size_t i = 0; i < 4; i++)
		f(a[i], 20 * MiB);
}

static void seq_interleave(void)
{
	uint64_t a[8];
	for (int i = 0; i < 8; i++)
		a[i] = m(20 * MiB);
	for (int i = 0; i < 8; i += 2)
		f(a[i], 20 * MiB);
	uint64_t x = m(20 * MiB), y = m(10 * MiB), z = m(40 * MiB);
	f(a[3], 20 * MiB); /* now a[2..4] is one 60 MiB hole if ranges coalesce */
	uint64_t w = m(60 * MiB);
	f(x, 20 * MiB), f(y, 10 * MiB), f(z, 40 * MiB), f(w, 60 * MiB);
	for (int i = 1; i < 8; i += 2)
		if (i != 3)
			f(a[i], 20 * MiB);
}

static void seq_bottom(void)
{
	uint64_t a = m(20 * MiB), b = m(20 * MiB), c = m(20 * MiB);
	f(c, 20 * MiB);          /* the last one placed */
	uint64_t d = m(30 * MiB); /* fits where c was only if c went back to fresh space */
	f(a, 20 * MiB);
	uint64_t e = m(20 * MiB);
	f(b, 20 * MiB), f(d, 30 * MiB), f(e, 20 * MiB);
}

static void seq_smallbig(void)
{
	static uint64_t a[200];
	for (int i = 0; i < 200; i++)
		a[i] = m(2 * MiB);
	uint64_t g = m(1024 * MiB), q[4];
	for (int i = 0; i < 4; i++)
		q[i] = m(256 * MiB);
	for (int i = 0; i < 200; i += 2)
		f(a[i], 2 * MiB);
	uint64_t s = m(2 * MiB), t = m(20 * MiB);
	f(s, 2 * MiB), f(t, 20 * MiB), f(g, 1024 * MiB);
	for (int i = 0; i < 4; i++)
		f(q[i], 256 * MiB);
	for (int i = 1; i < 200; i += 2)
		f(a[i], 2 * MiB);
}

static void seq_reuse(void)
{
	uint64_t a = m(64 * MiB), b = m(64 * MiB);
	f(a, 64 * MiB);
	uint64_t c = m(32 * MiB), d = m(32 * MiB), e = m(48 * MiB);
	f(b, 64 * MiB);
	uint64_t g = m(48 * MiB), h = m(16 * MiB); /* best fit would put h in b's rest */
	f(c, 32 * MiB), f(d, 32 * MiB), f(e, 48 * MiB), f(g, 48 * MiB), f(h, 16 * MiB);
}

static void seq_churn(void)
{
	uint64_t addr[64] = {0}, size[64] = {0}, x = 12345;
	for (int i = 0; i < 400; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		int k = (int)((x >> 33) % 64);
		if (addr[k]) {
			f(addr[k], size[k]);
			addr[k] = 0;
		} else {
			size[k] = (2 + (x >> 45) % 150) * 2 * MiB;
			addr[k] = m(size[k]);
		}
	}
	for (int k = 0; k < 64; k++)
		f(addr[k], size[k]);
}

/* A kernel whose threads each use N bytes of local memory (a volatile
 * array indexed at run time cannot live in registers). */
template <int N> __global__ void lmem_kernel(int *o, int i)
{
	volatile char a[N];
	for (int j = 0; j < N; j += 32)
		a[j] = (char)(j + i);
	if (i < 0)
		o[threadIdx.x] = a[(i * 32) % N];
}

template <int N> static void lmem_step(int *o)
{
	/* enough blocks to fill every SM */
	lmem_kernel<N><<<132 * 16, 128>>>(o, 1);
	cudaError_t e = cudaDeviceSynchronize();
	if (e != cudaSuccess)
		fprintf(stderr, "va_probe %s: lmem %d: %s\n", seq, N, cudaGetErrorString(e));
	size_t lim = 0;
	cudaDeviceGetLimit(&lim, cudaLimitStackSize);
	row("lmem", N, 0);
	row("stack_limit", lim, 0);
	(void)m(2 * MiB);
}

__global__ void k_plain(int *o, int i)
{
	if (i < 0)
		o[0] = i;
}

__global__ void k_assert(int *o, int i)
{
	assert(i >= 0 && o);
}

__global__ void k_printf(int *o, int i)
{
	if (i < 0)
		printf("va_probe %d\n", o[0]);
}

__global__ void k_malloc(int *o, int i)
{
	if (i < 0) {
		int *p = (int *)malloc(16);
		o[0] = p ? p[0] : 0;
		free(p);
	}
}

static void launch(const char *name, int *o)
{
	if (!strcmp(name, "plain"))
		k_plain<<<1, 32>>>(o, 1);
	else if (!strcmp(name, "assert"))
		k_assert<<<1, 32>>>(o, 1);
	else if (!strcmp(name, "printf"))
		k_printf<<<1, 32>>>(o, 1);
	else
		k_malloc<<<1, 32>>>(o, 1);
	cudaError_t e = cudaDeviceSynchronize();
	if (e != cudaSuccess)
		fprintf(stderr, "va_probe %s: %s: %s\n", seq, name, cudaGetErrorString(e));
	size_t heap = 0, fifo = 0;
	cudaDeviceGetLimit(&heap, cudaLimitMallocHeapSize);
	cudaDeviceGetLimit(&fifo, cudaLimitPrintfFifoSize);
	fprintf(out, "%s\t%d\tlaunch:%s:heap=%zu:fifo=%zu\t0\t0x0\t0.0\t-1\n", seq, step++,
		name, heap, fifo);
	(void)m(2 * MiB);
}

static void seq_heap(const char *order)
{
	int *o = NULL;
	(void)m(20 * MiB);
	(void)m(2 * MiB);
	cudaMalloc(&o, 4096); /* sub-2 MiB: the probe's own, not a row */
	for (const char *c = order; *c; c++)
		launch(*c == 'p' ? "plain" : *c == 'a' ? "assert" : *c == 'f' ? "printf" : "malloc", o);
	(void)m(20 * MiB);
}

static void seq_lmem(void)
{
	int *o = NULL;
	(void)m(20 * MiB);
	(void)m(2 * MiB);
	cudaMalloc(&o, 4096); /* sub-2 MiB: the probe's own, not a row */
	lmem_step<64>(o);
	lmem_step<512>(o);
	lmem_step<1024>(o);
	lmem_step<2048>(o);
	lmem_step<512>(o);
	lmem_step<4096>(o);
	lmem_step<8192>(o);
	lmem_step<16384>(o);
	lmem_step<1024>(o);
	(void)m(20 * MiB);
}

static int vmm_map(uint64_t size, uint64_t align)
{
	CUdeviceptr va;
	CUmemGenericAllocationHandle h;
	CUmemAllocationProp prop;
	CUmemAccessDesc acc;
	memset(&prop, 0, sizeof prop);
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	if (cuMemAddressReserve(&va, size, align, 0, 0) != CUDA_SUCCESS)
		return -1;
	row(align ? "reserve_aligned" : "reserve", size, (uint64_t)va);
	if (cuMemCreate(&h, size, &prop, 0) != CUDA_SUCCESS || cuMemMap(va, size, 0, h, 0) != CUDA_SUCCESS)
		return -1;
	memset(&acc, 0, sizeof acc);
	acc.location = prop.location;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	cuMemSetAccess(va, size, &acc, 1);
	row("create_map", size, (uint64_t)va);
	return 0;
}

static void seq_vmm(void)
{
	CUmemAllocationProp prop;
	size_t gmin = 0, grec = 0;
	memset(&prop, 0, sizeof prop);
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	cuMemGetAllocationGranularity(&gmin, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	cuMemGetAllocationGranularity(&grec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
	row("info_granularity_min", gmin, 0);
	row("info_granularity_recommended", grec, 0);
	uint64_t a = m(20 * MiB);
	static const uint64_t sz[] = {2 * MiB, 4 * MiB, 20 * MiB, 64 * MiB, 256 * MiB, 1024 * MiB};
	for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++)
		if (vmm_map(sz[i], 0) < 0)
			row("vmm_failed", sz[i], 0);
	if (vmm_map(2 * MiB, 64 * MiB) < 0)
		row("vmm_failed", 2 * MiB, 0);
	uint64_t b = m(20 * MiB); /* after the reservations: same space? */
	f(a, 20 * MiB), f(b, 20 * MiB);
}

/* Load library ENV names (a path) and call its handle constructor SYM:
 * 1 when both worked. */
static int load_lib(const char *env, const char *sym)
{
	const char *path = getenv(env), *why;
	void *h = path ? dlopen(path, RTLD_NOW | RTLD_GLOBAL) : NULL;
	int (*create)(void **) = h ? (int (*)(void **))dlsym(h, sym) : NULL;
	void *handle = NULL;
	if (create && create(&handle) == 0)
		return 1;
	if (!path)
		why = "unset";
	else if (create)
		why = "the constructor failed";
	else if (!(why = dlerror()))
		why = "not loaded";
	fprintf(stderr, "va_probe: %s (%s, %s): %s\n", env, path ? path : "-", sym, why);
	return 0;
}

/* Replay FILE's calls; the row's seq is the FILE's name. 0, or 1 on a bad
 * line (named on stderr). */
static int seq_replay(const char *file)
{
	FILE *in = fopen(file, "r");
	if (!in) {
		perror(file);
		return 1;
	}
	uint64_t *addr = NULL, *size = NULL;
	size_t n = 0, cap = 0, line = 0;
	void *hmap[4096];
	size_t hsize[4096], nh = 0;
	char buf[4096];
	int ret = 0;
	while (fgets(buf, sizeof buf, in)) {
		unsigned long long v;
		line++;
		if (buf[0] == '#' || buf[0] == '\n')
			continue;
		if (buf[0] == 'l') {
			row("load", (uint64_t)(load_lib("VA_PROBE_CUDNN", "cudnnCreate") |
					       load_lib("VA_PROBE_CUBLAS", "cublasCreate_v2") << 1), 0);
			continue;
		}
		if (sscanf(buf, "m %llu", &v) == 1) {
			if (n == cap) {
				cap = cap ? 2 * cap : 1024;
				uint64_t *a = (uint64_t *)realloc(addr, cap * sizeof *a);
				uint64_t *z = (uint64_t *)realloc(size, cap * sizeof *z);
				if (!a || !z) {
					free(a ? a : addr);
					free(z ? z : size);
					fclose(in);
					fprintf(stderr, "va_probe: out of memory\n");
					return 1;
				}
				addr = a, size = z;
			}
			size[n] = v;
			addr[n++] = m(v);
		} else if (sscanf(buf, "h %llu", &v) == 1 && nh < 4096) {
			void *p = mmap(NULL, v, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
				       -1, 0);
			hsize[nh] = v;
			hmap[nh++] = p == MAP_FAILED ? NULL : p;
			row("host_map", v, (uint64_t)(uintptr_t)(p == MAP_FAILED ? NULL : p));
		} else if (sscanf(buf, "u %llu", &v) == 1 && v < nh) {
			if (hmap[v])
				munmap(hmap[v], hsize[v]);
			row("host_unmap", hsize[v], (uint64_t)(uintptr_t)hmap[v]);
			hmap[v] = NULL;
		} else if (sscanf(buf, "f %llu", &v) == 1 && v < n) {
			f(addr[v], size[v]);
			addr[v] = 0;
		} else {
			fprintf(stderr, "%s:%zu: expected 'm SIZE', 'f K' (K an earlier m), 'h SIZE', 'u K' (K an "
				"earlier h) or 'l'\n", file,
				line);
			ret = 1;
			break;
		}
	}
	fclose(in);
	free(addr);
	free(size);
	return ret;
}

int main(int argc, char **argv)
{
	int n = 0;
	if (argc != 3) {
		fprintf(stderr, "usage: va_probe SEQ OUT.tsv\n");
		return 2;
	}
	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
		return 77;
	seq = argv[1];
	out = fopen(argv[2], "a");
	if (!out) {
		perror(argv[2]);
		return 1;
	}
	cudaFree(0); /* create the context before the first measured call */
	cuInit(0);
	if (!strcmp(seq, "sizes"))
		seq_sizes();
	else if (!strcmp(seq, "interleave"))
		seq_interleave();
	else if (!strcmp(seq, "bottom"))
		seq_bottom();
	else if (!strcmp(seq, "smallbig"))
		seq_smallbig();
	else if (!strcmp(seq, "reuse"))
		seq_reuse();
	else if (!strcmp(seq, "churn"))
		seq_churn();
	else if (!strcmp(seq, "vmm"))
		seq_vmm();
	else if (!strcmp(seq, "lmem"))
		seq_lmem();
	else if (!strcmp(seq, "heap_a"))
		seq_heap("pppafm");
	else if (!strcmp(seq, "heap_f"))
		seq_heap("pppfam");
	else if (!strcmp(seq, "heap_m"))
		seq_heap("pppmaf");
	else if (!strncmp(seq, "replay:", 7)) {
		const char *file = seq + 7, *slash = strrchr(file, '/');
		seq = slash ? slash + 1 : file;
		if (seq_replay(file))
			return 1;
	} else {
		fprintf(stderr, "va_probe: unknown sequence '%s'\n", seq);
		return 2;
	}
	return fclose(out) ? 1 : 0;
}
