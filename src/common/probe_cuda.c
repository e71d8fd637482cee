#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <cuda_runtime_api.h>

#include "src/common/probe.h"

int kvfs_cuda_probe(char *why, size_t len)
{
	cudaError_t err;
	int n = 0;

	err = cudaGetDeviceCount(&n);
	if (err != cudaSuccess) {
		snprintf(why, len, "built with CUDA, no usable GPU (%s)",
			 cudaGetErrorString(err));
		return 0;
	}
	snprintf(why, len, "%d CUDA device(s)", n);
	return n;
}
