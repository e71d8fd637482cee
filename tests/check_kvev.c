/*
 * check_kvev.c - sched/kvev.h: vLLM's KV event batches decoded from both
 * encodings (tagged arrays, maps), block hashes as bytes and as signed
 * and unsigned integers, the sequence rules (next, gap, restart), and
 * garbage refused without a crash or an allocation the bytes do not
 * justify.  Batches are built with msgpack-c's packer; a few are pinned
 * as bytes written from the msgpack spec by hand.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "sched/kvev.h"
#include "tests/check_sched.h"

/* what the callback saw */
struct seen {
	unsigned n;
	enum kvev_type type[16];
	int64_t block_size[16];
	uint32_t nkeys[16];
	uint64_t key[16][8];
	int fail_at; /* fail the nth event with -ENOSPC (0: never) */
};

static int collect(void *arg, const struct kvev_event *ev)
{
	struct seen *s = arg;

	if (s->fail_at && s->n + 1 == (unsigned)s->fail_at)
		return -ENOSPC;
	ck_assert_uint_lt(s->n, 16);
	s->type[s->n] = ev->type;
	s->block_size[s->n] = ev->block_size;
	s->nkeys[s->n] = ev->nkeys;
	for (uint32_t i = 0; i < ev->nkeys && i < 8; i++)
		s->key[s->n][i] = ev->keys[i];
	s->n++;
	return 0;
}

/* ---- building batches ---------------------------------------------------- */

struct mp {
	msgpack_sbuffer b;
	msgpack_packer pk;
};

static void mp_init(struct mp *m)
{
	msgpack_sbuffer_init(&m->b);
	msgpack_packer_init(&m->pk, &m->b, msgpack_sbuffer_write);
}

static void mp_str(struct mp *m, const char *s)
{
	msgpack_pack_str_with_body(&m->pk, s, strlen(s));
}

static void hash_of(uint8_t h[32], unsigned i)
{
	for (int k = 0; k < 32; k++)
		h[k] = (uint8_t)(i * 29 + k * 3 + 1);
}

/* [ts, [events...], 0] head: the caller packs nev events */
static void batch_head(struct mp *m, unsigned nev)
{
	msgpack_pack_array(&m->pk, 3);
	msgpack_pack_double(&m->pk, 1700000000.25);
	msgpack_pack_array(&m->pk, nev);
}

static void batch_tail(struct mp *m)
{
	msgpack_pack_uint64(&m->pk, 0); /* data_parallel_rank */
}

/* ["BlockStored", [n 32-byte hashes from first], nil, [tokens], bs,
 *  nil, "GPU"] */
static void stored_array(struct mp *m, unsigned first, unsigned n, uint64_t bs)
{
	uint8_t h[32];

	msgpack_pack_array(&m->pk, 7);
	mp_str(m, "BlockStored");
	msgpack_pack_array(&m->pk, n);
	for (unsigned i = 0; i < n; i++) {
		hash_of(h, first + i);
		msgpack_pack_bin_with_body(&m->pk, h, sizeof(h));
	}
	msgpack_pack_nil(&m->pk);
	msgpack_pack_array(&m->pk, 2);
	msgpack_pack_uint64(&m->pk, 1);
	msgpack_pack_uint64(&m->pk, 2);
	msgpack_pack_uint64(&m->pk, bs);
	msgpack_pack_nil(&m->pk);
	mp_str(m, "GPU");
}

static int decode(struct mp *m, struct seen *s, struct kvev_batch *b)
{
	return kvev_decode(m->b.data, m->b.size, collect, s, b);
}

/* ---- the two encodings ----------------------------------------------------
 */

