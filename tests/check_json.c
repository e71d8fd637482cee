/*
 * check_json.c - the contract of src/common/json.h: the reader (strict
 * RFC 8259, nesting limit, escapes, numbers kept as text and read back
 * exactly, malformed and truncated input refused) and the writer (sticky
 * errors, string literals that are always valid JSON).
 *
 * The reader parses what peers and the control socket send, so every
 * refusal here is a hostile input that must come back -EINVAL and leak
 * nothing, never a crash.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/json.h"

/* parse a NUL-terminated document, which must be good */
static struct kvfs_json *parse_ok(const char *text)
{
	struct kvfs_json *j = NULL;
	int rc = kvfs_json_parse(text, strlen(text), &j);

	ck_assert_msg(rc == 0, "refused (%d): %s", rc, text);
	ck_assert_ptr_nonnull(j);
	return j;
}

/* a document that must be refused with -EINVAL, *out untouched */
static void parse_bad(const char *text, size_t len)
{
	struct kvfs_json *sentinel = (struct kvfs_json *)&sentinel;
	struct kvfs_json *j = sentinel;
	int rc = kvfs_json_parse(text, len, &j);

	ck_assert_msg(rc == -EINVAL, "rc %d for \"%.*s\"", rc, (int)len, text);
	ck_assert_ptr_eq(j, sentinel);
}

static void bad(const char *text)
{
	parse_bad(text, strlen(text));
}

/* ---- good documents ------------------------------------------------- */

START_TEST(test_scalars)
{
	struct kvfs_json *j;

	j = parse_ok("null");
	ck_assert_int_eq(j->type, KVFS_JSON_NULL);
	ck_assert(!kvfs_json_true(j));
	kvfs_json_free(j);

	j = parse_ok(" true ");
	ck_assert_int_eq(j->type, KVFS_JSON_BOOL);
	ck_assert(kvfs_json_true(j));
	kvfs_json_free(j);

	j = parse_ok("\t\r\nfalse\n");
	ck_assert_int_eq(j->type, KVFS_JSON_BOOL);
	ck_assert(!j->b);
	ck_assert(!kvfs_json_true(j));
	kvfs_json_free(j);

	j = parse_ok("\"x\"");
	ck_assert_int_eq(j->type, KVFS_JSON_STR);
	ck_assert_str_eq(kvfs_json_str(j), "x");
	ck_assert_uint_eq(j->len, 1);
	ck_assert_ptr_null(j->key);
	/* only the literal true is true, not a string of it */
	ck_assert(!kvfs_json_true(j));
	kvfs_json_free(j);

	j = parse_ok("-12.5e2");
	ck_assert_int_eq(j->type, KVFS_JSON_NUM);
	ck_assert_str_eq(j->str, "-12.5e2"); /* the text is kept */
	ck_assert_ptr_null(kvfs_json_str(j));
	kvfs_json_free(j);
}
END_TEST

START_TEST(test_object_array)
{
	struct kvfs_json *j =
		parse_ok("{ \"a\" : 1, \"b\":[true,false,null,\"s\",{}], "
			 "\"c\":{\"d\":[]},"
			 "\"\":\"empty key\" }");
	const struct kvfs_json *b, *c, *d;
	uint64_t v = 0;

	ck_assert_int_eq(j->type, KVFS_JSON_OBJ);
	ck_assert_uint_eq(j->n, 4);
	/* members keep their order and their names */
	ck_assert_str_eq(j->kid[0].key, "a");
	ck_assert_str_eq(j->kid[3].key, "");
	ck_assert_int_eq(kvfs_json_u64(kvfs_json_get(j, "a"), &v), 0);
	ck_assert_uint_eq(v, 1);
	b = kvfs_json_get(j, "b");
	ck_assert_ptr_nonnull(b);
	ck_assert_int_eq(b->type, KVFS_JSON_ARR);
	ck_assert_uint_eq(b->n, 5);
	ck_assert(kvfs_json_true(&b->kid[0]));
	ck_assert(!kvfs_json_true(&b->kid[1]));
	ck_assert_int_eq(b->kid[2].type, KVFS_JSON_NULL);
	ck_assert_str_eq(kvfs_json_str(&b->kid[3]), "s");
	ck_assert_ptr_null(b->kid[3].key); /* array elements have no name */
	ck_assert_int_eq(b->kid[4].type, KVFS_JSON_OBJ);
	ck_assert_uint_eq(b->kid[4].n, 0);
	c = kvfs_json_get(j, "c");
	d = kvfs_json_get(c, "d");
	ck_assert_ptr_nonnull(d);
	ck_assert_int_eq(d->type, KVFS_JSON_ARR);
	ck_assert_uint_eq(d->n, 0);
	ck_assert_str_eq(kvfs_json_str(kvfs_json_get(j, "")), "empty key");

	/* get: a missing member, a non-object, NULL */
	ck_assert_ptr_null(kvfs_json_get(j, "z"));
	ck_assert_ptr_null(kvfs_json_get(j, "A"));
	ck_assert_ptr_null(kvfs_json_get(b, "a"));
	ck_assert_ptr_null(kvfs_json_get(NULL, "a"));
	ck_assert_ptr_null(kvfs_json_str(NULL));
	ck_assert(!kvfs_json_true(NULL));
	kvfs_json_free(j);
	kvfs_json_free(NULL); /* like free(3) */
}
END_TEST

