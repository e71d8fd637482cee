/*
 * fuse_inode.c - fuse/inode.h's contract: one ino per key while the kernel
 * holds it, lookup counts, forget, unhash, inos never reused, growth, the
 * block snapshot, and concurrent use.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/inode.h"

static void hash_of(uint32_t k, uint8_t h[KVFS_HASH_LEN])
{
	memset(h, 0, KVFS_HASH_LEN);
	memcpy(h, &k, sizeof(k));
	h[31] = (uint8_t)(k * 7);
}

START_TEST(test_same_key_same_ino)
{
	struct inode_table *t;
	uint8_t h[KVFS_HASH_LEN];
	uint64_t a, b, c;
	struct inode_info in;

	ck_assert_int_eq(inode_table_new(&t), 0);
	hash_of(1, h);
	ck_assert_int_eq(inode_lookup(t, INODE_BLOCK, 3, h, &a), 0);
	ck_assert_int_eq(inode_lookup(t, INODE_BLOCK, 3, h, &b), 0);
	ck_assert_uint_eq(a, b);
	ck_assert_uint_ge(a, INODE_FIRST);
	/* another namespace, another kind: other inos */
	ck_assert_int_eq(inode_lookup(t, INODE_BLOCK, 4, h, &c), 0);
	ck_assert_uint_ne(a, c);
	ck_assert_int_eq(inode_lookup(t, INODE_NS, 3, NULL, &c), 0);
	ck_assert_uint_ne(a, c);
	ck_assert_int_eq(inode_get(t, a, &in), 0);
	ck_assert_int_eq(in.kind, INODE_BLOCK);
	ck_assert_uint_eq(in.ns, 3);
	ck_assert_mem_eq(in.hash, h, KVFS_HASH_LEN);
	ck_assert(in.hashed);
	ck_assert_uint_eq(inode_find(t, INODE_BLOCK, 3, h), a);
	ck_assert_uint_eq(inode_count(t), 3);
	ck_assert_int_eq(inode_lookup(t, INODE_BLOCK, 3, NULL, &c), -EINVAL);
	inode_table_free(t);
}
END_TEST

START_TEST(test_forget_counts)
{
	struct inode_table *t;
	uint8_t h[KVFS_HASH_LEN];
	uint64_t a, b;
	struct inode_info in;

	ck_assert_int_eq(inode_table_new(&t), 0);
	hash_of(2, h);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(inode_lookup(t, INODE_BLOCK, 1, h, &a), 0);
	inode_forget(t, a, 2);
	ck_assert_int_eq(inode_get(t, a, &in), 0);
	inode_unlookup(t, a);
	ck_assert_int_eq(inode_get(t, a, &in), -ENOENT);
	ck_assert_uint_eq(inode_find(t, INODE_BLOCK, 1, h), 0);
	/* the key comes back with a new ino: never reused */
	ck_assert_int_eq(inode_lookup(t, INODE_BLOCK, 1, h, &b), 0);
	ck_assert_uint_gt(b, a);
	/* forgets on fixed inos and unknown ones are ignored */
	inode_forget(t, 1, 1);
	inode_forget(t, b + 1000, 1);
	inode_forget(t, b, 100); /* more than counted: gone, no underflow */
	ck_assert_int_eq(inode_get(t, b, &in), -ENOENT);
	ck_assert_uint_eq(inode_count(t), 0);
	inode_table_free(t);
}
END_TEST

START_TEST(test_unhash)
{
	struct inode_table *t;
	uint8_t h[KVFS_HASH_LEN];
	uint64_t a, b;
	struct inode_info in;

	ck_assert_int_eq(inode_table_new(&t), 0);
	hash_of(3, h);
	ck_assert_int_eq(inode_lookup(t, INODE_BLOCK, 1, h, &a), 0);
	ck_assert_int_eq(inode_set_attr(t, a, 4096, 77), 0);
	ck_assert_int_eq(inode_open(t, a, 1), 0);
	inode_unhash(t, a);
	/* the old ino still answers, for the kernel's remaining refs */
	ck_assert_int_eq(inode_get(t, a, &in), 0);
	ck_assert(!in.hashed);
	ck_assert(in.have_attr);
	ck_assert_uint_eq(in.size, 4096);
	ck_assert_uint_eq(in.seal_ns, 77);
	ck_assert_uint_eq(in.nopen, 1);
	/* but the name maps to a fresh one */
	ck_assert_uint_eq(inode_find(t, INODE_BLOCK, 1, h), 0);
	ck_assert_int_eq(inode_lookup(t, INODE_BLOCK, 1, h, &b), 0);
	ck_assert_uint_ne(a, b);
	inode_unhash(t, a); /* twice: harmless */
	inode_forget(t, a, 1);
	ck_assert_int_eq(inode_get(t, a, &in), -ENOENT);
	ck_assert_int_eq(inode_get(t, b, &in), 0);
	ck_assert(in.hashed);
	inode_table_free(t);
}
END_TEST