START_TEST(test_array_bytes)
{
	struct mp m;
	struct seen s = { 0 };
	struct kvev_batch b;
	uint8_t h[32];

	mp_init(&m);
	batch_head(&m, 3);
	stored_array(&m, 0, 3, 16);
	msgpack_pack_array(&m.pk, 3);
	mp_str(&m, "BlockRemoved");
	msgpack_pack_array(&m.pk, 1);
	hash_of(h, 1);
	msgpack_pack_bin_with_body(&m.pk, h, sizeof(h));
	mp_str(&m, "GPU");
	msgpack_pack_array(&m.pk, 1);
	mp_str(&m, "AllBlocksCleared");
	batch_tail(&m);
	ck_assert_int_eq(decode(&m, &s, &b), 0);
	ck_assert_uint_eq(s.n, 3);
	ck_assert_uint_eq(b.events, 3);
	ck_assert_int_eq(b.dp_rank, 0);
	ck_assert(b.ts == 1700000000.25);
	ck_assert_int_eq(s.type[0], KVEV_STORED);
	ck_assert_int_eq(s.block_size[0], 16);
	ck_assert_uint_eq(s.nkeys[0], 3);
	for (unsigned i = 0; i < 3; i++) {
		uint64_t want = 0;

		hash_of(h, i);
		/* vLLM's int form: the last 8 bytes, big-endian */
		for (int k = 24; k < 32; k++)
			want = want << 8 | h[k];
		ck_assert_uint_eq(s.key[0][i], want);
	}
	ck_assert_int_eq(s.type[1], KVEV_REMOVED);
	ck_assert_uint_eq(s.nkeys[1], 1);
	ck_assert_uint_eq(s.key[1][0], s.key[0][1]);
	ck_assert_int_eq(s.block_size[1], -1);
	ck_assert_int_eq(s.type[2], KVEV_CLEARED);
	ck_assert_uint_eq(s.nkeys[2], 0);
	msgpack_sbuffer_destroy(&m.b);
}
END_TEST

START_TEST(test_map_ints)
{
	struct mp m;
	struct seen s = { 0 };
	struct kvev_batch b;

	mp_init(&m);
	/* no rank: [ts, events] */
	msgpack_pack_array(&m.pk, 2);
	msgpack_pack_uint64(&m.pk, 1700000000); /* an integer ts */
	msgpack_pack_array(&m.pk, 3);
	msgpack_pack_map(&m.pk, 4);
	mp_str(&m, "block_hashes");
	msgpack_pack_array(&m.pk, 4);
	msgpack_pack_uint64(&m.pk, 7);
	msgpack_pack_int64(&m.pk, -3);
	msgpack_pack_uint64(&m.pk, (1ull << 63) + 5);
	msgpack_pack_int64(&m.pk, INT64_MIN);
	mp_str(&m, "type"); /* the tag need not come first */
	mp_str(&m, "BlockStored");
	mp_str(&m, "block_size");
	msgpack_pack_uint64(&m.pk, 16);
	mp_str(&m, "lora_name"); /* unknown fields are ignored */
	msgpack_pack_nil(&m.pk);
	msgpack_pack_map(&m.pk, 2);
	mp_str(&m, "type");
	mp_str(&m, "BlockRemoved");
	mp_str(&m, "block_hashes");
	msgpack_pack_array(&m.pk, 1);
	msgpack_pack_int64(&m.pk, -3);
	msgpack_pack_map(&m.pk, 1);
	mp_str(&m, "type");
	mp_str(&m, "AllBlocksCleared");
	ck_assert_int_eq(decode(&m, &s, &b), 0);
	ck_assert_uint_eq(s.n, 3);
	ck_assert_int_eq(b.dp_rank, -1);
	ck_assert(b.ts == 1700000000.0);
	ck_assert_int_eq(s.type[0], KVEV_STORED);
	ck_assert_int_eq(s.block_size[0], 16);
	ck_assert_uint_eq(s.nkeys[0], 4);
	ck_assert_uint_eq(s.key[0][0], 7);
	ck_assert_uint_eq(s.key[0][1], UINT64_MAX - 2); /* two's complement */
	ck_assert_uint_eq(s.key[0][2], (1ull << 63) + 5);
	ck_assert_uint_eq(s.key[0][3], 1ull << 63);
	ck_assert_int_eq(s.type[1], KVEV_REMOVED);
	ck_assert_uint_eq(s.key[1][0], UINT64_MAX - 2);
	ck_assert_int_eq(s.type[2], KVEV_CLEARED);
	msgpack_sbuffer_destroy(&m.b);
}
END_TEST

/* bytes written by hand from the msgpack spec: [1.5, [["AllBlocksCleared"],
 * ["BlockRemoved", [h"0102", 5]]], nil] */