/* duplicate names are legal JSON; get finds the first */
START_TEST(test_duplicate_key)
{
	struct kvfs_json *j = parse_ok("{\"k\":\"first\",\"k\":\"second\"}");

	ck_assert_uint_eq(j->n, 2);
	ck_assert_str_eq(kvfs_json_str(kvfs_json_get(j, "k")), "first");
	kvfs_json_free(j);
}
END_TEST

/* KVFS_JSON_DEPTH levels parse, one more is refused: the stack of a
 * recursive reader is bounded by the depth, whatever a peer sends */
START_TEST(test_depth)
{
	char doc[4 * KVFS_JSON_DEPTH + 8];
	struct kvfs_json *j;
	const struct kvfs_json *k;
	size_t n = 0;
	int depth;

	/* arrays here, objects in test_depth_objects */
	for (int i = 0; i < KVFS_JSON_DEPTH; i++)
		doc[n++] = '[';
	for (int i = 0; i < KVFS_JSON_DEPTH; i++)
		doc[n++] = ']';
	doc[n] = '\0';
	j = parse_ok(doc);
	depth = 0;
	for (k = j; k->type == KVFS_JSON_ARR; k = &k->kid[0]) {
		depth++;
		if (k->n == 0)
			break;
	}
	ck_assert_int_eq(depth, KVFS_JSON_DEPTH);
	kvfs_json_free(j);

	n = 0;
	for (int i = 0; i < KVFS_JSON_DEPTH + 1; i++)
		doc[n++] = '[';
	for (int i = 0; i < KVFS_JSON_DEPTH + 1; i++)
		doc[n++] = ']';
	doc[n] = '\0';
	bad(doc);
}
END_TEST

START_TEST(test_depth_objects)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	struct kvfs_json *j;
	char *doc;

	for (int i = 0; i < KVFS_JSON_DEPTH; i++)
		kvfs_buf_puts(&b, "{\"a\":");
	kvfs_buf_puts(&b, "1");
	for (int i = 0; i < KVFS_JSON_DEPTH; i++)
		kvfs_buf_puts(&b, "}");
	ck_assert_int_eq(kvfs_buf_finish(&b, &doc, NULL), 0);
	j = parse_ok(doc);
	kvfs_json_free(j);
	free(doc);

	for (int i = 0; i < KVFS_JSON_DEPTH + 1; i++)
		kvfs_buf_puts(&b, "{\"a\":");
	kvfs_buf_puts(&b, "1");
	for (int i = 0; i < KVFS_JSON_DEPTH + 1; i++)
		kvfs_buf_puts(&b, "}");
	ck_assert_int_eq(kvfs_buf_finish(&b, &doc, NULL), 0);
	bad(doc);
	free(doc);
}
END_TEST

/* many members: the child arrays grow past their first allocation */
START_TEST(test_wide)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	struct kvfs_json *j;
	uint64_t v;
	char *doc;

	kvfs_buf_puts(&b, "[");
	for (int i = 0; i < 1000; i++)
		kvfs_buf_printf(&b, "%s%d", i ? "," : "", i);
	kvfs_buf_puts(&b, "]");
	ck_assert_int_eq(kvfs_buf_finish(&b, &doc, NULL), 0);
	j = parse_ok(doc);
	ck_assert_uint_eq(j->n, 1000);
	for (size_t i = 0; i < j->n; i++) {
		ck_assert_int_eq(kvfs_json_u64(&j->kid[i], &v), 0);
		ck_assert_uint_eq(v, i);
	}
	kvfs_json_free(j);
	free(doc);
}
END_TEST

