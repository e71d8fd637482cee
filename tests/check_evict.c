/* check_evict.c - store.h eviction: LRU, leaves first, pins, -ENOSPC */
#include "config.h"

#include <errno.h>

#include "tests/testutil.h"

#define SLOT 4096

static struct tu_paths P;
static struct kv_store *S;
static uint32_t NS;

static void setup(void)
{
	tu_paths(&P);
	S = tu_open(&P, SLOT, 4);
	ck_assert_int_eq(kv_store_ns_create(S, "m", 4, &NS), 0);
}

static void teardown(void)
{
	kv_store_close(S);
}

static int cached(const uint8_t *h)
{
	struct kv_block_info bi;

	return kv_store_stat(S, NS, h, &bi) == 0;
}

START_TEST(test_plain_lru)
{
	uint8_t h[6][KVFS_HASH_LEN];
	struct kv_stats ns;

	for (int i = 0; i < 6; i++)
		tu_hash(h[i], (uint32_t)i, 1);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(tu_put_block(S, NS, h[i], NULL, 8), 0);
	/* use 0 again: 1 is now least recently used */
	ck_assert_int_eq(kv_store_lookup(S, NS, h[0]), 1);
	ck_assert_int_eq(tu_put_block(S, NS, h[4], NULL, 8), 0);
	ck_assert(!cached(h[1]));
	ck_assert(cached(h[0]) && cached(h[2]) && cached(h[3]));
	ck_assert(tu_verify(S, NS, h[2], 8)); /* a get is a use too */
	ck_assert_int_eq(tu_put_block(S, NS, h[5], NULL, 8), 0);
	ck_assert(!cached(h[3]));
	ck_assert(cached(h[2]));
	ck_assert_int_eq(kv_store_ns_stats(S, NS, &ns), 0);
	ck_assert_uint_eq(ns.evictions, 2);
	ck_assert_uint_eq(ns.blocks, 4);
}
END_TEST

START_TEST(test_leaves_first)
{
	uint8_t a[KVFS_HASH_LEN], b[KVFS_HASH_LEN], c[KVFS_HASH_LEN];
	uint8_t d[KVFS_HASH_LEN], e[KVFS_HASH_LEN], f[KVFS_HASH_LEN];

	tu_hash(a, 1, 2);
	tu_hash(b, 2, 2);
	tu_hash(c, 3, 2);
	tu_hash(d, 4, 2);
	tu_hash(e, 5, 2);
	tu_hash(f, 6, 2);
	/* chain a <- b <- c, then an unrelated d; a is the oldest */
	ck_assert_int_eq(tu_put_block(S, NS, a, NULL, 8), 0);
	ck_assert_int_eq(tu_put_block(S, NS, b, a, 8), 0);
	ck_assert_int_eq(tu_put_block(S, NS, c, b, 8), 0);
	ck_assert_int_eq(tu_put_block(S, NS, d, NULL, 8), 0);
	/* d is used last, yet the leaves are c and d: c goes first */
	ck_assert_int_eq(tu_put_block(S, NS, e, NULL, 8), 0);
	ck_assert(!cached(c));
	ck_assert(cached(a) && cached(b) && cached(d) && cached(e));
	/* now b is a leaf (its child went) and the oldest leaf */
	ck_assert_int_eq(tu_put_block(S, NS, f, NULL, 8), 0);
	ck_assert(!cached(b));
	ck_assert(cached(a) && cached(d) && cached(e) && cached(f));
}
END_TEST

START_TEST(test_inner_when_no_leaf_free)
{
	uint8_t a[KVFS_HASH_LEN], b[KVFS_HASH_LEN], x[KVFS_HASH_LEN];
	uint8_t y[KVFS_HASH_LEN], z[KVFS_HASH_LEN];
	struct kv_ref rb, ry;

	tu_hash(a, 1, 3);
	tu_hash(b, 2, 3);
	tu_hash(x, 3, 3);
	tu_hash(y, 4, 3);
	tu_hash(z, 5, 3);
	ck_assert_int_eq(tu_put_block(S, NS, a, NULL, 8), 0);
	ck_assert_int_eq(tu_put_block(S, NS, b, a, 8), 0);
	ck_assert_int_eq(tu_put_block(S, NS, x, NULL, 8), 0);
	ck_assert_int_eq(tu_put_block(S, NS, y, x, 8), 0);
	/* the leaves b and y are pinned: an inner block must go, the LRU
	 * one (a) */
	ck_assert_int_eq(kv_store_get(S, NS, b, &rb), 0);
	ck_assert_int_eq(kv_store_get(S, NS, y, &ry), 0);
	ck_assert_int_eq(tu_put_block(S, NS, z, NULL, 8), 0);
	ck_assert(!cached(a));
	ck_assert(cached(b) && cached(x) && cached(y) && cached(z));
	kv_store_put(S, &rb);
	kv_store_put(S, &ry);
}
END_TEST