START_TEST(test_pinned)
{
	static const uint8_t
		v[] = {
			0x93, 0xcb, 0x3f, 0xf8, 0,    0,    0,
			0,    0,    0, /* [1.5, */
			0x92,	       /* [ */
			0x91, 0xb0, 'A',  'l',	'l',  'B',  'l',
			'o',  'c',  'k',  's',	'C',  'l',  'e',
			'a',  'r',  'e',  'd', /* ["AllBlocksCleared"] */
			0x92, 0xac, 'B',  'l',	'o',  'c',  'k',
			'R',  'e',  'm',  'o',	'v',  'e',  'd',
			0x92, 0xc4, 0x02, 0x01, 0x02, 0x05, /* [..] */
			0xc0,				    /* nil] */
		};
	struct seen s = { 0 };
	struct kvev_batch b;

	ck_assert_int_eq(kvev_decode(v, sizeof(v), collect, &s, &b), 0);
	ck_assert_uint_eq(s.n, 2);
	ck_assert(b.ts == 1.5);
	ck_assert_int_eq(b.dp_rank, -1);
	ck_assert_int_eq(s.type[0], KVEV_CLEARED);
	ck_assert_int_eq(s.type[1], KVEV_REMOVED);
	/* bytes shorter than 8: big-endian, all of them */
	ck_assert_uint_eq(s.key[1][0], 0x0102);
	ck_assert_uint_eq(s.key[1][1], 5);
	ck_assert_uint_eq(kvev_key_bytes((const uint8_t *)"\x01\x02", 2),
			  0x0102);
	/* vLLM's int.from_bytes(bytes(range(1, 11)), "big") & (2^64 - 1) */
	ck_assert_uint_eq(kvev_key_bytes((const uint8_t *)"\x01\x02\x03\x04"
							  "\x05\x06\x07\x08"
							  "\x09\x0a",
					 10),
			  0x030405060708090aull);
}
END_TEST

/* trailing fields may be left out (msgspec's omit_defaults); fewer than
 * the required ones may not; an unknown type is skipped and counted */
START_TEST(test_fields)
{
	struct mp m;
	struct seen s = { 0 };
	struct kvev_batch b;

	mp_init(&m);
	batch_head(&m, 2);
	msgpack_pack_array(&m.pk, 5);
	mp_str(&m, "BlockStored");
	msgpack_pack_array(&m.pk, 1);
	msgpack_pack_uint64(&m.pk, 9);
	msgpack_pack_uint64(&m.pk, 8); /* a parent */
	msgpack_pack_array(&m.pk, 0);
	msgpack_pack_nil(&m.pk); /* block size nil */
	msgpack_pack_array(&m.pk, 2);
	mp_str(&m, "BlockUpdated");
	msgpack_pack_uint64(&m.pk, 1);
	batch_tail(&m);
	ck_assert_int_eq(decode(&m, &s, &b), 0);
	ck_assert_uint_eq(s.n, 1);
	ck_assert_uint_eq(b.unknown, 1);
	ck_assert_int_eq(s.block_size[0], -1);
	ck_assert_uint_eq(s.key[0][0], 9);
	msgpack_sbuffer_destroy(&m.b);

	mp_init(&m);
	batch_head(&m, 1);
	msgpack_pack_array(&m.pk, 4); /* no block_size */
	mp_str(&m, "BlockStored");
	msgpack_pack_array(&m.pk, 0);
	msgpack_pack_nil(&m.pk);
	msgpack_pack_array(&m.pk, 0);
	batch_tail(&m);
	ck_assert_int_eq(decode(&m, &s, &b), -EBADMSG);
	msgpack_sbuffer_destroy(&m.b);
}
END_TEST

/* ---- a batch is checked whole ------------------------------------------- */

START_TEST(test_whole)
{
	struct mp m;
	struct seen s = { 0 };

	/* a good event, then one with a float hash: nothing applied */
	mp_init(&m);
	batch_head(&m, 2);
	stored_array(&m, 0, 2, 16);
	msgpack_pack_array(&m.pk, 2);
	mp_str(&m, "BlockRemoved");
	msgpack_pack_array(&m.pk, 1);
	msgpack_pack_double(&m.pk, 1.0);
	batch_tail(&m);
	ck_assert_int_eq(decode(&m, &s, NULL), -EBADMSG);
	ck_assert_uint_eq(s.n, 0);
	msgpack_sbuffer_destroy(&m.b);

	/* the callback's error stops the walk and comes back */
	mp_init(&m);
	batch_head(&m, 3);
	stored_array(&m, 0, 1, 16);
	stored_array(&m, 1, 1, 16);
	stored_array(&m, 2, 1, 16);
	batch_tail(&m);
	s.fail_at = 2;
	ck_assert_int_eq(decode(&m, &s, NULL), -ENOSPC);
	ck_assert_uint_eq(s.n, 1);
	msgpack_sbuffer_destroy(&m.b);
}
END_TEST

/* ---- garbage ------------------------------------------------------------- */

struct bad {
	const char *what;
	const char *bytes;
	size_t len;
	int rc;
};

#define BAD(w, b, rc)                                                          \
	{                                                                      \
		w, b, sizeof(b) - 1, rc                                        \
	}