/* a private entry: the key keeps its own; more lookups by ino, and a
 * lookup of an entry forgotten is ENOENT (inos are never reused) */
START_TEST(test_private)
{
	struct inode_table *t;
	struct inode_info in;
	uint8_t h[KVFS_HASH_LEN];
	uint64_t pub, priv;

	ck_assert_int_eq(inode_table_new(&t), 0);
	hash_of(9, h);
	ck_assert_int_eq(inode_lookup(t, INODE_BLOCK, 1, h, &pub), 0);
	ck_assert_int_eq(inode_lookup_private(t, INODE_BLOCK, 1, h, &priv), 0);
	ck_assert_uint_ne(pub, priv);
	ck_assert_uint_eq(inode_find(t, INODE_BLOCK, 1, h), pub);
	ck_assert_int_eq(inode_get(t, priv, &in), 0);
	ck_assert(!in.hashed);
	ck_assert_int_eq(inode_lookup_ino(t, priv), 0);
	inode_forget(t, priv, 1);
	ck_assert_int_eq(inode_get(t, priv, &in), 0); /* one lookup left */
	inode_forget(t, priv, 1);
	ck_assert_int_eq(inode_get(t, priv, &in), -ENOENT);
	ck_assert_int_eq(inode_lookup_ino(t, priv), -ENOENT);
	/* taking the key over (a publication) unhashes the public entry */
	ck_assert_int_eq(inode_lookup_private(t, INODE_BLOCK, 1, h, &priv), 0);
	ck_assert_int_eq(inode_rekey(t, priv, h), 1);
	ck_assert_uint_eq(inode_find(t, INODE_BLOCK, 1, h), priv);
	ck_assert_int_eq(inode_get(t, pub, &in), 0);
	ck_assert(!in.hashed);
	inode_table_free(t);
}
END_TEST

START_TEST(test_block_state)
{
	struct inode_table *t;
	uint8_t h[KVFS_HASH_LEN];
	uint64_t a, d;
	struct inode_info in;

	ck_assert_int_eq(inode_table_new(&t), 0);
	hash_of(4, h);
	ck_assert_int_eq(inode_lookup(t, INODE_BLOCK, 1, h, &a), 0);
	ck_assert_int_eq(inode_lookup(t, INODE_NS, 1, NULL, &d), 0);
	ck_assert_int_eq(inode_set_writing(t, a, true), 0);
	ck_assert_int_eq(inode_get(t, a, &in), 0);
	ck_assert(in.writing);
	ck_assert_int_eq(inode_set_writing(t, d, true), -EINVAL);
	ck_assert_int_eq(inode_set_attr(t, 9999, 1, 1), -ENOENT);
	ck_assert_int_eq(inode_open(t, a, 1), 0);
	ck_assert_int_eq(inode_open(t, a, -1), 0);
	ck_assert_int_eq(inode_open(t, a, -1), 0); /* no underflow */
	ck_assert_int_eq(inode_get(t, a, &in), 0);
	ck_assert_uint_eq(in.nopen, 0);
	inode_table_free(t);
}
END_TEST

