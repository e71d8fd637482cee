/*
 * check_hash.c - the contracts of src/hash.h and src/tokens.h.
 *
 * Pinned vectors were computed with tests/hash_ref.py, an independent
 * Python implementation; kvfs(7) quotes the first one as its worked example
 * (and the first SGLang one in "SGLang chain").
 * If one of them changes, the on-disk names of every cached block change:
 * that is a format break (kvfs-v2), never a test to "fix".
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/crc32c.h"
#include "src/common/hash.h"
#include "src/common/tokens.h"

/* "llama3-70b-tp8-ünïcödé" in UTF-8; octal escapes cannot swallow a letter */
#define NS_UNI "llama3-70b-tp8-\303\274n\303\257c\303\266d\303\251"

/* hash_ref.py --seed llama3-8b 4 */
#define SEED_EX                                                                \
	"9375f413bd5653141d0b475e5264b1c2a4a99ee02073c0833f18a3f5dab78505"
/* hash_ref.py llama3-8b 4 1 2 3 4 5 6 7 8 9 10 (9, 10: partial, ignored) */
#define EX_0 "1619866375d4acda39d6312b1e05d85f50a7be1171b26c088f2c354f8de51f34"
#define EX_1 "ca36b31ae4aec98828ba4565de41684c91db58094045e2f5cdf37838006adf5a"
/* hash_ref.py --seed llama3-70b-tp8-ünïcödé 16 */
#define SEED_UNI                                                               \
	"2c7fae42bffc7be7af66a3a78412df140ec686ebaeaa5dc5a5b638c72ccc5c01"
/* hash_ref.py llama3-70b-tp8-ünïcödé 2 100 200 300 400 */
#define UNI_0 "85bef8803694999ec2facb23f91bd610e9ee042f4dcc0bd17041ef10902f5200"
#define UNI_1 "528c2b16574f655f14379b0b1cea4f1744df8e7f6b6feb8ca44a33967a38d69b"
/* hash_ref.py m 1 0 1 2 */
#define B1_0 "0214f8a435cd00d5488faa27f5b57e107de99f502e4847200044bd376b0cad20"
#define B1_1 "51bdc85f26dc9adff5ceef0f1573ac6921c16e8a83d5dcb44e39b3c6ca43e342"
#define B1_2 "a6324197e0c070f7900e404b36404af2bd28e0a169026282c97595547d379e8e"
/* hash_ref.py test 2 4294967295 0 16909060 2147483648 */
#define LE_0 "5734d26eac9f9ad40a539e64aed9dd761224763cb6ed7515726b362cedfee53b"
#define LE_1 "b39595b3de6d523060e6bc41c73835bd3b5dc6999504e9e875f0215921976c05"

/* SGLang page keys: hash_ref.py --sglang 4 1 2 3 4 5 6 7 8 9 10 */
#define SG_0 "cf97adeedb59e05bfd73a2b4c2a8885708c4f4f70c84c64b27120e72ab733b72"
#define SG_1 "4ebfa8a1f3c341517621838c6e1b9aa350307e3f00b3cbd1a07ef740f54396d6"
/* hash_ref.py --sglang 1 0 1 2; SGB1_0 is SHA256 of four 0x00 bytes */
#define SGB1_0                                                                 \
	"df3f619804a92fdb4057192dc43dd748ea778adc52bc498ce80524c014b81119"
#define SGB1_1                                                                 \
	"53f69ec6a1c7effbd864307243e74feaafa8b26bbdc9d066fe8b22ed64a010bb"
#define SGB1_2                                                                 \
	"a50b91b33b91a230e3b4567831c9cc253151883dbb44c7b7522026eb72237cca"
/* hash_ref.py --sglang 2 4294967295 0 16909060 2147483648 */
#define SGLE_0                                                                 \
	"72a4fa3544e43a836ffcb268ce06ccdbc55d44d5e6b1b1c19216a53ea98301fd"
#define SGLE_1                                                                 \
	"77b96a190883d25c92ddd2a59db61a70a7d1e9485270239dc967f3343452c615"

static const uint32_t ex_tok[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };

static void ck_hash_hex(const uint8_t h[KVFS_HASH_LEN], const char *want)
{
	char hex[KVFS_HASH_HEX_LEN + 1];

	kvfs_hash_to_hex(h, hex);
	ck_assert_str_eq(hex, want);
}

/* ------------------------------------------------------------ namespaces */

