/*
 * check_xfer_rdma.c - the rdma transport end to end: fetch (LOCATE +
 * RDMA READ), push (ALLOC + RDMA WRITE + COMMIT), has, over loopback on
 * the first device.  SKIP (77) where no RDMA device is present; the
 * setup path without one (AUTO -> tcp, explicit rdma -> -ENODEV) is in
 * check_xfer.
 */
#include "config.h"

#include <errno.h>

#include "src/common/probe.h"
#include "tests/testutil.h"
#include "kvstore/xfer.h"

static const uint8_t SECRET[] = "test-cluster-secret-0123456789";

static struct kv_xfer *engine(struct kv_store *st, const char *listen)
{
	struct kv_xfer_config cfg = {
		.store = st,
		.listen = listen,
		.secret = SECRET,
		.secret_len = 30,
		.transport = KV_TRANSPORT_RDMA,
		.timeout_ms = 2000,
	};
	struct kv_xfer *x = NULL;

	ck_assert_int_eq(kv_xfer_open(&cfg, &x), 0);
	ck_assert_str_eq(kv_xfer_transport(x), "rdma");
	return x;
}

START_TEST(test_rdma)
{
	struct tu_paths pa, pb;
	struct kv_store *sa, *sb;
	struct kv_xfer *xa, *xb;
	uint8_t h[8][KVFS_HASH_LEN];
	uint32_t nsa, nsb, bt;
	int res[8];
	char peer[64];

	tu_paths(&pa);
	tu_paths(&pb);
	sa = tu_open(&pa, 8192, 32);
	sb = tu_open(&pb, 8192, 32);
	ck_assert_int_eq(kv_store_ns_create(sa, "m", 16, &nsa), 0);
	for (uint32_t i = 0; i < 8; i++) {
		tu_hash(h[i], i, 1);
		ck_assert_int_eq(tu_put_block(sa, nsa, h[i], NULL, 1000 + i),
				 0);
	}
	xa = engine(sa, "127.0.0.1:0");
	xb = engine(sb, NULL);
	snprintf(peer, sizeof(peer), "127.0.0.1:%d", kv_xfer_port(xa));
	ck_assert_int_eq(kv_xfer_fetch(xb, peer, "m", h[0]), 0);
	ck_assert_int_eq(kv_xfer_fetch_many(xb, peer, "m",
					    (const uint8_t(*)[32])h, 8, res),
			 8);
	ck_assert_int_eq(kv_store_ns_find(sb, "m", &nsb, &bt), 0);
	for (uint32_t i = 0; i < 8; i++)
		ck_assert(tu_verify(sb, nsb, h[i], 1000 + i));
	ck_assert_int_eq(kv_store_evict(sa, nsa, h[3]), 0);
	ck_assert_int_eq(kv_xfer_has(xb, peer, "m", h[3]), 0);
	ck_assert_int_eq(kv_xfer_push(xb, peer, "m", h[3]), 0);
	ck_assert_int_eq(kv_xfer_has(xb, peer, "m", h[3]), 1);
	ck_assert(tu_verify(sa, nsa, h[3], 1003));
	kv_xfer_close(xb);
	kv_xfer_close(xa);
	kv_store_close(sb);
	kv_store_close(sa);
}
END_TEST

int main(void)
{
	Suite *s;
	TCase *tc;
	char why[256];

	/* before anything is allocated: a skip leaks nothing */
	if (kvfs_rdma_probe(why, sizeof(why)) <= 0) {
		printf("SKIP: %s\n", why);
		return 77;
	}
	s = suite_create("xfer_rdma");
	tc = tcase_create("rdma");
	tu_init("xfer_rdma");
	tcase_add_test(tc, test_rdma);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
