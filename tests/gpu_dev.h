/*
 * gpu_dev.h - the few CUDA calls tests/check_gpu.c makes itself, behind
 * a header so that the test carries no #ifdef: gpu_dev_cuda.c in a build
 * with CUDA, gpu_dev_none.c (every call -ENOTSUP) without.  Each returns
 * 0 or a negative errno.
 */
#ifndef KVFS_TESTS_GPU_DEV_H
#define KVFS_TESTS_GPU_DEV_H

#include <stddef.h>

int tdev_alloc(void **dev, size_t len);
void tdev_free(void *dev);
/* a fresh non-default stream, as an engine's would be */
int tdev_stream(void **stream);
void tdev_stream_free(void *stream);
/* synchronous: len bytes of device memory into host memory, and back */
int tdev_to_host(void *dst, const void *dev, size_t len);
int tdev_from_host(void *dev, const void *src, size_t len);
int tdev_memset(void *dev, int byte, size_t len);

#endif /* KVFS_TESTS_GPU_DEV_H */