START_TEST(test_ns_valid)
{
	char name[KVFS_NS_MAX + 2];

	ck_assert_int_eq(kvfs_ns_valid("a"), 0);
	ck_assert_int_eq(kvfs_ns_valid(NS_UNI), 0);
	ck_assert_int_eq(kvfs_ns_valid("a.b"), 0);
	ck_assert_int_eq(kvfs_ns_valid("with space"), 0);
	ck_assert_int_eq(kvfs_ns_valid("-"), 0);
	memset(name, 'n', KVFS_NS_MAX);
	name[KVFS_NS_MAX] = '\0';
	ck_assert_int_eq(kvfs_ns_valid(name), 0);
	name[KVFS_NS_MAX] = 'n';
	name[KVFS_NS_MAX + 1] = '\0';
	ck_assert_int_eq(kvfs_ns_valid(name), -EINVAL);
}
END_TEST

START_TEST(test_ns_invalid)
{
	static const char *const bad[] = { "",	"/",  "a/b",   "ab/",
					   ".", "..", ".kvfs", ".x" };

	ck_assert_int_eq(kvfs_ns_valid(NULL), -EINVAL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(kvfs_ns_valid(bad[i]) == -EINVAL, "ns \"%s\"",
			      bad[i]);
}
END_TEST

/* ------------------------------------------------------------ seed */

START_TEST(test_seed_pinned)
{
	uint8_t h[KVFS_HASH_LEN];

	ck_assert_int_eq(kvfs_hash_seed("llama3-8b", 4, h), 0);
	ck_hash_hex(h, SEED_EX);
	ck_assert_int_eq(kvfs_hash_seed(NS_UNI, 16, h), 0);
	ck_hash_hex(h, SEED_UNI);
}
END_TEST

START_TEST(test_seed_bad)
{
	uint8_t h[KVFS_HASH_LEN];

	ck_assert_int_eq(kvfs_hash_seed(NULL, 4, h), -EINVAL);
	ck_assert_int_eq(kvfs_hash_seed("", 4, h), -EINVAL);
	ck_assert_int_eq(kvfs_hash_seed("a/b", 4, h), -EINVAL);
	ck_assert_int_eq(kvfs_hash_seed(".kvfs", 4, h), -EINVAL);
	ck_assert_int_eq(kvfs_hash_seed("ns", 0, h), -EINVAL);
	ck_assert_int_eq(kvfs_hash_seed("ns", KVFS_BLOCK_TOKENS_MAX + 1, h),
			 -EINVAL);
	ck_assert_int_eq(kvfs_hash_seed("ns", KVFS_BLOCK_TOKENS_MAX, h), 0);
	ck_assert_int_eq(kvfs_hash_seed("ns", 4, NULL), -EINVAL);
}
END_TEST

/* ------------------------------------------------------------ chain */

START_TEST(test_chain_example)
{
	uint8_t out[4][KVFS_HASH_LEN];

	/* 10 tokens, B = 4: two full blocks, tokens 9 and 10 are not named */
	ck_assert_int_eq(kvfs_hash_chain("llama3-8b", 4, ex_tok, 10, out, 4),
			 2);
	ck_hash_hex(out[0], EX_0);
	ck_hash_hex(out[1], EX_1);
	/* the partial block does not change the full ones */
	ck_assert_int_eq(kvfs_hash_chain("llama3-8b", 4, ex_tok, 8, out, 4), 2);
	ck_hash_hex(out[1], EX_1);
}
END_TEST

START_TEST(test_chain_b1)
{
	static const uint32_t tok[] = { 0, 1, 2 };
	uint8_t out[3][KVFS_HASH_LEN];

	ck_assert_int_eq(kvfs_hash_chain("m", 1, tok, 3, out, 3), 3);
	ck_hash_hex(out[0], B1_0);
	ck_hash_hex(out[1], B1_1);
	ck_hash_hex(out[2], B1_2);
}
END_TEST

START_TEST(test_chain_unicode_ns)
{
	static const uint32_t tok[] = { 100, 200, 300, 400 };
	uint8_t out[2][KVFS_HASH_LEN];

	ck_assert_int_eq(kvfs_hash_chain(NS_UNI, 2, tok, 4, out, 2), 2);
	ck_hash_hex(out[0], UNI_0);
	ck_hash_hex(out[1], UNI_1);
}
END_TEST

/* pins u32le: a big-endian or 64-bit encoding gives other names */
START_TEST(test_chain_little_endian)
{
	static const uint32_t tok[] = { 4294967295u, 0, 0x01020304u,
					0x80000000u };
	uint8_t out[2][KVFS_HASH_LEN];

	ck_assert_int_eq(kvfs_hash_chain("test", 2, tok, 4, out, 2), 2);
	ck_hash_hex(out[0], LE_0);
	ck_hash_hex(out[1], LE_1);
}
END_TEST

START_TEST(test_chain_empty)
{
	uint8_t out[1][KVFS_HASH_LEN];

	ck_assert_int_eq(kvfs_hash_chain("test", 4, NULL, 0, out, 1), 0);
	ck_assert_int_eq(kvfs_hash_chain("test", 4, ex_tok, 0, out, 1), 0);
	ck_assert_int_eq(kvfs_hash_chain("test", 4, ex_tok, 3, out, 1), 0);
	ck_assert_int_eq(kvfs_hash_chain("test", 4, ex_tok, 8, NULL, 0), 0);
}
END_TEST

START_TEST(test_chain_max_out)
{
	uint8_t out[2][KVFS_HASH_LEN];
	uint8_t sentinel[KVFS_HASH_LEN];

	memset(out, 0xa5, sizeof(out));
	memset(sentinel, 0xa5, sizeof(sentinel));
	ck_assert_int_eq(kvfs_hash_chain("llama3-8b", 4, ex_tok, 10, out, 1),
			 1);
	ck_hash_hex(out[0], EX_0);
	ck_assert_mem_eq(out[1], sentinel, KVFS_HASH_LEN);
	ck_assert_int_eq(kvfs_hash_chain("llama3-8b", 4, ex_tok, 10, out, 0),
			 0);
}
END_TEST

START_TEST(test_chain_bad)
{
	uint8_t out[2][KVFS_HASH_LEN];

	ck_assert_int_eq(kvfs_hash_chain(NULL, 4, ex_tok, 8, out, 2), -EINVAL);
	ck_assert_int_eq(kvfs_hash_chain("", 4, ex_tok, 8, out, 2), -EINVAL);
	ck_assert_int_eq(kvfs_hash_chain("a/b", 4, ex_tok, 8, out, 2), -EINVAL);
	ck_assert_int_eq(kvfs_hash_chain(".x", 4, ex_tok, 8, out, 2), -EINVAL);
	ck_assert_int_eq(kvfs_hash_chain("ns", 0, ex_tok, 8, out, 2), -EINVAL);
	ck_assert_int_eq(kvfs_hash_chain("ns", KVFS_BLOCK_TOKENS_MAX + 1,
					 ex_tok, 8, out, 2),
			 -EINVAL);
	ck_assert_int_eq(kvfs_hash_chain("ns", 4, NULL, 8, out, 2), -EINVAL);
	ck_assert_int_eq(kvfs_hash_chain("ns", 4, ex_tok, 8, NULL, 2), -EINVAL);
}
END_TEST

/* many links through the one reused context agree with fresh ones */
START_TEST(test_chain_long_matches_next)
{
	enum { NTOK = 3000, B = 3, NBLK = NTOK / B };
	static uint32_t tok[NTOK];
	static uint8_t out[NBLK][KVFS_HASH_LEN];
	uint8_t h[KVFS_HASH_LEN];

	for (uint32_t i = 0; i < NTOK; i++)
		tok[i] = i * 2654435761u;
	ck_assert_int_eq(kvfs_hash_chain(NS_UNI, B, tok, NTOK, out, NBLK),
			 NBLK);
	ck_assert_int_eq(kvfs_hash_seed(NS_UNI, B, h), 0);
	for (size_t i = 0; i < NBLK; i++) {
		ck_assert_int_eq(kvfs_hash_next(h, tok + i * B, B, h), 0);
		ck_assert_mem_eq(h, out[i], KVFS_HASH_LEN);
	}
}
END_TEST

/* ------------------------------------------------------------ sglang */

START_TEST(test_sglang_example)
{
	uint8_t out[4][KVFS_HASH_LEN];

	ck_assert_int_eq(kvfs_hash_chain_sglang(4, ex_tok, 10, out, 4), 2);
	ck_hash_hex(out[0], SG_0);
	ck_hash_hex(out[1], SG_1);
	/* the partial page does not change the full ones */
	ck_assert_int_eq(kvfs_hash_chain_sglang(4, ex_tok, 8, out, 4), 2);
	ck_hash_hex(out[1], SG_1);
}
END_TEST

START_TEST(test_sglang_b1)
{
	static const uint32_t tok[] = { 0, 1, 2 };
	uint8_t out[3][KVFS_HASH_LEN];

	ck_assert_int_eq(kvfs_hash_chain_sglang(1, tok, 3, out, 3), 3);
	ck_hash_hex(out[0], SGB1_0);
	ck_hash_hex(out[1], SGB1_1);
	ck_hash_hex(out[2], SGB1_2);
}
END_TEST

START_TEST(test_sglang_little_endian)
{
	static const uint32_t tok[] = { 4294967295u, 0, 0x01020304u,
					0x80000000u };
	uint8_t out[2][KVFS_HASH_LEN];

	ck_assert_int_eq(kvfs_hash_chain_sglang(2, tok, 4, out, 2), 2);
	ck_hash_hex(out[0], SGLE_0);
	ck_hash_hex(out[1], SGLE_1);
}
END_TEST

/* no seed, but every link after the first is the kvfs link */
START_TEST(test_sglang_links_are_kvfs_links)
{
	enum { NTOK = 300, B = 5, NBLK = NTOK / B };
	static uint32_t tok[NTOK];
	static uint8_t sg[NBLK][KVFS_HASH_LEN], kv[NBLK][KVFS_HASH_LEN];
	uint8_t h[KVFS_HASH_LEN];

	for (uint32_t i = 0; i < NTOK; i++)
		tok[i] = i * 2654435761u;
	ck_assert_int_eq(kvfs_hash_chain_sglang(B, tok, NTOK, sg, NBLK), NBLK);
	for (size_t i = 1; i < NBLK; i++) {
		ck_assert_int_eq(kvfs_hash_next(sg[i - 1], tok + i * B, B, h),
				 0);
		ck_assert_mem_eq(h, sg[i], KVFS_HASH_LEN);
	}
	/* and it is not the kvfs chain of any namespace tried */
	ck_assert_int_eq(kvfs_hash_chain("m", B, tok, NTOK, kv, NBLK), NBLK);
	for (size_t i = 0; i < NBLK; i++)
		ck_assert_mem_ne(sg[i], kv[i], KVFS_HASH_LEN);
}
END_TEST

START_TEST(test_sglang_empty_max_out)
{
	uint8_t out[2][KVFS_HASH_LEN];
	uint8_t sentinel[KVFS_HASH_LEN];

	ck_assert_int_eq(kvfs_hash_chain_sglang(4, NULL, 0, out, 2), 0);
	ck_assert_int_eq(kvfs_hash_chain_sglang(4, ex_tok, 3, out, 2), 0);
	ck_assert_int_eq(kvfs_hash_chain_sglang(4, ex_tok, 8, NULL, 0), 0);
	memset(out, 0xa5, sizeof(out));
	memset(sentinel, 0xa5, sizeof(sentinel));
	ck_assert_int_eq(kvfs_hash_chain_sglang(4, ex_tok, 10, out, 1), 1);
	ck_hash_hex(out[0], SG_0);
	ck_assert_mem_eq(out[1], sentinel, KVFS_HASH_LEN);
}
END_TEST

START_TEST(test_sglang_bad)
{
	uint8_t out[2][KVFS_HASH_LEN];

	ck_assert_int_eq(kvfs_hash_chain_sglang(0, ex_tok, 8, out, 2), -EINVAL);
	ck_assert_int_eq(kvfs_hash_chain_sglang(KVFS_BLOCK_TOKENS_MAX + 1,
						ex_tok, 8, out, 2),
			 -EINVAL);
	ck_assert_int_eq(kvfs_hash_chain_sglang(4, NULL, 8, out, 2), -EINVAL);
	ck_assert_int_eq(kvfs_hash_chain_sglang(4, ex_tok, 8, NULL, 2),
			 -EINVAL);
	errno = 4242;
	kvfs_hash_chain_sglang(4, ex_tok, 10, out, 2);
	kvfs_hash_chain_sglang(0, ex_tok, 10, out, 2);
	ck_assert_int_eq(errno, 4242);
}
END_TEST

/* ------------------------------------------------------------ next */

START_TEST(test_next_pinned)
{
	uint8_t seed[KVFS_HASH_LEN], h0[KVFS_HASH_LEN], h1[KVFS_HASH_LEN];

	ck_assert_int_eq(kvfs_hash_seed("llama3-8b", 4, seed), 0);
	ck_assert_int_eq(kvfs_hash_next(seed, ex_tok, 4, h0), 0);
	ck_hash_hex(h0, EX_0);
	ck_assert_int_eq(kvfs_hash_next(h0, ex_tok + 4, 4, h1), 0);
	ck_hash_hex(h1, EX_1);
	ck_hash_hex(seed, SEED_EX); /* prev is input only */
}
END_TEST

START_TEST(test_next_alias)
{
	uint8_t h[KVFS_HASH_LEN];

	ck_assert_int_eq(kvfs_hash_seed("llama3-8b", 4, h), 0);
	ck_assert_int_eq(kvfs_hash_next(h, ex_tok, 4, h), 0);
	ck_hash_hex(h, EX_0);
	ck_assert_int_eq(kvfs_hash_next(h, ex_tok + 4, 4, h), 0);
	ck_hash_hex(h, EX_1);
}
END_TEST

START_TEST(test_next_bad)
{
	uint8_t h[KVFS_HASH_LEN] = { 0 };

	ck_assert_int_eq(kvfs_hash_next(NULL, ex_tok, 4, h), -EINVAL);
	ck_assert_int_eq(kvfs_hash_next(h, NULL, 4, h), -EINVAL);
	ck_assert_int_eq(kvfs_hash_next(h, ex_tok, 4, NULL), -EINVAL);
	ck_assert_int_eq(kvfs_hash_next(h, ex_tok, 0, h), -EINVAL);
	ck_assert_int_eq(
		kvfs_hash_next(h, ex_tok, KVFS_BLOCK_TOKENS_MAX + 1, h),
		-EINVAL);
}
END_TEST

START_TEST(test_errno_untouched)
{
	uint8_t h[KVFS_HASH_LEN], out[2][KVFS_HASH_LEN];

	errno = 4242;
	kvfs_hash_seed("llama3-8b", 4, h);
	kvfs_hash_seed(NULL, 4, h);
	kvfs_hash_next(h, ex_tok, 4, h);
	kvfs_hash_next(h, NULL, 4, h);
	kvfs_hash_chain("llama3-8b", 4, ex_tok, 10, out, 2);
	kvfs_hash_chain("a/b", 4, ex_tok, 10, out, 2);
	kvfs_ns_valid(NULL);
	kvfs_hash_from_hex("zz", h);
	kvfs_hash_to_hex(h, (char[KVFS_HASH_HEX_LEN + 1]){ 0 });
	ck_assert_int_eq(errno, 4242);
}
END_TEST

/* ------------------------------------------------------------ hex */

START_TEST(test_hex_roundtrip)
{
	uint8_t h[KVFS_HASH_LEN], back[KVFS_HASH_LEN];
	char hex[KVFS_HASH_HEX_LEN + 1];

	/* every nibble value in both positions */
	for (int i = 0; i < KVFS_HASH_LEN; i++)
		h[i] = (uint8_t)(i * 0x11 + (i >> 4));
	kvfs_hash_to_hex(h, hex);
	ck_assert_uint_eq(strlen(hex), KVFS_HASH_HEX_LEN);
	ck_assert_int_eq(kvfs_hash_from_hex(hex, back), 0);
	ck_assert_mem_eq(h, back, KVFS_HASH_LEN);

	ck_assert_int_eq(kvfs_hash_from_hex(EX_0, back), 0);
	kvfs_hash_to_hex(back, hex);
	ck_assert_str_eq(hex, EX_0);
	ck_assert_uint_eq(back[0], 0x16);
	ck_assert_uint_eq(back[31], 0x34);
}
END_TEST

START_TEST(test_hex_bad)
{
	static const char upper[] = "1619866375D4ACDA39D6312B1E05D85F50A7BE1171"
				    "B26C088F2C354F8DE51F34";
	char buf[KVFS_HASH_HEX_LEN + 2];
	uint8_t h[KVFS_HASH_LEN], keep[KVFS_HASH_LEN];

	memset(h, 0x5a, sizeof(h));
	memcpy(keep, h, sizeof(h));
	ck_assert_int_eq(kvfs_hash_from_hex(NULL, h), -EINVAL);
	ck_assert_int_eq(kvfs_hash_from_hex(EX_0, NULL), -EINVAL);
	ck_assert_int_eq(kvfs_hash_from_hex("", h), -EINVAL);
	ck_assert_int_eq(kvfs_hash_from_hex(upper, h), -EINVAL);
	memcpy(buf, EX_0, KVFS_HASH_HEX_LEN - 1); /* 63 chars */
	buf[KVFS_HASH_HEX_LEN - 1] = '\0';
	ck_assert_int_eq(kvfs_hash_from_hex(buf, h), -EINVAL);
	memcpy(buf, EX_0 "0", KVFS_HASH_HEX_LEN + 2); /* 65 chars */
	ck_assert_int_eq(kvfs_hash_from_hex(buf, h), -EINVAL);
	memcpy(buf, EX_0, KVFS_HASH_HEX_LEN + 1);
	for (const char *c = "gG -x\xc3/"; *c; c++) {
		buf[40] = *c; /* a bad char late in the name */
		ck_assert_int_eq(kvfs_hash_from_hex(buf, h), -EINVAL);
	}
	ck_assert_mem_eq(h, keep, KVFS_HASH_LEN); /* untouched on failure */
}
END_TEST

/* ------------------------------------------------------------ tokens */

static void ck_tokens(const uint32_t *tok, size_t n, const uint32_t *want,
		      size_t nwant)
{
	ck_assert_uint_eq(n, nwant);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(tok[i] == want[i], "tok[%zu] = %u, want %u", i,
			      tok[i], want[i]);
}

START_TEST(test_tokens_basic)
{
	static const uint32_t want[] = { 1, 2, 3, 0, 7, 4294967295u };
	uint32_t *tok = NULL;
	size_t n = 0;
	char err[128];

	ck_assert_int_eq(kvfs_tokens_parse("1 2 3 0 007 4294967295", &tok, &n,
					   err, sizeof(err)),
			 0);
	ck_tokens(tok, n, want, 6);
	free(tok);
}
END_TEST

/* any run of commas and whitespace is one separator (tokens.h) */
START_TEST(test_tokens_separators)
{
	static const uint32_t want[] = { 1, 2, 3, 4 };
	static const char *const ok[] = { "1,2,3,4", "1,,2,3,,,4",
					  " ,1,\t2\n\r3 ,\v\f4, \n",
					  "1 , 2,3 4" };
	char err[128];

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		uint32_t *tok = NULL;
		size_t n = 0;

		ck_assert_int_eq(
			kvfs_tokens_parse(ok[i], &tok, &n, err, sizeof(err)),
			0);
		ck_tokens(tok, n, want, 4);
		free(tok);
	}
}
END_TEST

