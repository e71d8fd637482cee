#include "config.h"

#include <errno.h>
#include <stdio.h>

#include "src/common/probe.h"

int kvfs_cuda_probe(char *why, size_t len)
{
	snprintf(why, len,
		 "built without CUDA (configure --with-cuda=no or no CUDA "
		 "runtime)");
	return -ENOTSUP;
}