/* a miss is remembered only while writing, and taken once (seal_locked) */
START_TEST(test_missed)
{
	struct inode_table *t;
	uint8_t h[KVFS_HASH_LEN], other[KVFS_HASH_LEN];
	uint64_t a;

	ck_assert_int_eq(inode_table_new(&t), 0);
	hash_of(5, h);
	hash_of(6, other);
	ck_assert_int_eq(inode_lookup(t, INODE_BLOCK, 1, h, &a), 0);
	inode_note_miss(t, 1, h); /* not writing: nothing to remember */
	ck_assert(!inode_take_missed(t, a));
	ck_assert_int_eq(inode_set_writing(t, a, true), 0);
	ck_assert(!inode_take_missed(t, a)); /* nobody looked */
	inode_note_miss(t, 1, other);	     /* another name */
	inode_note_miss(t, 2, h);	     /* another namespace */
	ck_assert(!inode_take_missed(t, a));
	inode_note_miss(t, 1, h);
	ck_assert_int_eq(inode_set_writing(t, a, false), 0);
	ck_assert(inode_take_missed(t, a));
	ck_assert(!inode_take_missed(t, a)); /* taken */
	/* a new write of the name starts clean */
	inode_note_miss(t, 1, h);
	ck_assert_int_eq(inode_set_writing(t, a, true), 0);
	inode_note_miss(t, 1, h);
	ck_assert_int_eq(inode_set_writing(t, a, true), 0);
	ck_assert(!inode_take_missed(t, a));
	/* an unhashed entry is no longer found by its key */
	inode_unhash(t, a);
	inode_note_miss(t, 1, h);
	ck_assert(!inode_take_missed(t, a));
	ck_assert(!inode_take_missed(t, 9999));
	inode_table_free(t);
}
END_TEST

START_TEST(test_growth_and_snapshot)
{
	enum { N = 5000 };
	struct inode_table *t;
	uint8_t h[KVFS_HASH_LEN];
	static uint64_t ino[N];
	struct inode_ref *v;
	uint64_t x;
	long n;

	ck_assert_int_eq(inode_table_new(&t), 0);
	for (uint32_t k = 0; k < N; k++) {
		hash_of(k, h);
		ck_assert_int_eq(inode_lookup(t, INODE_BLOCK, 1, h, &ino[k]),
				 0);
	}
	ck_assert_uint_eq(inode_count(t), N);
	for (uint32_t k = 0; k < N; k++) {
		hash_of(k, h);
		ck_assert_uint_eq(inode_find(t, INODE_BLOCK, 1, h), ino[k]);
	}
	/* the snapshot skips unhashed and writing entries */
	inode_unhash(t, ino[0]);
	inode_set_writing(t, ino[1], true);
	ck_assert_int_eq(inode_lookup(t, INODE_NS, 1, NULL, &x), 0);
	n = inode_blocks(t, &v);
	ck_assert_int_eq(n, N - 2);
	for (long i = 0; i < n; i++)
		ck_assert(v[i].ino != ino[0] && v[i].ino != ino[1]);
	free(v);
	for (uint32_t k = 0; k < N; k++)
		inode_forget(t, ino[k], 1);
	inode_forget(t, x, 1);
	ck_assert_uint_eq(inode_count(t), 0);
	ck_assert_int_eq(inode_blocks(t, &v), 0);
	ck_assert_ptr_null(v);
	inode_table_free(t);
}
END_TEST

struct worker {
	struct inode_table *t;
	uint32_t base;
};

/* lookups and forgets of shared and own keys, racing */
static void *churn(void *arg)
{
	struct worker *w = arg;
	uint8_t h[KVFS_HASH_LEN];
	uint64_t ino;

	for (uint32_t i = 0; i < 20000; i++) {
		hash_of(i % 64 + (i & 1 ? w->base : 0), h);
		if (inode_lookup(w->t, INODE_BLOCK, 1, h, &ino) != 0)
			return (void *)1;
		inode_forget(w->t, ino, 1);
	}
	return NULL;
}

START_TEST(test_concurrent)
{
	struct worker w[4];
	pthread_t th[4];
	struct inode_table *t;

	ck_assert_int_eq(inode_table_new(&t), 0);
	for (int i = 0; i < 4; i++) {
		w[i].t = t;
		w[i].base = 1000u * (uint32_t)(i + 1);
		pthread_create(&th[i], NULL, churn, &w[i]);
	}
	for (int i = 0; i < 4; i++) {
		void *rv;

		pthread_join(th[i], &rv);
		ck_assert_ptr_null(rv);
	}
	ck_assert_uint_eq(inode_count(t), 0);
	inode_table_free(t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("inode");
	TCase *tc = tcase_create("table");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_same_key_same_ino);
	tcase_add_test(tc, test_forget_counts);
	tcase_add_test(tc, test_unhash);
	tcase_add_test(tc, test_private);
	tcase_add_test(tc, test_block_state);
	tcase_add_test(tc, test_missed);
	tcase_add_test(tc, test_growth_and_snapshot);
	tcase_add_test(tc, test_concurrent);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