START_TEST(test_tokens_empty)
{
	uint32_t *tok = NULL;
	size_t n = 0;

	ck_assert_int_eq(kvfs_tokens_parse("", &tok, &n, NULL, 0), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(kvfs_tokens_parse(" ,\n,, ", &tok, &n, NULL, 0), 0);
	ck_assert_uint_eq(n, 0);
	free(tok);
}
END_TEST

START_TEST(test_tokens_append)
{
	static const uint32_t want[] = { 5, 6, 7, 8, 9 };
	uint32_t *tok = NULL;
	size_t n = 0;

	ck_assert_int_eq(kvfs_tokens_parse("5 6", &tok, &n, NULL, 0), 0);
	ck_assert_int_eq(kvfs_tokens_parse("7", &tok, &n, NULL, 0), 0);
	ck_assert_int_eq(kvfs_tokens_parse("", &tok, &n, NULL, 0), 0);
	ck_assert_int_eq(kvfs_tokens_parse("8,9", &tok, &n, NULL, 0), 0);
	ck_tokens(tok, n, want, 5);
	free(tok);
}
END_TEST

static void ck_bad_token(const char *text, const char *want_err)
{
	uint32_t *tok = malloc(sizeof(*tok));
	size_t n = 1;
	char err[160] = "";

	ck_assert_ptr_nonnull(tok);
	tok[0] = 99;
	ck_assert_int_eq(kvfs_tokens_parse(text, &tok, &n, err, sizeof(err)),
			 -EINVAL);
	ck_assert_str_eq(err, want_err);
	/* a failed call drops its tokens and keeps the old ones */
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(tok[0], 99);
	free(tok);
}

#define NOT_DEC "\": not an unsigned decimal number"
#define RANGE "\": out of range 0..4294967295"

START_TEST(test_tokens_bad)
{
	ck_bad_token("12x", "bad token \"12x" NOT_DEC);
	ck_bad_token("1 2 12x 3", "bad token \"12x" NOT_DEC);
	ck_bad_token("-1", "bad token \"-1" NOT_DEC);
	ck_bad_token("+5", "bad token \"+5" NOT_DEC);
	ck_bad_token("0x10", "bad token \"0x10" NOT_DEC);
	ck_bad_token("1;2", "bad token \"1;2" NOT_DEC);
	ck_bad_token("4294967296", "bad token \"4294967296" RANGE);
	ck_bad_token("7,99999999999", "bad token \"99999999999" RANGE);
	/* far past 2^64: the value saturates instead of wrapping */
	ck_bad_token("184467440737095516170", "bad token \"18446744073709551617"
					      "0" RANGE);
	/* quotes and control bytes are escaped, long tokens cut */
	ck_bad_token("a\"b\x01", "bad token \"a\\x22b\\x01" NOT_DEC);
	ck_bad_token("1234567890123456789012345678901234567890x",
		     "bad token \"12345678901234567890123456789012..." NOT_DEC);
}
END_TEST

START_TEST(test_tokens_bad_args)
{
	uint32_t *tok = NULL;
	size_t n = 0;
	char err[64] = "";

	ck_assert_int_eq(kvfs_tokens_parse(NULL, &tok, &n, err, sizeof(err)),
			 -EINVAL);
	ck_assert_str_ne(err, "");
	ck_assert_int_eq(kvfs_tokens_parse("1", NULL, &n, NULL, 0), -EINVAL);
	ck_assert_int_eq(kvfs_tokens_parse("1", &tok, NULL, NULL, 0), -EINVAL);
	ck_assert_int_eq(kvfs_tokens_read_stream(NULL, &tok, &n, NULL, 0),
			 -EINVAL);
	/* err may be absent: the return code alone says what went wrong */
	ck_assert_int_eq(kvfs_tokens_parse("x", &tok, &n, NULL, 0), -EINVAL);
	ck_assert_uint_eq(n, 0);
	free(tok);
}
END_TEST

static FILE *stream_of(const char *text, size_t len)
{
	FILE *f = tmpfile();

	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(text, 1, len, f), len);
	rewind(f);
	return f;
}