/* ---- strings ---------------------------------------------------------- */

START_TEST(test_string_escapes)
{
	struct kvfs_json *j;

	j = parse_ok("\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\"");
	ck_assert_str_eq(j->str, "\" \\ / \b \f \n \r \t");
	ck_assert_uint_eq(j->len, strlen(j->str));
	kvfs_json_free(j);

	/* \u: one, two and three UTF-8 bytes, hex digits in either case */
	j = parse_ok("\"\\u0041\\u00e9\\u20AC\"");
	ck_assert_str_eq(j->str, "A\xc3\xa9\xe2\x82\xac");
	kvfs_json_free(j);

	/* a surrogate pair is one code point, four bytes: U+1F600 */
	j = parse_ok("\"\\ud83d\\ude00\"");
	ck_assert_str_eq(j->str, "\xf0\x9f\x98\x80");
	ck_assert_uint_eq(j->len, 4);
	kvfs_json_free(j);

	/* \u0000 is a byte like any other: len says how many there are */
	j = parse_ok("\"a\\u0000b\"");
	ck_assert_uint_eq(j->len, 3);
	ck_assert_mem_eq(j->str, "a\0b", 3);
	ck_assert_int_eq(j->str[3], '\0');
	kvfs_json_free(j);

	/* raw UTF-8 passes through unchanged; so does DEL */
	j = parse_ok("\"\xc3\xbc\xe2\x82\xac\xf0\x9f\x98\x80\x7f\"");
	ck_assert_str_eq(j->str, "\xc3\xbc\xe2\x82\xac\xf0\x9f\x98\x80\x7f");
	kvfs_json_free(j);

	/* escaped member names are decoded too */
	j = parse_ok("{\"a\\u0062\":1}");
	ck_assert_ptr_nonnull(kvfs_json_get(j, "ab"));
	kvfs_json_free(j);

	j = parse_ok("\"\"");
	ck_assert_str_eq(j->str, "");
	ck_assert_uint_eq(j->len, 0);
	kvfs_json_free(j);
}
END_TEST

START_TEST(test_string_bad)
{
	static const char *const docs[] = {
		"\"\\x\"",	      /* unknown escape */
		"\"\\U0041\"",	      /* \U is not \u */
		"\"\\u00\"",	      /* short \u */
		"\"\\u00g0\"",	      /* not hex */
		"\"\\ud83d\"",	      /* lone high surrogate */
		"\"\\ud83dx\"",	      /* high surrogate, then no \u */
		"\"\\ud83d\\u0041\"", /* high surrogate, then no low one */
		"\"\\ude00\"",	      /* lone low surrogate */
		"\"a\nb\"",	      /* raw control character */
		"\"a\tb\"",
		"\"\xc3\"",		/* truncated UTF-8 */
		"\"\xc0\xaf\"",		/* overlong '/' */
		"\"\xed\xa0\x80\"",	/* a surrogate in UTF-8 */
		"\"\xf4\x90\x80\x80\"", /* beyond U+10FFFF */
		"\"\xff\"",
		"'single'",
		"\"open",
		"\"\\",
	};

	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++)
		bad(docs[i]);
	/* a NUL byte inside the text is a control character, not an end */
	parse_bad("\"a\0b\"", 5);
}
END_TEST

/* ---- numbers ----------------------------------------------------------- */

