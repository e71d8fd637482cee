#include "config.h"

#include <errno.h>
#include <stdio.h>

#include "src/common/probe.h"

int kvfs_rdma_probe(char *why, size_t len)
{
	snprintf(why, len,
		 "built without RDMA (configure --with-rdma=no or no "
		 "libibverbs)");
	return -ENOTSUP;
}
