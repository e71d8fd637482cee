/*
 * check_sched_event.c - sched/event.h: the block-event wire format, the
 * streaming decoder fed in pieces of every size, its refusals, and the
 * events applied to a scheduler's index (a test feeder standing in for
 * kvfsd).
 */
#include "config.h"

#include <string.h>

#include "tests/check_sched.h"
#include "src/common/crc32c.h"
#include "sched/event.h"

static void hash_of(uint8_t h[KVFS_HASH_LEN], uint32_t i)
{
	for (int k = 0; k < KVFS_HASH_LEN; k++)
		h[k] = (uint8_t)(i * 31 + k * 7 + 1);
	memcpy(h, &i, sizeof(i));
}

static uint32_t recs_of(struct sched_ev_rec *r, uint32_t n, uint8_t op,
			uint32_t first)
{
	for (uint32_t i = 0; i < n; i++) {
		r[i].op = op;
		hash_of(r[i].hash, first + i);
	}
	return n;
}

/* what the callback saw */
struct seen {
	unsigned n;
	uint8_t op[64];
	uint64_t key[64];
	uint16_t node;
	char ns[32];
	int fail_at; /* fail the nth record with -ENOMEM (0: never) */
};

static int collect(void *arg, const struct sched_ev *ev)
{
	struct seen *s = arg;

	if (s->fail_at && s->n + 1 == (unsigned)s->fail_at)
		return -ENOMEM;
	ck_assert_uint_lt(s->n, 64);
	s->op[s->n] = (uint8_t)ev->op;
	s->key[s->n] = sched_key_from_hash(ev->hash);
	s->node = ev->node;
	memcpy(s->ns, ev->ns, ev->ns_len);
	s->ns[ev->ns_len] = 0;
	s->n++;
	return 0;
}

START_TEST(test_layout)
{
	struct sched_ev_rec r[2];
	uint8_t buf[256];
	long n;

	recs_of(r, 2, SCHED_EV_INSERT, 5);
	r[1].op = SCHED_EV_EVICT;
	n = sched_ev_encode(buf, sizeof(buf), 0x0102, 0x1122334455667788ull,
			    "llama3-70b", r, 2);
	ck_assert_int_eq(n, 24 + 10 + 2 * 33 + 4);
	ck_assert_uint_eq(n, sched_ev_frame_size(10, 2));
	ck_assert(memcmp(buf, "KVEV", 4) == 0);
	ck_assert_uint_eq(buf[4], 1);
	ck_assert_uint_eq(buf[5], 0);
	ck_assert_uint_eq(buf[6], 0x02); /* little-endian node */
	ck_assert_uint_eq(buf[7], 0x01);
	ck_assert_uint_eq(buf[8], 0x88); /* little-endian seq */
	ck_assert_uint_eq(buf[15], 0x11);
	ck_assert_uint_eq(buf[16], 2);	/* count */
	ck_assert_uint_eq(buf[20], 10); /* ns_len */
	ck_assert(memcmp(buf + 24, "llama3-70b", 10) == 0);
	ck_assert_uint_eq(buf[34], SCHED_EV_INSERT);
	ck_assert(memcmp(buf + 35, r[0].hash, 32) == 0);
	ck_assert_uint_eq(buf[67], SCHED_EV_EVICT);

	ck_assert_int_eq(sched_ev_encode(buf, 50, 1, 0, "m", r, 2), -ENOSPC);
	ck_assert_int_eq(sched_ev_encode(buf, 256, 1, 0, ".kvfs", r, 2),
			 -EINVAL);
	ck_assert_int_eq(sched_ev_encode(buf, 256, 1, 0, "a/b", r, 2), -EINVAL);
	r[0].op = 9;
	ck_assert_int_eq(sched_ev_encode(buf, 256, 1, 0, "m", r, 2), -EINVAL);
	r[0].op = SCHED_EV_RESET; /* a RESET carries a zero hash */
	ck_assert_int_eq(sched_ev_encode(buf, 256, 1, 0, "m", r, 2), -EINVAL);
}
END_TEST

