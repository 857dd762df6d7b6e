/*
 * cuda_malloc.c: no allocator at all. Every request is its own device
 * allocation (cudaMalloc) and every free returns it (cudaFree): what
 * PYTORCH_NO_CUDA_MEMORY_CACHING=1 or XLA_PYTHON_CLIENT_ALLOCATOR=platform
 * do. Allocated equals reserved; the reference every caching policy is
 * measured against. No knobs.
 */
#include "policy.h"

#include <stdio.h>

struct cuda_malloc_state {
	struct sim_device *dev;
};

static const struct policy_knob cuda_malloc_knobs[] = {{NULL, NULL, NULL}};

static int cm_init(void *st, const char *conf, const struct policy_env *env,
		   char *err, size_t errlen)
{
	struct cuda_malloc_state *s = st;
	if (conf_none("cuda_malloc", conf, err, errlen) < 0)
		return -1;
	s->dev = env->dev;
	return 0;
}

static int cm_alloc(void *st, const struct alloc_request *req, struct alloc_result *res)
{
	struct cuda_malloc_state *s = st;
	if (device_malloc(s->dev, req->bytes, req->stream, &res->addr) != DEVICE_OK)
		return POLICY_OOM;
	res->block_bytes = req->bytes;
	return POLICY_OK;
}

static void cm_free(void *st, uint64_t addr, uint64_t block_bytes, uint32_t stream)
{
	struct cuda_malloc_state *s = st;
	(void)stream;
	device_free(s->dev, addr, block_bytes);
}

static void cm_fini(void *st) { (void)st; }

const struct alloc_policy policy_cuda_malloc = {
	.iversion = POLICY_IFACE_VERSION,
	.name = "cuda_malloc",
	.description = "every request is its own cudaMalloc, every free a cudaFree (no caching)",
	.state_size = sizeof(struct cuda_malloc_state),
	.knobs = cuda_malloc_knobs,
	.init = cm_init,
	.alloc = cm_alloc,
	.free = cm_free,
	.fini = cm_fini,
};
