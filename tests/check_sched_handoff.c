/*
 * check_sched_handoff.c - the prefill-to-decode handoff: FETCH frames
 * (sched/event.h, "FETCH") encoded and decoded, refused when garbled or
 * cut; the conductor's books (sched/serve_handoff.c: which node is to
 * pull which keys, each once, until complete or expiry, within caps);
 * frames staged and encoded per destination stream, sealed when the
 * stream is; and the event listener end to end over loopback: a stream
 * that opened with its RESET in "-fetch" gets the FETCH frames of what
 * the prefill node seals, one that did not gets none.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tests/check_sched.h"
#include "kvstore/auth.h"
#include "src/common/clock.h"
#include "src/common/crc32c.h"
#include "src/common/le.h"
#include "sched/serve_int.h"

static void hash_of(uint8_t h[KVFS_HASH_LEN], uint32_t i)
{
	for (int k = 0; k < KVFS_HASH_LEN; k++)
		h[k] = (uint8_t)(i * 13 + k * 3 + 5);
	kv_put_le32(h, i);
}

/* ---- the FETCH frame ---------------------------------------------------- */

START_TEST(test_fe_roundtrip)
{
	uint8_t hs[3][KVFS_HASH_LEN], buf[512];
	struct sched_fe fe;
	long n;

	for (uint32_t i = 0; i < 3; i++)
		hash_of(hs[i], i);
	n = sched_fe_encode(buf, sizeof(buf), 2, 41, 1, "llama", hs[0], 3);
	ck_assert_int_eq(n, (long)sched_fe_frame_size(5, 3));
	ck_assert_int_eq(n, 24 + 5 + 96 + 4);
	ck_assert_mem_eq(buf, "KVFE", 4);
	ck_assert_int_eq(sched_fe_frame_len(buf), n);
	ck_assert_int_eq(sched_fe_decode(buf, (size_t)n, &fe), 0);
	ck_assert_uint_eq(fe.node, 2);
	ck_assert_uint_eq(fe.src, 1);
	ck_assert_uint_eq(fe.seq, 41);
	ck_assert_uint_eq(fe.count, 3);
	ck_assert_uint_eq(fe.ns_len, 5);
	ck_assert_mem_eq(fe.ns, "llama", 5);
	ck_assert_mem_eq(fe.hashes, hs[0], sizeof(hs));
	/* the layout of event.h's table */
	ck_assert_uint_eq(kv_get_le16(buf + 6), 2);
	ck_assert_uint_eq(kv_get_le64(buf + 8), 41);
	ck_assert_uint_eq(kv_get_le16(buf + 16), 1);
	ck_assert_uint_eq(kv_get_le16(buf + 18), 3);
	ck_assert_uint_eq(buf[20], 5);

	/* refusals of the encoder */
	ck_assert_int_eq(
		sched_fe_encode(buf, (size_t)n - 1, 2, 0, 1, "llama", hs[0], 3),
		-ENOSPC);
	ck_assert_int_eq(
		sched_fe_encode(buf, sizeof(buf), 2, 0, 1, "a/b", hs[0], 1),
		-EINVAL);
	ck_assert_int_eq(
		sched_fe_encode(buf, sizeof(buf), 2, 0, 1, "m", hs[0], 0),
		-EINVAL);
	ck_assert_int_eq(sched_fe_encode(buf, sizeof(buf), 2, 0, 1, "m", hs[0],
					 SCHED_FE_MAX_RECORDS + 1),
			 -EINVAL);
}
END_TEST

START_TEST(test_fe_garbage)
{
	uint8_t hs[2][KVFS_HASH_LEN], good[256], buf[256];
	struct sched_fe fe;
	long n;

	hash_of(hs[0], 7);
	hash_of(hs[1], 8);
	n = sched_fe_encode(good, sizeof(good), 3, 0, 1, "m", hs[0], 2);
	ck_assert_int_gt(n, 0);

	/* every single-bit flip anywhere is refused (CRC or a field) */
	for (long i = 0; i < n; i++)
		for (int b = 0; b < 8; b++) {
			memcpy(buf, good, (size_t)n);
			buf[i] ^= (uint8_t)(1u << b);
			ck_assert_msg(sched_fe_decode(buf, (size_t)n, &fe) < 0,
				      "flip of byte %ld bit %d accepted", i, b);
		}
	/* truncated anywhere, or with a byte more: refused */
	for (long len = 0; len < n; len++)
		ck_assert_int_lt(sched_fe_decode(good, (size_t)len, &fe), 0);
	memcpy(buf, good, (size_t)n);
	buf[n] = 0;
	ck_assert_int_eq(sched_fe_decode(buf, (size_t)n + 1, &fe), -EBADMSG);

	/* the header's own checks, whatever follows it */
	memcpy(buf, good, (size_t)n);
	buf[4] = 2;
	ck_assert_int_eq(sched_fe_frame_len(buf), -EPROTONOSUPPORT);
	memcpy(buf, good, (size_t)n);
	memcpy(buf, "KVEV", 4); /* a block-event frame is not one */
	ck_assert_int_eq(sched_fe_frame_len(buf), -EBADMSG);
	memcpy(buf, good, (size_t)n);
	kv_put_le16(buf + 18, 0);
	ck_assert_int_eq(sched_fe_frame_len(buf), -EBADMSG);
	kv_put_le16(buf + 18, SCHED_FE_MAX_RECORDS + 1);
	ck_assert_int_eq(sched_fe_frame_len(buf), -EBADMSG);
	memcpy(buf, good, (size_t)n);
	buf[20] = 0;
	ck_assert_int_eq(sched_fe_frame_len(buf), -EBADMSG);
	memcpy(buf, good, (size_t)n);
	buf[5] = 1;
	ck_assert_int_eq(sched_fe_frame_len(buf), -EBADMSG);
	memcpy(buf, good, (size_t)n);
	buf[22] = 1;
	ck_assert_int_eq(sched_fe_frame_len(buf), -EBADMSG);

	/* a namespace with a NUL or a '/' under a valid CRC */
	{
		uint8_t h[KVFS_HASH_LEN];
		long m;

		hash_of(h, 1);
		m = sched_fe_encode(buf, sizeof(buf), 3, 0, 1, "ab", h, 1);
		ck_assert_int_gt(m, 0);
		buf[SCHED_FE_HDR + 1] = '/';
		kv_put_le32(buf + m - 4, kvfs_crc32c(0, buf, (size_t)m - 4));
		ck_assert_int_eq(sched_fe_decode(buf, (size_t)m, &fe),
				 -EBADMSG);
		buf[SCHED_FE_HDR + 1] = 0;
		kv_put_le32(buf + m - 4, kvfs_crc32c(0, buf, (size_t)m - 4));
		ck_assert_int_eq(sched_fe_decode(buf, (size_t)m, &fe),
				 -EBADMSG);
	}

	/* random bytes never decode, nor crash */
	srand(14);
	for (int t = 0; t < 20000; t++) {
		size_t len = (size_t)(rand() % (int)sizeof(buf));

		for (size_t i = 0; i < len; i++)
			buf[i] = (uint8_t)rand();
		if (t & 1)
			memcpy(buf, "KVFE\1\0", len < 6 ? len : 6);
		ck_assert_int_lt(sched_fe_decode(buf, len, &fe), 0);
	}
}
END_TEST

