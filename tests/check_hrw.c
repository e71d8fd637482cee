/*
 * check_hrw.c - the placement contract of kvstore/cluster.h: HRW weights
 * and home sets.
 *
 * The pinned weights were computed with Python's hashlib, independently:
 *   sha256(id + b"\0" + ns + b"\0" + bytes(range(32))).digest()[:8],
 *   big-endian.
 * If they change, every cluster moves every block: a format break.
 */
#include "config.h"

#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvstore/cluster.h"
#include "src/common/hash.h"

#define NS "llama3-8b"
#define NHASH 2000

static void hash_i(unsigned i, uint8_t h[KVFS_HASH_LEN])
{
	/* any spread of hashes will do: chain a counter through SHA-256 */
	uint32_t tok = i;

	kvfs_hash_chain("hrw-test", 1, &tok, 1, (uint8_t(*)[KVFS_HASH_LEN])h,
			1);
}

static void nodes_make(struct kv_node_info *v, size_t n, const char *fmt)
{
	memset(v, 0, n * sizeof(*v));
	for (size_t i = 0; i < n; i++)
		snprintf(v[i].id, sizeof(v[i].id), fmt, (unsigned)i);
}

/* the home set of nodes, as ids, in out (r strings of id size) */
static size_t home_ids(const struct kv_node_info *v, size_t n,
		       const uint8_t h[KVFS_HASH_LEN], size_t r,
		       char (*out)[KV_NODE_ID_MAX + 1])
{
	size_t idx[16];
	size_t k = kv_hrw_pick(v, n, NS, h, r, idx);

	for (size_t i = 0; i < k; i++)
		memcpy(out[i], v[idx[i]].id, sizeof(out[i]));
	return k;
}

static bool ids_has(char (*ids)[KV_NODE_ID_MAX + 1], size_t k, const char *id)
{
	for (size_t i = 0; i < k; i++)
		if (strcmp(ids[i], id) == 0)
			return true;
	return false;
}

START_TEST(test_weight_pinned)
{
	uint8_t h[KVFS_HASH_LEN];

	for (int i = 0; i < KVFS_HASH_LEN; i++)
		h[i] = (uint8_t)i;
	ck_assert_uint_eq(kv_hrw_weight("node-a", NS, h),
			  0xb71a8fda30780fc3ull);
	ck_assert_uint_eq(kv_hrw_weight("node-b", NS, h),
			  0x8ced49dd2a816fb6ull);
	/* the separators matter: moving a byte across one changes it */
	ck_assert_uint_ne(kv_hrw_weight("node-a", NS, h),
			  kv_hrw_weight("node-", "a" NS, h));
}
END_TEST

/* pick(r) is the first r of pick(n), a permutation, best weight first */
START_TEST(test_pick_permutation_prefix)
{
	struct kv_node_info v[7];
	uint8_t h[KVFS_HASH_LEN];
	size_t all[7], some[7];

	nodes_make(v, 7, "n%u");
	for (unsigned t = 0; t < 200; t++) {
		bool seen[7] = { false };

		hash_i(t, h);
		ck_assert_uint_eq(kv_hrw_pick(v, 7, NS, h, 7, all), 7);
		for (size_t i = 0; i < 7; i++) {
			ck_assert_uint_lt(all[i], 7);
			ck_assert(!seen[all[i]]);
			seen[all[i]] = true;
			if (i > 0)
				ck_assert_uint_ge(
					kv_hrw_weight(v[all[i - 1]].id, NS, h),
					kv_hrw_weight(v[all[i]].id, NS, h));
		}
		for (size_t r = 0; r <= 7; r++) {
			ck_assert_uint_eq(kv_hrw_pick(v, 7, NS, h, r, some), r);
			ck_assert(memcmp(some, all, r * sizeof(*some)) == 0);
		}
	}
}
END_TEST

/* the set does not depend on where a node sits in the array */
START_TEST(test_pick_order_independent)
{
	struct kv_node_info v[5], rev[5];
	char a[3][KV_NODE_ID_MAX + 1], b[3][KV_NODE_ID_MAX + 1];
	uint8_t h[KVFS_HASH_LEN];

	nodes_make(v, 5, "node-%u");
	for (int i = 0; i < 5; i++)
		rev[i] = v[4 - i];
	for (unsigned t = 0; t < 200; t++) {
		hash_i(t, h);
		ck_assert_uint_eq(home_ids(v, 5, h, 3, a), 3);
		ck_assert_uint_eq(home_ids(rev, 5, h, 3, b), 3);
		ck_assert(memcmp(a, b, sizeof(a)) == 0);
	}
}
END_TEST

/* adding a node changes only the home sets that now contain it, and in
 * those only by that node coming in (the rest keep their order) */