/* three frames, fed whole, byte by byte and in uneven pieces */
START_TEST(test_stream_pieces)
{
	static const size_t steps[] = { 1000000, 1, 7, 33, 100 };
	struct sched_ev_rec r[20];
	uint8_t buf[4096];
	size_t len = 0;

	for (uint64_t f = 0; f < 3; f++) {
		long n;

		recs_of(r, 20, f == 2 ? SCHED_EV_EVICT : SCHED_EV_INSERT,
			(uint32_t)(f * 20));
		n = sched_ev_encode(buf + len, sizeof(buf) - len, 7, f, "ns1",
				    r, f == 1 ? 0 : 20);
		ck_assert_int_gt(n, 0);
		len += (size_t)n;
	}
	for (size_t si = 0; si < sizeof(steps) / sizeof(steps[0]); si++) {
		struct sched_ev_decoder d;
		struct seen s = { 0 };

		sched_ev_decoder_init(&d);
		for (size_t off = 0; off < len; off += steps[si]) {
			size_t k =
				len - off < steps[si] ? len - off : steps[si];

			ck_assert_int_eq(
				sched_ev_feed(&d, buf + off, k, collect, &s),
				0);
		}
		ck_assert_uint_eq(s.n, 40);
		ck_assert_uint_eq(d.frames, 3);
		ck_assert_uint_eq(d.records, 40);
		ck_assert_uint_eq(s.node, 7);
		ck_assert_str_eq(s.ns, "ns1");
		ck_assert_uint_eq(s.op[0], SCHED_EV_INSERT);
		ck_assert_uint_eq(s.op[39], SCHED_EV_EVICT);
		hash_of(r[0].hash, 45);
		ck_assert_uint_eq(s.key[25], sched_key_from_hash(r[0].hash));
		sched_ev_decoder_release(&d);
	}
}
END_TEST

/* feed one frame after the bytes were tampered with by fix(); with
 * recrc the CRC is made right again, so a later check must refuse it */
static int feed_bad(void (*fix)(uint8_t *buf), bool recrc, uint64_t seq,
		    unsigned *n)
{
	struct sched_ev_decoder d;
	struct sched_ev_rec r[3];
	struct seen s = { 0 };
	uint8_t buf[512];
	long len;
	int rc;

	recs_of(r, 3, SCHED_EV_INSERT, 1);
	len = sched_ev_encode(buf, sizeof(buf), 3, seq, "ns", r, 3);
	ck_assert_int_gt(len, 0);
	if (fix)
		fix(buf);
	if (recrc) {
		uint32_t crc = kvfs_crc32c(0, buf, (size_t)len - 4);

		for (int i = 0; i < 4; i++)
			buf[len - 4 + i] = (uint8_t)(crc >> (8 * i));
	}
	sched_ev_decoder_init(&d);
	rc = sched_ev_feed(&d, buf, (size_t)len, collect, &s);
	/* the stream is over: even a good frame is refused now */
	if (rc < 0) {
		len = sched_ev_encode(buf, sizeof(buf), 3, 0, "ns", r, 3);
		ck_assert_int_eq(
			sched_ev_feed(&d, buf, (size_t)len, collect, &s), rc);
	}
	*n = s.n;
	sched_ev_decoder_release(&d);
	return rc;
}

static void bad_magic(uint8_t *b)
{
	b[0] = 'X';
}
static void bad_version(uint8_t *b)
{
	b[4] = 2;
}
static void bad_flags(uint8_t *b)
{
	b[5] = 1;
}
static void bad_reserved(uint8_t *b)
{
	b[22] = 1;
}
static void bad_crc(uint8_t *b)
{
	b[24 + 2 + 33 + 5] ^= 1;
}
static void bad_op(uint8_t *b)
{
	b[24 + 2 + 33] = 7;
}
static void bad_ns(uint8_t *b)
{
	b[24] = '.';
}

