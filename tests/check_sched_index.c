/*
 * check_sched_index.c - sched/locality.h and sched/tab.h: holder sets from
 * insert/evict events, per-node prefixes, resets, growth to a million
 * blocks, and the table's backward-shift deletion against a reference.
 */
#include "config.h"

#include <string.h>

#include "tests/check_sched.h"
#include "sched/locality.h"
#include "sched/tab.h"

static struct sched_index *mk(uint32_t nnodes, size_t expect)
{
	struct sched_index *ix = NULL;

	ck_assert_int_eq(sched_index_create(nnodes, expect, &ix), 0);
	return ix;
}

START_TEST(test_insert_evict)
{
	struct sched_index *ix = mk(4, 16);

	ck_assert_int_eq(sched_index_insert(ix, 1, 42), 1);
	ck_assert_int_eq(sched_index_insert(ix, 1, 42), 0);
	ck_assert_int_eq(sched_index_insert(ix, 3, 42), 1);
	ck_assert_int_eq(sched_index_insert(ix, 4, 42), -EINVAL);
	ck_assert(sched_index_holds(ix, 1, 42));
	ck_assert(sched_index_holds(ix, 3, 42));
	ck_assert(!sched_index_holds(ix, 0, 42));
	ck_assert_uint_eq(sched_index_blocks(ix), 1);
	ck_assert_uint_eq(sched_index_node_blocks(ix, 1), 1);

	ck_assert_int_eq(sched_index_evict(ix, 1, 42), 1);
	ck_assert_int_eq(sched_index_evict(ix, 1, 42), 0);
	/* an evict for a block never seen is not an error */
	ck_assert_int_eq(sched_index_evict(ix, 2, 777), 0);
	ck_assert_int_eq(sched_index_evict(ix, 9, 42), -EINVAL);
	ck_assert_uint_eq(sched_index_blocks(ix), 1);
	ck_assert_int_eq(sched_index_evict(ix, 3, 42), 1);
	/* no holder left: the entry is gone */
	ck_assert_uint_eq(sched_index_blocks(ix), 0);
	ck_assert_uint_eq(sched_index_node_blocks(ix, 3), 0);
	ck_assert_int_eq(sched_index_create(0, 1, &ix), -EINVAL);
	sched_index_destroy(ix);
}
END_TEST

START_TEST(test_prefix)
{
	struct sched_index *ix = mk(3, 64);
	uint32_t lens[3], best_node = 99;
	uint64_t k[10];

	cs_chain(k, 10, 100);
	for (int i = 0; i < 5; i++)
		sched_index_insert(ix, 0, k[i]);
	for (int i = 0; i < 3; i++)
		sched_index_insert(ix, 1, k[i]);
	for (int i = 0; i < 10; i++)
		if (i != 5)
			sched_index_insert(ix, 2, k[i]);
	/* node 2 misses block 5: a prefix stops at the first miss */
	ck_assert_uint_eq(sched_index_prefix(ix, k, 10, lens, &best_node), 5);
	ck_assert_uint_eq(lens[0], 5);
	ck_assert_uint_eq(lens[1], 3);
	ck_assert_uint_eq(lens[2], 5);
	ck_assert_uint_eq(best_node, 0); /* the lowest of 0 and 2 */

	sched_index_insert(ix, 2, k[5]);
	ck_assert_uint_eq(sched_index_prefix(ix, k, 10, lens, &best_node), 10);
	ck_assert_uint_eq(lens[2], 10);
	ck_assert_uint_eq(best_node, 2);

	/* nothing held, or nothing asked */
	k[0] = 1;
	ck_assert_uint_eq(sched_index_prefix(ix, k, 10, lens, &best_node), 0);
	ck_assert_uint_eq(best_node, SCHED_NO_NODE);
	ck_assert_uint_eq(lens[0] + lens[1] + lens[2], 0);
	ck_assert_uint_eq(sched_index_prefix(ix, k, 0, lens, &best_node), 0);
	ck_assert_uint_eq(best_node, SCHED_NO_NODE);
	sched_index_destroy(ix);
}
END_TEST

