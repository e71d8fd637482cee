/*
 * libkvfs_gpu_cuda.c - the GPU calls of kvfs.h on the CUDA runtime.
 *
 * The pool is pinned once per handle (cudaHostRegister of the whole
 * mapping), so a copy is one cudaMemcpyAsync between a slot and device
 * memory: no bounce buffer, no per-copy pinning.  Only one mapping is
 * pinned: the read-write one where this process may write the pool (both
 * directions go through it: the read-only mapping is of the same file, so
 * a kvfs_map() pointer has the same offset in either), else the read-only
 * one, which CUDA can pin only with cudaHostRegisterReadOnly.
 *
 * Completion: a copy holds daemon references (a map per block to the
 * device, a writer per block from it) that must outlive the DMA, or the
 * slot could be evicted and reused under it.  A cudaEvent recorded after
 * the copies on the caller's stream tells when they are over.  The
 * references are dropped by kvfs_copy_wait()/kvfs_copy_poll() on the
 * caller's thread, not from a cudaLaunchHostFunc callback: the callback
 * runs on a CUDA thread, and a handle is not thread-safe (the drop is a
 * request on the handle's control connection); it would also stall the
 * stream for a socket round trip.  kvfs_disconnect() waits for the copies
 * left before it closes the connection (libkvfs_gpu_close()).
 *
 * No GPU at run time (cudaGetDeviceCount fails or counts 0): every call
 * is -ENODEV, checked before anything else, so nothing is mapped or
 * pinned.
 *
 * Checksums.  kvfsd seals a block with its CRC-32C, which would make it
 * read every byte a copy from the device just wrote, on its one control
 * thread.  So the copy computes the CRC on the device instead, from the
 * source: a kernel (crc32c_gpu.cu, loaded from its PTX at the first copy)
 * takes the raw CRC of each CRC_PIECE bytes on the handle's side stream,
 * beside the copies, the pieces' CRCs come back to pinned memory there,
 * the caller's stream waits for that before its copy counts as done, and
 * kvfs_crc32c_chunks() combines them into each block's CRC, which the
 * commit hands kvfsd.  Where the
 * kernel cannot be loaded or run, or its memory is not to be had, the
 * commit goes without, and kvfsd computes it as for any block.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>

#include "src/common/crc32c.h"
#include "src/libkvfs/crc32c_gpu_ptx.h"
#include "src/libkvfs/kvfs.h"
#include "src/libkvfs/libkvfs_int.h"

#define CRC_PIECE 8192u /* bytes a kernel thread checksums */
#define CRC_THREADS 32u /* threads a thread block: more blocks, more SMs */

struct kvfs_gpu {
	/* &k->rw or &k->ro once pinned, else NULL (copies then go through
	 * CUDA's staging buffers: correct, slower) */
	struct pool_map *pinned;
	bool tried; /* the copies try to pin once, not at every call */
	struct kvfs_copy *copies; /* in flight, a list */
	/* the CRCs of copies from the device (crc_room) */
	cudaStream_t side; /* non-blocking, of side_dev */
	cudaEvent_t ready, crc_done;
	int side_dev;
	bool have_side;
	unsigned int *dcrc; /* device */
	uint32_t *hcrc;	    /* pinned host */
	size_t crc_cap;	    /* pieces either holds */
	bool crc_busy;	    /* a copy in flight uses them */
};

/* one block of a copy: the reference it holds */
struct copy_ent {
	const void *map;	/* to the device: kvfs_map()'s pointer */
	struct kvfs_wblock *wb; /* from the device: the writer */
	size_t len;		/* from the device: bytes to seal */
	size_t piece;		/* from the device: its first CRC piece */
};

struct kvfs_copy {
	struct kvfs *k;
	cudaEvent_t done;
	bool from_dev;
	size_t n; /* ent[0..n-1] hold a reference */
	bool crc; /* its pieces' CRCs come back in its gpu's hcrc */
	struct kvfs_copy *prev, *next;
	struct copy_ent ent[];
};

