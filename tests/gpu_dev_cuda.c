/* gpu_dev_cuda.c - gpu_dev.h on the CUDA runtime */
#include "config.h"

#include <errno.h>
#include <cuda_runtime_api.h>

#include "tests/gpu_dev.h"

static int err(cudaError_t e)
{
	if (e == cudaSuccess)
		return 0;
	(void)cudaGetLastError();
	return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

int tdev_alloc(void **dev, size_t len)
{
	return err(cudaMalloc(dev, len));
}

void tdev_free(void *dev)
{
	cudaFree(dev);
}

int tdev_stream(void **stream)
{
	cudaStream_t s;
	int rc = err(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

	if (!rc)
		*stream = s;
	return rc;
}

void tdev_stream_free(void *stream)
{
	cudaStreamDestroy((cudaStream_t)stream);
}

int tdev_to_host(void *dst, const void *dev, size_t len)
{
	return err(cudaMemcpy(dst, dev, len, cudaMemcpyDeviceToHost));
}

int tdev_from_host(void *dev, const void *src, size_t len)
{
	return err(cudaMemcpy(dev, src, len, cudaMemcpyHostToDevice));
}

int tdev_memset(void *dev, int byte, size_t len)
{
	return err(cudaMemset(dev, byte, len));
}