START_TEST(test_prefix_union)
{
	struct sched_index *ix = mk(2, 64), *fl = mk(2, 64);
	uint32_t lens[2], ulens[2], best;
	uint64_t k[8];

	cs_chain(k, 8, 1);
	for (int i = 0; i < 3; i++)
		sched_index_insert(ix, 0, k[i]);
	/* queued on node 0: blocks 3..7 will be written there */
	for (int i = 3; i < 8; i++)
		sched_index_insert(fl, 0, k[i]);
	sched_index_insert(fl, 1, k[0]);
	ck_assert_uint_eq(sched_index_prefix2(ix, fl, k, 8, lens, ulens, &best),
			  3);
	ck_assert_uint_eq(best, 0);
	ck_assert_uint_eq(lens[0], 3);
	ck_assert_uint_eq(lens[1], 0);
	ck_assert_uint_eq(ulens[0], 8);
	ck_assert_uint_eq(ulens[1], 1);
	sched_index_destroy(ix);
	sched_index_destroy(fl);
}
END_TEST

/*
 * prefix2's in-flight lengths against a walk of one index holding both
 * (cached and in flight), over random holders: prompts with nothing in
 * flight, in flight on nodes that already hold the block, and in flight
 * past or within a node's cached prefix, with one word and four.
 */
START_TEST(test_prefix_union_fuzz)
{
	enum { K = 40 };
	static const uint32_t nn[] = { 1, 5, 64, 65, 248, SCHED_MAX_NODES };
	uint32_t lens[SCHED_MAX_NODES], ulens[SCHED_MAX_NODES];
	uint32_t both[SCHED_MAX_NODES], b1, b2;
	uint64_t x = 99, k[K];

	for (int t = 0; t < 300; t++) {
		uint32_t nnodes = nn[t % 6];
		struct sched_index *ix = mk(nnodes, 256), *fl = mk(nnodes, 256);
		struct sched_index *un = mk(nnodes, 256);

		cs_chain(k, K, 1000 * (uint64_t)t);
		for (int h = 0; h < 12; h++) {
			uint32_t node, from, to;

			x = x * 6364136223846793005ull + 1442695040888963407ull;
			node = (uint32_t)(x >> 33) % nnodes;
			from = h % 3 ? 0 : (uint32_t)(x >> 20) % K;
			to = (uint32_t)(x >> 40) % (K + 1);
			for (uint32_t i = from; i < to; i++) {
				sched_index_insert(h < 6 ? ix : fl, node, k[i]);
				sched_index_insert(un, node, k[i]);
			}
		}
		for (uint32_t n = 0; n <= K; n += 1 + n / 4) {
			ck_assert_uint_eq(
				sched_index_prefix2(ix, fl, k, n, lens, ulens,
						    &b1),
				sched_index_prefix(ix, k, n, both, &b2));
			ck_assert_uint_eq(b1, b2);
			ck_assert_mem_eq(lens, both, nnodes * sizeof(*lens));
			sched_index_prefix(un, k, n, both, NULL);
			ck_assert_mem_eq(ulens, both, nnodes * sizeof(*ulens));
		}
		sched_index_destroy(ix);
		sched_index_destroy(fl);
		sched_index_destroy(un);
	}
}
END_TEST

/* holder sets wider than one word */
START_TEST(test_many_nodes)
{
	struct sched_index *ix = mk(SCHED_MAX_NODES, 64);
	uint32_t lens[SCHED_MAX_NODES], best;
	uint64_t k[6];

	cs_chain(k, 6, 5000);
	for (int i = 0; i < 6; i++)
		sched_index_insert(ix, 200, k[i]);
	for (int i = 0; i < 4; i++)
		sched_index_insert(ix, 63, k[i]);
	sched_index_insert(ix, 64, k[0]);
	sched_index_insert(ix, SCHED_MAX_NODES - 1, k[0]);
	ck_assert_uint_eq(sched_index_prefix(ix, k, 6, lens, &best), 6);
	ck_assert_uint_eq(best, 200);
	ck_assert_uint_eq(lens[63], 4);
	ck_assert_uint_eq(lens[64], 1);
	ck_assert_uint_eq(lens[SCHED_MAX_NODES - 1], 1);
	ck_assert_uint_eq(lens[0], 0);
	ck_assert_int_eq(sched_index_insert(ix, SCHED_MAX_NODES, k[0]),
			 -EINVAL);
	sched_index_destroy(ix);
}
END_TEST