/* ---- the books ------------------------------------------------------------
 */

START_TEST(test_books)
{
	uint64_t k1[4] = { 10, 11, 12, 13 }, k2[3] = { 12, 20, 21 };
	struct srv_ho *h;
	uint16_t dst[8];
	size_t reqs, keys;

	ck_assert_int_eq(srv_ho_create(4, 100, &h), 0);
	/* request 1: prefill on node 1, decode on node 2; request 2:
	 * prefill on node 1, decode on node 3; they share key 12 */
	ck_assert_int_eq(srv_ho_add(h, 1, 1, 2, k1, 4, 0.0), 0);
	ck_assert_int_eq(srv_ho_add(h, 2, 1, 3, k2, 3, 0.0), 0);
	ck_assert_int_eq(srv_ho_add(h, 1, 1, 2, k1, 4, 0.0), -EEXIST);
	/* the same node for both: nothing to hand off */
	ck_assert_int_eq(srv_ho_add(h, 3, 2, 2, k1, 4, 0.0), 0);
	srv_ho_size(h, &reqs, &keys);
	ck_assert_uint_eq(reqs, 2);
	ck_assert_uint_eq(keys, 7);

	/* an insert on another node than the prefill's hands nothing off */
	ck_assert_uint_eq(srv_ho_sealed(h, 2, 10, dst, 8), 0);
	ck_assert_uint_eq(srv_ho_sealed(h, 3, 12, dst, 8), 0);
	/* nor does a key nobody waits for */
	ck_assert_uint_eq(srv_ho_sealed(h, 1, 99, dst, 8), 0);
	/* key 10 goes to node 2, once */
	ck_assert_uint_eq(srv_ho_sealed(h, 1, 10, dst, 8), 1);
	ck_assert_uint_eq(dst[0], 2);
	ck_assert_uint_eq(srv_ho_sealed(h, 1, 10, dst, 8), 0);
	/* key 12 to both decode nodes */
	ck_assert_uint_eq(srv_ho_sealed(h, 1, 12, dst, 8), 2);
	ck_assert_uint_ne(dst[0], dst[1]);
	ck_assert(dst[0] + dst[1] == 5);
	srv_ho_size(h, &reqs, &keys);
	ck_assert_uint_eq(keys, 4);

	/* request 1 completes: its keys no longer go anywhere */
	ck_assert(srv_ho_forget(h, 1));
	ck_assert(!srv_ho_forget(h, 1));
	ck_assert_uint_eq(srv_ho_sealed(h, 1, 11, dst, 8), 0);
	/* request 2's last keys go to node 3, and then it is gone */
	ck_assert_uint_eq(srv_ho_sealed(h, 1, 20, dst, 8), 1);
	ck_assert_uint_eq(dst[0], 3);
	ck_assert_uint_eq(srv_ho_sealed(h, 1, 21, dst, 8), 1);
	srv_ho_size(h, &reqs, &keys);
	ck_assert_uint_eq(reqs, 0);
	ck_assert_uint_eq(keys, 0);
	ck_assert(!srv_ho_forget(h, 2));

	/* a key twice in one prompt: one fetch, and the request then goes */
	{
		uint64_t dup[3] = { 5, 5, 6 };

		ck_assert_int_eq(srv_ho_add(h, 9, 4, 7, dup, 3, 1.0), 0);
		ck_assert_uint_eq(srv_ho_sealed(h, 4, 5, dst, 8), 1);
		ck_assert_uint_eq(srv_ho_sealed(h, 4, 6, dst, 8), 1);
		srv_ho_size(h, &reqs, &keys);
		ck_assert_uint_eq(reqs, 0);
	}
	srv_ho_destroy(h);
}
END_TEST

