/*
 * inject_activity.c: CUPTI activity buffers for the injection library
 * (inject.c): buffers from a pool of reused ones, each completed buffer's
 * records converted to neutral records (capture/convert.h) and queued;
 * NVTX ranges paired from their MARKER records.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/vec.h"
#include "inject_int.h"

static pthread_mutex_t cap_pool_lock = PTHREAD_MUTEX_INITIALIZER;
atomic_ullong cap_dropped, cap_zero_time, cap_pool_records, cap_oom;
uint64_t cap_last_ts;      /* latest timestamp seen, for open ranges */

/* Activity buffer pool: reuse instead of malloc per buffer. */
static void *cap_pool[CAP_BUF_POOL];
static int cap_npool;

/* Open NVTX ranges (START seen, END not yet): struct cap_open_range. */
struct cap_open_range *cap_ranges;
size_t cap_nranges;
static size_t cap_capranges;

/* ------------------------------------------------------------- activity */

void CUPTIAPI cap_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	void *b = NULL;
	pthread_mutex_lock(&cap_pool_lock);
	if (cap_npool)
		b = cap_pool[--cap_npool];
	pthread_mutex_unlock(&cap_pool_lock);
	if (!b)
		b = aligned_alloc(8, CAP_BUF_SIZE);
	*buffer = b;
	*size = b ? CAP_BUF_SIZE : 0;
	*max_records = 0;
}

static void cap_buffer_release(void *b)
{
	pthread_mutex_lock(&cap_pool_lock);
	if (cap_npool < CAP_BUF_POOL) {
		cap_pool[cap_npool++] = b;
		b = NULL;
	}
	pthread_mutex_unlock(&cap_pool_lock);
	free(b);
}

static uint32_t cap_stream(uint32_t s)
{
	return s == 0xffffffffu ? TRACE_NO_STREAM : s;
}

void cap_push(const struct cap_rec *r)
{
	if (r->rec.start > cap_last_ts)
		cap_last_ts = r->rec.start;
	if (r->rec.end > cap_last_ts)
		cap_last_ts = r->rec.end;
	if (cap_conv_push(cap_conv, r) < 0)
		atomic_fetch_add(&cap_oom, 1);
}

static uint32_t cap_copy_kind(uint8_t k)
{
	switch (k) {
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return TCOPY_HTOD;
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return TCOPY_DTOH;
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return TCOPY_DTOD;
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return TCOPY_HTOH;
	case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return TCOPY_PTOP;
	default: return TCOPY_UNKNOWN;
	}
}

static uint32_t cap_sync_kind(uint32_t t)
{
	switch (t) {
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return TSYNC_EVENT;
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return TSYNC_STREAM_WAIT_EVENT;
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return TSYNC_STREAM;
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return TSYNC_CONTEXT;
	default: return TSYNC_UNKNOWN;
	}
}

/* A MARKER record: START opens a range, END closes the one with its id.
 * Depth is how many ranges are open on the same thread at the start. */
static void cap_marker(const CUpti_ActivityMarker2 *m)
{
	uint32_t thread = m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? m->objectId.pt.threadId : 0;
	if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
		if (VEC_RESERVE(cap_ranges, cap_capranges, cap_nranges + 1, 64) < 0) {
			atomic_fetch_add(&cap_oom, 1);
			return;
		}
		uint32_t depth = 0;
		for (size_t i = 0; i < cap_nranges; i++)
			depth += cap_ranges[i].thread == thread;
		struct cap_open_range *r = &cap_ranges[cap_nranges++];
		r->id = m->id;
		r->thread = thread;
		r->depth = depth;
		r->start = m->timestamp;
		r->name = strdup(m->name ? m->name : "");
	} else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
		for (size_t i = cap_nranges; i-- > 0;) {
			if (cap_ranges[i].id != m->id)
				continue;
			struct cap_rec c;
			memset(&c, 0, sizeof(c));
			c.rec.type = TREC_RANGE;
			c.rec.start = cap_ranges[i].start;
			c.rec.end = m->timestamp;
			c.rec.u.range.depth = cap_ranges[i].depth;
			/* decided at the END, long after the pause's callback */
			c.rec.u.range.uncaptured = cap_range_uncaptured(cap_ranges[i].name,
									 cap_ranges[i].start);
			c.name = cap_ranges[i].name;
			cap_push(&c);
			free(cap_ranges[i].name);
			memmove(&cap_ranges[i], &cap_ranges[i + 1], (cap_nranges - i - 1) * sizeof(*cap_ranges));
			cap_nranges--;
			break;
		}
	}
}

