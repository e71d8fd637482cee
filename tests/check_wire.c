/* check_wire.c - kvstore/wire.h (frame codec) and kvstore/auth.h */
#include "config.h"

#include <errno.h>

#include "kvstore/auth.h"
#include "tests/testutil.h"
#include "kvstore/wire.h"

#define FRAME_MAX (KV_WIRE_HDR_LEN + KV_WIRE_META_MAX + 64)

static const uint8_t SECRET[] = "0123456789abcdef-cluster";
static const uint8_t OTHER[] = "0123456789abcdef-intruder";

/* one message of each type, fields filled */
static void sample(struct kv_wire_msg *m, uint8_t type, uint64_t data)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
	m->id = 0x1122334455667788ull + type;
	switch (type) {
	case KV_WIRE_GET:
	case KV_WIRE_HAS:
	case KV_WIRE_LOCATE:
		tu_hash(m->hash, type, 1);
		snprintf(m->ns, sizeof(m->ns), "llama-3/tp%u", type);
		m->ns[5] = '_';
		break;
	case KV_WIRE_PUT:
	case KV_WIRE_ALLOC:
		tu_hash(m->hash, type, 1);
		snprintf(m->ns, sizeof(m->ns), "model-%u", type);
		/* fall through */
	case KV_WIRE_GET_OK:
	case KV_WIRE_LOCATE_OK:
		m->size = type == KV_WIRE_ALLOC || type == KV_WIRE_LOCATE_OK
				  ? 4096
				  : data;
		m->crc = 0xdeadbeef;
		m->block_tokens = 16;
		m->has_parent = true;
		tu_hash(m->parent, type, 2);
		if (type == KV_WIRE_LOCATE_OK) {
			m->addr = 0x7f0000001000ull;
			m->rkey = 77;
			m->token = 99;
		}
		break;
	case KV_WIRE_HELLO:
	case KV_WIRE_CHALLENGE:
	case KV_WIRE_AUTH:
		memset(m->nonce, type == KV_WIRE_AUTH ? 0 : 0xa5, 32);
		memset(m->mac, type == KV_WIRE_HELLO ? 0 : 0x5a, 32);
		if (type == KV_WIRE_HELLO) {
			m->transports = KV_WIRE_TP_TCP;
			snprintf(m->node, sizeof(m->node), "node-1.a_b");
			snprintf(m->target, sizeof(m->target), "%063d", 7);
		}
		break;
	case KV_WIRE_AUTH_OK:
		m->transports = KV_WIRE_TP_TCP | KV_WIRE_TP_RDMA;
		break;
	case KV_WIRE_HAS_OK:
		m->present = 1;
		break;
	case KV_WIRE_ERR:
		m->err = ENOENT;
		break;
	case KV_WIRE_RDMA_EP:
		m->ep.lid = 3;
		m->ep.port = 1;
		m->ep.mtu = 5;
		m->ep.qpn = 0x123;
		m->ep.psn = 0x456;
		m->ep.rkey = 9;
		m->ep.addr = 1u << 20;
		m->ep.len = 1u << 24;
		memset(m->ep.gid, 0xfe, 16);
		break;
	case KV_WIRE_ALLOC_OK:
		m->addr = 4096;
		m->rkey = 5;
		m->token = 6;
		break;
	case KV_WIRE_RELEASE:
	case KV_WIRE_COMMIT:
		m->token = 42;
		break;
	default:
		break;
	}
}

/* encode m + data bytes into buf; returns the frame length */
static size_t frame(const struct kv_wire_msg *m, uint8_t *buf, size_t cap)
{
	long n = kv_wire_encode(m, buf, cap);

	ck_assert_int_gt(n, 0);
	if (kv_wire_type_has_data(m->type)) {
		ck_assert_uint_le((size_t)n + m->size, cap);
		memset(buf + n, 0xab, m->size);
		n += (long)m->size;
	}
	return (size_t)n;
}