START_TEST(test_numbers)
{
	static const char *const good[] = {
		"0",
		"-0",
		"1",
		"-1",
		"10",
		"0.5",
		"-0.5",
		"1e3",
		"1E3",
		"1e+3",
		"1e-3",
		"1.25e-10",
		"123456789012345678901234567890",
	};
	static const char *const nums[] = {
		"01",  "-01",	   "+1",	".5",  "1.",   "1.e3",
		"1e",  "1e+",	   "-",		"--1", "0x10", "1_000",
		"NaN", "Infinity", "-Infinity", "1 2", "1,",
	};
	struct kvfs_json *j;
	double d;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		j = parse_ok(good[i]);
		ck_assert_int_eq(j->type, KVFS_JSON_NUM);
		ck_assert_str_eq(j->str, good[i]);
		ck_assert_int_eq(kvfs_json_double(j, &d), 0);
		ck_assert(d == strtod(good[i], NULL));
		kvfs_json_free(j);
	}
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
		bad(nums[i]);

	/* double: any number, and nothing else */
	j = parse_ok("[-2.5e1, \"3\", true]");
	ck_assert_int_eq(kvfs_json_double(&j->kid[0], &d), 0);
	ck_assert(d == -25.0);
	d = 7;
	ck_assert_int_eq(kvfs_json_double(&j->kid[1], &d), -EINVAL);
	ck_assert_int_eq(kvfs_json_double(&j->kid[2], &d), -EINVAL);
	ck_assert(d == 7); /* untouched on failure */
	ck_assert_int_eq(kvfs_json_double(NULL, &d), -EINVAL);
	kvfs_json_free(j);
}
END_TEST

/* u64: exact up to UINT64_MAX (no trip through a double), from a number
 * or a decimal string; anything else -EINVAL and *v untouched */
START_TEST(test_u64)
{
	struct kvfs_json *j = parse_ok(
		"[18446744073709551615, 18446744073709551616, "
		"99999999999999999999,"
		" 9007199254740993, \"18446744073709551615\", \"42\", 0,"
		" -1, 1.0, 1e3, \"\", \"4x\", \"-4\", \" 4\", null, true, [1],"
		" 184467440737095516150, \"a\\u0000\", \"4\\u0000\"]");
	uint64_t v;

	ck_assert_uint_eq(j->n, 20);
	ck_assert_int_eq(kvfs_json_u64(&j->kid[0], &v), 0);
	ck_assert(v == UINT64_MAX);
	ck_assert_int_eq(kvfs_json_u64(&j->kid[1], &v), -EINVAL); /* max + 1 */
	ck_assert_int_eq(kvfs_json_u64(&j->kid[2], &v), -EINVAL);
	/* 2^53 + 1: a double would read 2^53 */
	ck_assert_int_eq(kvfs_json_u64(&j->kid[3], &v), 0);
	ck_assert(v == 9007199254740993ull);
	ck_assert_int_eq(kvfs_json_u64(&j->kid[4], &v), 0);
	ck_assert(v == UINT64_MAX);
	ck_assert_int_eq(kvfs_json_u64(&j->kid[5], &v), 0);
	ck_assert_uint_eq(v, 42);
	ck_assert_int_eq(kvfs_json_u64(&j->kid[6], &v), 0);
	ck_assert_uint_eq(v, 0);
	v = 5;
	for (size_t i = 7; i < j->n; i++)
		ck_assert_msg(kvfs_json_u64(&j->kid[i], &v) == -EINVAL,
			      "element %zu read as an integer", i);
	ck_assert_uint_eq(v, 5);
	ck_assert_int_eq(kvfs_json_u64(NULL, &v), -EINVAL);
	kvfs_json_free(j);
}
END_TEST

/* ---- malformed and truncated input ------------------------------------ */

START_TEST(test_malformed)
{
	static const char *const docs[] = {
		"",
		" ",
		"\n\t",
		"[1,]",
		"{\"a\":1,}",
		"[,1]",
		"[1 2]",
		"{\"a\" 1}",
		"{\"a\":}",
		"{a:1}",
		"{1:1}",
		"{\"a\":1 \"b\":2}",
		"{\"a\",1}",
		"[1}",
		"{\"a\":1]",
		"]",
		"}",
		"[",
		"{",
		"tru",
		"True",
		"nul",
		"nulll",
		"falsey",
		"t",
		"1 // comment",
		"/* c */ 1",
		"# c\n1",
		"[1] [2]",
		"{} x",
		"\xef\xbb\xbf{}", /* a byte order mark is not whitespace */
		"\v1",
		"\f1",
		"1\v",
	};

	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++)
		bad(docs[i]);
}
END_TEST