START_TEST(test_books_caps_expiry)
{
	uint64_t keys[64];
	struct srv_ho *h;
	uint16_t dst[8];
	size_t nr, nk;

	for (uint32_t i = 0; i < 64; i++)
		keys[i] = 1000 + i;
	ck_assert_int_eq(srv_ho_create(3, 40, &h), 0);
	ck_assert_int_eq(srv_ho_add(h, 1, 1, 2, keys, 20, 0.0), 0);
	/* past the keys' cap: refused whole */
	ck_assert_int_eq(srv_ho_add(h, 2, 1, 2, keys + 20, 21, 1.0), -ENOSPC);
	ck_assert_int_eq(srv_ho_add(h, 2, 1, 2, keys + 20, 20, 1.0), 0);
	ck_assert_int_eq(srv_ho_add(h, 3, 1, 2, keys + 40, 1, 2.0), -ENOSPC);
	srv_ho_forget(h, 2);
	ck_assert_int_eq(srv_ho_add(h, 3, 1, 2, keys + 40, 1, 2.0), 0);
	ck_assert_int_eq(srv_ho_add(h, 4, 1, 2, keys + 41, 1, 3.0), 0);
	/* past the requests' cap */
	ck_assert_int_eq(srv_ho_add(h, 5, 1, 2, keys + 42, 1, 3.0), -ENOSPC);

	/* expiry: the oldest first, by the time of the schedule */
	ck_assert_uint_eq(srv_ho_expire(h, 10.0, 9.5), 1);
	ck_assert_uint_eq(srv_ho_sealed(h, 1, 1000, dst, 8), 0);
	ck_assert_uint_eq(srv_ho_sealed(h, 1, 1040, dst, 8), 1);
	ck_assert_uint_eq(srv_ho_expire(h, 10.0, 9.5), 0);
	ck_assert_uint_eq(srv_ho_expire(h, 100.0, 9.5), 1);
	srv_ho_size(h, &nr, &nk);
	ck_assert_uint_eq(nr, 0);
	ck_assert_uint_eq(nk, 0);
	srv_ho_destroy(h);
}
END_TEST

/* a locality index for the books: node 1 holds keys 10, 11, 12, 14 and
 * every key from 100000, node 2 holds 11, node 3 holds 10 */
static bool fake_holds(void *arg, uint16_t node, uint64_t key)
{
	(void)arg;
	switch (node) {
	case 1:
		return key == 10 || key == 11 || key == 12 || key == 14 ||
		       key >= 100000;
	case 2:
		return key == 11;
	case 3:
		return key == 10;
	default:
		return false;
	}
}

/* what srv_ho_due_take hands out, in order */
struct due_log {
	uint32_t n;
	struct {
		uint16_t src, dst;
		char ns[8];
		uint8_t hash[KVFS_HASH_LEN];
	} item[8];
};

static void due_log(void *arg, uint16_t src, uint16_t dst, const char *ns,
		    uint8_t ns_len, const uint8_t *hash)
{
	struct due_log *d = arg;

	ck_assert_uint_lt(d->n, 8);
	ck_assert_uint_lt(ns_len, sizeof(d->item[0].ns));
	d->item[d->n].src = src;
	d->item[d->n].dst = dst;
	memcpy(d->item[d->n].ns, ns, ns_len);
	d->item[d->n].ns[ns_len] = 0;
	memcpy(d->item[d->n].hash, hash, KVFS_HASH_LEN);
	d->n++;
}

/* item i of d is the block named hash_of(key), from src to dst in "m" */
static void due_is(const struct due_log *d, uint32_t i, uint16_t src,
		   uint16_t dst, uint32_t key)
{
	uint8_t h[KVFS_HASH_LEN];

	hash_of(h, key);
	ck_assert_uint_lt(i, d->n);
	ck_assert_uint_eq(d->item[i].src, src);
	ck_assert_uint_eq(d->item[i].dst, dst);
	ck_assert_str_eq(d->item[i].ns, "m");
	ck_assert_mem_eq(d->item[i].hash, h, KVFS_HASH_LEN);
}

/* a prompt of keys first.. with its names */
static void prompt(uint64_t *keys, uint8_t (*hs)[KVFS_HASH_LEN], uint32_t first,
		   uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		keys[i] = first + i;
		hash_of(hs[i], first + i);
	}
}

/* the prefix the prefill node holds already seals no INSERT: those of
 * its blocks the decode node lacks are due at once, the rest waits */
