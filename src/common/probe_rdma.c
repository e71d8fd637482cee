#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <infiniband/verbs.h>

#include "src/common/probe.h"

int kvfs_rdma_probe(char *why, size_t len)
{
	struct ibv_device **list;
	int n = 0;

	list = ibv_get_device_list(&n);
	if (!list) {
		snprintf(why, len,
			 "no RDMA devices (ibv_get_device_list: errno %d)",
			 errno);
		return 0;
	}
	if (n > 0)
		snprintf(why, len, "%d RDMA device(s), first %s", n,
			 ibv_get_device_name(list[0]));
	else
		snprintf(why, len,
			 "built with libibverbs, no RDMA device present");
	ibv_free_device_list(list);
	return n;
}