START_TEST(test_roundtrip)
{
	uint8_t buf[FRAME_MAX];
	struct kv_wire_msg m, d;
	const void *data;
	size_t len, flen;
	unsigned types = 0;

	for (unsigned t = 0; t < 256; t++) {
		if (!kv_wire_type_known(t))
			continue;
		types++;
		sample(&m, (uint8_t)t, 40);
		len = frame(&m, buf, sizeof(buf));
		ck_assert_int_eq(kv_wire_parse(buf, len, &d, &data, &flen), 0);
		ck_assert_uint_eq(flen, len);
		ck_assert_msg(memcmp(&m, &d, sizeof(m)) == 0, "type %s",
			      kv_wire_type_name(t));
		if (kv_wire_type_has_data(t))
			ck_assert_ptr_eq(data, buf + len - 40);
	}
	ck_assert_uint_eq(types, 22);
	ck_assert_str_eq(kv_wire_type_name(KV_WIRE_GET_OK), "GET_OK");
	ck_assert_str_eq(kv_wire_type_name(200), "?");
}
END_TEST

START_TEST(test_truncated)
{
	uint8_t buf[FRAME_MAX];
	struct kv_wire_msg m, d;
	size_t len;

	for (unsigned t = 0; t < 256; t++) {
		if (!kv_wire_type_known(t))
			continue;
		sample(&m, (uint8_t)t, 17);
		len = frame(&m, buf, sizeof(buf));
		for (size_t i = 0; i < len; i++)
			ck_assert_msg(kv_wire_parse(buf, i, &d, NULL, NULL) ==
					      -EAGAIN,
				      "type %s prefix %zu accepted",
				      kv_wire_type_name(t), i);
	}
}
END_TEST

/* flip header fields: each must be refused */
START_TEST(test_bad_header)
{
	uint8_t buf[FRAME_MAX], bad[FRAME_MAX];
	struct kv_wire_msg m, d;
	size_t len;

	sample(&m, KV_WIRE_GET, 0);
	len = frame(&m, buf, sizeof(buf));

	memcpy(bad, buf, len);
	bad[0] = 'X'; /* magic */
	ck_assert_int_eq(kv_wire_parse(bad, len, &d, NULL, NULL), -EBADMSG);
	memcpy(bad, buf, len);
	bad[4] = 1; /* version 1: untagged frames, unbound handshake */
	ck_assert_int_eq(kv_wire_parse(bad, len, &d, NULL, NULL), -EPROTO);
	memcpy(bad, buf, len);
	bad[5] = 99; /* type */
	ck_assert_int_eq(kv_wire_parse(bad, len, &d, NULL, NULL), -EBADMSG);
	memcpy(bad, buf, len);
	bad[6] = 2; /* an unknown flag */
	ck_assert_int_eq(kv_wire_parse(bad, len, &d, NULL, NULL), -EBADMSG);
	memcpy(bad, buf, len);
	bad[14] = 1; /* reserved */
	ck_assert_int_eq(kv_wire_parse(bad, len, &d, NULL, NULL), -EBADMSG);
	memcpy(bad, buf, len);
	bad[11] = 0x80; /* payload_len 2 GiB: oversized */
	ck_assert_int_eq(kv_wire_parse(bad, len, &d, NULL, NULL), -EBADMSG);
	memcpy(bad, buf, len);
	bad[8]++; /* payload != meta on a type without data */
	ck_assert_int_eq(kv_wire_parse(bad, len + 1, &d, NULL, NULL), -EBADMSG);
	memcpy(bad, buf, len);
	bad[12] = 0xff;
	bad[13] = 0x7f; /* meta_len > max */
	ck_assert_int_eq(kv_wire_parse(bad, len, &d, NULL, NULL), -EBADMSG);
}
END_TEST