/* ---- the device ------------------------------------------------------ */

static pthread_once_t gpu_once = PTHREAD_ONCE_INIT;
static int gpu_count;

static void gpu_probe(void)
{
	int n = 0;

	/* no driver, no device, a broken install: all mean no GPU */
	if (cudaGetDeviceCount(&n) != cudaSuccess)
		n = 0;
	(void)cudaGetLastError();
	gpu_count = n;
}

static bool gpu_present(void)
{
	pthread_once(&gpu_once, gpu_probe);
	return gpu_count > 0;
}

/* a CUDA error as a negative errno; clears it from the runtime, so the
 * engine's own cudaGetLastError() does not find ours */
static int cuda_errno(cudaError_t e)
{
	if (e == cudaSuccess)
		return 0;
	(void)cudaGetLastError();
	switch (e) {
	case cudaErrorInvalidValue:
	case cudaErrorInvalidDevicePointer:
	case cudaErrorInvalidMemcpyDirection:
	case cudaErrorInvalidResourceHandle:
		return -EINVAL;
	case cudaErrorMemoryAllocation:
		return -ENOMEM;
	case cudaErrorNoDevice:
	case cudaErrorInsufficientDriver:
		return -ENODEV;
	case cudaErrorNotSupported:
		return -ENOTSUP;
	case cudaErrorHostMemoryAlreadyRegistered:
		return -EEXIST;
	default:
		return -EIO;
	}
}

static struct kvfs_gpu *gpu_state(struct kvfs *k)
{
	if (!k->gpu)
		k->gpu = calloc(1, sizeof(*k->gpu));
	return k->gpu;
}

/* ---- pinning --------------------------------------------------------- */

static int ro_pin_supported(void)
{
	int dev, ok = 0;

	if (cudaGetDevice(&dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&ok,
				   cudaDevAttrHostRegisterReadOnlySupported,
				   dev) != cudaSuccess) {
		(void)cudaGetLastError();
		return 0;
	}
	return ok;
}

int kvfs_gpu_register(struct kvfs *k)
{
	unsigned flags = cudaHostRegisterPortable; /* for every device */
	struct kvfs_gpu *g;
	struct pool_map *m;
	int rc;

	if (!gpu_present())
		return -ENODEV;
	if (!k)
		return -EINVAL;
	g = gpu_state(k);
	if (!g)
		return -ENOMEM;
	g->tried = true;
	if (g->pinned)
		return 0;
	rc = libkvfs_pool_map(k, true);
	m = &k->rw;
	if (rc == -EACCES || rc == -EPERM || rc == -EROFS) {
		/* a reader only: its mapping is PROT_READ, which CUDA
		 * pins only when told that the device will not write */
		rc = libkvfs_pool_map(k, false);
		m = &k->ro;
		if (!rc && !ro_pin_supported())
			return -ENOTSUP;
		flags |= cudaHostRegisterReadOnly;
	}
	if (rc)
		return rc;
	rc = cuda_errno(cudaHostRegister(m->base, m->len, flags));
	if (!rc)
		g->pinned = m;
	return rc;
}

/* where the DMA reads a kvfs_map() pointer p: in the pinned mapping */
static const void *dma_src(const struct kvfs *k, const void *p)
{
	if (k->gpu->pinned != &k->rw)
		return p;
	return k->rw.base + ((const uint8_t *)p - k->ro.base);
}

/* ---- copies ---------------------------------------------------------- */

/* the state every copy call starts from: the device, the arguments, a
 * try at pinning (its failure is no copy's failure) */
static int copy_begin(struct kvfs *k, const char *ns, const void *blocks,
		      size_t n, struct kvfs_copy **cp)
{
	if (!gpu_present())
		return -ENODEV;
	if (!k || !ns || !blocks || !n || !cp)
		return -EINVAL;
	if (!gpu_state(k))
		return -ENOMEM;
	if (!k->gpu->tried)
		(void)kvfs_gpu_register(k);
	return 0;
}