/* larger than the read chunk, so tokens straddle reads */
START_TEST(test_tokens_stream_large)
{
	enum { NTOK = 20000 };
	char *text = malloc((size_t)NTOK * 12);
	uint32_t *tok = NULL;
	size_t len = 0, n = 0;
	char err[128];
	FILE *f;

	ck_assert_ptr_nonnull(text);
	for (uint32_t i = 0; i < NTOK; i++)
		len += (size_t)sprintf(text + len, i % 3 ? "%u," : "%u\n",
				       i * 214013u);
	f = stream_of(text, len);
	ck_assert_int_eq(kvfs_tokens_read_stream(f, &tok, &n, err, sizeof(err)),
			 0);
	ck_assert_uint_eq(n, NTOK);
	for (uint32_t i = 0; i < NTOK; i++)
		ck_assert_uint_eq(tok[i], i * 214013u);
	fclose(f);
	free(tok);
	free(text);
}
END_TEST

/* one token exactly across the 16 KiB read boundary of tokens.c */
START_TEST(test_tokens_stream_straddle)
{
	enum { PAD = 16384 - 3 };
	static char text[PAD + 16];
	uint32_t *tok = NULL;
	size_t n = 0;
	FILE *f;

	memset(text, ' ', PAD);
	strcpy(text + PAD, "4294967295 12");
	f = stream_of(text, strlen(text));
	ck_assert_int_eq(kvfs_tokens_read_stream(f, &tok, &n, NULL, 0), 0);
	ck_tokens(tok, n, (const uint32_t[]){ 4294967295u, 12 }, 2);
	fclose(f);
	free(tok);
}
END_TEST

