/*
 * libkvfs_gpu_none.c - the GPU calls of kvfs.h in a build without CUDA.
 *
 * configure found no CUDA runtime (or was told --with-cuda=no), so
 * libkvfs_gpu_cuda.c is not compiled: every call says -ENOTSUP, whatever
 * its arguments, so that an engine can probe for the GPU path and fall
 * back to its own copy from the kvfs_map() pointer.
 */
#include "config.h"

#include <errno.h>

#include "src/libkvfs/kvfs.h"
#include "src/libkvfs/libkvfs_int.h"

void libkvfs_gpu_close(struct kvfs *k)
{
	(void)k; /* no copy was ever started */
}

int kvfs_gpu_register(struct kvfs *k)
{
	return -ENOTSUP;
}

int kvfs_copy_to_device(struct kvfs *k, const char *ns,
			const uint8_t hash[KVFS_HASH_LEN], void *dev,
			size_t cap, size_t *len, void *stream,
			struct kvfs_copy **cp)
{
	return -ENOTSUP;
}

int kvfs_copy_from_device(struct kvfs *k, const char *ns,
			  const uint8_t hash[KVFS_HASH_LEN],
			  const uint8_t *parent, const void *dev, size_t len,
			  void *stream, struct kvfs_copy **cp)
{
	return -ENOTSUP;
}

int kvfs_copy_to_device_batch(struct kvfs *k, const char *ns,
			      struct kvfs_gpu_block *blocks, size_t n,
			      void *stream, struct kvfs_copy **cp)
{
	return -ENOTSUP;
}

int kvfs_copy_from_device_batch(struct kvfs *k, const char *ns,
				const struct kvfs_gpu_block *blocks, size_t n,
				void *stream, struct kvfs_copy **cp)
{
	return -ENOTSUP;
}

int kvfs_copy_wait(struct kvfs_copy *cp)
{
	return -ENOTSUP;
}

int kvfs_copy_poll(struct kvfs_copy *cp)
{
	return -ENOTSUP;
}