static int copy_new(struct kvfs *k, size_t n, bool from_dev,
		    struct kvfs_copy **out)
{
	struct kvfs_copy *c;
	int rc;

	if (n > (SIZE_MAX - sizeof(*c)) / sizeof(c->ent[0]))
		return -EINVAL;
	c = calloc(1, sizeof(*c) + n * sizeof(c->ent[0]));
	if (!c)
		return -ENOMEM;
	rc = cuda_errno(
		cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming));
	if (rc) {
		free(c);
		return rc;
	}
	c->k = k;
	c->from_dev = from_dev;
	*out = c;
	return 0;
}

/* ---- checksums on the device (see the top) --------------------------- */

static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static cudaKernel_t crc_kernel; /* NULL: not to be had */
static uint32_t crc_tab[4][256];

static void crc_load(void)
{
	cudaLibrary_t lib;

	if (cudaLibraryLoadData(&lib, kvfs_crc32c_ptx, NULL, NULL, 0, NULL,
				NULL, 0) != cudaSuccess ||
	    cudaLibraryGetKernel(&crc_kernel, lib, "kvfs_crc32c_pieces") !=
		    cudaSuccess) {
		crc_kernel = NULL;
		(void)cudaGetLastError();
		return;
	}
	kvfs_crc32c_shift_table(crc_tab, CRC_PIECE);
}

/*
 * The handle's side stream, its two events and its buffers for the
 * pieces' CRCs (device and pinned host), made on the current device at
 * the first copy from it and grown as needed; one copy uses them at a
 * time (g->crc_busy).  False when they cannot be had for this copy.
 */
static bool crc_room(struct kvfs_gpu *g, size_t pieces)
{
	int dev;

	if (g->crc_busy || cudaGetDevice(&dev) != cudaSuccess)
		goto out_none;
	if (!g->have_side) {
		if (cudaStreamCreateWithFlags(
			    &g->side, cudaStreamNonBlocking) != cudaSuccess)
			goto out_none;
		if (cudaEventCreateWithFlags(
			    &g->ready, cudaEventDisableTiming) != cudaSuccess) {
			cudaStreamDestroy(g->side);
			goto out_none;
		}
		if (cudaEventCreateWithFlags(&g->crc_done,
					     cudaEventDisableTiming) !=
		    cudaSuccess) {
			cudaEventDestroy(g->ready);
			cudaStreamDestroy(g->side);
			goto out_none;
		}
		g->side_dev = dev;
		g->have_side = true;
	}
	if (g->side_dev != dev)
		goto out_none;
	if (g->crc_cap < pieces) {
		size_t cap = pieces < 4096 ? 4096 : pieces;

		cudaFree(g->dcrc);
		cudaFreeHost(g->hcrc);
		g->dcrc = NULL;
		g->hcrc = NULL;
		g->crc_cap = 0;
		if (cudaMalloc((void **)&g->dcrc, cap * sizeof(*g->dcrc)) !=
			    cudaSuccess ||
		    cudaMallocHost((void **)&g->hcrc, cap * sizeof(*g->hcrc)) !=
			    cudaSuccess)
			goto out_none;
		g->crc_cap = cap;
	}
	return true;
out_none:
	(void)cudaGetLastError();
	return false;
}

/*
 * Queue the CRCs of the pieces of c's blocks (read from the device at
 * blocks[i].dev) on the side stream, after what the engine queued on
 * stream so far, so that they run beside the copies; crc_join() makes
 * stream wait for them.  When a step fails, none (c->crc false).
 */