START_TEST(test_books_cached)
{
	uint64_t keys[6];
	uint8_t hs[6][KVFS_HASH_LEN];
	struct srv_ho_names nm = { .hash = (const uint8_t(*)[KVFS_HASH_LEN])hs,
				   .ns = "m" };
	struct due_log log = { 0 };
	uint16_t one = 1, dst[8];
	uint32_t due, over;
	struct srv_ho *h;
	size_t reqs, nk;

	ck_assert_int_eq(srv_ho_create(8, 100, &h), 0);
	/* keys 10..15 from node 1 to node 2: node 1 holds the prefix 10..12
	 * (14 too, past the prefix), node 2 holds 11 */
	prompt(keys, hs, 10, 6);
	ck_assert_int_eq(srv_ho_start(h, 1, &one, 1, 2, keys, &nm, 6,
				      fake_holds, NULL, 0.0, &due, &over),
			 1);
	ck_assert_uint_eq(due, 2);
	ck_assert_uint_eq(over, 0);
	srv_ho_size(h, &reqs, &nk);
	ck_assert_uint_eq(reqs, 1);
	ck_assert_uint_eq(nk, 3); /* 13, 14, 15 wait for their INSERT */
	ck_assert_uint_eq(srv_ho_due_take(h, due_log, &log), 2);
	ck_assert_uint_eq(log.n, 2);
	due_is(&log, 0, 1, 2, 10);
	due_is(&log, 1, 1, 2, 12);
	ck_assert_uint_eq(srv_ho_due_take(h, due_log, &log), 0);
	/* the prefix is not handed off again when sealed once more */
	ck_assert_uint_eq(srv_ho_sealed(h, 1, 10, dst, 8), 0);
	ck_assert_uint_eq(srv_ho_sealed(h, 1, 11, dst, 8), 0);
	ck_assert_uint_eq(srv_ho_sealed(h, 1, 12, dst, 8), 0);
	/* 14 is past the prefix (13 is not cached): the engine writes it
	 * again, and its INSERT hands it off */
	ck_assert_uint_eq(srv_ho_sealed(h, 1, 14, dst, 8), 1);
	ck_assert_uint_eq(dst[0], 2);
	ck_assert(srv_ho_forget(h, 1));

	/* without names (block_keys) nothing can be named in a FETCH: the
	 * prefix is dropped from the books, the rest waits as before */
	ck_assert_int_eq(srv_ho_start(h, 2, &one, 1, 2, keys, NULL, 6,
				      fake_holds, NULL, 0.0, &due, &over),
			 1);
	ck_assert_uint_eq(due, 0);
	nm.ns = "";
	ck_assert_int_eq(srv_ho_start(h, 3, &one, 1, 2, keys, &nm, 6,
				      fake_holds, NULL, 0.0, &due, &over),
			 1);
	ck_assert_uint_eq(due, 0);
	nm.ns = "m";
	ck_assert_uint_eq(srv_ho_due_take(h, due_log, &log), 0);
	srv_ho_size(h, &reqs, &nk);
	ck_assert_uint_eq(reqs, 2);
	ck_assert_uint_eq(nk, 6);
	srv_ho_forget(h, 2);
	srv_ho_forget(h, 3);

	/* a prompt wholly cached on both: nothing to hand off */
	ck_assert_int_eq(srv_ho_start(h, 4, &one, 1, 2, keys + 1,
				      &(struct srv_ho_names){
					      .hash = nm.hash + 1, .ns = "m" },
				      1, fake_holds, NULL, 0.0, &due, &over),
			 0);
	/* wholly cached on the prefill node: due, nothing remembered */
	ck_assert_int_eq(srv_ho_start(h, 5, &one, 1, 2, keys, &nm, 3,
				      fake_holds, NULL, 0.0, &due, &over),
			 1);
	ck_assert_uint_eq(due, 2);
	srv_ho_size(h, &reqs, &nk);
	ck_assert_uint_eq(reqs, 0);
	ck_assert_uint_eq(nk, 0);
	/* the same node for both: nothing at all */
	ck_assert_int_eq(srv_ho_start(h, 6, &one, 1, 1, keys, &nm, 6,
				      fake_holds, NULL, 0.0, &due, &over),
			 0);
	ck_assert_uint_eq(due, 0);
	ck_assert_uint_eq(srv_ho_due_take(h, NULL, NULL), 2);
	srv_ho_destroy(h);

	/* the due queue is bounded: what does not fit is counted, dropped */
	{
		uint32_t n = SRV_HO_MAX_DUE + 4;
		uint64_t *k = calloc(n, sizeof(*k));
		uint8_t(*bh)[KVFS_HASH_LEN] = calloc(n, KVFS_HASH_LEN);

		ck_assert(k && bh);
		prompt(k, bh, 100000, n);
		nm.hash = (const uint8_t(*)[KVFS_HASH_LEN])bh;
		ck_assert_int_eq(srv_ho_create(8, n, &h), 0);
		ck_assert_int_eq(srv_ho_start(h, 1, &one, 1, 2, k, &nm, n,
					      fake_holds, NULL, 0.0, &due,
					      &over),
				 1);
		ck_assert_uint_eq(due, SRV_HO_MAX_DUE);
		ck_assert_uint_eq(over, 4);
		ck_assert_uint_eq(srv_ho_due_take(h, NULL, NULL),
				  SRV_HO_MAX_DUE);
		srv_ho_destroy(h);
		free(k);
		free(bh);
	}
}
END_TEST

/* a held request (the queue policy) is bound at its dispatch: nothing
 * is handed off before, its cached prefix is due then, and a CPP
 * pipeline's INSERTs come from its lead or from a stage */
START_TEST(test_books_held)
{
	uint64_t keys[6];
	uint8_t hs[6][KVFS_HASH_LEN];
	struct srv_ho_names nm = { .hash = (const uint8_t(*)[KVFS_HASH_LEN])hs,
				   .ns = "m" };
	struct due_log log = { 0 };
	uint16_t one = 1, two = 2, pipe3[3] = { 1, 3, 2 }, dst[8];
	uint32_t due, over;
	struct srv_ho *h;
	size_t reqs, nk;

	ck_assert_int_eq(srv_ho_create(4, 12, &h), 0);
	prompt(keys, hs, 10, 6);
	ck_assert_int_eq(srv_ho_hold(h, 7, keys, &nm, 6, 0.0), 0);
	ck_assert_int_eq(srv_ho_hold(h, 7, keys, &nm, 6, 0.0), -EEXIST);
	srv_ho_size(h, &reqs, &nk);
	ck_assert_uint_eq(reqs, 1);
	ck_assert_uint_eq(nk, 6);
	/* its keys count against the cap while it waits */
	ck_assert_int_eq(srv_ho_hold(h, 8, keys, &nm, 6, 0.0), 0);
	ck_assert_int_eq(srv_ho_hold(h, 9, keys, NULL, 1, 0.0), -ENOSPC);
	ck_assert(srv_ho_forget(h, 8));
	/* not dispatched: no node is known, no INSERT hands it off */
	ck_assert_uint_eq(srv_ho_sealed(h, 1, 13, dst, 8), 0);
	ck_assert_uint_eq(srv_ho_due_take(h, NULL, NULL), 0);
	ck_assert_int_eq(srv_ho_dispatch(h, 99, &one, 1, 2, fake_holds, NULL,
					 50.0, &due, &over),
			 -ENOENT);

	/* dispatched at 50 s as a pipeline led by node 1, with stages on
	 * nodes 3 and 2, decoding on node 2: the lead's cached prefix is
	 * due at once (10 and 12; node 2 holds 11) */
	ck_assert_int_eq(srv_ho_dispatch(h, 7, pipe3, 3, 2, fake_holds, NULL,
					 50.0, &due, &over),
			 1);
	ck_assert_uint_eq(due, 2);
	ck_assert_uint_eq(srv_ho_due_take(h, due_log, &log), 2);
	due_is(&log, 0, 1, 2, 10);
	due_is(&log, 1, 1, 2, 12);
	/* a yielded request dispatched again is bound already */
	ck_assert_int_eq(srv_ho_dispatch(h, 7, &one, 1, 2, fake_holds, NULL,
					 60.0, &due, &over),
			 -EALREADY);
	ck_assert_uint_eq(due, 0);
	/* a stage's INSERT hands off to the decode node; the decode node's
	 * own does not, though it is in the pipeline; the lead's does */
	ck_assert_uint_eq(srv_ho_sealed(h, 3, 13, dst, 8), 1);
	ck_assert_uint_eq(dst[0], 2);
	ck_assert_uint_eq(srv_ho_sealed(h, 2, 14, dst, 8), 0);
	ck_assert_uint_eq(srv_ho_sealed(h, 4, 14, dst, 8), 0);
	ck_assert_uint_eq(srv_ho_sealed(h, 1, 14, dst, 8), 1);
	ck_assert_uint_eq(dst[0], 2);
	/* its TTL runs from the dispatch, not from the schedule */
	ck_assert_uint_eq(srv_ho_expire(h, 100.0, 60.0), 0);
	ck_assert_uint_eq(srv_ho_expire(h, 110.0, 60.0), 1);
	srv_ho_size(h, &reqs, &nk);
	ck_assert_uint_eq(reqs, 0);
	ck_assert_uint_eq(nk, 0);

	/* led from the decode node itself: nothing to hand off, forgotten */
	ck_assert_int_eq(srv_ho_hold(h, 10, keys, &nm, 6, 0.0), 0);
	ck_assert_int_eq(srv_ho_dispatch(h, 10, &two, 1, 2, fake_holds, NULL,
					 1.0, &due, &over),
			 0);
	ck_assert_int_eq(srv_ho_dispatch(h, 10, &one, 1, 2, fake_holds, NULL,
					 1.0, &due, &over),
			 -ENOENT);
	/* held without names: the prefix is not due, the rest waits; the
	 * lead here is node 3, which holds 10 only */
	ck_assert_int_eq(srv_ho_hold(h, 11, keys, NULL, 6, 0.0), 0);
	ck_assert_int_eq(srv_ho_dispatch(h, 11, (uint16_t[]){ 3 }, 1, 2,
					 fake_holds, NULL, 1.0, &due, &over),
			 1);
	ck_assert_uint_eq(due, 0);
	srv_ho_size(h, &reqs, &nk);
	ck_assert_uint_eq(nk, 5);
	ck_assert_uint_eq(srv_ho_sealed(h, 1, 11, dst, 8), 0);
	ck_assert_uint_eq(srv_ho_sealed(h, 3, 11, dst, 8), 1);
	/* cancelled before its dispatch */
	ck_assert_int_eq(srv_ho_hold(h, 12, keys, &nm, 1, 0.0), 0);
	ck_assert(srv_ho_forget(h, 12));
	ck_assert_int_eq(srv_ho_dispatch(h, 12, &one, 1, 2, fake_holds, NULL,
					 1.0, &due, &over),
			 -ENOENT);
	ck_assert(srv_ho_forget(h, 11));
	srv_ho_size(h, &reqs, &nk);
	ck_assert_uint_eq(reqs, 0);
	ck_assert_uint_eq(nk, 0);
	ck_assert_uint_eq(srv_ho_due_take(h, NULL, NULL), 0);
	srv_ho_destroy(h);
}
END_TEST

