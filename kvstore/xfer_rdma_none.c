/* xfer_rdma_none.c - the rdma transport when kvfs is built without it */
#include "config.h"

#include <errno.h>
#include <stdio.h>

#include "kvstore/xfer_int.h"

int xfer_rdma_probe(char *why, size_t len)
{
	snprintf(why, len, "built without RDMA (no libibverbs at configure)");
	return -ENOTSUP;
}

static int none_init(struct kv_xfer *x, char *why, size_t len)
{
	snprintf(why, len, "built without RDMA");
	return -ENODEV;
}

static void none_fini(struct kv_xfer *x)
{
}

/* never chosen: kv_xfer_open refuses rdma before any of these is used */
const struct xfer_ops xfer_rdma_ops = {
	.name = "rdma",
	.init = none_init,
	.fini = none_fini,
};