/* Convert one activity record; called with cap_lock held. */
void cap_activity(const CUpti_Activity *a)
{
	struct cap_rec c;
	memset(&c, 0, sizeof(c));
	switch (a->kind) {
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
	case CUPTI_ACTIVITY_KIND_KERNEL: {
		const CUpti_ActivityKernel10 *k = (const void *)a;
		if (k->start == 0 && k->end == 0) {
			atomic_fetch_add(&cap_zero_time, 1);
			return;
		}
		c.rec.type = TREC_KERNEL;
		c.rec.start = k->start;
		c.rec.end = k->end;
		c.rec.u.kernel.stream = k->streamId;
		c.rec.u.kernel.grid[0] = (uint32_t)k->gridX;
		c.rec.u.kernel.grid[1] = (uint32_t)k->gridY;
		c.rec.u.kernel.grid[2] = (uint32_t)k->gridZ;
		c.rec.u.kernel.block[0] = (uint32_t)k->blockX;
		c.rec.u.kernel.block[1] = (uint32_t)k->blockY;
		c.rec.u.kernel.block[2] = (uint32_t)k->blockZ;
		c.rec.u.kernel.regs = k->registersPerThread;
		c.rec.u.kernel.smem = (uint32_t)k->staticSharedMemory + (uint32_t)k->dynamicSharedMemory;
		c.rec.u.kernel.corr = k->correlationId;
		c.rec.u.kernel.graph = k->graphId;
		c.rec.u.kernel.graph_node = k->graphNodeId;
		c.name = k->name ? k->name : "unknown";
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *m = (const void *)a;
		if (m->start == 0 && m->end == 0) {
			atomic_fetch_add(&cap_zero_time, 1);
			return;
		}
		c.rec.type = TREC_MEMCPY;
		c.rec.start = m->start;
		c.rec.end = m->end;
		c.rec.u.copy.stream = m->streamId;
		c.rec.u.copy.kind = cap_copy_kind(m->copyKind);
		c.rec.u.copy.bytes = m->bytes;
		c.rec.u.copy.corr = m->correlationId;
		c.rec.u.copy.graph = m->graphId;
		c.rec.u.copy.graph_node = m->graphNodeId;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		const CUpti_ActivityMemset4 *m = (const void *)a;
		if (m->start == 0 && m->end == 0) {
			atomic_fetch_add(&cap_zero_time, 1);
			return;
		}
		c.rec.type = TREC_MEMSET;
		c.rec.start = m->start;
		c.rec.end = m->end;
		c.rec.u.copy.stream = m->streamId;
		c.rec.u.copy.bytes = m->bytes;
		c.rec.u.copy.corr = m->correlationId;
		c.rec.u.copy.graph = m->graphId;
		c.rec.u.copy.graph_node = m->graphNodeId;
		break;
	}
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
		const CUpti_ActivitySynchronization2 *s = (const void *)a;
		c.rec.type = TREC_SYNC;
		c.rec.start = s->start;
		c.rec.end = s->end;
		c.rec.u.sync.kind = cap_sync_kind(s->type);
		c.rec.u.sync.stream = c.rec.u.sync.kind == TSYNC_CONTEXT ? TRACE_NO_STREAM
									: cap_stream(s->streamId);
		c.rec.u.sync.corr = s->correlationId;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMORY2: {
		const CUpti_ActivityMemory4 *m = (const void *)a;
		c.rec.type = m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
				     ? TREC_ALLOC : TREC_FREE;
		if (m->memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION &&
		    m->memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
			return;
		c.rec.start = c.rec.end = m->timestamp;
		c.rec.u.mem.addr = m->address;
		c.rec.u.mem.bytes = m->bytes;
		c.rec.u.mem.stream = cap_stream(m->streamId);
		c.rec.u.mem.kind = (uint32_t)m->memoryKind;
		c.rec.u.mem.flags = (m->isAsync ? TMEM_F_ASYNC : 0) |
				    (m->memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID
					     ? TMEM_F_POOL : 0) |
				    (m->memoryPoolConfig.memoryPoolType == CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED
					     ? TMEM_F_IMPORTED : 0);
		c.rec.u.mem.corr = m->correlationId;
		c.ctx = m->contextId;
		c.name = m->source;
		if (cap_debug && (m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC ||
				  m->bytes >= (16u << 20)) &&
		    atomic_fetch_add(&cap_debug_lines, 1) < 200)
			fprintf(stderr, "gpumemsim capture debug: memory kind %u %s ctx %u corr %u t %llu "
					"addr 0x%llx bytes %llu name %s\n", (unsigned)m->memoryKind,
				c.rec.type == TREC_ALLOC ? "alloc" : "free", m->contextId, m->correlationId, (unsigned long long)m->timestamp,
				(unsigned long long)m->address, (unsigned long long)m->bytes,
				m->name ? m->name : "-");
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMORY_POOL:
		atomic_fetch_add(&cap_pool_records, 1);
		return;
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER: {
		const CUpti_ActivityAPI *p = (const void *)a;
		const char *name = NULL;
		if (a->kind == CUPTI_ACTIVITY_KIND_RUNTIME && p->cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE)
			name = cap_rt_names[p->cbid];
		else if (a->kind == CUPTI_ACTIVITY_KIND_DRIVER && p->cbid < CUPTI_DRIVER_TRACE_CBID_SIZE)
			name = cap_drv_names[p->cbid];
		if (!name)
			return;
		c.rec.type = TREC_API;
		c.rec.start = p->start;
		c.rec.end = p->end;
		c.rec.u.api.corr = p->correlationId;
		c.name = name;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MARKER:
		cap_marker((const void *)a);
		return;
	default:
		return;
	}
	if (c.rec.type == TREC_KERNEL || c.rec.type == TREC_MEMCPY || c.rec.type == TREC_MEMSET ||
	    (c.rec.type == TREC_ALLOC && c.rec.u.mem.kind != TMEM_DEVICE_STATIC &&
	     c.rec.u.mem.kind != TMEM_MANAGED_STATIC))
		atomic_store(&cap_has_work, 1);
	cap_push(&c);
}

void CUPTIAPI cap_buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
					  size_t size, size_t valid)
{
	CUpti_Activity *rec = NULL;
	size_t dropped = 0;
	pthread_mutex_lock(&cap_lock);
	if (cap_conv && !cap_open_failed)
		while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS)
			cap_activity(rec);
	pthread_mutex_unlock(&cap_lock);
	if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS && dropped)
		atomic_fetch_add(&cap_dropped, dropped);
	(void)size;
	cap_buffer_release(buffer);
}