/* ---- staging and encoding per stream ------------------------------------- */

struct two_outs {
	struct srv_fe_out o[2]; /* nodes 2 and 3; node 4 has no stream */
	struct kv_tagger *tag;
};

static struct srv_fe_out *find2(void *arg, uint16_t node,
				struct kv_tagger **tag)
{
	struct two_outs *t = arg;

	*tag = t->tag;
	return node == 2 ? &t->o[0] : node == 3 ? &t->o[1] : NULL;
}

/* the frames in o: each hash count and the first hash's index */
static uint32_t frames_of(struct srv_fe_out *o, uint16_t node, uint32_t *cnt,
			  uint32_t max)
{
	size_t off = 0;
	uint32_t n = 0;

	while (off < o->len) {
		long len = sched_fe_frame_len(o->buf + off);
		struct sched_fe fe;

		ck_assert_int_gt(len, 0);
		ck_assert_int_eq(
			sched_fe_decode(o->buf + off, (size_t)len, &fe), 0);
		ck_assert_uint_eq(fe.node, node);
		ck_assert_uint_eq(fe.src, 1);
		ck_assert_uint_eq(fe.seq, n);
		ck_assert_mem_eq(fe.ns, "m", 1);
		ck_assert_uint_lt(n, max);
		cnt[n++] = fe.count;
		off += (size_t)len;
	}
	return n;
}

START_TEST(test_stage)
{
	struct srv_fe_stage *st = calloc(1, sizeof(*st));
	struct srv_counters c = { 0 };
	struct two_outs t = { 0 };
	uint16_t to2 = 2, to23[2] = { 2, 3 }, to4 = 4;
	uint32_t cnt[8];
	uint8_t h[KVFS_HASH_LEN];

	ck_assert_ptr_nonnull(st);
	/* 300 blocks for node 2, of which 10 also for node 3; 5 for node 4,
	 * which has no stream that takes FETCH */
	for (uint32_t i = 0; i < 300; i++) {
		hash_of(h, i);
		if (i < 10)
			srv_fe_stage_add(st, find2, &t, &c, 1, "m", 1, to23, 2,
					 h);
		else
			srv_fe_stage_add(st, find2, &t, &c, 1, "m", 1, &to2, 1,
					 h);
	}
	for (uint32_t i = 0; i < 5; i++) {
		hash_of(h, 1000 + i);
		srv_fe_stage_add(st, find2, &t, &c, 1, "m", 1, &to4, 1, h);
	}
	srv_fe_stage_flush(st, find2, &t, &c);
	ck_assert_uint_eq(st->n, 0);
	/* node 2: 300 blocks in frames of at most 256 */
	{
		uint32_t n = frames_of(&t.o[0], 2, cnt, 8), sum = 0;

		for (uint32_t i = 0; i < n; i++) {
			ck_assert_uint_le(cnt[i], SCHED_FE_MAX_RECORDS);
			sum += cnt[i];
		}
		ck_assert_uint_eq(sum, 300);
	}
	ck_assert_uint_eq(frames_of(&t.o[1], 3, cnt, 8), 1);
	ck_assert_uint_eq(cnt[0], 10);
	ck_assert_uint_eq(c.ho_fetch_blocks, 310);
	ck_assert_uint_eq(c.ho_dropped, 5);
	ck_assert_uint_eq(c.ho_fetch_frames, t.o[0].seq + t.o[1].seq);

	/* a stream whose output is full drops, and counts */
	t.o[1].len = SRV_FE_OUT_MAX - 10;
	t.o[1].cap = 0;
	free(t.o[1].buf);
	t.o[1].buf = NULL;
	hash_of(h, 5000);
	srv_fe_stage_add(st, find2, &t, &c, 1, "m", 1, to23 + 1, 1, h);
	srv_fe_stage_flush(st, find2, &t, &c);
	ck_assert_uint_eq(c.ho_dropped, 6);
	t.o[1].len = 0;
	srv_fe_release(&t.o[0]);
	srv_fe_release(&t.o[1]);
	free(st);
}
END_TEST

