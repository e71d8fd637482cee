/* check_store.c - kvstore/store.h: block life, refs, leases, ns, stats */
#include "config.h"

#include <errno.h>
#include <time.h>

#include "src/common/crc32c.h"
#include "tests/testutil.h"

#define SLOT 4096

static struct tu_paths P;
static struct kv_store *S;
static uint32_t NS;

static void setup(void)
{
	tu_paths(&P);
	S = tu_open(&P, SLOT, 8);
	ck_assert_int_eq(kv_store_ns_create(S, "m", 16, &NS), 0);
}

static void teardown(void)
{
	kv_store_close(S);
}

static void msleep(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

START_TEST(test_block_life)
{
	uint8_t h[KVFS_HASH_LEN], buf[SLOT];
	struct kv_block_info bi;
	struct kv_ref ref;
	uint32_t wh, wh2;
	uint64_t sz;

	tu_hash(h, 1, 0);
	ck_assert_int_eq(kv_store_create(S, NS, h, NULL, &wh), 0);
	/* invisible while written, but the name is taken */
	ck_assert_int_eq(kv_store_get(S, NS, h, &ref), -ENOENT);
	ck_assert_int_eq(kv_store_lookup(S, NS, h), 0);
	ck_assert_int_eq(kv_store_stat(S, NS, h, &bi), -ENOENT);
	ck_assert_int_eq(
		kv_store_match(S, NS, (const uint8_t(*)[32])h, 1, 0, NULL), 0);
	ck_assert_int_eq(kv_store_create(S, NS, h, NULL, &wh2), -EEXIST);
	tu_fill(buf, sizeof(buf), h);
	ck_assert_int_eq(kv_store_write(S, wh, 100, buf + 100, 200), 0);
	ck_assert_int_eq(kv_store_write(S, wh, 0, buf, 100), 0);
	ck_assert_int_eq(kv_store_wsize(S, wh, &sz), 0);
	ck_assert_uint_eq(sz, 300);
	/* past the slot a block spills (test_spill); past the whole
	 * capacity (8 slots) it cannot be, and stays as it was */
	ck_assert_int_eq(kv_store_write(S, wh, 8 * SLOT - 1, buf, 2), -EFBIG);
	ck_assert_int_eq(kv_store_write(S, wh, 8 * SLOT + 1, buf, 0), -EFBIG);
	ck_assert_int_eq(kv_store_set_size(S, wh, 8 * SLOT + 1), -EFBIG);
	ck_assert_int_eq(kv_store_seal(S, wh), 0);

	/* sealed: immutable, visible, second create refused */
	ck_assert_int_eq(kv_store_write(S, wh, 0, buf, 1), -EINVAL);
	ck_assert_int_eq(kv_store_seal(S, wh), -EINVAL);
	ck_assert_int_eq(kv_store_abort(S, wh), -EINVAL);
	ck_assert_int_eq(kv_store_create(S, NS, h, NULL, &wh2), -EEXIST);
	ck_assert_int_eq(kv_store_stat(S, NS, h, &bi), 0);
	ck_assert_uint_eq(bi.size, 300);
	ck_assert_uint_eq(bi.refs, 0);
	ck_assert(!bi.has_parent);
	ck_assert_uint_ne(bi.seal_ns, 0);
	ck_assert(tu_verify(S, NS, h, 300));
	/* the same hash in another namespace is another block */
	{
		uint32_t ns2;

		ck_assert_int_eq(kv_store_ns_create(S, "m2", 16, &ns2), 0);
		ck_assert_int_eq(kv_store_lookup(S, ns2, h), 0);
		ck_assert_int_eq(tu_put_block(S, ns2, h, NULL, 10), 0);
		ck_assert(tu_verify(S, ns2, h, 10));
		ck_assert(tu_verify(S, NS, h, 300));
	}
}
END_TEST

/*
 * A block bigger than a slot: its bytes move to a spill file of its own
 * (pool.h) when a write crosses the slot, it is read like any other,
 * survives a reopen, and evicting it removes the file and gives its
 * bytes back to the capacity, which bigger blocks evict others to get.
 */
START_TEST(test_spill)
{
	uint8_t h[KVFS_HASH_LEN], g[KVFS_HASH_LEN], buf[3 * SLOT];
	struct kv_store_stats ss;
	struct kv_block_info bi;
	struct kv_ref ref;
	char path[4200];
	uint32_t wh, slot;
	uint64_t n, used;

	tu_hash(h, 9, 0);
	tu_fill(buf, sizeof(buf), h);
	ck_assert_int_eq(kv_store_create(S, NS, h, NULL, &wh), 0);
	slot = wh;
	ck_assert_int_eq(kv_store_write(S, wh, 0, buf, SLOT), 0);
	ck_assert_ptr_nonnull(kv_store_wptr(S, wh));
	ck_assert_int_eq(kv_store_write(S, wh, SLOT, buf + SLOT, 2 * SLOT), 0);
	ck_assert_ptr_null(kv_store_wptr(S, wh)); /* spilled */
	ck_assert_int_eq(kv_store_stats(S, &ss), 0);
	ck_assert_uint_eq(ss.spilled, 1);
	ck_assert_uint_ge(ss.used, 3 * SLOT);
	ck_assert_int_eq(kv_store_seal(S, wh), 0);
	ck_assert_int_eq(kv_store_get(S, NS, h, &ref), 0);
	ck_assert_uint_eq(ref.size, 3 * SLOT);
	ck_assert_int_eq(memcmp(ref.data, buf, sizeof(buf)), 0);
	ck_assert_int_eq(kv_store_put(S, &ref), 0);
	/* its file, under the pool's spill directory, survives a reopen */
	snprintf(path, sizeof(path), "%s.d/%08x", P.pool, slot);
	ck_assert_int_eq(access(path, F_OK), 0);
	kv_store_close(S);
	S = tu_open(&P, SLOT, 8);
	ck_assert(tu_verify(S, NS, h, 3 * SLOT));
	ck_assert_int_eq(kv_store_stats(S, &ss), 0);
	ck_assert_uint_eq(ss.spilled, 1);
	ck_assert_uint_eq(ss.used, 3 * SLOT);
	/* blocks in slots fill the rest; a second big one evicts them */
	for (uint32_t i = 0; i < 5; i++) {
		tu_hash(g, 100 + i, 0);
		ck_assert_int_eq(tu_put_block(S, NS, g, NULL, 100), 0);
	}
	tu_hash(g, 200, 0);
	ck_assert_int_eq(kv_store_create(S, NS, g, NULL, &wh), 0);
	ck_assert_int_eq(kv_store_set_size(S, wh, 4 * SLOT), 0);
	ck_assert_int_eq(kv_store_seal(S, wh), 0);
	ck_assert_int_eq(kv_store_stats(S, &ss), 0);
	ck_assert_uint_gt(ss.total.evictions, 0);
	ck_assert_uint_le(ss.used, ss.capacity);
	ck_assert_int_eq(kv_store_stat(S, NS, g, &bi), 0);
	ck_assert_uint_eq(bi.size, 4 * SLOT);
	/* evicted: the file goes, and its bytes */
	snprintf(path, sizeof(path), "%s.d/%08x", P.pool, wh);
	ck_assert_int_eq(access(path, F_OK), 0);
	n = ss.spilled;
	used = ss.used;
	ck_assert_int_eq(kv_store_evict(S, NS, g), 0);
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert_int_eq(kv_store_stats(S, &ss), 0);
	ck_assert_uint_eq(ss.spilled, n - 1);
	ck_assert_uint_eq(ss.used, used - 4 * SLOT);
}
END_TEST

START_TEST(test_zero_copy_and_abort)
{
	uint8_t h[KVFS_HASH_LEN], g[KVFS_HASH_LEN];
	struct kv_store_stats ss;
	uint32_t wh;
	uint8_t *p;

	tu_hash(h, 2, 0);
	ck_assert_int_eq(kv_store_create(S, NS, h, NULL, &wh), 0);
	p = kv_store_wptr(S, wh);
	ck_assert_ptr_nonnull(p);
	tu_fill(p, SLOT, h);
	ck_assert_int_eq(kv_store_set_size(S, wh, SLOT), 0);
	ck_assert_int_eq(kv_store_seal(S, wh), 0);
	ck_assert_ptr_null(kv_store_wptr(S, wh));
	ck_assert(tu_verify(S, NS, h, SLOT));

	tu_hash(g, 3, 0);
	ck_assert_int_eq(kv_store_create(S, NS, g, NULL, &wh), 0);
	ck_assert_int_eq(kv_store_stats(S, &ss), 0);
	ck_assert_uint_eq(ss.total.writing, 1);
	ck_assert_uint_eq(ss.slots_free, 6);
	ck_assert_int_eq(kv_store_abort(S, wh), 0);
	ck_assert_int_eq(kv_store_lookup(S, NS, g), 0);
	ck_assert_int_eq(kv_store_stats(S, &ss), 0);
	ck_assert_uint_eq(ss.total.writing, 0);
	ck_assert_uint_eq(ss.slots_free, 7);
	/* the name is free again */
	ck_assert_int_eq(tu_put_block(S, NS, g, NULL, 5), 0);
}
END_TEST

START_TEST(test_refs_and_remove)
{
	uint8_t h[KVFS_HASH_LEN];
	struct kv_ref r1, r2, stale;
	struct kv_store_stats ss;

	tu_hash(h, 4, 0);
	ck_assert_int_eq(tu_put_block(S, NS, h, NULL, 64), 0);
	ck_assert_int_eq(kv_store_get(S, NS, h, &r1), 0);
	ck_assert_int_eq(kv_store_get(S, NS, h, &r2), 0);
	ck_assert_int_eq(kv_store_evict(S, NS, h), -EBUSY);
	stale = r1;
	ck_assert_int_eq(kv_store_put(S, &r1), 0);
	ck_assert_int_eq(kv_store_put(S, &r1), -EINVAL); /* double put */
	ck_assert_int_eq(kv_store_evict(S, NS, h), -EBUSY);
	/* unlink while referenced: name gone, bytes still readable */
	ck_assert_int_eq(kv_store_remove(S, NS, h), 0);
	ck_assert_int_eq(kv_store_lookup(S, NS, h), 0);
	ck_assert_int_eq(kv_store_remove(S, NS, h), -ENOENT);
	ck_assert_int_eq(kv_store_stats(S, &ss), 0);
	ck_assert_uint_eq(ss.slots_free, 7);
	ck_assert_uint_eq(ss.total.blocks, 0);
	ck_assert_uint_eq(ss.total.removed, 1);
	ck_assert_uint_eq(((const uint8_t *)r2.data)[0],
			  ((const uint8_t *)stale.data)[0]);
	/* a new block of the same name can be made meanwhile */
	ck_assert_int_eq(tu_put_block(S, NS, h, NULL, 32), 0);
	ck_assert_int_eq(kv_store_put(S, &r2), 0);
	ck_assert_int_eq(kv_store_stats(S, &ss), 0);
	ck_assert_uint_eq(ss.slots_free, 7);
	ck_assert(tu_verify(S, NS, h, 32));
	/* a stale ref from before the slot was reused is refused */
	stale.gen--;
	ck_assert_int_eq(kv_store_put(S, &stale), -EINVAL);
	ck_assert_int_eq(kv_store_evict(S, NS, h), 0);
	ck_assert_int_eq(kv_store_evict(S, NS, h), -ENOENT);
}
END_TEST

static void chain(uint8_t (*h)[KVFS_HASH_LEN], int n, uint32_t salt)
{
	for (int i = 0; i < n; i++) {
		tu_hash(h[i], (uint32_t)i, salt);
		ck_assert_int_eq(
			tu_put_block(S, NS, h[i], i ? h[i - 1] : NULL, 100), 0);
	}
}

START_TEST(test_match_and_leases)
{
	uint8_t h[6][KVFS_HASH_LEN], q[6][KVFS_HASH_LEN];
	struct kv_store_stats ss;
	uint64_t lease, l2;

	chain(h, 4, 7);
	memcpy(q, h, sizeof(q));
	tu_hash(q[4], 99, 99);
	tu_hash(q[5], 100, 99);
	ck_assert_int_eq(kv_store_match(S, NS, q, 6, 0, NULL), 4);
	ck_assert_int_eq(kv_store_match(S, NS, q, 0, 0, NULL), 0);
	ck_assert_int_eq(kv_store_match(S, NS, q + 4, 2, 0, &lease), 0);
	ck_assert_uint_eq(lease, 0);
	ck_assert_int_eq(kv_store_match(S, NS, q, 3, 0, &lease), 3);
	ck_assert_uint_ne(lease, 0);
	ck_assert_int_eq(kv_store_evict(S, NS, h[0]), -EBUSY);
	ck_assert_int_eq(kv_store_evict(S, NS, h[2]), -EBUSY);
	ck_assert_int_eq(kv_store_stats(S, &ss), 0);
	ck_assert_uint_eq(ss.leases, 1);
	ck_assert_uint_eq(ss.pinned, 3);
	ck_assert_int_eq(kv_store_lease_renew(S, lease, 60000), 0);
	ck_assert_int_eq(kv_store_lease_release(S, lease), 0);
	ck_assert_int_eq(kv_store_lease_release(S, lease), -ENOENT);
	ck_assert_int_eq(kv_store_lease_renew(S, lease, 10), -ENOENT);
	ck_assert_int_eq(kv_store_evict(S, NS, h[2]), 0);
	ck_assert_int_eq(kv_store_match(S, NS, q, 6, 0, NULL), 2);

	/* a lease expires on its own */
	ck_assert_int_eq(kv_store_match(S, NS, q, 2, 30, &l2), 2);
	ck_assert_int_eq(kv_store_evict(S, NS, h[1]), -EBUSY);
	msleep(60);
	ck_assert_int_eq(kv_store_evict(S, NS, h[1]), 0);
	ck_assert_int_eq(kv_store_lease_release(S, l2), -ENOENT);
	ck_assert_int_eq(kv_store_stats(S, &ss), 0);
	ck_assert_uint_eq(ss.leases, 0);
	ck_assert_uint_eq(ss.pinned, 0);
	/* explicit sweep expires too */
	ck_assert_int_eq(kv_store_match(S, NS, q, 1, 20, &l2), 1);
	msleep(40);
	kv_store_lease_sweep(S);
	ck_assert_int_eq(kv_store_stats(S, &ss), 0);
	ck_assert_uint_eq(ss.pinned, 0);
}
END_TEST

START_TEST(test_long_match_lease)
{
	enum { N = 100 };
	uint8_t(*h)[KVFS_HASH_LEN] = malloc(sizeof(*h) * N);
	struct kv_store *big;
	struct tu_paths p2;
	uint64_t lease;
	uint32_t ns;

	tu_paths(&p2);
	big = tu_open(&p2, SLOT, N);
	ck_assert_int_eq(kv_store_ns_create(big, "x", 1, &ns), 0);
	for (int i = 0; i < N; i++) {
		tu_hash(h[i], (uint32_t)i, 5);
		ck_assert_int_eq(
			tu_put_block(big, ns, h[i], i ? h[i - 1] : NULL, 1), 0);
	}
	/* more than the on-stack slot buffer of the match */
	ck_assert_int_eq(kv_store_match(big, ns, h, N, 0, &lease), N);
	ck_assert_int_eq(kv_store_evict(big, ns, h[N - 1]), -EBUSY);
	ck_assert_int_eq(kv_store_lease_release(big, lease), 0);
	ck_assert_int_eq(kv_store_evict(big, ns, h[N - 1]), 0);
	kv_store_close(big);
	free(h);
}
END_TEST

static int count_ns(const char *name, uint32_t id, uint32_t bt,
		    const struct kv_stats *s, void *arg)
{
	(*(int *)arg)++;
	return 0;
}

START_TEST(test_namespaces)
{
	uint8_t h[KVFS_HASH_LEN];
	uint32_t id, bt, wh;
	int n = 0;

	ck_assert_int_eq(kv_store_ns_create(S, "m", 16, &id), -EEXIST);
	ck_assert_int_eq(kv_store_ns_create(S, "llama-ünï", 512, &id), 0);
	ck_assert_int_eq(kv_store_ns_find(S, "llama-ünï", &id, &bt), 0);
	ck_assert_uint_eq(bt, 512);
	ck_assert_int_eq(kv_store_ns_find(S, "nope", &id, &bt), -ENOENT);
	ck_assert_int_eq(kv_store_ns_set_block_tokens(S, "llama-ünï", 256), 0);
	ck_assert_int_eq(kv_store_ns_find(S, "llama-ünï", &id, &bt), 0);
	ck_assert_uint_eq(bt, 256);
	ck_assert_int_eq(kv_store_ns_set_block_tokens(S, "llama-ünï", 0),
			 -EINVAL);
	ck_assert_int_eq(kv_store_ns_set_block_tokens(S, "nope", 1), -ENOENT);
	ck_assert_int_eq(kv_store_ns_foreach(S, count_ns, &n), 0);
	ck_assert_int_eq(n, 2);
	tu_hash(h, 1, 1);
	ck_assert_int_eq(kv_store_create(S, id, h, NULL, &wh), 0);
	ck_assert_int_eq(kv_store_ns_remove(S, "llama-ünï"), -ENOTEMPTY);
	ck_assert_int_eq(kv_store_ns_set_block_tokens(S, "llama-ünï", 64),
			 -ENOTEMPTY);
	ck_assert_int_eq(kv_store_seal(S, wh), 0);
	ck_assert_int_eq(kv_store_ns_remove(S, "llama-ünï"), -ENOTEMPTY);
	ck_assert_int_eq(kv_store_evict(S, id, h), 0);
	ck_assert_int_eq(kv_store_ns_remove(S, "llama-ünï"), 0);
	ck_assert_int_eq(kv_store_ns_remove(S, "llama-ünï"), -ENOENT);
	ck_assert_int_eq(kv_store_create(S, id, h, NULL, &wh), -ENOENT);
	/* ids are not reused */
	ck_assert_int_eq(kv_store_ns_create(S, "llama-ünï", 512, &bt), 0);
	ck_assert_uint_ne(bt, id);
}
END_TEST

START_TEST(test_ns_walk)
{
	uint8_t h[5][KVFS_HASH_LEN], got[KVFS_HASH_LEN];
	struct kv_block_info bi;
	uint64_t cur = 0;
	uint32_t other, wh;
	int seen = 0, rc;

	ck_assert_int_eq(kv_store_ns_create(S, "other", 16, &other), 0);
	for (int i = 0; i < 5; i++)
		tu_hash(h[i], (uint32_t)i, 21);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(tu_put_block(S, NS, h[i], NULL, 10 + i), 0);
	ck_assert_int_eq(tu_put_block(S, other, h[3], NULL, 1), 0);
	/* a block being written is not listed */
	ck_assert_int_eq(kv_store_create(S, NS, h[4], NULL, &wh), 0);
	while ((rc = kv_store_ns_next(S, NS, &cur, got, &bi)) == 1) {
		int k;

		for (k = 0; k < 3; k++)
			if (memcmp(got, h[k], KVFS_HASH_LEN) == 0)
				break;
		ck_assert_int_lt(k, 3);
		ck_assert_uint_eq(bi.size, 10 + (unsigned)k);
		ck_assert(!(seen & (1 << k)));
		seen |= 1 << k;
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(seen, 7);
	/* the end stays the end */
	ck_assert_int_eq(kv_store_ns_next(S, NS, &cur, got, NULL), 0);
	cur = 0;
	ck_assert_int_eq(kv_store_ns_next(S, 999, &cur, got, NULL), -ENOENT);
	ck_assert_int_eq(kv_store_ns_next(S, NS, NULL, got, NULL), -EINVAL);
	ck_assert_int_eq(kv_store_ns_next(S, NS, &cur, NULL, NULL), -EINVAL);
	kv_store_abort(S, wh);
}
END_TEST

START_TEST(test_stats)
{
	uint8_t h[2][KVFS_HASH_LEN];
	struct kv_store_stats ss;
	struct kv_stats ns;
	struct kv_ref r;

	tu_hash(h[0], 1, 3);
	tu_hash(h[1], 2, 3);
	ck_assert_int_eq(tu_put_block(S, NS, h[0], NULL, 1000), 0);
	ck_assert_int_eq(kv_store_get(S, NS, h[0], &r), 0);
	ck_assert_int_eq(kv_store_put(S, &r), 0);
	ck_assert_int_eq(kv_store_get(S, NS, h[1], &r), -ENOENT);
	ck_assert_int_eq(kv_store_lookup(S, NS, h[1]), 0);
	ck_assert_int_eq(kv_store_match(S, NS, h, 2, 0, NULL), 1);
	ck_assert_int_eq(kv_store_ns_stats(S, NS, &ns), 0);
	ck_assert_uint_eq(ns.blocks, 1);
	ck_assert_uint_eq(ns.bytes, 1000);
	ck_assert_uint_eq(ns.hits, 2);
	ck_assert_uint_eq(ns.misses, 3);
	ck_assert_uint_eq(ns.seals, 1);
	ck_assert_int_eq(kv_store_ns_stats(S, 999, &ns), -ENOENT);
	ck_assert_int_eq(kv_store_stats(S, &ss), 0);
	ck_assert_uint_eq(ss.total.hits, 2);
	ck_assert_uint_eq(ss.slots_total, 8);
	ck_assert_uint_eq(ss.slots_free, 7);
	ck_assert_uint_eq(ss.slot_size, SLOT);
	ck_assert_uint_eq(kv_store_slot_size(S), SLOT);
}
END_TEST

START_TEST(test_reopen_keeps_blocks)
{
	uint8_t h[3][KVFS_HASH_LEN];
	struct kv_store_stats ss;
	uint32_t id, bt;

	chain(h, 3, 11);
	kv_store_close(S);
	S = tu_open(&P, SLOT, 8);
	ck_assert_int_eq(kv_store_ns_find(S, "m", &id, &bt), 0);
	ck_assert_uint_eq(id, NS);
	ck_assert_uint_eq(bt, 16);
	for (int i = 0; i < 3; i++)
		ck_assert(tu_verify(S, NS, h[i], 100));
	ck_assert_int_eq(kv_store_stats(S, &ss), 0);
	ck_assert_uint_eq(ss.recovered, 3);
	ck_assert_uint_eq(ss.recovery_dropped, 0);
	ck_assert_uint_eq(ss.slots_free, 5);
}
END_TEST

START_TEST(test_geometry_and_reformat)
{
	struct kv_store_config cfg = {
		.pool_path = P.pool,
		.index_dir = P.index,
		.slot_size = SLOT * 2,
		.nslots = 8,
	};
	uint8_t h[KVFS_HASH_LEN];
	struct kv_store_stats ss;
	struct kv_store *st = NULL;
	uint32_t id;

	tu_hash(h, 1, 12);
	ck_assert_int_eq(tu_put_block(S, NS, h, NULL, 10), 0);
	kv_store_close(S);
	S = NULL;
	ck_assert_int_eq(kv_store_open(&cfg, &st), -EINVAL);
	ck_assert_ptr_null(st);
	cfg.reformat = true;
	ck_assert_int_eq(kv_store_open(&cfg, &st), 0);
	/* a new pool: the old records describe nothing, namespaces stay */
	ck_assert_int_eq(kv_store_lookup(st, NS, h), 0);
	ck_assert_int_eq(kv_store_ns_find(st, "m", &id, NULL), 0);
	ck_assert_int_eq(kv_store_stats(st, &ss), 0);
	ck_assert_uint_eq(ss.recovery_dropped, 1);
	ck_assert_uint_eq(ss.slot_size, SLOT * 2);
	S = st;
}
END_TEST

/* what the event hook saw: op, ns and the hash's first byte */
static struct {
	int n;
	int op[32];
	uint32_t ns[32];
	uint8_t h0[32];
} EV;

static void on_event(void *arg, enum kv_store_event ev, uint32_t ns,
		     const uint8_t hash[KVFS_HASH_LEN])
{
	ck_assert_ptr_eq(arg, &EV);
	if (EV.n < 32) {
		EV.op[EV.n] = ev;
		EV.ns[EV.n] = ns;
		EV.h0[EV.n] = hash[0];
		EV.n++;
	}
}

static void put_block(uint8_t k)
{
	uint8_t h[KVFS_HASH_LEN], buf[64];
	uint32_t wh;

	tu_hash(h, k, 0);
	h[0] = k;
	tu_fill(buf, sizeof(buf), h);
	ck_assert_int_eq(kv_store_create(S, NS, h, NULL, &wh), 0);
	ck_assert_int_eq(kv_store_write(S, wh, 0, buf, sizeof(buf)), 0);
	ck_assert_int_eq(kv_store_seal(S, wh), 0);
}

START_TEST(test_event_hook)
{
	uint8_t h[KVFS_HASH_LEN];
	uint32_t wh;

	memset(&EV, 0, sizeof(EV));
	kv_store_set_event_hook(S, on_event, &EV);
	put_block(1);
	/* an aborted block was never visible: no event */
	tu_hash(h, 2, 0);
	h[0] = 2;
	ck_assert_int_eq(kv_store_create(S, NS, h, NULL, &wh), 0);
	ck_assert_int_eq(kv_store_abort(S, wh), 0);
	ck_assert_int_eq(EV.n, 1);
	ck_assert_int_eq(EV.op[0], KV_STORE_SEALED);
	ck_assert_uint_eq(EV.ns[0], NS);
	ck_assert_uint_eq(EV.h0[0], 1);
	/* 8 slots: the ninth block evicts the LRU one, block 1 */
	for (uint8_t k = 3; k < 11; k++)
		put_block(k);
	ck_assert_int_eq(EV.n, 10);
	ck_assert_int_eq(EV.op[9], KV_STORE_SEALED);
	ck_assert_int_eq(EV.op[8], KV_STORE_GONE);
	ck_assert_uint_eq(EV.h0[8], 1);
	/* evict and remove are GONE too */
	tu_hash(h, 3, 0);
	h[0] = 3;
	ck_assert_int_eq(kv_store_evict(S, NS, h), 0);
	ck_assert_int_eq(EV.op[10], KV_STORE_GONE);
	ck_assert_uint_eq(EV.h0[10], 3);
	tu_hash(h, 4, 0);
	h[0] = 4;
	ck_assert_int_eq(kv_store_remove(S, NS, h), 0);
	ck_assert_int_eq(EV.op[11], KV_STORE_GONE);
	ck_assert_uint_eq(EV.h0[11], 4);
	/* unhooked: silence */
	kv_store_set_event_hook(S, NULL, NULL);
	put_block(20);
	ck_assert_int_eq(EV.n, 12);
}
END_TEST

START_TEST(test_seal_crc)
{
	uint8_t h[KVFS_HASH_LEN], buf[100];
	struct kv_block_info bi;
	uint32_t wh, crc;

	tu_hash(h, 40, 0);
	tu_fill(buf, sizeof(buf), h);
	crc = kvfs_crc32c(0, buf, sizeof(buf));
	ck_assert_int_eq(kv_store_create(S, NS, h, NULL, &wh), 0);
	ck_assert_int_eq(kv_store_write(S, wh, 0, buf, sizeof(buf)), 0);
	ck_assert_int_eq(kv_store_seal_crc(S, wh, crc), 0);
	ck_assert_int_eq(kv_store_stat(S, NS, h, &bi), 0);
	ck_assert_uint_eq(bi.checksum, crc);
	ck_assert_uint_eq(bi.size, sizeof(buf));
	/* a crc that is not the bytes': recorded as given, and the block
	 * fails its check when the store is opened again */
	tu_hash(h, 41, 0);
	ck_assert_int_eq(kv_store_create(S, NS, h, NULL, &wh), 0);
	ck_assert_int_eq(kv_store_write(S, wh, 0, buf, sizeof(buf)), 0);
	ck_assert_int_eq(kv_store_seal_crc(S, wh, crc ^ 1), 0);
	kv_store_close(S);
	S = tu_open(&P, SLOT, 8);
	ck_assert_int_eq(kv_store_stat(S, NS, h, &bi), -ENOENT);
	tu_hash(h, 40, 0);
	ck_assert_int_eq(kv_store_stat(S, NS, h, &bi), 0);
	ck_assert_int_eq(kv_store_seal_crc(S, 12345, crc), -EINVAL);
}
END_TEST

START_TEST(test_ns_find_id)
{
	char name[KVFS_NS_MAX + 1];

	ck_assert_int_eq(kv_store_ns_find_id(S, NS, name), 0);
	ck_assert_str_eq(name, "m");
	ck_assert_int_eq(kv_store_ns_find_id(S, NS + 100, name), -ENOENT);
}
END_TEST

START_TEST(test_bad_args)
{
	struct kv_store_config cfg = { 0 };
	uint8_t h[KVFS_HASH_LEN] = { 1 };
	struct kv_block_info bi;
	struct kv_store *st;
	struct kv_ref r = { 0 };
	char longname[300];
	uint32_t wh, id;
	uint64_t l;

	ck_assert_int_eq(kv_store_open(NULL, &st), -EINVAL);
	ck_assert_int_eq(kv_store_open(&cfg, &st), -EINVAL);
	cfg.pool_path = P.pool;
	ck_assert_int_eq(kv_store_open(&cfg, NULL), -EINVAL);
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	ck_assert_int_eq(kv_store_ns_create(S, longname, 1, &id), -EINVAL);
	ck_assert_int_eq(kv_store_ns_create(S, "a/b", 1, &id), -EINVAL);
	ck_assert_int_eq(kv_store_ns_create(S, ".kvfs", 1, &id), -EINVAL);
	ck_assert_int_eq(kv_store_ns_create(S, "", 1, &id), -EINVAL);
	ck_assert_int_eq(kv_store_ns_create(S, NULL, 1, &id), -EINVAL);
	ck_assert_int_eq(kv_store_ns_create(S, "z", 0, &id), -EINVAL);
	ck_assert_int_eq(
		kv_store_ns_create(S, "z", KVFS_BLOCK_TOKENS_MAX + 1, &id),
		-EINVAL);
	ck_assert_int_eq(kv_store_ns_create(NULL, "z", 1, &id), -EINVAL);
	ck_assert_int_eq(kv_store_ns_find(S, NULL, &id, NULL), -EINVAL);
	ck_assert_int_eq(kv_store_ns_remove(S, "a/b"), -EINVAL);
	ck_assert_int_eq(kv_store_ns_foreach(S, NULL, NULL), -EINVAL);
	ck_assert_int_eq(kv_store_create(S, NS, NULL, NULL, &wh), -EINVAL);
	ck_assert_int_eq(kv_store_create(S, NS, h, NULL, NULL), -EINVAL);
	ck_assert_int_eq(kv_store_create(S, 77, h, NULL, &wh), -ENOENT);
	ck_assert_int_eq(kv_store_create(NULL, NS, h, NULL, &wh), -EINVAL);
	ck_assert_int_eq(kv_store_write(S, 1000, 0, h, 1), -EINVAL);
	ck_assert_int_eq(kv_store_write(S, 3, 0, h, 1), -EINVAL);
	ck_assert_int_eq(kv_store_create(S, NS, h, NULL, &wh), 0);
	ck_assert_int_eq(kv_store_write(S, wh, 0, NULL, 1), -EINVAL);
	ck_assert_int_eq(kv_store_wsize(S, wh, NULL), -EINVAL);
	ck_assert_int_eq(kv_store_abort(S, wh), 0);
	ck_assert_int_eq(kv_store_seal(S, wh), -EINVAL);
	ck_assert_int_eq(kv_store_set_size(S, wh, 1), -EINVAL);
	ck_assert_ptr_null(kv_store_wptr(NULL, 0));
	ck_assert_int_eq(kv_store_get(S, NS, NULL, &r), -EINVAL);
	ck_assert_int_eq(kv_store_get(S, NS, h, NULL), -EINVAL);
	ck_assert_int_eq(kv_store_get(S, 999, h, &r), -ENOENT);
	r.slot = 100000;
	ck_assert_int_eq(kv_store_put(S, &r), -EINVAL);
	r.slot = 0;
	ck_assert_int_eq(kv_store_put(S, &r), -EINVAL);
	ck_assert_int_eq(kv_store_put(S, NULL), -EINVAL);
	ck_assert_int_eq(kv_store_stat(S, NS, h, NULL), -EINVAL);
	ck_assert_int_eq(kv_store_stat(S, NS, NULL, &bi), -EINVAL);
	ck_assert_int_eq(kv_store_lookup(S, NS, NULL), -EINVAL);
	ck_assert_int_eq(kv_store_lookup(NULL, NS, h), -EINVAL);
	ck_assert_int_eq(kv_store_match(S, NS, NULL, 3, 0, &l), -EINVAL);
	ck_assert_int_eq(
		kv_store_match(S, 999, (const uint8_t(*)[32])h, 1, 0, &l),
		-ENOENT);
	ck_assert_int_eq(kv_store_lease_release(S, 0), -EINVAL);
	ck_assert_int_eq(kv_store_lease_renew(NULL, 1, 1), -EINVAL);
	ck_assert_int_eq(kv_store_evict(S, NS, NULL), -EINVAL);
	ck_assert_int_eq(kv_store_remove(NULL, NS, h), -EINVAL);
	ck_assert_int_eq(kv_store_stats(S, NULL), -EINVAL);
	ck_assert_int_eq(kv_store_ns_stats(S, NS, NULL), -EINVAL);
	kv_store_lease_sweep(NULL);
	kv_store_close(NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("store");
	TCase *tc = tcase_create("core");

	tu_init("store");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_block_life);
	tcase_add_test(tc, test_spill);
	tcase_add_test(tc, test_zero_copy_and_abort);
	tcase_add_test(tc, test_refs_and_remove);
	tcase_add_test(tc, test_match_and_leases);
	tcase_add_test(tc, test_long_match_lease);
	tcase_add_test(tc, test_namespaces);
	tcase_add_test(tc, test_ns_walk);
	tcase_add_test(tc, test_stats);
	tcase_add_test(tc, test_reopen_keeps_blocks);
	tcase_add_test(tc, test_geometry_and_reformat);
	tcase_add_test(tc, test_event_hook);
	tcase_add_test(tc, test_ns_find_id);
	tcase_add_test(tc, test_seal_crc);
	tcase_add_test(tc, test_bad_args);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