static const struct bad bads[] = {
	BAD("empty", "", -EBADMSG),
	BAD("never used type 0xc1", "\xc1", -EBADMSG),
	BAD("a batch that is a number", "\x05", -EBADMSG),
	BAD("one element", "\x91\x01", -EBADMSG),
	BAD("four elements", "\x94\x01\x90\xc0\xc0", -EBADMSG),
	BAD("events not an array", "\x92\x01\x01", -EBADMSG),
	BAD("ts a string", "\x92\xa1x\x90", -EBADMSG),
	BAD("rank a string", "\x93\x01\x90\xa1x", -EBADMSG),
	BAD("trailing bytes", "\x92\x01\x90\x00", -EBADMSG),
	BAD("truncated",
	    "\x92\x01\x91\x92\xab"
	    "BlockRemov",
	    -EBADMSG),
	BAD("an event that is a number", "\x92\x01\x91\x05", -EBADMSG),
	BAD("an empty event", "\x92\x01\x91\x90", -EBADMSG),
	BAD("a tag that is bytes", "\x92\x01\x91\x91\xc4\x01x", -EBADMSG),
	BAD("a hash of no bytes",
	    "\x92\x01\x91\x92\xac"
	    "BlockRemoved"
	    "\x91\xc4\x00",
	    -EBADMSG),
	BAD("a hash that is nil",
	    "\x92\x01\x91\x92\xac"
	    "BlockRemoved"
	    "\x91\xc0",
	    -EBADMSG),
	BAD("hashes not an array",
	    "\x92\x01\x91\x92\xac"
	    "BlockRemoved"
	    "\x05",
	    -EBADMSG),
	BAD("a map event without type", "\x92\x01\x91\x80", -EBADMSG),
	BAD("a map event, type twice",
	    "\x92\x01\x91\x82\xa4type\xb0"
	    "AllBlocksCleared"
	    "\xa4type\xb0"
	    "AllBlocksCleared",
	    -EBADMSG),
	BAD("a map event, key not a string",
	    "\x92\x01\x91\x82\xa4type\xb0"
	    "AllBlocksCleared\x01\x01",
	    -EBADMSG),
	BAD("BlockRemoved map without hashes",
	    "\x92\x01\x91\x81\xa4type\xac"
	    "BlockRemoved",
	    -EBADMSG),
	BAD("a negative block size",
	    "\x92\x01\x91\x95\xab"
	    "BlockStored\x90\xc0\x90\xff",
	    -EBADMSG),
	/* a header claiming 2^32-1 elements in 5 bytes: refused before
	 * msgpack-c would allocate 100 GB for it */
	BAD("a huge array header", "\xdd\xff\xff\xff\xff", -EBADMSG),
	BAD("a huge map header", "\xdf\x7f\xff\xff\xff", -EBADMSG),
	BAD("a huge bin", "\xc6\xff\xff\xff\xff", -EBADMSG),
	BAD("a huge ext", "\xc9\xff\xff\xff\xff\x01", -EBADMSG),
	BAD("an ext hash",
	    "\x92\x01\x91\x92\xac"
	    "BlockRemoved"
	    "\x91\xd4\x01\x02",
	    -EBADMSG),
};

START_TEST(test_garbage)
{
	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		struct seen s = { 0 };
		int rc = kvev_decode(bads[i].bytes, bads[i].len, collect, &s,
				     NULL);

		ck_assert_msg(rc == bads[i].rc, "%s: %d, want %d", bads[i].what,
			      rc, bads[i].rc);
		ck_assert_uint_eq(s.n, 0);
	}
}
END_TEST