START_TEST(test_sealed)
{
	uint8_t key[KV_AUTH_KEY_LEN], h[KVFS_HASH_LEN];
	struct kv_tagger send, check;
	struct srv_fe_out o = { 0 };
	struct sched_fe fe;
	uint32_t len;

	memset(key, 0x5a, sizeof(key));
	ck_assert_int_eq(kv_tagger_init(&send, key), 0);
	ck_assert_int_eq(kv_tagger_init(&check, key), 0);
	hash_of(h, 3);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(srv_fe_put(&o, &send, 2, 1, "m", h, 1), 0);
	/* two sealed records: length, frame, tag; each tag checks in turn */
	for (size_t off = 0, i = 0; i < 2; i++) {
		len = kv_get_le32(o.buf + off);
		ck_assert_uint_eq(len, sched_fe_frame_size(1, 1));
		ck_assert_int_eq(kv_tagger_begin(&check), 0);
		ck_assert_int_eq(kv_tagger_update(&check, o.buf + off, 4 + len),
				 0);
		ck_assert_int_eq(kv_tagger_check(&check, o.buf + off + 4 + len),
				 0);
		ck_assert_int_eq(sched_fe_decode(o.buf + off + 4, len, &fe), 0);
		ck_assert_uint_eq(fe.seq, i);
		off += 4 + len + KV_WIRE_TAG_LEN;
		ck_assert_uint_le(off, o.len);
	}
	srv_fe_release(&o);
	kv_tagger_fini(&send);
	kv_tagger_fini(&check);
}
END_TEST

/* ---- the event listener end to end --------------------------------------- */

/* rcvbuf: SO_RCVBUF before the connect (the window), 0: the default */
static int connect_to(int lfd, int rcvbuf)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct timeval tv = { .tv_sec = 5 };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	if (rcvbuf)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	sa.sin_port = htons((uint16_t)srv_port(lfd));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static void send_recs(int fd, uint16_t node, uint64_t seq, const char *ns,
		      uint8_t op, uint32_t first, uint32_t n)
{
	struct sched_ev_rec r[8];
	uint8_t buf[512];
	long len;

	ck_assert_uint_le(n, 8);
	for (uint32_t i = 0; i < n; i++) {
		r[i].op = op;
		if (op == SCHED_EV_RESET)
			memset(r[i].hash, 0, KVFS_HASH_LEN);
		else
			hash_of(r[i].hash, first + i);
	}
	len = sched_ev_encode(buf, sizeof(buf), node, seq, ns, r, n);
	ck_assert_int_gt(len, 0);
	ck_assert_int_eq(write(fd, buf, (size_t)len), len);
}

/* the counter once it reaches want, polled for 5 s at most */
static uint64_t counter_when(struct srv *srv, const uint64_t *ctr,
			     uint64_t want)
{
	struct timespec ms = { 0, 1000000 };
	uint64_t v = 0;

	for (int i = 0; i < 5000; i++) {
		pthread_mutex_lock(&srv->lock);
		v = *ctr;
		pthread_mutex_unlock(&srv->lock);
		if (v >= want)
			break;
		nanosleep(&ms, NULL);
	}
	return v;
}