START_TEST(test_tokens_stream_bad)
{
	uint32_t *tok = NULL;
	size_t n = 0;
	char err[128];
	FILE *f;

	f = stream_of("", 0);
	ck_assert_int_eq(kvfs_tokens_read_stream(f, &tok, &n, err, sizeof(err)),
			 0);
	ck_assert_uint_eq(n, 0);
	fclose(f);

	f = stream_of("1 2\n3 abc\n", 10);
	ck_assert_int_eq(kvfs_tokens_read_stream(f, &tok, &n, err, sizeof(err)),
			 -EINVAL);
	ck_assert_str_eq(err, "bad token \"abc" NOT_DEC);
	ck_assert_uint_eq(n, 0);
	fclose(f);

	/* a NUL byte is data, not an end of input */
	f = stream_of("1\0"
		      "2",
		      3);
	ck_assert_int_eq(kvfs_tokens_read_stream(f, &tok, &n, err, sizeof(err)),
			 -EINVAL);
	ck_assert_str_eq(err, "bad token \"1\\x002" NOT_DEC);
	fclose(f);

	/* the last token, with no separator after it, is checked too */
	f = stream_of("1 4294967296", 12);
	ck_assert_int_eq(kvfs_tokens_read_stream(f, &tok, &n, err, sizeof(err)),
			 -EINVAL);
	ck_assert_str_eq(err, "bad token \"4294967296" RANGE);
	fclose(f);
	free(tok);
}
END_TEST

