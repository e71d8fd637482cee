/*
 * libkvfs_int.h - what libkvfs.c shares with its GPU backend.
 *
 * The handle is opaque in kvfs.h; its layout is here so that the GPU
 * backend (libkvfs_gpu_cuda.c, or libkvfs_gpu_none.c when configure found
 * no CUDA) can reach the pool mappings.  Nothing here is exported: the
 * version script (libkvfs.map) keeps every symbol but kvfs.h's local.
 */
#ifndef KVFS_LIBKVFS_INT_H
#define KVFS_LIBKVFS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "src/libkvfs/kvfs.h"

struct kvfs_mapent;
struct kvfs_gpu; /* the backend's per-handle state, NULL until used */

/* one mapping of the pool file; base is NULL until it is made */
struct pool_map {
	uint8_t *base;
	size_t len;
};

struct kvfs {
	struct kvfs_ctl *ctl;
	char *mount;   /* what kvfs_connect() was given */
	bool no_mount; /* ... a control socket (kvfsd --no-mount) */
	char *pool_path;
	uint64_t slot_size;
	struct pool_map ro; /* kvfs_map() pointers point into it */
	struct pool_map rw; /* kvfs_alloc() pointers point into it */
	/* the live maps by pointer, open addressing (libkvfs.c): a block
	 * mapped twice is in it twice, one entry per daemon ref */
	struct kvfs_mapent *maps;
	size_t nmaps;
	size_t maps_cap;	     /* 0 or a power of two */
	struct kvfs_wblock *writers; /* open zero-copy writers, a list */
	struct kvfs_gpu *gpu;
};

/*
 * Map the pool file once per handle: read-only (rw false) or read-write.
 * 0 when k->ro / k->rw is mapped (now or before), else a negative errno:
 * -EACCES when the file's mode refuses this process.
 */
int libkvfs_pool_map(struct kvfs *k, bool rw);

/*
 * The backend's part of kvfs_disconnect(), called first, while the
 * control connection is still open: every copy still in flight is waited
 * for (its slots must not be reused under a DMA) and its references
 * dropped, then the pool is unpinned and k->gpu freed.
 */
void libkvfs_gpu_close(struct kvfs *k);

/*
 * kvfs_commit(), handing kvfsd the block's CRC-32C (crc32c.h) when crc is
 * not NULL, so that sealing it reads none of its bytes: the GPU copies
 * compute it on the device.  A wrong one only makes the block fail its
 * later checks, as a damaged block does.
 */
int libkvfs_commit_crc(struct kvfs_wblock *wb, size_t len, const uint32_t *crc);

#endif /* KVFS_LIBKVFS_INT_H */