static int read_all(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* the next FETCH frame from fd into buf (SCHED_FE_FRAME_MAX), decoded
 * into *fe: its length */
static long read_fe(int fd, uint8_t *buf, struct sched_fe *fe)
{
	long len;

	ck_assert_int_eq(read_all(fd, buf, SCHED_FE_HDR), 0);
	len = sched_fe_frame_len(buf);
	ck_assert_int_gt(len, 0);
	ck_assert_int_eq(
		read_all(fd, buf + SCHED_FE_HDR, (size_t)len - SCHED_FE_HDR),
		0);
	ck_assert_int_eq(sched_fe_decode(buf, (size_t)len, fe), 0);
	return len;
}

/* the event listener of a conductor with prefill node 1 and decode
 * nodes 2 (and 3 when nd is 2), and handoff books for max_keys keys */
static void srv_up(struct srv *srv, uint32_t nd, size_t max_keys)
{
	uint32_t pf[1] = { 1 }, dc[2] = { 2, 3 };

	memset(srv, 0, sizeof(*srv));
	pthread_mutex_init(&srv->lock, NULL);
	sched_config_default(&srv->cfg);
	srv->pol = sched_policy_find("lookahead");
	srv->seed = 1;
	srv->start_ns = kvfs_mono_ns();
	srv->ev_hello = SRV_DEF_EV_HELLO;
	srv->ev_idle = SRV_DEF_EV_IDLE;
	ck_assert_int_eq(srv_ho_create(16, max_keys, &srv->ho), 0);
	ck_assert_int_eq(srv_set_instances(srv, 1, pf, nd, dc), 0);
	ck_assert_int_eq(srv_listen("127.0.0.1:0", &srv->ev_fd), 0);
	ck_assert_int_eq(srv_events_start(srv), 0);
}

static void srv_down(struct srv *srv)
{
	srv_events_stop(srv);
	close(srv->ev_fd);
	srv_ho_destroy(srv->ho);
	sched_destroy(srv->s);
	free(srv->pf_node);
	free(srv->dc_node);
	pthread_mutex_destroy(&srv->lock);
}

START_TEST(test_listener)
{
	uint64_t keys[4];
	uint8_t h[KVFS_HASH_LEN], buf[SCHED_FE_FRAME_MAX];
	struct sched_decision d = { .verdict = SCHED_ACCEPT };
	struct sched_fe fe;
	struct srv srv;
	int p1, d2, d3;
	long len;
	char c;

	srv_up(&srv, 2, 1024);

	/* node 1 (prefill) and node 2 take FETCH; node 3 is an old kvfsd */
	p1 = connect_to(srv.ev_fd, 0);
	d2 = connect_to(srv.ev_fd, 0);
	d3 = connect_to(srv.ev_fd, 0);
	send_recs(p1, 1, 0, SCHED_EV_NS_FETCH, SCHED_EV_RESET, 0, 1);
	send_recs(d2, 2, 0, SCHED_EV_NS_FETCH, SCHED_EV_RESET, 0, 1);
	send_recs(d3, 3, 0, "-", SCHED_EV_RESET, 0, 1);
	ck_assert_uint_eq(counter_when(&srv, &srv.c.ev_frames, 3), 3);

	/* two requests from node 1: one decoding on node 2, one on 3 */
	for (uint32_t i = 0; i < 4; i++) {
		hash_of(h, 100 + i);
		keys[i] = sched_key_from_hash(h);
	}
	pthread_mutex_lock(&srv.lock);
	d.id = 1;
	d.prefill = 0;
	d.decode = 0;
	srv_handoff_add(&srv, &d,
			&(struct sched_body){ .keys = keys, .nkeys = 3 });
	d.id = 2;
	d.decode = 1;
	srv_handoff_add(&srv, &d,
			&(struct sched_body){ .keys = keys + 3, .nkeys = 1 });
	ck_assert_uint_eq(srv.c.ho_requests, 2);
	pthread_mutex_unlock(&srv.lock);

	/* node 2 sealing request 1's blocks hands nothing off; node 1
	 * sealing them (and one nobody waits for) does, to node 2 only */
	send_recs(d2, 2, 1, "m", SCHED_EV_INSERT, 100, 3);
	send_recs(p1, 1, 1, "m", SCHED_EV_INSERT, 99, 5);
	ck_assert_uint_eq(counter_when(&srv, &srv.c.ho_fetch_blocks, 3), 3);
	len = read_fe(d2, buf, &fe);
	ck_assert_int_eq(len, (long)sched_fe_frame_size(1, 3));
	ck_assert_uint_eq(fe.node, 2);
	ck_assert_uint_eq(fe.src, 1);
	ck_assert_uint_eq(fe.seq, 0);
	ck_assert_uint_eq(fe.count, 3);
	hash_of(h, 100);
	ck_assert_mem_eq(fe.hashes, h, KVFS_HASH_LEN);
	hash_of(h, 102);
	ck_assert_mem_eq(fe.hashes + 2 * KVFS_HASH_LEN, h, KVFS_HASH_LEN);
	/* request 2's block is due on node 3, whose stream never said it
	 * takes FETCH: dropped and counted, nothing sent there */
	ck_assert_uint_eq(counter_when(&srv, &srv.c.ho_dropped, 1), 1);
	{
		struct timeval tv = { 0, 200000 };

		setsockopt(d3, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		ck_assert_int_lt(read(d3, &c, 1), 0);
	}
	pthread_mutex_lock(&srv.lock);
	ck_assert_uint_eq(srv.c.ho_fetch_frames, 1);
	pthread_mutex_unlock(&srv.lock);

	close(p1);
	close(d2);
	close(d3);
	srv_down(&srv);
}
END_TEST

/* the FETCH frame next on fd holds the blocks named hash_of(first..),
 * but for skip, from node src */
static void fe_expect(int fd, uint64_t seq, uint16_t src, uint32_t first,
		      uint32_t n, uint32_t skip)
{
	uint8_t buf[SCHED_FE_FRAME_MAX], h[KVFS_HASH_LEN];
	struct sched_fe fe;
	uint32_t m = 0;

	read_fe(fd, buf, &fe);
	ck_assert_uint_eq(fe.seq, seq);
	ck_assert_uint_eq(fe.src, src);
	ck_assert_uint_eq(fe.ns_len, 1);
	ck_assert_mem_eq(fe.ns, "m", 1);
	for (uint32_t i = first; i < first + n; i++) {
		if (i == skip)
			continue;
		hash_of(h, i);
		ck_assert_uint_lt(m, fe.count);
		ck_assert_mem_eq(fe.hashes + m++ * KVFS_HASH_LEN, h,
				 KVFS_HASH_LEN);
	}
	ck_assert_uint_eq(fe.count, m);
}

/* through the daemon's index and listener: a prefix cached on the
 * prefill node goes to the decode node at once, by /v1/schedule or, for
 * a held request, by its dispatch (the listener woken for it), and only
 * the blocks the decode node lacks */
START_TEST(test_listener_cached)
{
	uint64_t keys[5];
	uint8_t hs[5][KVFS_HASH_LEN];
	struct sched_body q = { .keys = keys, .hash = hs, .nkeys = 5 };
	struct sched_decision d = { .verdict = SCHED_ACCEPT, .id = 1 };
	struct sched_dispatch dp = { .id = 2, .ninst = 1 };
	struct srv srv;
	int p1, d2;

	srv_up(&srv, 1, 1024);
	p1 = connect_to(srv.ev_fd, 0);
	d2 = connect_to(srv.ev_fd, 0);
	send_recs(p1, 1, 0, SCHED_EV_NS_FETCH, SCHED_EV_RESET, 0, 1);
	send_recs(d2, 2, 0, SCHED_EV_NS_FETCH, SCHED_EV_RESET, 0, 1);
	/* node 1 holds blocks 200..203, node 2 holds 201 */
	send_recs(p1, 1, 1, "m", SCHED_EV_INSERT, 200, 4);
	send_recs(d2, 2, 1, "m", SCHED_EV_INSERT, 201, 1);
	ck_assert_uint_eq(counter_when(&srv, &srv.c.ev_records, 7), 7);
	prompt(keys, hs, 200, 5);
	for (uint32_t i = 0; i < 5; i++)
		keys[i] = sched_key_from_hash(hs[i]);
	strcpy(q.ns, "m");

	/* scheduled: 200, 202 and 203 go at once; 204 when node 1 seals it */
	pthread_mutex_lock(&srv.lock);
	srv_handoff_add(&srv, &d, &q);
	ck_assert_uint_eq(srv.c.ho_requests, 1);
	pthread_mutex_unlock(&srv.lock);
	fe_expect(d2, 0, 1, 200, 4, 201);
	send_recs(p1, 1, 2, "m", SCHED_EV_INSERT, 204, 1);
	fe_expect(d2, 1, 1, 204, 1, UINT32_MAX);

	/* held: nothing at its schedule; at its dispatch, the prefix node 1
	 * holds then (200..204), but 201 */
	d.id = 2;
	d.held = true;
	pthread_mutex_lock(&srv.lock);
	srv_handoff_add(&srv, &d, &q);
	ck_assert_uint_eq(srv.c.ho_requests, 1);
	ck_assert_uint_eq(srv.c.ho_fetch_blocks, 4);
	srv_handoff_dispatch(&srv, &dp);
	ck_assert_uint_eq(srv.c.ho_requests, 2);
	pthread_mutex_unlock(&srv.lock);
	fe_expect(d2, 2, 1, 200, 5, 201);
	ck_assert_uint_eq(counter_when(&srv, &srv.c.ho_fetch_blocks, 8), 8);
	pthread_mutex_lock(&srv.lock);
	ck_assert_uint_eq(srv.c.ho_dropped, 0);
	pthread_mutex_unlock(&srv.lock);

	close(p1);
	close(d2);
	srv_down(&srv);
}
END_TEST

/* a destination that reads slowly: FETCH frames wait in the stream's
 * output once loopback's send buffer (up to tcp_wmem's 4 MiB) is full,
 * the listener goes on serving every stream meanwhile (it never reads a
 * socket that is only writable), and they all arrive in order but for
 * those dropped, and counted, past SRV_FE_OUT_MAX */
START_TEST(test_backpressure)
{
	enum { N = 204800, BATCH = 1024 };
	struct sched_decision d = { .verdict = SCHED_ACCEPT, .id = 1 };
	struct sched_ev_rec *recs = calloc(N, sizeof(*recs));
	uint64_t *keys = calloc(N, sizeof(*keys));
	uint8_t *buf = malloc(sched_ev_frame_size(1, BATCH));
	uint8_t fb[SCHED_FE_FRAME_MAX];
	int p1, d2;
	uint64_t seq = 0, dropped, sent;
	uint32_t got = 0;
	struct srv srv;
	long len;

	ck_assert(recs && keys && buf);
	srv_up(&srv, 1, N);

	p1 = connect_to(srv.ev_fd, 0);
	/* a small window, so the conductor's sends back up */
	d2 = connect_to(srv.ev_fd, 4096);
	send_recs(p1, 1, 0, SCHED_EV_NS_FETCH, SCHED_EV_RESET, 0, 1);
	send_recs(d2, 2, 0, SCHED_EV_NS_FETCH, SCHED_EV_RESET, 0, 1);
	ck_assert_uint_eq(counter_when(&srv, &srv.c.ev_frames, 2), 2);

	for (uint32_t i = 0; i < N; i++) {
		recs[i].op = SCHED_EV_INSERT;
		hash_of(recs[i].hash, 10000 + i);
		keys[i] = sched_key_from_hash(recs[i].hash);
	}
	pthread_mutex_lock(&srv.lock);
	srv_handoff_add(&srv, &d,
			&(struct sched_body){ .keys = keys, .nkeys = N });
	pthread_mutex_unlock(&srv.lock);
	/* kvfsd's batches, each taken before the next goes */
	for (uint32_t b = 0; b < N / BATCH; b++) {
		len = sched_ev_encode(buf, sched_ev_frame_size(1, BATCH), 1,
				      1 + b, "m", recs + b * BATCH, BATCH);
		ck_assert_int_gt(len, 0);
		ck_assert_int_eq(write(p1, buf, (size_t)len), len);
		ck_assert_uint_eq(counter_when(&srv, &srv.c.ev_frames, 3 + b),
				  3 + b);
	}
	pthread_mutex_lock(&srv.lock);
	sent = srv.c.ho_fetch_blocks;
	dropped = srv.c.ho_dropped;
	pthread_mutex_unlock(&srv.lock);
	ck_assert_uint_eq(sent + dropped, N);
	ck_assert_uint_gt(sent, 0);

	/* read what was sent; the listener must stay live meanwhile */
	while (got < sent) {
		struct sched_fe fe;

		read_fe(d2, fb, &fe);
		ck_assert_uint_eq(fe.seq, seq++);
		got += fe.count;
		if (seq == 2) {
			/* room again: the next INSERT is still applied */
			send_recs(p1, 1, 1 + N / BATCH, "m", SCHED_EV_INSERT,
				  900000, 1);
			ck_assert_uint_eq(counter_when(&srv, &srv.c.ev_frames,
						       3 + N / BATCH),
					  3 + N / BATCH);
		}
	}
	ck_assert_uint_eq(got, sent);

	close(p1);
	close(d2);
	srv_down(&srv);
	free(recs);
	free(keys);
	free(buf);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sched_handoff");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_fe_roundtrip);
	tcase_add_test(tc, test_fe_garbage);
	tcase_add_test(tc, test_books);
	tcase_add_test(tc, test_books_caps_expiry);
	tcase_add_test(tc, test_books_cached);
	tcase_add_test(tc, test_books_held);
	tcase_add_test(tc, test_stage);
	tcase_add_test(tc, test_sealed);
	tcase_add_test(tc, test_listener);
	tcase_add_test(tc, test_listener_cached);
	tcase_add_test(tc, test_backpressure);
	suite_add_tcase(s, tc);
	return cs_run(s);
}