START_TEST(test_args)
{
	struct kvfs_json *j = NULL;

	ck_assert_int_eq(kvfs_json_parse(NULL, 0, &j), -EINVAL);
	ck_assert_int_eq(kvfs_json_parse("1", 1, NULL), -EINVAL);
	ck_assert_ptr_null(j);
}
END_TEST

/*
 * Every proper prefix of a document that ends in a container is refused:
 * the reader goes by len, never past it and never to a NUL, so it works
 * on a buffer straight off a socket.  The text is copied into a buffer
 * of exactly len bytes, so a read past it is a sanitizer's error.
 */
START_TEST(test_truncated)
{
	static const char doc[] =
		"{\"ok\":true,\"n\":[1,-2.5e3,\"\\u00e9\\ud83d\\ude00\"],"
		"\"s\":\"a\\\"b\",\"o\":{\"x\":null,\"y\":false}}";
	size_t len = strlen(doc);
	struct kvfs_json *j;

	for (size_t n = 0; n < len; n++) {
		char *p = malloc(n ? n : 1);

		ck_assert_ptr_nonnull(p);
		memcpy(p, doc, n);
		parse_bad(p, n);
		free(p);
	}
	j = parse_ok(doc);
	ck_assert_str_eq(kvfs_json_str(kvfs_json_get(j, "s")), "a\"b");
	kvfs_json_free(j);

	/* len shorter than the string: what lies past len is not read */
	ck_assert_int_eq(kvfs_json_parse("12345", 2, &j), 0);
	ck_assert_str_eq(j->str, "12");
	kvfs_json_free(j);
	ck_assert_int_eq(kvfs_json_parse("[1]garbage", 3, &j), 0);
	kvfs_json_free(j);
}
END_TEST

/* ---- writing ----------------------------------------------------------- */

START_TEST(test_buf)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	char big[1000], *out;
	size_t len;

	kvfs_buf_add(&b, "ab", 2);
	kvfs_buf_puts(&b, "cd");
	kvfs_buf_printf(&b, "%d-%s", 12, "x");
	ck_assert_str_eq(b.p, "abcd12-x"); /* NUL-terminated all along */
	/* a printf longer than the room left: grows and writes it whole */
	memset(big, 'y', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	kvfs_buf_printf(&b, "[%s]", big);
	ck_assert_uint_eq(b.len, 8 + 2 + 999);
	ck_assert_int_eq(kvfs_buf_finish(&b, &out, &len), 0);
	ck_assert_uint_eq(len, 1009);
	ck_assert_uint_eq(strlen(out), 1009);
	ck_assert_int_eq(out[8], '[');
	ck_assert_int_eq(out[1008], ']');
	ck_assert_ptr_null(b.p); /* handed over: the buffer is empty again */
	ck_assert_uint_eq(b.len, 0);
	free(out);

	/* nothing written: finish still gives "" */
	ck_assert_int_eq(kvfs_buf_finish(&b, &out, NULL), 0);
	ck_assert_str_eq(out, "");
	free(out);

	/* a sticky error: later appends are no-ops, finish reports it */
	kvfs_buf_puts(&b, "x");
	b.err = -ENOMEM;
	kvfs_buf_puts(&b, "more");
	kvfs_buf_printf(&b, "%d", 1);
	ck_assert_uint_eq(b.len, 1);
	out = NULL;
	ck_assert_int_eq(kvfs_buf_finish(&b, &out, &len), -ENOMEM);
	ck_assert_ptr_null(out);
	ck_assert_ptr_null(b.p); /* freed either way */

	kvfs_buf_puts(&b, "y");
	kvfs_buf_release(&b);
	ck_assert_ptr_null(b.p);
	ck_assert_int_eq(b.err, 0);
}
END_TEST

/* s written as a JSON string, parsed back */
static void str_roundtrip(const char *s, size_t len, const char *want_text,
			  const char *want, size_t want_len)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	struct kvfs_json *j;
	char *out;
	size_t n;

	kvfs_buf_json_str(&b, s, len);
	ck_assert_int_eq(kvfs_buf_finish(&b, &out, &n), 0);
	if (want_text)
		ck_assert_str_eq(out, want_text);
	ck_assert_int_eq(kvfs_json_parse(out, n, &j), 0);
	ck_assert_uint_eq(j->len, want_len);
	ck_assert_mem_eq(j->str, want, want_len);
	kvfs_json_free(j);
	free(out);
}