static void crc_queue(struct kvfs_copy *c, const struct kvfs_gpu_block *blocks,
		      void *stream)
{
	struct kvfs_gpu *g = c->k->gpu;
	size_t total = 0;

	pthread_once(&crc_once, crc_load);
	if (!crc_kernel)
		return;
	for (size_t i = 0; i < c->n; i++) {
		c->ent[i].piece = total;
		total += (c->ent[i].len + CRC_PIECE - 1) / CRC_PIECE;
	}
	if (!total || !crc_room(g, total))
		return;
	if (cudaEventRecord(g->ready, (cudaStream_t)stream) != cudaSuccess ||
	    cudaStreamWaitEvent(g->side, g->ready, 0) != cudaSuccess)
		goto out_fail;
	for (size_t i = 0; i < c->n; i++) {
		const void *p = blocks[i].dev;
		unsigned long long len = c->ent[i].len;
		unsigned int piece = CRC_PIECE;
		unsigned int *out = g->dcrc + c->ent[i].piece;
		size_t np = (len + CRC_PIECE - 1) / CRC_PIECE;
		void *args[] = { &p, &len, &piece, &out };
		dim3 grid = { (unsigned)((np + CRC_THREADS - 1) / CRC_THREADS),
			      1, 1 };
		dim3 block = { CRC_THREADS, 1, 1 };

		if (np &&
		    cudaLaunchKernel((const void *)crc_kernel, grid, block,
				     args, 0, g->side) != cudaSuccess)
			goto out_fail;
	}
	if (cudaMemcpyAsync(g->hcrc, g->dcrc, total * sizeof(*g->hcrc),
			    cudaMemcpyDeviceToHost, g->side) != cudaSuccess ||
	    cudaEventRecord(g->crc_done, g->side) != cudaSuccess)
		goto out_fail;
	g->crc_busy = true;
	c->crc = true;
	return;
out_fail:
	/* what was queued finishes on the side stream before the next use
	 * of its buffers, which is queued behind it */
	(void)cudaGetLastError();
}

/* stream waits for c's CRCs: its copy is over only when they are back */
static int crc_join(struct kvfs_copy *c, void *stream)
{
	if (!c->crc)
		return 0;
	return cuda_errno(cudaStreamWaitEvent((cudaStream_t)stream,
					      c->k->gpu->crc_done, 0));
}

/* drop every reference of c (sealing its blocks when ok) and free it;
 * the DMA must be over.  The first error, or 0. */
static int copy_end(struct kvfs_copy *c, bool ok)
{
	struct kvfs_gpu *g = c->k->gpu;
	/* the copy is over, and its CRCs with it (crc_join) */
	const uint32_t *crc = c->crc && ok ? g->hcrc : NULL;
	int rc = 0, r;

	for (size_t i = 0; i < c->n; i++) {
		uint32_t v = 0;

		if (crc)
			v = kvfs_crc32c_chunks(crc_tab, crc + c->ent[i].piece,
					       CRC_PIECE, c->ent[i].len);
		if (!c->from_dev)
			r = kvfs_unmap(c->k, c->ent[i].map);
		else if (ok)
			r = libkvfs_commit_crc(c->ent[i].wb, c->ent[i].len,
					       crc ? &v : NULL);
		else
			r = kvfs_abort(c->ent[i].wb);
		if (!rc)
			rc = r;
	}
	if (c->crc)
		g->crc_busy = false;
	if (c->prev)
		c->prev->next = c->next;
	else if (g->copies == c)
		g->copies = c->next;
	if (c->next)
		c->next->prev = c->prev;
	cudaEventDestroy(c->done);
	free(c);
	return rc;
}

/*
 * The copies are queued: record the event that ends them and hand c out.
 * When queueing failed (rc, or the record does), the copies already on
 * the stream are waited for before their slots are let go.
 */
static int copy_launch(struct kvfs_copy *c, void *stream, int rc,
		       struct kvfs_copy **cp)
{
	struct kvfs_gpu *g = c->k->gpu;

