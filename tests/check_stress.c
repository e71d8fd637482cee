/*
 * check_stress.c - several threads create, read, match, pin and evict on
 * one small store at once; the store's invariants are checked at the end
 * and every byte read is verified on the way.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>

#include "tests/testutil.h"

#define SLOT 4096
#define NSLOTS 48
#define KEYS 160 /* more names than slots: constant eviction */
#define THREADS 4
#define OPS 6000 /* per thread: bounded */

static struct kv_store *S;
static uint32_t NS;
static uint8_t H[KEYS][KVFS_HASH_LEN];

struct tstat {
	unsigned seals, hits, bad, enospc, matches;
};

static size_t key_len(int k)
{
	return 64 + (size_t)(k * 37) % (SLOT - 64);
}

static uint32_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return (uint32_t)(*x >> 11);
}

/* keys are chained in runs of 8: k's parent is k-1 unless k % 8 == 0 */
static const uint8_t *parent_of(int k)
{
	return k % 8 ? H[k - 1] : NULL;
}

static void op_write(struct tstat *t, int k)
{
	int rc = tu_put_block(S, NS, H[k], parent_of(k), key_len(k));

	if (rc == 0)
		t->seals++;
	else if (rc == -ENOSPC)
		t->enospc++;
	else if (rc != -EEXIST)
		t->bad++;
}

static void op_read(struct tstat *t, int k)
{
	uint8_t want[SLOT];
	struct kv_ref r;

	if (kv_store_get(S, NS, H[k], &r) < 0)
		return;
	tu_fill(want, key_len(k), H[k]);
	if (r.size != key_len(k) || memcmp(r.data, want, r.size))
		t->bad++;
	t->hits++;
	if (kv_store_put(S, &r))
		t->bad++;
}

/*
 * Match a run from its head.  Under a normal lease every matched block is
 * pinned: evicting it must fail with -EBUSY (or -ENOENT when another
 * thread unlinked it), never succeed.  Some leases are 1 ms long and left
 * to expire instead of being released.
 */
static void op_match(struct tstat *t, int k, uint64_t *x)
{
	int head = k - k % 8;
	uint32_t ms = rnd(x) % 4 ? 0 : 1;
	uint64_t lease;
	long n = kv_store_match(S, NS, (const uint8_t(*)[32])H[head], 8, ms,
				&lease);

	if (n < 0) {
		if (n != -EAGAIN)
			t->bad++;
		return;
	}
	t->matches++;
	if (ms)
		return;
	for (long i = 0; i < n; i++) {
		int rc = kv_store_evict(S, NS, H[head + i]);

		if (rc != -EBUSY && rc != -ENOENT)
			t->bad++;
	}
	if (lease && kv_store_lease_release(S, lease) < 0)
		t->bad++;
}

static void *worker(void *arg)
{
	struct tstat *t = arg;
	uint64_t x = 0x9e3779b97f4a7c15ull ^ (uintptr_t)arg;

	for (int i = 0; i < OPS; i++) {
		int k = (int)(rnd(&x) % KEYS);

		switch (rnd(&x) % 8) {
		case 0:
		case 1:
		case 2:
			op_write(t, k);
			break;
		case 3:
		case 4:
			op_read(t, k);
			break;
		case 5:
		case 6:
			op_match(t, k % (KEYS / 2), &x);
			break;
		default:
			/*
			 * Unlink only in the upper half, which is never
			 * matched: an unlinked-and-rewritten name is a new,
			 * unpinned block that op_match could rightly evict.
			 */
			if (k < KEYS / 2)
				kv_store_evict(S, NS, H[k]);
			else
				kv_store_remove(S, NS, H[k]);
		}
	}
	return NULL;
}

START_TEST(test_stress)
{
	struct tstat ts[THREADS] = { 0 };
	pthread_t th[THREADS];
	struct kv_store_stats ss;
	struct kv_stats ns;
	struct tu_paths p;
	uint64_t cached = 0, bytes = 0, seals = 0;

	tu_paths(&p);
	S = tu_open(&p, SLOT, NSLOTS);
	ck_assert_int_eq(kv_store_ns_create(S, "stress", 4, &NS), 0);
	for (int k = 0; k < KEYS; k++)
		tu_hash(H[k], (uint32_t)k, 42);
	for (int i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, worker, &ts[i]);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);

	for (int i = 0; i < THREADS; i++) {
		ck_assert_msg(ts[i].bad == 0, "thread %d saw %u bad results", i,
			      ts[i].bad);
		seals += ts[i].seals;
	}
	ck_assert_uint_gt(seals, NSLOTS); /* eviction really happened */

	/* let the 1 ms leases lapse, then everything must be unpinned */
	{
		struct timespec d = { 0, 5 * 1000000 };

		nanosleep(&d, NULL);
	}
	ck_assert_int_eq(kv_store_stats(S, &ss), 0);
	ck_assert_uint_eq(ss.leases, 0);
	ck_assert_uint_eq(ss.pinned, 0);
	ck_assert_uint_eq(ss.total.writing, 0);
	for (int k = 0; k < KEYS; k++) {
		struct kv_block_info bi;

		if (kv_store_stat(S, NS, H[k], &bi) == 0) {
			cached++;
			bytes += bi.size;
			ck_assert_uint_eq(bi.refs, 0);
			ck_assert(tu_verify(S, NS, H[k], key_len(k)));
		}
	}
	ck_assert_uint_eq(ss.total.blocks, cached);
	ck_assert_uint_eq(ss.total.bytes, bytes);
	ck_assert_uint_eq(ss.slots_free + cached, NSLOTS);
	ck_assert_uint_eq(ss.total.seals, seals);
	/* blocks = seals - evictions - removals */
	ck_assert_uint_eq(
		ss.total.seals - ss.total.evictions - ss.total.removed, cached);
	ck_assert_int_eq(kv_store_ns_stats(S, NS, &ns), 0);
	ck_assert_int_eq(kv_store_stats(S, &ss), 0);
	ck_assert_uint_eq(ns.blocks, cached);
	ck_assert_uint_eq(ns.hits, ss.total.hits);
	ck_assert_uint_eq(ns.misses, ss.total.misses);
	ck_assert_uint_eq(ns.evictions, ss.total.evictions);

	/* everything cached survives a reopen */
	kv_store_close(S);
	S = tu_open(&p, SLOT, NSLOTS);
	ck_assert_int_eq(kv_store_stats(S, &ss), 0);
	ck_assert_uint_eq(ss.recovered, cached);
	ck_assert_uint_eq(ss.recovery_dropped, 0);
	kv_store_close(S);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stress");
	TCase *tc = tcase_create("threads");

	tu_init("stress");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_stress);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
