/*
 * libkvfs_gpu_none.c - the GPU calls of kvfs.h without a GPU backend.
 *
 * The CUDA implementation (register device memory once, copy between a
 * mapped block and the device without a bounce buffer) is later work; until
 * then every call says -ENOTSUP, so an engine can probe for it and fall
 * back to its own copy from the kvfs_map() pointer.
 */
#include "config.h"

#include <errno.h>

#include "kvfs.h"

int kvfs_gpu_register(struct kvfs *k, int device, void *dev, size_t len)
{
	(void)k;
	(void)device;
	(void)dev;
	(void)len;
	return -ENOTSUP;
}

int kvfs_copy_to_device(struct kvfs *k, void *dev, const void *src, size_t len)
{
	(void)k;
	(void)dev;
	(void)src;
	(void)len;
	return -ENOTSUP;
}

int kvfs_copy_from_device(struct kvfs *k, void *dst, const void *dev,
			  size_t len)
{
	(void)k;
	(void)dst;
	(void)dev;
	(void)len;
	return -ENOTSUP;
}