	if (!rc)
		rc = cuda_errno(cudaEventRecord(c->done, (cudaStream_t)stream));
	if (rc) {
		(void)cuda_errno(cudaStreamSynchronize((cudaStream_t)stream));
		copy_end(c, false);
		return rc;
	}
	c->next = g->copies;
	if (g->copies)
		g->copies->prev = c;
	g->copies = c;
	*cp = c;
	return 0;
}

#define MAP_CHUNK 1024 /* blocks mapped per request */

/* map blocks[0..n-1] into c->ent, one kvfs_map_batch() per MAP_CHUNK;
 * c->n counts those mapped, for copy_end to give back */
static int map_blocks(struct kvfs *k, const char *ns,
		      const struct kvfs_gpu_block *blocks, size_t n,
		      struct kvfs_copy *c)
{
	size_t chunk = n < MAP_CHUNK ? n : MAP_CHUNK, len[MAP_CHUNK], m;
	const void *ptr[MAP_CHUNK];
	uint8_t(*h)[KVFS_HASH_LEN];
	long got = 0;
	int rc = 0;

	h = malloc((chunk ? chunk : 1) * sizeof(*h));
	if (!h)
		return -ENOMEM;
	for (size_t at = 0; at < n && !rc; at += m) {
		m = n - at < chunk ? n - at : chunk;
		for (size_t i = 0; i < m; i++)
			memcpy(h[i], blocks[at + i].hash, KVFS_HASH_LEN);
		got = kvfs_map_batch(k, ns, h, m, ptr, len);
		if (got < 0)
			rc = (int)got;
		for (long i = 0; i < got; i++) {
			c->ent[c->n].map = ptr[i];
			c->ent[c->n].len = len[i];
			if (len[i] > blocks[c->n].len)
				rc = -EFBIG;
			c->n++;
		}
		if (!rc && (size_t)got < m)
			rc = -ENOENT;
	}
	free(h);
	return rc;
}

int kvfs_copy_to_device_batch(struct kvfs *k, const char *ns,
			      struct kvfs_gpu_block *blocks, size_t n,
			      void *stream, struct kvfs_copy **cp)
{
	struct kvfs_copy *c;
	size_t i;
	int rc;

	rc = copy_begin(k, ns, blocks, n, cp);
	if (rc)
		return rc;
	for (i = 0; i < n; i++)
		if (!blocks[i].hash || !blocks[i].dev)
			return -EINVAL;
	rc = copy_new(k, n, false, &c);
	if (rc)
		return rc;
	/* every block referenced before the first copy: a miss costs no
	 * DMA, and all or nothing is queued */
	rc = map_blocks(k, ns, blocks, n, c);
	if (rc)
		goto out_end;
	for (i = 0; i < n && !rc; i++)
		rc = cuda_errno(cudaMemcpyAsync(
			blocks[i].dev, dma_src(k, c->ent[i].map), c->ent[i].len,
			cudaMemcpyHostToDevice, (cudaStream_t)stream));
	if (!rc)
		for (i = 0; i < n; i++)
			blocks[i].len = c->ent[i].len;
	return copy_launch(c, stream, rc, cp);
out_end:
	copy_end(c, false);
	return rc;
}