START_TEST(test_all_pinned_enospc)
{
	uint8_t h[5][KVFS_HASH_LEN];
	struct kv_store_stats ss;
	struct kv_ref r[4];
	uint64_t lease;
	uint32_t wh;

	for (int i = 0; i < 5; i++)
		tu_hash(h[i], (uint32_t)i, 4);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(tu_put_block(S, NS, h[i], NULL, 8), 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(kv_store_get(S, NS, h[i], &r[i]), 0);
	/* the fourth is pinned by a lease */
	ck_assert_int_eq(kv_store_match(S, NS, h + 3, 1, 60000, &lease), 1);
	ck_assert_int_eq(kv_store_create(S, NS, h[4], NULL, &wh), -ENOSPC);
	/* nothing sealed was lost */
	for (int i = 0; i < 4; i++)
		ck_assert(tu_verify(S, NS, h[i], 8));
	ck_assert_int_eq(kv_store_stats(S, &ss), 0);
	ck_assert_uint_eq(ss.total.evictions, 0);
	ck_assert_uint_eq(ss.total.blocks, 4);
	/* writers hold slots too: one writer and three pins fill it */
	ck_assert_int_eq(kv_store_lease_release(S, lease), 0);
	ck_assert_int_eq(kv_store_create(S, NS, h[4], NULL, &wh), 0);
	ck_assert(!cached(h[3]));
	ck_assert_int_eq(kv_store_create(S, NS, h[3], NULL, &wh), -ENOSPC);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(kv_store_put(S, &r[i]), 0);
	ck_assert_int_eq(kv_store_create(S, NS, h[3], NULL, &wh), 0);
}
END_TEST

START_TEST(test_evict_parent_then_child)
{
	uint8_t a[KVFS_HASH_LEN], b[KVFS_HASH_LEN], c[KVFS_HASH_LEN];
	uint8_t d[KVFS_HASH_LEN], e[KVFS_HASH_LEN];

	tu_hash(a, 1, 5);
	tu_hash(b, 2, 5);
	tu_hash(c, 3, 5);
	tu_hash(d, 4, 5);
	tu_hash(e, 5, 5);
	ck_assert_int_eq(tu_put_block(S, NS, a, NULL, 8), 0);
	ck_assert_int_eq(tu_put_block(S, NS, b, a, 8), 0);
	/* explicit evict of a parent: the child's link must not dangle */
	ck_assert_int_eq(kv_store_evict(S, NS, a), 0);
	ck_assert_int_eq(tu_put_block(S, NS, c, NULL, 8), 0); /* a's slot */
	ck_assert_int_eq(tu_put_block(S, NS, d, c, 8), 0);
	/* b's stale link to a's slot must not uncount c's child d */
	ck_assert_int_eq(kv_store_evict(S, NS, b), 0);
	ck_assert_int_eq(tu_put_block(S, NS, e, NULL, 8), 0);
	ck_assert_int_eq(tu_put_block(S, NS, a, NULL, 8), 0);
	ck_assert_int_eq(tu_put_block(S, NS, b, NULL, 8), 0);
	/* four slots: c, d, e, a -> b evicts the LRU leaf d, keeps c */
	ck_assert(cached(c));
	ck_assert(!cached(d));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("evict");
	TCase *tc = tcase_create("core");

	tu_init("evict");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_plain_lru);
	tcase_add_test(tc, test_leaves_first);
	tcase_add_test(tc, test_inner_when_no_leaf_free);
	tcase_add_test(tc, test_all_pinned_enospc);
	tcase_add_test(tc, test_evict_parent_then_child);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