START_TEST(test_bad_meta)
{
	uint8_t buf[FRAME_MAX], bad[FRAME_MAX];
	struct kv_wire_msg m, d;
	size_t len;

	/* ns_len 0, ns_len past the meta, a NUL in the name */
	sample(&m, KV_WIRE_GET, 0);
	len = frame(&m, buf, sizeof(buf));
	memcpy(bad, buf, len);
	bad[KV_WIRE_HDR_LEN + 32] = 0;
	ck_assert_int_eq(kv_wire_parse(bad, len, &d, NULL, NULL), -EBADMSG);
	memcpy(bad, buf, len);
	bad[KV_WIRE_HDR_LEN + 32]++;
	ck_assert_int_eq(kv_wire_parse(bad, len, &d, NULL, NULL), -EBADMSG);
	memcpy(bad, buf, len);
	bad[KV_WIRE_HDR_LEN + 37] = 0;
	ck_assert_int_eq(kv_wire_parse(bad, len, &d, NULL, NULL), -EBADMSG);

	/* PUT: size disagrees with the data length; unknown blk flag */
	sample(&m, KV_WIRE_PUT, 8);
	len = frame(&m, buf, sizeof(buf));
	memcpy(bad, buf, len);
	bad[KV_WIRE_HDR_LEN + 32] = 9;
	ck_assert_int_eq(kv_wire_parse(bad, len, &d, NULL, NULL), -EBADMSG);
	memcpy(bad, buf, len);
	bad[KV_WIRE_HDR_LEN + 32 + 16] = 4;
	ck_assert_int_eq(kv_wire_parse(bad, len, &d, NULL, NULL), -EBADMSG);
	/* bit 1 says the namespace is open, and round-trips */
	memcpy(bad, buf, len);
	bad[KV_WIRE_HDR_LEN + 32 + 16] |= 2;
	ck_assert_int_eq(kv_wire_parse(bad, len, &d, NULL, NULL), 0);
	ck_assert(d.ns_open);

	/* ERR with errno 0, HAS_OK with 2 */
	sample(&m, KV_WIRE_ERR, 0);
	len = frame(&m, buf, sizeof(buf));
	buf[KV_WIRE_HDR_LEN] = 0;
	ck_assert_int_eq(kv_wire_parse(buf, len, &d, NULL, NULL), -EBADMSG);
	sample(&m, KV_WIRE_HAS_OK, 0);
	len = frame(&m, buf, sizeof(buf));
	buf[KV_WIRE_HDR_LEN] = 2;
	ck_assert_int_eq(kv_wire_parse(buf, len, &d, NULL, NULL), -EBADMSG);

	/* encoder refuses what would not decode */
	sample(&m, KV_WIRE_GET, 0);
	m.ns[0] = '\0';
	ck_assert_int_eq(kv_wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	sample(&m, KV_WIRE_GET, 0);
	ck_assert_int_eq(kv_wire_encode(&m, buf, 30), -ENOSPC);
	m.type = 99;
	ck_assert_int_eq(kv_wire_encode(&m, buf, sizeof(buf)), -EINVAL);
}
END_TEST

/* random garbage: never accepted as more than it is, never crashes */
START_TEST(test_garbage)
{
	uint8_t buf[FRAME_MAX];
	struct kv_wire_msg d;
	uint64_t x = 12345;
	unsigned accepted = 0;

	for (int i = 0; i < 20000; i++) {
		size_t len = (size_t)(x % sizeof(buf));

		for (size_t k = 0; k < len; k++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			buf[k] = (uint8_t)(x >> 56);
		}
		if (i % 2 && len >= 8) { /* a good magic and version */
			memcpy(buf, KV_WIRE_MAGIC, 4);
			buf[4] = KV_WIRE_VERSION;
		}
		if (kv_wire_parse(buf, len, &d, NULL, NULL) == 0)
			accepted++;
	}
	ck_assert_uint_lt(accepted, 10);
}
END_TEST

START_TEST(test_auth_ok)
{
	struct kv_auth c, s;
	struct kv_wire_msg hello, ch, au, ok = { .type = KV_WIRE_AUTH_OK };

	ck_assert_int_eq(kv_auth_init(&c, KV_AUTH_CLIENT, SECRET,
				      sizeof(SECRET) - 1, NULL),
			 0);
	ck_assert_int_eq(kv_auth_init(&s, KV_AUTH_SERVER, SECRET,
				      sizeof(SECRET) - 1, NULL),
			 0);
	ck_assert_int_eq(kv_auth_client_hello(&c, NULL, &hello), 0);
	ck_assert_int_eq(kv_auth_server_challenge(&s, &hello, &ch), 0);
	ck_assert_int_eq(kv_auth_client_answer(&c, &ch, &au), 0);
	ck_assert_int_eq(kv_auth_server_verify(&s, &au), 0);
	ck_assert(kv_auth_done(&s));
	ck_assert_int_eq(kv_auth_client_finish(&c, &ok), 0);
	ck_assert(kv_auth_done(&c));
	/* out of order afterwards */
	ck_assert_int_eq(kv_auth_server_verify(&s, &au), -EPROTO);
	ck_assert_int_eq(kv_auth_init(&c, KV_AUTH_CLIENT, SECRET, 0, NULL),
			 -EINVAL);
}
END_TEST

START_TEST(test_auth_refused)
{
	struct kv_auth c, s, c2, s2;
	struct kv_wire_msg hello, ch, au, replay;
	struct kv_wire_msg fail = { .type = KV_WIRE_AUTH_FAIL };

	/* a server without the secret: the client sees it at once */
	kv_auth_init(&c, KV_AUTH_CLIENT, SECRET, sizeof(SECRET) - 1, NULL);
	kv_auth_init(&s, KV_AUTH_SERVER, OTHER, sizeof(OTHER) - 1, NULL);
	kv_auth_client_hello(&c, NULL, &hello);
	ck_assert_int_eq(kv_auth_server_challenge(&s, &hello, &ch), 0);
	ck_assert_int_eq(kv_auth_client_answer(&c, &ch, &au), -EACCES);
	ck_assert(!kv_auth_done(&c));

	/* a client without the secret that answers anyway */
	kv_auth_init(&c, KV_AUTH_CLIENT, OTHER, sizeof(OTHER) - 1, NULL);
	kv_auth_init(&s, KV_AUTH_SERVER, SECRET, sizeof(SECRET) - 1, NULL);
	kv_auth_client_hello(&c, NULL, &hello);
	kv_auth_server_challenge(&s, &hello, &ch);
	memset(&au, 0, sizeof(au));
	au.type = KV_WIRE_AUTH;
	ck_assert_int_eq(kv_auth_server_verify(&s, &au), -EACCES);
	ck_assert(!kv_auth_done(&s));
	ck_assert_int_eq(kv_auth_client_finish(&c, &fail), -EPROTO);

	/* a replayed proof from another session fails on a fresh nonce */
	kv_auth_init(&c, KV_AUTH_CLIENT, SECRET, sizeof(SECRET) - 1, NULL);
	kv_auth_init(&s, KV_AUTH_SERVER, SECRET, sizeof(SECRET) - 1, NULL);
	kv_auth_client_hello(&c, NULL, &hello);
	kv_auth_server_challenge(&s, &hello, &ch);
	kv_auth_client_answer(&c, &ch, &replay);
	kv_auth_init(&s2, KV_AUTH_SERVER, SECRET, sizeof(SECRET) - 1, NULL);
	kv_auth_server_challenge(&s2, &hello, &ch);
	ck_assert_int_eq(kv_auth_server_verify(&s2, &replay), -EACCES);

	/* the server's proof cannot pass as the client's */
	kv_auth_init(&c2, KV_AUTH_CLIENT, SECRET, sizeof(SECRET) - 1, NULL);
	kv_auth_init(&s, KV_AUTH_SERVER, SECRET, sizeof(SECRET) - 1, NULL);
	kv_auth_client_hello(&c2, NULL, &hello);
	kv_auth_server_challenge(&s, &hello, &ch);
	memset(&au, 0, sizeof(au));
	au.type = KV_WIRE_AUTH;
	memcpy(au.mac, ch.mac, sizeof(au.mac));
	ck_assert_int_eq(kv_auth_server_verify(&s, &au), -EACCES);

	/* a reflected HELLO (our own nonce back) */
	kv_auth_init(&c, KV_AUTH_CLIENT, SECRET, sizeof(SECRET) - 1, NULL);
	kv_auth_client_hello(&c, NULL, &hello);
	memset(&ch, 0, sizeof(ch));
	ch.type = KV_WIRE_CHALLENGE;
	memcpy(ch.nonce, hello.nonce, sizeof(ch.nonce));
	ck_assert_int_eq(kv_auth_client_answer(&c, &ch, &au), -EACCES);
}
END_TEST

/* HELLO carries both node ids; a handshake for another node fails */
START_TEST(test_auth_bound)
{
	struct kv_auth c, s;
	struct kv_wire_msg hello, ch, au, d;
	uint8_t buf[KV_WIRE_HDR_LEN + KV_WIRE_META_MAX];
	uint8_t cs[KV_AUTH_KEY_LEN], cr[KV_AUTH_KEY_LEN];
	uint8_t ss[KV_AUTH_KEY_LEN], sr[KV_AUTH_KEY_LEN];
	long n;

	kv_auth_init(&c, KV_AUTH_CLIENT, SECRET, sizeof(SECRET) - 1, "n-1");
	ck_assert_int_eq(kv_auth_client_hello(&c, "n-2", &hello), 0);
	n = kv_wire_encode(&hello, buf, sizeof(buf));
	ck_assert_int_eq(n, KV_WIRE_HDR_LEN + 36 + 2 * KV_WIRE_ID_LEN);
	ck_assert_int_eq(kv_wire_parse(buf, (size_t)n, &d, NULL, NULL), 0);
	ck_assert_str_eq(d.node, "n-1");
	ck_assert_str_eq(d.target, "n-2");
	/* an id must be padded with NULs and printable */
	buf[KV_WIRE_HDR_LEN + 36 + 10] = 'x';
	ck_assert_int_eq(kv_wire_parse(buf, (size_t)n, &d, NULL, NULL),
			 -EBADMSG);
	buf[KV_WIRE_HDR_LEN + 36 + 10] = 0;
	buf[KV_WIRE_HDR_LEN + 36 + 1] = '\n';
	ck_assert_int_eq(kv_wire_parse(buf, (size_t)n, &d, NULL, NULL),
			 -EBADMSG);

	/* node n-3 is not the node n-1 meant */
	kv_auth_init(&s, KV_AUTH_SERVER, SECRET, sizeof(SECRET) - 1, "n-3");
	ck_assert_int_eq(kv_auth_server_challenge(&s, &hello, &ch), -EACCES);
	/* a challenge of a server that changed the ids fails the proof */
	kv_auth_init(&s, KV_AUTH_SERVER, SECRET, sizeof(SECRET) - 1, "n-3");
	snprintf(hello.target, sizeof(hello.target), "n-3");
	ck_assert_int_eq(kv_auth_server_challenge(&s, &hello, &ch), 0);
	ck_assert_int_eq(kv_auth_client_answer(&c, &ch, &au), -EACCES);

	/* n-2 itself: done, each side's send key is the other's receive
	 * key, and the two directions differ */
	kv_auth_init(&c, KV_AUTH_CLIENT, SECRET, sizeof(SECRET) - 1, "n-1");
	kv_auth_init(&s, KV_AUTH_SERVER, SECRET, sizeof(SECRET) - 1, "n-2");
	ck_assert_int_eq(kv_auth_keys(&c, cs, cr), -EPROTO);
	kv_auth_client_hello(&c, "n-2", &hello);
	ck_assert_int_eq(kv_auth_server_challenge(&s, &hello, &ch), 0);
	ck_assert_int_eq(kv_auth_client_answer(&c, &ch, &au), 0);
	ck_assert_int_eq(kv_auth_server_verify(&s, &au), 0);
	d.type = KV_WIRE_AUTH_OK;
	ck_assert_int_eq(kv_auth_client_finish(&c, &d), 0);
	ck_assert_str_eq(kv_auth_peer(&s), "n-1");
	ck_assert_str_eq(kv_auth_peer(&c), "n-2");
	ck_assert_int_eq(kv_auth_keys(&c, cs, cr), 0);
	ck_assert_int_eq(kv_auth_keys(&s, ss, sr), 0);
	ck_assert_mem_eq(cs, sr, sizeof(cs));
	ck_assert_mem_eq(cr, ss, sizeof(cr));
	ck_assert(memcmp(cs, cr, sizeof(cs)) != 0);
}
END_TEST

/* frame tags: checked in order; altered, replayed or reflected fail */
START_TEST(test_tags)
{
	struct kv_tagger tx, rx, self;
	uint8_t k1[KV_AUTH_KEY_LEN], k2[KV_AUTH_KEY_LEN];
	uint8_t msg[1000], t1[KV_WIRE_TAG_LEN], t2[KV_WIRE_TAG_LEN];

	memset(k1, 1, sizeof(k1));
	memset(k2, 2, sizeof(k2));
	memset(msg, 'm', sizeof(msg));
	ck_assert_int_eq(kv_tagger_init(&tx, k1), 0);
	ck_assert_int_eq(kv_tagger_init(&rx, k1), 0);
	ck_assert_int_eq(kv_tagger_init(&self, k2), 0);
	/* one tag over two updates checks against one over the whole */
	kv_tagger_begin(&tx);
	kv_tagger_update(&tx, msg, 300);
	kv_tagger_update(&tx, msg + 300, 700);
	ck_assert_int_eq(kv_tagger_finish(&tx, t1), 0);
	kv_tagger_begin(&rx);
	kv_tagger_update(&rx, msg, sizeof(msg));
	ck_assert_int_eq(kv_tagger_check(&rx, t1), 0);
	/* the next frame: the same bytes have another tag (a replay of
	 * the first fails), and one changed bit fails */
	kv_tagger_begin(&tx);
	kv_tagger_update(&tx, msg, sizeof(msg));
	kv_tagger_finish(&tx, t2);
	ck_assert(memcmp(t1, t2, sizeof(t1)) != 0);
	kv_tagger_begin(&rx);
	kv_tagger_update(&rx, msg, sizeof(msg));
	ck_assert_int_eq(kv_tagger_check(&rx, t1), -EBADMSG);
	msg[500] ^= 4;
	kv_tagger_begin(&tx);
	kv_tagger_update(&tx, msg, sizeof(msg));
	kv_tagger_finish(&tx, t1);
	msg[500] ^= 4;
	kv_tagger_begin(&rx);
	kv_tagger_update(&rx, msg, sizeof(msg));
	ck_assert_int_eq(kv_tagger_check(&rx, t1), -EBADMSG);
	/* the other direction's key (a reflection) */
	kv_tagger_begin(&self);
	kv_tagger_update(&self, msg, sizeof(msg));
	kv_tagger_finish(&self, t1);
	kv_tagger_begin(&rx);
	kv_tagger_update(&rx, msg, sizeof(msg));
	ck_assert_int_eq(kv_tagger_check(&rx, t1), -EBADMSG);
	kv_tagger_fini(&tx);
	kv_tagger_fini(&rx);
	kv_tagger_fini(&self);
}
END_TEST

/* a tagged frame is longer by its tags; its data follows the meta's */
START_TEST(test_tagged_parse)
{
	uint8_t buf[FRAME_MAX + 2 * KV_WIRE_TAG_LEN];
	struct kv_wire_msg m, d;
	const void *data;
	size_t len, flen;
	long n;

	sample(&m, KV_WIRE_GET_OK, 100);
	n = kv_wire_encode(&m, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	kv_wire_set_tagged(buf);
	memset(buf + n, 't', KV_WIRE_TAG_LEN);
	memset(buf + n + KV_WIRE_TAG_LEN, 'd', 100);
	memset(buf + n + KV_WIRE_TAG_LEN + 100, 't', KV_WIRE_TAG_LEN);
	len = (size_t)n + 100 + 2 * KV_WIRE_TAG_LEN;
	ck_assert_int_eq(kv_wire_parse(buf, len - 1, &d, &data, &flen),
			 -EAGAIN);
	ck_assert_int_eq(kv_wire_parse(buf, len, &d, &data, &flen), 0);
	ck_assert_uint_eq(flen, len);
	ck_assert_ptr_eq(data, buf + n + KV_WIRE_TAG_LEN);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("wire");
	TCase *tc = tcase_create("codec");

	tu_init("wire");
	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_truncated);
	tcase_add_test(tc, test_bad_header);
	tcase_add_test(tc, test_bad_meta);
	tcase_add_test(tc, test_garbage);
	suite_add_tcase(s, tc);
	tc = tcase_create("auth");
	tcase_add_test(tc, test_auth_ok);
	tcase_add_test(tc, test_auth_refused);
	tcase_add_test(tc, test_auth_bound);
	tcase_add_test(tc, test_tags);
	tcase_add_test(tc, test_tagged_parse);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