/* ------------------------------------------------------------ runner */

/* ---- CRC-32C ------------------------------------------------------- */

/* bit at a time, straight from the definition */
static uint32_t crc_ref(uint32_t crc, const uint8_t *p, size_t len)
{
	crc = ~crc;
	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1)));
	}
	return ~crc;
}

START_TEST(test_crc32c_vector)
{
	/* the check value of CRC-32C (RFC 3720, B.4) */
	ck_assert_uint_eq(kvfs_crc32c(0, "123456789", 9), 0xe3069283u);
	ck_assert_uint_eq(kvfs_crc32c(0, "", 0), 0);
	{
		uint8_t z[32] = { 0 };

		ck_assert_uint_eq(kvfs_crc32c(0, z, 32), 0x8a9136aau);
	}
}
END_TEST

/* the CRC of a block from its pieces' raw CRCs (what libkvfs does with
 * the CRCs a GPU computes), against the CRC of the whole, for pieces of
 * 4 KiB and 16 KiB, blocks ending inside a piece, on one and on none */
START_TEST(test_crc32c_chunks)
{
	static const uint64_t chunks[] = { 4096, 16384 };
	static const size_t lens[] = { 0,     1,      4095,   4096,   4097,
				       16384, 100003, 262144, 1 << 20 };
	static uint32_t tab[4][256];
	uint8_t *buf = malloc(1 << 20);
	uint32_t raw[300];

	ck_assert_ptr_nonnull(buf);
	for (size_t i = 0; i < (1 << 20); i++)
		buf[i] = (uint8_t)(i * 2654435761u >> 13);
	ck_assert_uint_eq(kvfs_crc32c_shift(0, 12345), 0);
	for (size_t c = 0; c < sizeof(chunks) / sizeof(*chunks); c++) {
		kvfs_crc32c_shift_table(tab, chunks[c]);
		for (size_t l = 0; l < sizeof(lens) / sizeof(*lens); l++) {
			size_t n = 0;

			for (uint64_t off = 0; off < lens[l];
			     off += chunks[c], n++) {
				uint64_t m = lens[l] - off < chunks[c]
						     ? lens[l] - off
						     : chunks[c];

				ck_assert_uint_lt(n, 300);
				raw[n] = ~kvfs_crc32c(~0u, buf + off, m);
			}
			ck_assert_msg(kvfs_crc32c_chunks(tab, raw, chunks[c],
							 lens[l]) ==
					      kvfs_crc32c(0, buf, lens[l]),
				      "chunk %llu, len %zu",
				      (unsigned long long)chunks[c], lens[l]);
		}
	}
	/* a wrong piece gives another CRC */
	raw[0] ^= 1;
	ck_assert_uint_ne(kvfs_crc32c_chunks(tab, raw, 16384, 1 << 20),
			  kvfs_crc32c(0, buf, 1 << 20));
	free(buf);
}
END_TEST