START_TEST(test_refusals)
{
	unsigned n;

	ck_assert_int_eq(feed_bad(NULL, false, 0, &n), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_int_eq(feed_bad(bad_magic, true, 0, &n), -EBADMSG);
	ck_assert_int_eq(feed_bad(bad_version, true, 0, &n), -EPROTONOSUPPORT);
	ck_assert_int_eq(feed_bad(bad_flags, true, 0, &n), -EBADMSG);
	ck_assert_int_eq(feed_bad(bad_reserved, true, 0, &n), -EBADMSG);
	/* a bad frame applies none of its records, not even the first */
	ck_assert_int_eq(feed_bad(bad_crc, false, 0, &n), -EBADMSG);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(feed_bad(bad_op, true, 0, &n), -EBADMSG);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(feed_bad(bad_ns, true, 0, &n), -EBADMSG);
	ck_assert_uint_eq(n, 0);
	/* a stream starts at seq 0 */
	ck_assert_int_eq(feed_bad(NULL, false, 5, &n), -EPROTO);
}
END_TEST

START_TEST(test_sequence)
{
	struct sched_ev_decoder d;
	struct sched_ev_rec r[1];
	struct seen s = { 0 };
	uint8_t buf[256];
	long n;

	recs_of(r, 1, SCHED_EV_INSERT, 1);
	sched_ev_decoder_init(&d);
	n = sched_ev_encode(buf, sizeof(buf), 4, 0, "ns", r, 1);
	ck_assert_int_eq(sched_ev_feed(&d, buf, (size_t)n, collect, &s), 0);
	n = sched_ev_encode(buf, sizeof(buf), 4, 1, "ns", r, 1);
	ck_assert_int_eq(sched_ev_feed(&d, buf, (size_t)n, collect, &s), 0);
	/* seq 3 after 1: a frame was lost */
	n = sched_ev_encode(buf, sizeof(buf), 4, 3, "ns", r, 1);
	ck_assert_int_eq(sched_ev_feed(&d, buf, (size_t)n, collect, &s),
			 -EPROTO);
	sched_ev_decoder_release(&d);

	/* another node on the same stream */
	sched_ev_decoder_init(&d);
	n = sched_ev_encode(buf, sizeof(buf), 4, 0, "ns", r, 1);
	ck_assert_int_eq(sched_ev_feed(&d, buf, (size_t)n, collect, &s), 0);
	n = sched_ev_encode(buf, sizeof(buf), 5, 1, "ns", r, 1);
	ck_assert_int_eq(sched_ev_feed(&d, buf, (size_t)n, collect, &s),
			 -EPROTO);
	sched_ev_decoder_release(&d);

	/* a count too large is refused from the header alone */
	sched_ev_decoder_init(&d);
	n = sched_ev_encode(buf, sizeof(buf), 4, 0, "ns", r, 1);
	buf[18] = 0x10; /* count 2^20 + 1 */
	ck_assert_int_eq(sched_ev_feed(&d, buf, SCHED_EV_HDR, collect, &s),
			 -EBADMSG);
	sched_ev_decoder_release(&d);

	/* the callback's error ends the stream and is returned */
	sched_ev_decoder_init(&d);
	s = (struct seen){ .fail_at = 1 };
	n = sched_ev_encode(buf, sizeof(buf), 4, 0, "ns", r, 1);
	ck_assert_int_eq(sched_ev_feed(&d, buf, (size_t)n, collect, &s),
			 -ENOMEM);
	ck_assert_int_eq(d.err, -ENOMEM);
	sched_ev_decoder_release(&d);
}
END_TEST

/* reset_first: the conductor's rule that a stream opens with a RESET */
START_TEST(test_reset_first)
{
	struct sched_ev_decoder d;
	struct sched_ev_rec r[2];
	struct seen s = { 0 };
	uint8_t buf[256];
	long n;

	/* an INSERT first: refused, nothing applied */
	recs_of(r, 1, SCHED_EV_INSERT, 1);
	sched_ev_decoder_init(&d);
	d.reset_first = true;
	n = sched_ev_encode(buf, sizeof(buf), 4, 0, "ns", r, 1);
	ck_assert_int_eq(sched_ev_feed(&d, buf, (size_t)n, collect, &s),
			 -ENOMSG);
	ck_assert_uint_eq(s.n, 0);
	ck_assert(!d.started);
	sched_ev_decoder_release(&d);

	/* an empty frame (a keepalive) first: refused too */
	sched_ev_decoder_init(&d);
	d.reset_first = true;
	n = sched_ev_encode(buf, sizeof(buf), 4, 0, "-", NULL, 0);
	ck_assert_int_eq(sched_ev_feed(&d, buf, (size_t)n, collect, &s),
			 -ENOMSG);
	sched_ev_decoder_release(&d);

	/* RESET first, then anything, keepalives included */
	sched_ev_decoder_init(&d);
	d.reset_first = true;
	memset(&r[0], 0, sizeof(r[0]));
	r[0].op = SCHED_EV_RESET;
	recs_of(r + 1, 1, SCHED_EV_INSERT, 7);
	n = sched_ev_encode(buf, sizeof(buf), 4, 0, "ns", r, 2);
	ck_assert_int_eq(sched_ev_feed(&d, buf, (size_t)n, collect, &s), 0);
	n = sched_ev_encode(buf, sizeof(buf), 4, 1, "-", NULL, 0);
	ck_assert_int_eq(sched_ev_feed(&d, buf, (size_t)n, collect, &s), 0);
	n = sched_ev_encode(buf, sizeof(buf), 4, 2, "ns", r + 1, 1);
	ck_assert_int_eq(sched_ev_feed(&d, buf, (size_t)n, collect, &s), 0);
	ck_assert_uint_eq(s.n, 3);
	ck_assert_uint_eq(d.frames, 3);
	sched_ev_decoder_release(&d);
}
END_TEST

/* the feeder: node 1 announces blocks, evicts some, restarts */
START_TEST(test_apply)
{
	struct sched *s = cs_sched("kvcache-centric", 2, 1, NULL);
	struct sched_ev_decoder d;
	struct sched_ev_rec r[10];
	uint8_t buf[1024];
	uint64_t keys[10];
	struct sched_req req;
	struct sched_decision dec;
	long n;

	sched_ev_decoder_init(&d);
	r[0].op = SCHED_EV_RESET;
	memset(r[0].hash, 0, sizeof(r[0].hash));
	recs_of(r + 1, 9, SCHED_EV_INSERT, 100);
	n = sched_ev_encode(buf, sizeof(buf), 1, 0, "m", r, 10);
	ck_assert_int_eq(sched_ev_feed(&d, buf, (size_t)n, sched_ev_apply, s),
			 0);
	ck_assert_uint_eq(sched_node_blocks(s, 1), 9);
	for (int i = 0; i < 9; i++)
		keys[i] = sched_key_from_hash(r[1 + i].hash);

	/* a request for those blocks goes where they are */
	req = cs_req(keys, 9, 16);
	ck_assert_int_eq(sched_schedule(s, &req, 0, &dec), 0);
	ck_assert_uint_eq(dec.prefill, 1);
	ck_assert_uint_eq(dec.local_blocks, 9);

	recs_of(r, 4, SCHED_EV_EVICT, 105);
	n = sched_ev_encode(buf, sizeof(buf), 1, 1, "m", r, 4);
	ck_assert_int_eq(sched_ev_feed(&d, buf, (size_t)n, sched_ev_apply, s),
			 0);
	ck_assert_uint_eq(sched_node_blocks(s, 1), 5);

	r[0].op = SCHED_EV_RESET;
	memset(r[0].hash, 0, sizeof(r[0].hash));
	n = sched_ev_encode(buf, sizeof(buf), 1, 2, "m", r, 1);
	ck_assert_int_eq(sched_ev_feed(&d, buf, (size_t)n, sched_ev_apply, s),
			 0);
	ck_assert_uint_eq(sched_node_blocks(s, 1), 0);
	ck_assert_uint_eq(sched_blocks(s), 0);
	sched_ev_decoder_release(&d);

	/* a node the scheduler does not have */
	sched_ev_decoder_init(&d);
	recs_of(r, 1, SCHED_EV_INSERT, 1);
	n = sched_ev_encode(buf, sizeof(buf), 40, 0, "m", r, 1);
	ck_assert_int_eq(sched_ev_feed(&d, buf, (size_t)n, sched_ev_apply, s),
			 -EINVAL);
	sched_ev_decoder_release(&d);
	sched_destroy(s);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("sched_event");
	TCase *tc = tcase_create("event");

	tcase_add_test(tc, test_layout);
	tcase_add_test(tc, test_stream_pieces);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_sequence);
	tcase_add_test(tc, test_reset_first);
	tcase_add_test(tc, test_apply);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return cs_run(suite());
}