START_TEST(test_add_node_moves_little)
{
	struct kv_node_info v[5];
	char before[2][KV_NODE_ID_MAX + 1], after[2][KV_NODE_ID_MAX + 1];
	uint8_t h[KVFS_HASH_LEN];
	unsigned moved = 0;

	nodes_make(v, 5, "node-%u");
	for (unsigned t = 0; t < NHASH; t++) {
		hash_i(t, h);
		home_ids(v, 4, h, 2, before);
		home_ids(v, 5, h, 2, after);
		if (!ids_has(after, 2, "node-4")) {
			ck_assert(memcmp(before, after, sizeof(before)) == 0);
			continue;
		}
		moved++;
		/* the old members still in the set keep their relative order */
		if (strcmp(after[0], "node-4") == 0)
			ck_assert_str_eq(after[1], before[0]);
		else
			ck_assert_str_eq(after[0], before[0]);
	}
	/* about 2/5 of the sets gain the new node */
	ck_assert_uint_gt(moved, NHASH * 3 / 10);
	ck_assert_uint_lt(moved, NHASH * 5 / 10);
}
END_TEST

/* removing a node changes only the home sets that contained it */
START_TEST(test_remove_node_moves_little)
{
	struct kv_node_info v[6], w[5];
	char before[3][KV_NODE_ID_MAX + 1], after[3][KV_NODE_ID_MAX + 1];
	uint8_t h[KVFS_HASH_LEN];

	nodes_make(v, 6, "node-%u");
	/* w: v without node-2 */
	for (int i = 0, j = 0; i < 6; i++)
		if (i != 2)
			w[j++] = v[i];
	for (unsigned t = 0; t < NHASH; t++) {
		hash_i(t, h);
		home_ids(v, 6, h, 3, before);
		home_ids(w, 5, h, 3, after);
		if (!ids_has(before, 3, "node-2")) {
			ck_assert(memcmp(before, after, sizeof(before)) == 0);
			continue;
		}
		/* the survivors stay, one newcomer comes in last */
		for (int i = 0; i < 3; i++)
			if (strcmp(before[i], "node-2") != 0)
				ck_assert(ids_has(after, 2, before[i]));
		ck_assert(!ids_has(before, 3, after[2]));
	}
}
END_TEST

/* r = 1 over 3 nodes, 30000 hashes: each within 10% of a third */
START_TEST(test_distribution)
{
	struct kv_node_info v[3];
	unsigned count[3] = { 0 };
	uint8_t h[KVFS_HASH_LEN];
	size_t idx;

	nodes_make(v, 3, "gpu-host-%u");
	for (unsigned t = 0; t < 30000; t++) {
		hash_i(t, h);
		ck_assert_uint_eq(kv_hrw_pick(v, 3, NS, h, 1, &idx), 1);
		count[idx]++;
	}
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_gt(count[i], 9000);
		ck_assert_uint_lt(count[i], 11000);
	}
}
END_TEST

START_TEST(test_r_bounds)
{
	struct kv_node_info v[3];
	uint8_t h[KVFS_HASH_LEN];
	size_t idx[8] = { 0 };

	nodes_make(v, 3, "n%u");
	hash_i(1, h);
	ck_assert_uint_eq(kv_hrw_pick(v, 3, NS, h, 8, idx), 3);
	ck_assert_uint_eq(kv_hrw_pick(v, 3, NS, h, 0, idx), 0);
	ck_assert_uint_eq(kv_hrw_pick(v, 0, NS, h, 2, idx), 0);
	ck_assert_uint_eq(kv_hrw_pick(v, 1, NS, h, 2, idx), 1);
	ck_assert_uint_eq(idx[0], 0);
}
END_TEST

/* more nodes than the stack holds: same answer as a pairwise ranking */
START_TEST(test_many_nodes)
{
	enum { N = 100 };
	static struct kv_node_info v[N];
	uint8_t h[KVFS_HASH_LEN];
	size_t idx[4];

	nodes_make(v, N, "rack1-node%03u");
	for (unsigned t = 0; t < 20; t++) {
		size_t best = 0;

		hash_i(t, h);
		ck_assert_uint_eq(kv_hrw_pick(v, N, NS, h, 4, idx), 4);
		for (size_t i = 1; i < N; i++)
			if (kv_hrw_weight(v[i].id, NS, h) >
			    kv_hrw_weight(v[best].id, NS, h))
				best = i;
		ck_assert_uint_eq(idx[0], best);
	}
}
END_TEST

/* equal ids (a broken membership) still give a total order: by index */
START_TEST(test_ties)
{
	struct kv_node_info v[3];
	uint8_t h[KVFS_HASH_LEN];
	size_t idx[3];

	memset(v, 0, sizeof(v));
	strcpy(v[0].id, "same");
	strcpy(v[1].id, "same");
	strcpy(v[2].id, "same");
	hash_i(7, h);
	ck_assert_uint_eq(kv_hrw_pick(v, 3, NS, h, 3, idx), 3);
	ck_assert_uint_eq(idx[0], 0);
	ck_assert_uint_eq(idx[1], 1);
	ck_assert_uint_eq(idx[2], 2);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hrw");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_weight_pinned);
	tcase_add_test(tc, test_pick_permutation_prefix);
	tcase_add_test(tc, test_pick_order_independent);
	tcase_add_test(tc, test_add_node_moves_little);
	tcase_add_test(tc, test_remove_node_moves_little);
	tcase_add_test(tc, test_distribution);
	tcase_add_test(tc, test_r_bounds);
	tcase_add_test(tc, test_many_nodes);
	tcase_add_test(tc, test_ties);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
