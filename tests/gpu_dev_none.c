/* gpu_dev_none.c - gpu_dev.h without CUDA: there is no device to use */
#include "config.h"

#include <errno.h>

#include "tests/gpu_dev.h"

int tdev_alloc(void **dev, size_t len)
{
	return -ENOTSUP;
}

void tdev_free(void *dev)
{
}

int tdev_stream(void **stream)
{
	return -ENOTSUP;
}

void tdev_stream_free(void *stream)
{
}

int tdev_to_host(void *dst, const void *dev, size_t len)
{
	return -ENOTSUP;
}

int tdev_from_host(void *dev, const void *src, size_t len)
{
	return -ENOTSUP;
}

int tdev_memset(void *dev, int byte, size_t len)
{
	return -ENOTSUP;
}