START_TEST(test_json_str)
{
	unsigned char all[256];

	str_roundtrip("plain", 5, "\"plain\"", "plain", 5);
	str_roundtrip("q\"b\\", 4, "\"q\\\"b\\\\\"", "q\"b\\", 4);
	str_roundtrip("\n\x01\x7f", 3, "\"\\u000a\\u0001\\u007f\"",
		      "\n\x01\x7f", 3);
	str_roundtrip("a\0b", 3, "\"a\\u0000b\"", "a\0b", 3);
	str_roundtrip("\xc3\xbc", 2, "\"\xc3\xbc\"", "\xc3\xbc", 2);
	/* bytes that are not UTF-8 come out as U+FFFD, one per byte */
	str_roundtrip("a\xff\xc3", 3, "\"a\\ufffd\\ufffd\"",
		      "a\xef\xbf\xbd\xef\xbf\xbd", 7);
	str_roundtrip("", 0, "\"\"", "", 0);

	/* every byte value: the output always parses */
	for (int i = 0; i < 256; i++)
		all[i] = (unsigned char)i;
	{
		struct kvfs_buf b = KVFS_BUF_INIT;
		struct kvfs_json *j;
		char *out;
		size_t n;

		kvfs_buf_json_str(&b, (const char *)all, sizeof(all));
		ck_assert_int_eq(kvfs_buf_finish(&b, &out, &n), 0);
		ck_assert_int_eq(kvfs_json_parse(out, n, &j), 0);
		/* the ASCII half survives exactly */
		ck_assert_mem_eq(j->str, all, 128);
		kvfs_json_free(j);
		free(out);
	}
}
END_TEST

START_TEST(test_utf8_len)
{
	static const struct {
		const char *s;
		size_t len, want;
	} v[] = {
		{ "a", 1, 1 },
		{ "\x7f", 1, 1 },
		{ "\xc3\xa9", 2, 2 },
		{ "\xe2\x82\xac", 3, 3 },
		{ "\xf0\x9f\x98\x80", 4, 4 },
		{ "\xf4\x8f\xbf\xbf", 4, 4 }, /* U+10FFFF */
		{ "\xef\xbf\xbf", 3, 3 },     /* U+FFFF */
		{ "\xc3\xa9", 1, 0 },	      /* truncated */
		{ "\xf0\x9f\x98", 3, 0 },
		{ "\x80", 1, 0 },     /* a lone continuation byte */
		{ "\xc0\x80", 2, 0 }, /* overlong */
		{ "\xc1\xbf", 2, 0 },
		{ "\xe0\x80\x80", 3, 0 },
		{ "\xf0\x80\x80\x80", 4, 0 },
		{ "\xed\xa0\x80", 3, 0 },     /* U+D800 */
		{ "\xed\xbf\xbf", 3, 0 },     /* U+DFFF */
		{ "\xf4\x90\x80\x80", 4, 0 }, /* U+110000 */
		{ "\xf5\x80\x80\x80", 4, 0 },
		{ "\xc3\x41", 2, 0 }, /* not a continuation byte */
		{ "", 0, 0 },
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		ck_assert_msg(kvfs_utf8_len((const unsigned char *)v[i].s,
					    v[i].len) == v[i].want,
			      "vector %zu", i);
}
END_TEST

static Suite *json_suite(void)
{
	Suite *s = suite_create("json");
	TCase *tr = tcase_create("read");
	TCase *tw = tcase_create("write");

	tcase_add_test(tr, test_scalars);
	tcase_add_test(tr, test_object_array);
	tcase_add_test(tr, test_duplicate_key);
	tcase_add_test(tr, test_depth);
	tcase_add_test(tr, test_depth_objects);
	tcase_add_test(tr, test_wide);
	tcase_add_test(tr, test_string_escapes);
	tcase_add_test(tr, test_string_bad);
	tcase_add_test(tr, test_numbers);
	tcase_add_test(tr, test_u64);
	tcase_add_test(tr, test_malformed);
	tcase_add_test(tr, test_args);
	tcase_add_test(tr, test_truncated);
	suite_add_tcase(s, tr);

	tcase_add_test(tw, test_buf);
	tcase_add_test(tw, test_json_str);
	tcase_add_test(tw, test_utf8_len);
	suite_add_tcase(s, tw);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(json_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