int kvfs_copy_from_device_batch(struct kvfs *k, const char *ns,
				const struct kvfs_gpu_block *blocks, size_t n,
				void *stream, struct kvfs_copy **cp)
{
	struct kvfs_copy *c;
	void **dst;
	size_t i, cap;
	int rc;

	rc = copy_begin(k, ns, blocks, n, cp);
	if (rc)
		return rc;
	for (i = 0; i < n; i++)
		if (!blocks[i].hash || !blocks[i].dev)
			return -EINVAL;
	dst = calloc(n, sizeof(*dst));
	if (!dst)
		return -ENOMEM;
	rc = copy_new(k, n, true, &c);
	if (rc)
		goto out_free;
	for (i = 0; i < n; i++) {
		rc = kvfs_alloc(k, ns, blocks[i].hash, blocks[i].parent,
				&dst[i], &cap, &c->ent[i].wb);
		if (rc)
			goto out_end;
		c->n++;
		if (blocks[i].len > cap) {
			rc = -EFBIG;
			goto out_end;
		}
		c->ent[i].len = blocks[i].len;
	}
	crc_queue(c, blocks, stream);
	/* kvfs_alloc() pointers are in the read-write mapping: pinned when
	 * anything is, since a writer pins that one */
	for (i = 0; i < n && !rc; i++)
		rc = cuda_errno(cudaMemcpyAsync(
			dst[i], blocks[i].dev, blocks[i].len,
			cudaMemcpyDeviceToHost, (cudaStream_t)stream));
	if (!rc)
		rc = crc_join(c, stream);
	free(dst);
	return copy_launch(c, stream, rc, cp);
out_end:
	copy_end(c, false);
out_free:
	free(dst);
	return rc;
}

int kvfs_copy_to_device(struct kvfs *k, const char *ns,
			const uint8_t hash[KVFS_HASH_LEN], void *dev,
			size_t cap, size_t *len, void *stream,
			struct kvfs_copy **cp)
{
	struct kvfs_gpu_block b = { .hash = hash, .dev = dev, .len = cap };
	int rc;

	rc = kvfs_copy_to_device_batch(k, ns, &b, 1, stream, cp);
	if (!rc && len)
		*len = b.len;
	return rc;
}

int kvfs_copy_from_device(struct kvfs *k, const char *ns,
			  const uint8_t hash[KVFS_HASH_LEN],
			  const uint8_t *parent, const void *dev, size_t len,
			  void *stream, struct kvfs_copy **cp)
{
	struct kvfs_gpu_block b = {
		.hash = hash, .parent = parent, .dev = (void *)dev, .len = len
	};

	return kvfs_copy_from_device_batch(k, ns, &b, 1, stream, cp);
}

/* ---- completion ------------------------------------------------------ */

int kvfs_copy_wait(struct kvfs_copy *c)
{
	int rc;

	if (!gpu_present())
		return -ENODEV;
	if (!c)
		return -EINVAL;
	/* a failed copy is -EIO whatever CUDA called it: the data did not
	 * arrive, which is all the caller can act on */
	rc = cuda_errno(cudaEventSynchronize(c->done)) ? -EIO : 0;
	if (rc) {
		copy_end(c, false);
		return rc;
	}
	return copy_end(c, true);
}

int kvfs_copy_poll(struct kvfs_copy *c)
{
	cudaError_t e;

	if (!gpu_present())
		return -ENODEV;
	if (!c)
		return -EINVAL;
	e = cudaEventQuery(c->done);
	if (e == cudaErrorNotReady) {
		(void)cudaGetLastError();
		return -EAGAIN;
	}
	return kvfs_copy_wait(c);
}

void libkvfs_gpu_close(struct kvfs *k)
{
	struct kvfs_gpu *g = k->gpu;

	if (!g)
		return;
	/* the caller gave up on these: the DMA is waited for, its writers
	 * aborted, as kvfs_disconnect() does with any open writer */
	while (g->copies) {
		(void)cuda_errno(cudaEventSynchronize(g->copies->done));
		copy_end(g->copies, false);
	}
	if (g->pinned)
		(void)cuda_errno(cudaHostUnregister(g->pinned->base));
	if (g->have_side) {
		(void)cuda_errno(cudaStreamSynchronize(g->side));
		cudaFree(g->dcrc);
		cudaFreeHost(g->hcrc);
		cudaEventDestroy(g->ready);
		cudaEventDestroy(g->crc_done);
		(void)cuda_errno(cudaStreamDestroy(g->side));
	}
	free(g);
	k->gpu = NULL;
}