START_TEST(test_reset_node)
{
	struct sched_index *ix = mk(3, 16);

	for (uint64_t i = 0; i < 1000; i++) {
		sched_index_insert(ix, 1, i);
		if (i % 2)
			sched_index_insert(ix, 2, i);
	}
	ck_assert_int_eq(sched_index_reset_node(ix, 1), 1000);
	ck_assert_uint_eq(sched_index_node_blocks(ix, 1), 0);
	ck_assert_uint_eq(sched_index_node_blocks(ix, 2), 500);
	/* blocks only node 1 held are gone, node 2's stay */
	ck_assert_uint_eq(sched_index_blocks(ix), 500);
	for (uint64_t i = 0; i < 1000; i++) {
		ck_assert(!sched_index_holds(ix, 1, i));
		ck_assert(sched_index_holds(ix, 2, i) == (i % 2 == 1));
	}
	ck_assert_int_eq(sched_index_reset_node(ix, 0), 0);
	ck_assert_int_eq(sched_index_reset_node(ix, 3), -EINVAL);
	sched_index_destroy(ix);
}
END_TEST

/* sized for millions: growth from a tiny table keeps every block */
START_TEST(test_million)
{
	const uint64_t n = 1000000;
	struct sched_index *ix = mk(32, 16);
	uint32_t lens[32], best;
	uint64_t k[4];

	for (uint64_t i = 0; i < n; i++)
		ck_assert_int_eq(sched_index_insert(ix, (uint32_t)(i % 32), i),
				 1);
	ck_assert_uint_eq(sched_index_blocks(ix), n);
	for (uint64_t i = 0; i < n; i += 9973)
		ck_assert(sched_index_holds(ix, (uint32_t)(i % 32), i));
	/* block 32*j + 5 lives on node 5 */
	for (int i = 0; i < 4; i++)
		k[i] = 5 + 32 * (uint64_t)i;
	sched_index_insert(ix, 5, k[1]);
	sched_index_insert(ix, 5, k[2]);
	sched_index_insert(ix, 5, k[3]);
	ck_assert_uint_eq(sched_index_prefix(ix, k, 4, lens, &best), 4);
	ck_assert_uint_eq(best, 5);
	for (uint64_t i = 0; i < n; i++)
		ck_assert_int_eq(sched_index_evict(ix, (uint32_t)(i % 32), i),
				 1);
	ck_assert_uint_eq(sched_index_blocks(ix), 0);
	sched_index_destroy(ix);
}
END_TEST

/* random adds and deletes over a small key space, against a bitmap */
START_TEST(test_tab_fuzz)
{
	enum { KEYS = 3000, OPS = 300000 };
	static uint8_t ref[KEYS];
	struct sched_tab t;
	uint64_t x = 12345, *v;
	size_t n = 0;

	memset(ref, 0, sizeof(ref));
	ck_assert_int_eq(sched_tab_init(&t, 1, 8), 0);
	for (int op = 0; op < OPS; op++) {
		uint64_t key;

		x = x * 6364136223846793005ull + 1442695040888963407ull;
		key = (x >> 33) % KEYS;
		if ((x >> 20) & 1) {
			int rc = sched_tab_get(&t, key, &v);

			ck_assert_int_eq(rc, ref[key] ? 0 : 1);
			if (rc == 1)
				*v = key * 3 + 1;
			n += !ref[key];
			ref[key] = 1;
		} else {
			ck_assert_int_eq(sched_tab_del(&t, key),
					 ref[key] ? 0 : -ENOENT);
			n -= ref[key];
			ref[key] = 0;
		}
		if (op % 1000 == 0)
			for (uint64_t k = 0; k < KEYS; k++) {
				v = sched_tab_find(&t, k);
				ck_assert(!!v == ref[k]);
				ck_assert(!v || *v == k * 3 + 1);
			}
	}
	ck_assert_uint_eq(t.n, n);
	ck_assert_int_eq(sched_tab_init(&t, 0, 8), -EINVAL);
	sched_tab_release(&t);
}
END_TEST

START_TEST(test_key_from_hash)
{
	uint8_t h[KVFS_HASH_LEN];

	for (int i = 0; i < KVFS_HASH_LEN; i++)
		h[i] = (uint8_t)(i + 1);
	/* the first 8 bytes, little-endian */
	ck_assert_uint_eq(sched_key_from_hash(h), 0x0807060504030201ull);
	ck_assert_uint_eq(sched_tab_mix(0), 1);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("sched_index");
	TCase *tc = tcase_create("index");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_insert_evict);
	tcase_add_test(tc, test_prefix);
	tcase_add_test(tc, test_prefix_union);
	tcase_add_test(tc, test_prefix_union_fuzz);
	tcase_add_test(tc, test_many_nodes);
	tcase_add_test(tc, test_reset_node);
	tcase_add_test(tc, test_million);
	tcase_add_test(tc, test_tab_fuzz);
	tcase_add_test(tc, test_key_from_hash);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return cs_run(suite());
}