START_TEST(test_limits)
{
	uint8_t deep[64];
	struct seen s = { 0 };
	uint8_t *huge;

	/* nesting past KVEV_MAX_DEPTH */
	memset(deep, 0x91, sizeof(deep));
	deep[sizeof(deep) - 1] = 0x01;
	ck_assert_int_eq(kvev_decode(deep, sizeof(deep), collect, &s, NULL),
			 -EMSGSIZE);
	/* a payload past KVEV_MAX_PAYLOAD is refused unread */
	huge = calloc(1, KVEV_MAX_PAYLOAD + 1);
	ck_assert_ptr_nonnull(huge);
	ck_assert_int_eq(
		kvev_decode(huge, KVEV_MAX_PAYLOAD + 1, collect, &s, NULL),
		-EMSGSIZE);
	/* more values than KVEV_MAX_OBJECTS: a fixarray of positive
	 * fixints, each a value */
	huge[0] = 0xdd;
	huge[1] = (uint8_t)((KVEV_MAX_OBJECTS + 1) >> 24);
	huge[2] = (uint8_t)((KVEV_MAX_OBJECTS + 1) >> 16);
	huge[3] = (uint8_t)((KVEV_MAX_OBJECTS + 1) >> 8);
	huge[4] = (uint8_t)(KVEV_MAX_OBJECTS + 1);
	ck_assert_int_eq(
		kvev_decode(huge, 5 + KVEV_MAX_OBJECTS + 1, collect, &s, NULL),
		-EMSGSIZE);
	free(huge);
	/* a hash of 65 bytes */
	ck_assert_int_eq(kvev_decode("\x92\x01\x91\x92\xac"
				     "BlockRemoved"
				     "\x91\xc4\x41"
				     "0123456789012345678901234567890123456789"
				     "0123456789012345678901234",
				     5 + 12 + 3 + 65, collect, &s, NULL),
			 -EBADMSG);
	ck_assert_uint_eq(s.n, 0);
}
END_TEST

/* every prefix of a good batch, and every byte of it changed, decodes or
 * is refused: no crash, and a refused one applies nothing */
START_TEST(test_mutations)
{
	struct mp m;
	uint8_t *buf;

	mp_init(&m);
	batch_head(&m, 2);
	stored_array(&m, 0, 2, 16);
	msgpack_pack_map(&m.pk, 2);
	mp_str(&m, "type");
	mp_str(&m, "BlockRemoved");
	mp_str(&m, "block_hashes");
	msgpack_pack_array(&m.pk, 1);
	msgpack_pack_int64(&m.pk, -9);
	batch_tail(&m);
	buf = malloc(m.b.size);
	ck_assert_ptr_nonnull(buf);
	for (size_t n = 0; n < m.b.size; n++) {
		struct seen s = { 0 };

		ck_assert_int_lt(kvev_decode(m.b.data, n, collect, &s, NULL),
				 0);
		ck_assert_uint_eq(s.n, 0);
	}
	for (size_t i = 0; i < m.b.size; i++)
		for (unsigned v = 0; v < 256; v += 7) {
			struct seen s = { 0 };
			int rc;

			memcpy(buf, m.b.data, m.b.size);
			buf[i] = (uint8_t)v;
			rc = kvev_decode(buf, m.b.size, collect, &s, NULL);
			if (rc < 0)
				ck_assert_uint_eq(s.n, 0);
		}
	free(buf);
	msgpack_sbuffer_destroy(&m.b);
}
END_TEST

/* ---- the sequence -------------------------------------------------------- */

START_TEST(test_seq)
{
	uint64_t seq;

	ck_assert_int_eq(kvev_seq("\x00\x00\x00\x00\x00\x00\x01\x02", 8, &seq),
			 0);
	ck_assert_uint_eq(seq, 0x102);
	ck_assert_int_eq(kvev_seq("\xff\xff\xff\xff\xff\xff\xff\xff", 8, &seq),
			 0);
	ck_assert_uint_eq(seq, KVEV_SEQ_END);
	ck_assert_int_eq(kvev_seq("\x00\x01", 2, &seq), -EBADMSG);
	ck_assert_int_eq(kvev_seq("", 0, &seq), -EBADMSG);

	/* the first batch heard, whatever its seq */
	ck_assert_int_eq(kvev_seq_check(false, 0, 0), KVEV_NEXT);
	ck_assert_int_eq(kvev_seq_check(false, 9, 500), KVEV_NEXT);
	ck_assert_int_eq(kvev_seq_check(true, 4, 5), KVEV_NEXT);
	/* batches 5 and 6 lost */
	ck_assert_int_eq(kvev_seq_check(true, 4, 7), KVEV_GAP);
	/* the publisher restarted: back to 0, or just lower, or a repeat */
	ck_assert_int_eq(kvev_seq_check(true, 4, 0), KVEV_RESTART);
	ck_assert_int_eq(kvev_seq_check(true, 4, 2), KVEV_RESTART);
	ck_assert_int_eq(kvev_seq_check(true, 4, 4), KVEV_RESTART);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("kvev");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_array_bytes);
	tcase_add_test(tc, test_map_ints);
	tcase_add_test(tc, test_pinned);
	tcase_add_test(tc, test_fields);
	tcase_add_test(tc, test_whole);
	tcase_add_test(tc, test_garbage);
	tcase_add_test(tc, test_limits);
	tcase_add_test(tc, test_mutations);
	tcase_add_test(tc, test_seq);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return cs_run(suite());
}