START_TEST(test_crc32c_matches_reference)
{
	/* lengths around the 3 x 4096-byte interleave, odd offsets, and a
	 * block split anywhere gives the crc of the whole */
	static const size_t lens[] = { 1,	   7,	  8,	 63,
				       4096,	   12287, 12288, 12289,
				       24576 + 13, 65536, 100003 };
	uint8_t *buf = malloc(100003 + 16);
	uint64_t x = 88172645463325252ull;

	ck_assert_ptr_nonnull(buf);
	for (size_t i = 0; i < 100003 + 16; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (size_t off = 0; off < 16; off += 5) {
			const uint8_t *p = buf + off;
			uint32_t want = crc_ref(0, p, lens[i]);
			size_t cut = lens[i] / 3;

			ck_assert_uint_eq(kvfs_crc32c(0, p, lens[i]), want);
			ck_assert_uint_eq(kvfs_crc32c(kvfs_crc32c(0, p, cut),
						      p + cut, lens[i] - cut),
					  want);
		}
	free(buf);
}
END_TEST

static Suite *hash_suite(void)
{
	Suite *s = suite_create("hash");
	TCase *tc = tcase_create("hash");
	TCase *tt = tcase_create("tokens");

	tcase_add_test(tc, test_crc32c_vector);
	tcase_add_test(tc, test_crc32c_matches_reference);
	tcase_add_test(tc, test_crc32c_chunks);
	tcase_add_test(tc, test_ns_valid);
	tcase_add_test(tc, test_ns_invalid);
	tcase_add_test(tc, test_seed_pinned);
	tcase_add_test(tc, test_seed_bad);
	tcase_add_test(tc, test_chain_example);
	tcase_add_test(tc, test_chain_b1);
	tcase_add_test(tc, test_chain_unicode_ns);
	tcase_add_test(tc, test_chain_little_endian);
	tcase_add_test(tc, test_chain_empty);
	tcase_add_test(tc, test_chain_max_out);
	tcase_add_test(tc, test_chain_bad);
	tcase_add_test(tc, test_chain_long_matches_next);
	tcase_add_test(tc, test_sglang_example);
	tcase_add_test(tc, test_sglang_b1);
	tcase_add_test(tc, test_sglang_little_endian);
	tcase_add_test(tc, test_sglang_links_are_kvfs_links);
	tcase_add_test(tc, test_sglang_empty_max_out);
	tcase_add_test(tc, test_sglang_bad);
	tcase_add_test(tc, test_next_pinned);
	tcase_add_test(tc, test_next_alias);
	tcase_add_test(tc, test_next_bad);
	tcase_add_test(tc, test_errno_untouched);
	tcase_add_test(tc, test_hex_roundtrip);
	tcase_add_test(tc, test_hex_bad);
	suite_add_tcase(s, tc);

	tcase_add_test(tt, test_tokens_basic);
	tcase_add_test(tt, test_tokens_separators);
	tcase_add_test(tt, test_tokens_empty);
	tcase_add_test(tt, test_tokens_append);
	tcase_add_test(tt, test_tokens_bad);
	tcase_add_test(tt, test_tokens_bad_args);
	tcase_add_test(tt, test_tokens_stream_large);
	tcase_add_test(tt, test_tokens_stream_straddle);
	tcase_add_test(tt, test_tokens_stream_bad);
	suite_add_tcase(s, tt);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(hash_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
