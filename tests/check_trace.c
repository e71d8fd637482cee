/*
 * check_trace.c - the contract of src/trace.h: the line parser (good lines,
 * every kind of bad line, and a bounded fuzz loop of random and mutated
 * lines), the streaming reader (line numbers, skip-bad, long lines), the
 * token rule, and the generator (valid, prefix-chained, deterministic).
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/common/hash.h"
#include "src/common/trace.h"

#define GOOD                                                                   \
	"{\"timestamp\": 27, \"input_length\": 1100, \"output_length\": 6, "   \
	"\"hash_ids\": [0, 1, 2]}"

struct parsed {
	struct kvfs_trace_rec rec;
	uint64_t *ids;
	size_t cap;
	char err[KVFS_TRACE_ERR_MAX];
	int rc;
};

static void parse_n(struct parsed *p, const char *line, size_t len)
{
	memset(p, 0, sizeof(*p));
	p->rc = kvfs_trace_parse(line, len, &p->rec, &p->ids, &p->cap, p->err,
				 sizeof(p->err));
}

static void parse(struct parsed *p, const char *line)
{
	parse_n(p, line, strlen(line));
}

/* the line is refused and the message says what it must */
static void ck_bad(const char *line, const char *want)
{
	struct parsed p;

	parse(&p, line);
	ck_assert_msg(p.rc == -EINVAL, "accepted (%d): %s", p.rc, line);
	ck_assert_msg(strstr(p.err, want), "for %s: \"%s\" lacks \"%s\"", line,
		      p.err, want);
	free(p.ids);
}

/* ---------------------------------------------------------------- parse */

START_TEST(test_parse_good)
{
	struct parsed p;

	parse(&p, GOOD);
	ck_assert_int_eq(p.rc, 1);
	ck_assert_uint_eq(p.rec.timestamp_ms, 27);
	ck_assert_uint_eq(p.rec.input_length, 1100);
	ck_assert_uint_eq(p.rec.output_length, 6);
	ck_assert_uint_eq(p.rec.n, 3);
	ck_assert_ptr_eq(p.rec.hash_ids, p.ids);
	ck_assert_uint_eq(p.rec.hash_ids[2], 2);
	ck_assert_uint_eq(kvfs_trace_full_blocks(&p.rec), 2);
	ck_assert_str_eq(p.err, "");
	free(p.ids);
}
END_TEST

START_TEST(test_parse_forms)
{
	struct parsed p;

	/* any order, no spaces, unknown members of every kind skipped */
	parse(&p, "{\"hash_ids\":[18446744073709551615],\"x\":{\"a\":[1,"
		  "{\"b\":null}],\"c\":\"s\\\"\\u00e9\\n\"},\"output_length\""
		  ":0,\"y\":[true,false,-1.5e-3],\"input_length\":512,"
		  "\"timestamp\":0}");
	ck_assert_int_eq(p.rc, 1);
	ck_assert_uint_eq(p.rec.n, 1);
	ck_assert(p.rec.hash_ids[0] == UINT64_MAX);
	ck_assert_uint_eq(kvfs_trace_full_blocks(&p.rec), 1);
	free(p.ids);

	/* white space of all four kinds; CR at the end */
	parse(&p, " \t{ \"timestamp\" :\t5 , \"input_length\" : 0,"
		  "\"output_length\":1,\"hash_ids\":[ ] }\r");
	ck_assert_int_eq(p.rc, 1);
	ck_assert_uint_eq(p.rec.n, 0);
	free(p.ids);

	/* fractional and exponent timestamps, rounded down; -0 is 0 */
	parse(&p, "{\"timestamp\": 12.9, \"input_length\": -0, "
		  "\"output_length\": 1, \"hash_ids\": []}");
	ck_assert_int_eq(p.rc, 1);
	ck_assert_uint_eq(p.rec.timestamp_ms, 12);
	ck_assert_uint_eq(p.rec.input_length, 0);
	free(p.ids);
	parse(&p, "{\"timestamp\": 1.5E3, \"input_length\": 513, "
		  "\"output_length\": 1, \"hash_ids\": [7, 8]}");
	ck_assert_int_eq(p.rc, 1);
	ck_assert_uint_eq(p.rec.timestamp_ms, 1500);
	ck_assert_uint_eq(kvfs_trace_full_blocks(&p.rec), 1);
	free(p.ids);

	/* an escaped member name is the name it decodes to */
	parse(&p, "{\"timestamp\": 0, \"input_length\": 1, \"output_length\""
		  ": 1, \"hash\\u005fids\": [3]}");
	ck_assert_int_eq(p.rc, 1);
	ck_assert_uint_eq(p.rec.hash_ids[0], 3);
	free(p.ids);

	/* blank lines are no record and no error */
	parse(&p, "");
	ck_assert_int_eq(p.rc, 0);
	free(p.ids);
	parse(&p, " \t\r");
	ck_assert_int_eq(p.rc, 0);
	free(p.ids);
}
END_TEST

START_TEST(test_parse_bad)
{
	static const struct {
		const char *line, *want;
	} cases[] = {
		{ "{", "bad JSON" },
		{ "[1]", "bad JSON at column 1: expected '{'" },
		{ "x", "bad JSON at column 1" },
		{ "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": "
		  "1, "
		  "\"hash_ids\": [1]",
		  "found the end of the line" },
		{ "{\"timestamp\": 0,}", "expected a member name" },
		{ "{\"timestamp\" 0}", "expected ':'" },
		{ "{\"timestamp\": 0 \"input_length\": 1}",
		  "expected ',' or '}'" },
		{ "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": "
		  "1, "
		  "\"hash_ids\": [1,]}",
		  "hash_ids[1] is not a number" },
		{ "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": "
		  "1, "
		  "\"hash_ids\": [1 2]}",
		  "expected ',' or ']' in hash_ids" },
		{ GOOD " x", "more after the object" },
		{ GOOD "{}", "more after the object" },
		{ "{\"input_length\": 0, \"output_length\": 1, \"hash_ids\": "
		  "[]}",
		  "missing field \"timestamp\"" },
		{ "{\"timestamp\": 0, \"output_length\": 1, \"hash_ids\": []}",
		  "missing field \"input_length\"" },
		{ "{\"timestamp\": 0, \"input_length\": 0, \"hash_ids\": []}",
		  "missing field \"output_length\"" },
		{ "{\"timestamp\": 0, \"input_length\": 0, \"output_length\": "
		  "1}",
		  "missing field \"hash_ids\"" },
		{ "{}", "missing field \"timestamp\"" },
		{ "{\"timestamp\": 0, \"input_length\": -5, \"output_length\": "
		  "1, "
		  "\"hash_ids\": []}",
		  "input_length is negative (-5)" },
		{ "{\"timestamp\": 0, \"input_length\": 0, \"output_length\": "
		  "-1, "
		  "\"hash_ids\": []}",
		  "output_length is negative" },
		{ "{\"timestamp\": -3, \"input_length\": 0, \"output_length\": "
		  "1, "
		  "\"hash_ids\": []}",
		  "negative timestamp" },
		{ "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": "
		  "1, "
		  "\"hash_ids\": [-1]}",
		  "hash_ids[0] is negative" },
		{ "{\"timestamp\": 0, \"input_length\": 1.5, "
		  "\"output_length\": 1, "
		  "\"hash_ids\": [1]}",
		  "input_length is not an integer" },
		{ "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": "
		  "1, "
		  "\"hash_ids\": [1e2]}",
		  "hash_ids[0] is not an integer" },
		{ "{\"timestamp\": 0, \"input_length\": \"10\", "
		  "\"output_length\": "
		  "1, \"hash_ids\": []}",
		  "input_length is not a number" },
		{ "{\"timestamp\": 0, \"input_length\": 18446744073709551616, "
		  "\"output_length\": 1, \"hash_ids\": []}",
		  "input_length is out of range" },
		{ "{\"timestamp\": 1e30, \"input_length\": 0, "
		  "\"output_length\": 1,"
		  " \"hash_ids\": []}",
		  "timestamp out of range" },
		{ "{\"timestamp\": 0, \"input_length\": 01, \"output_length\": "
		  "1, "
		  "\"hash_ids\": [1]}",
		  "leading zero" },
		{ "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": "
		  "1, "
		  "\"hash_ids\": 1}",
		  "hash_ids is not an array" },
		{ "{\"timestamp\": 0, \"timestamp\": 0}", "duplicate field" },
		/* ceil(L / 512) ids, no more, no fewer */
		{ "{\"timestamp\": 0, \"input_length\": 1025, "
		  "\"output_length\": 1,"
		  " \"hash_ids\": [1, 2]}",
		  "2 hash_ids, but input_length 1025 needs 3" },
		{ "{\"timestamp\": 0, \"input_length\": 512, "
		  "\"output_length\": 1, "
		  "\"hash_ids\": [1, 2]}",
		  "needs 1" },
		{ "{\"timestamp\": 0, \"input_length\": 0, \"output_length\": "
		  "1, "
		  "\"hash_ids\": [1]}",
		  "needs 0" },
		/* strings and literals */
		{ "{\"timestamp\": 0, \"x\": \"abc}", "unterminated string" },
		{ "{\"timestamp\": 0, \"x\": \"a\\q\"}", "bad escape" },
		{ "{\"timestamp\": 0, \"x\": \"a\\u12g4\"}", "bad \\u escape" },
		{ "{\"timestamp\": 0, \"x\": \"a\\u12\"}", "bad \\u escape" },
		{ "{\"timestamp\": 0, \"x\": \"a\tb\"}", "control character" },
		{ "{\"timestamp\": 0, \"x\": tru}", "expected a value" },
		{ "{\"timestamp\": 0, \"x\": nul", "expected a value" },
		{ "{\"timestamp\": 0, \"x\": }", "expected a value" },
		{ "{\"timestamp\": 0, \"x\": -}", "bad number" },
		{ "{\"timestamp\": 0, \"x\": 1.}", "digit expected after '.'" },
		{ "{\"timestamp\": 0, \"x\": 1e+}",
		  "digit expected in the exponent" },
		{ "{\"timestamp\": 0, \"x\": [1,]}", "expected a value" },
		{ "{\"timestamp\": 0, \"x\": {\"a\" 1}}", "expected ':'" },
		/* "output_leng\th" has a tab in it: not output_length */
		{ "{\"timestamp\": 0, \"input_length\": 0, "
		  "\"output_leng\\th\": 1, "
		  "\"hash_ids\": []}",
		  "missing field \"output_length\"" },
		/* \u0000 cannot cut a name short */
		{ "{\"timestamp\": 0, \"input_length\": 0, "
		  "\"output_length\\u0000x\": 1, \"hash_ids\": []}",
		  "missing field \"output_length\"" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ck_bad(cases[i].line, cases[i].want);
}
END_TEST

START_TEST(test_parse_depth_and_nul)
{
	char line[512];
	struct parsed p;
	int n = 0, d;

	/* nesting up to the limit is skipped, one more is refused */
	for (d = KVFS_TRACE_DEPTH - 1; d <= KVFS_TRACE_DEPTH; d++) {
		n = snprintf(line, sizeof(line), "{\"x\": ");
		for (int k = 0; k < d; k++)
			line[n++] = '[';
		for (int k = 0; k < d; k++)
			line[n++] = ']';
		n += snprintf(line + n, sizeof(line) - (size_t)n,
			      ", \"timestamp\": 0, \"input_length\": 0, "
			      "\"output_length\": 0, \"hash_ids\": []}");
		parse(&p, line);
		if (d < KVFS_TRACE_DEPTH)
			ck_assert_msg(p.rc == 1, "depth %d: %s", d, p.err);
		else
			ck_assert(p.rc == -EINVAL && strstr(p.err, "too deep"));
		free(p.ids);
	}

	/* a NUL inside the line is a byte like any other: refused, at its
	 * column, and nothing past it is taken for the end */
	memcpy(line, GOOD, sizeof(GOOD));
	line[16] = '\0'; /* the ',' after the timestamp */
	parse_n(&p, line, sizeof(GOOD) - 1);
	ck_assert_int_eq(p.rc, -EINVAL);
	ck_assert_msg(strstr(p.err, "column 17"), "%s", p.err);
	free(p.ids);
	line[16] = ',';
	line[30] = '\0'; /* inside "input_length" */
	parse_n(&p, line, sizeof(GOOD) - 1);
	ck_assert_int_eq(p.rc, -EINVAL);
	ck_assert_msg(strstr(p.err, "control character"), "%s", p.err);
	free(p.ids);
	parse_n(&p, GOOD "\0", sizeof(GOOD));
	ck_assert_int_eq(p.rc, -EINVAL);
	free(p.ids);
}
END_TEST

/* ------------------------------------------------------------------ fuzz */

static const char fuzz_alpha[] = "{}[]\":,.-+eE0123456789 \t\\u\"abtnlrsfx\r";

/* the rules a parse must keep whatever the input */
static void ck_parse_sane(const char *line, size_t len)
{
	struct parsed p;
	uint64_t need;

	parse_n(&p, line, len);
	ck_assert(p.rc == 1 || p.rc == 0 || p.rc == -EINVAL);
	ck_assert(memchr(p.err, '\0', sizeof(p.err)));
	if (p.rc == -EINVAL)
		ck_assert(p.err[0]);
	if (p.rc == 1) {
		need = (p.rec.input_length + 511) / 512;
		ck_assert(p.rec.n == need);
		ck_assert(p.rec.n <= p.cap);
	}
	free(p.ids);
}

START_TEST(test_fuzz)
{
	const char *seed[] = {
		GOOD,
		"{\"timestamp\": 0, \"input_length\": 513, \"output_length\": "
		"1, "
		"\"x\": [{\"a\": \"\\u00e9\"}, null, true], \"hash_ids\": [1, "
		"2]}",
	};
	uint64_t s = 0x5eed;
	char buf[512];

	for (int it = 0; it < 60000; it++) {
		size_t len;

		s = s * 6364136223846793005ull + 1442695040888963407ull;
		if (it % 3 == 0) {
			/* random bytes of a JSON-ish alphabet, or any byte */
			len = (s >> 33) % 160;
			for (size_t k = 0; k < len; k++) {
				s = s * 6364136223846793005ull + 1;
				buf[k] =
					(s >> 60) & 1
						? (char)(s >> 40)
						: fuzz_alpha
							  [(s >> 33) %
							   (sizeof(fuzz_alpha) -
							    1)];
			}
		} else {
			/* a valid line with a few bytes flipped, cut or
			 * inserted */
			const char *src = seed[it & 1];
			int edits = 1 + (int)((s >> 40) % 4);

			len = strlen(src);
			memcpy(buf, src, len);
			while (edits--) {
				size_t at;

				s = s * 6364136223846793005ull + 1;
				at = len ? (s >> 33) % len : 0;
				switch ((s >> 20) % 3) {
				case 0:
					buf[at] =
						fuzz_alpha[(s >> 50) %
							   (sizeof(fuzz_alpha) -
							    1)];
					break;
				case 1:
					memmove(buf + at, buf + at + 1,
						len - at - (len > 0));
					len -= len > 0;
					break;
				default:
					if (len + 1 >= sizeof(buf))
						break;
					memmove(buf + at + 1, buf + at,
						len - at);
					buf[at] = (char)(s >> 44);
					len++;
				}
			}
		}
		ck_parse_sane(buf, len);
	}
}
END_TEST

/* ---------------------------------------------------------------- reader */

static FILE *mem_file(const char *text, size_t len)
{
	FILE *f = tmpfile();

	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(text, 1, len, f), len);
	rewind(f);
	return f;
}

static const char reader_text[] =
	GOOD "\n"
	     "\n"
	     "{\"timestamp\": 30, \"input_length\": -1}\n"
	     "{\"timestamp\": 40, \"input_length\": 10, \"output_length\": 1, "
	     "\"hash_ids\": [9]}\r\n"
	     "not json\n"
	     "{\"timestamp\": 50, \"input_length\": 0, \"output_length\": 1, "
	     "\"hash_ids\": []}"; /* no final newline */

START_TEST(test_reader_lines)
{
	FILE *f = mem_file(reader_text, sizeof(reader_text) - 1);
	struct kvfs_trace_rec r;
	struct kvfs_trace *t;

	ck_assert_int_eq(kvfs_trace_fopen(f, "t.jsonl", 0, &t), 0);
	ck_assert_int_eq(kvfs_trace_next(t, &r), 1);
	ck_assert_uint_eq(r.timestamp_ms, 27);
	ck_assert_uint_eq(kvfs_trace_lineno(t), 1);
	/* the blank line 2 is passed over; line 3 is bad */
	ck_assert_int_eq(kvfs_trace_next(t, &r), -EINVAL);
	ck_assert_str_eq(kvfs_trace_error(t),
			 "t.jsonl:3: input_length is negative (-1)");
	/* and the reader goes on after it */
	ck_assert_int_eq(kvfs_trace_next(t, &r), 1);
	ck_assert_uint_eq(r.timestamp_ms, 40);
	ck_assert_uint_eq(r.hash_ids[0], 9);
	ck_assert_int_eq(kvfs_trace_next(t, &r), -EINVAL);
	ck_assert_msg(!strncmp(kvfs_trace_error(t), "t.jsonl:5: bad JSON", 19),
		      "%s", kvfs_trace_error(t));
	ck_assert_int_eq(kvfs_trace_next(t, &r), 1);
	ck_assert_uint_eq(r.timestamp_ms, 50);
	ck_assert_uint_eq(kvfs_trace_lineno(t), 6);
	ck_assert_int_eq(kvfs_trace_next(t, &r), 0);
	ck_assert_int_eq(kvfs_trace_next(t, &r), 0);
	ck_assert_uint_eq(kvfs_trace_skipped(t), 0);
	kvfs_trace_close(t);
	fclose(f);
}
END_TEST

START_TEST(test_reader_skip_bad)
{
	FILE *f = mem_file(reader_text, sizeof(reader_text) - 1);
	struct kvfs_trace_rec r;
	struct kvfs_trace *t;
	int n = 0, rc;

	ck_assert_int_eq(kvfs_trace_fopen(f, "t", KVFS_TRACE_SKIP_BAD, &t), 0);
	while ((rc = kvfs_trace_next(t, &r)) == 1)
		n++;
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(n, 3);
	ck_assert_uint_eq(kvfs_trace_skipped(t), 2);
	/* the first bad line is the one kept */
	ck_assert_msg(!strncmp(kvfs_trace_error(t), "t:3: ", 5), "%s",
		      kvfs_trace_error(t));
	kvfs_trace_close(t);
	fclose(f);
	ck_assert_int_eq(kvfs_trace_fopen(stdin, "t", 0x8, &t), -EINVAL);
	ck_assert_int_eq(kvfs_trace_fopen(NULL, "t", 0, &t), -EINVAL);
}
END_TEST

START_TEST(test_reader_long_line)
{
	FILE *f = tmpfile();
	struct kvfs_trace_rec r;
	struct kvfs_trace *t;

	ck_assert_ptr_nonnull(f);
	/* one line past the limit, then a good one */
	for (size_t i = 0; i < KVFS_TRACE_LINE_MAX + 10; i++)
		putc(' ', f);
	fputs("\n" GOOD "\n", f);
	rewind(f);
	ck_assert_int_eq(kvfs_trace_fopen(f, "big", 0, &t), 0);
	ck_assert_int_eq(kvfs_trace_next(t, &r), -EINVAL);
	ck_assert_msg(strstr(kvfs_trace_error(t), "big:1: line longer than"),
		      "%s", kvfs_trace_error(t));
	ck_assert_int_eq(kvfs_trace_next(t, &r), 1);
	ck_assert_uint_eq(kvfs_trace_lineno(t), 2);
	kvfs_trace_close(t);
	fclose(f);
}
END_TEST

START_TEST(test_reader_open)
{
	char path[256];
	const char *tmp = getenv("TMPDIR");
	struct kvfs_trace_rec r;
	struct kvfs_trace *t;
	int fd;

	snprintf(path, sizeof(path), "%s/check_trace-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, GOOD "\n", sizeof(GOOD)),
			 (ssize_t)sizeof(GOOD));
	close(fd);
	ck_assert_int_eq(kvfs_trace_open(path, 0, &t), 0);
	ck_assert_int_eq(kvfs_trace_next(t, &r), 1);
	ck_assert_int_eq(kvfs_trace_next(t, &r), 0);
	kvfs_trace_close(t);
	unlink(path);
	ck_assert_int_eq(kvfs_trace_open(path, 0, &t), -ENOENT);
	ck_assert_int_eq(kvfs_trace_open("", 0, &t), -EINVAL);
	kvfs_trace_close(NULL);
}
END_TEST

/* ---------------------------------------------------------------- tokens */

START_TEST(test_tokens)
{
	uint64_t ids_a[] = { 5, 6, 7 }, ids_b[] = { 5, 6, 8 };
	struct kvfs_trace_rec a = { .input_length = 1536,
				    .hash_ids = ids_a,
				    .n = 3 };
	struct kvfs_trace_rec b = { .input_length = 1600,
				    .hash_ids = ids_b,
				    .n = 4 };
	uint8_t ha[3][KVFS_HASH_LEN], hb[3][KVFS_HASH_LEN];
	uint32_t *ta = calloc(2048, sizeof(*ta)), *tb = calloc(2048, 4);
	uint32_t one[512];

	ck_assert(ta && tb);
	ck_assert_int_eq(kvfs_trace_tokens(&a, ta, 1536), 0);
	/* block 1 of a is the block of id 6, whatever the position */
	kvfs_trace_block_tokens(6, one, 512);
	ck_assert(!memcmp(ta + 512, one, sizeof(one)));
	for (int j = 0; j < 1536; j++)
		ck_assert_uint_lt(ta[j], KVFS_TRACE_VOCAB);
	/* ids 5 and 6 differ in their tokens */
	ck_assert(memcmp(ta, ta + 512, sizeof(one)));
	/* pinned (computed in Python from the rule in trace.h), so the
	 * rule cannot drift unnoticed: it decides kvfs names */
	kvfs_trace_block_tokens(0, one, 4);
	ck_assert_uint_eq(one[0], 8489u);
	ck_assert_uint_eq(one[1], 15362u);

	/* more tokens than the ids cover */
	ck_assert_int_eq(kvfs_trace_tokens(&a, ta, 1537), -EINVAL);
	ck_assert_int_eq(kvfs_trace_tokens(&b, tb, 1536), 0);

	/* shared prefix of ids -> shared kvfs names, up to the first
	 * difference, and no further */
	ck_assert_int_eq(kvfs_hash_chain("m", 512, ta, 1536, ha, 3), 3);
	ck_assert_int_eq(kvfs_hash_chain("m", 512, tb, 1536, hb, 3), 3);
	ck_assert(!memcmp(ha[0], hb[0], KVFS_HASH_LEN));
	ck_assert(!memcmp(ha[1], hb[1], KVFS_HASH_LEN));
	ck_assert(memcmp(ha[2], hb[2], KVFS_HASH_LEN));
	free(ta);
	free(tb);
}
END_TEST

/* -------------------------------------------------------------- generator */

static char *gen_text(const struct kvfs_trace_gen_params *p, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(kvfs_trace_gen(f, p), 0);
	fclose(f);
	return buf;
}

struct idinfo {
	uint64_t parent; /* UINT64_MAX: first block */
	size_t pos;
	bool seen;
};

START_TEST(test_gen_valid_chained)
{
	struct kvfs_trace_gen_params p;
	struct kvfs_trace_rec r;
	struct kvfs_trace *t;
	struct idinfo *info;
	uint64_t last_ts = 0, requests = 0, hits = 0, named = 0, max_id = 0;
	size_t len, cap = 1 << 20;
	char *text;
	FILE *f;
	int rc;

	kvfs_trace_gen_defaults(&p);
	p.requests = 400;
	text = gen_text(&p, &len);
	info = calloc(cap, sizeof(*info));
	ck_assert_ptr_nonnull(info);
	f = fmemopen(text, len, "r");
	ck_assert_int_eq(kvfs_trace_fopen(f, "gen", 0, &t), 0);
	while ((rc = kvfs_trace_next(t, &r)) == 1) {
		size_t full = kvfs_trace_full_blocks(&r), k = 0;
		bool prefix = true;

		ck_assert(r.timestamp_ms >= last_ts);
		ck_assert(requests || r.timestamp_ms == 0);
		ck_assert(r.input_length <= p.max_input);
		ck_assert(r.output_length >= p.out_min &&
			  r.output_length <= p.out_max);
		last_ts = r.timestamp_ms;
		for (size_t i = 0; i < r.n; i++) {
			uint64_t id = r.hash_ids[i];
			uint64_t par = i ? r.hash_ids[i - 1] : UINT64_MAX;

			ck_assert_uint_lt(id, cap);
			max_id = id > max_id ? id : max_id;
			/* prefix-chained: an id always has the same
			 * position and the same block before it */
			if (info[id].seen) {
				ck_assert_uint_eq(info[id].pos, i);
				ck_assert(info[id].parent == par);
			}
			if (i < full && prefix && info[id].seen)
				k++;
			else
				prefix = false;
		}
		for (size_t i = 0; i < r.n; i++) {
			struct idinfo *e = &info[r.hash_ids[i]];

			e->seen = true;
			e->pos = i;
			e->parent = i ? r.hash_ids[i - 1] : UINT64_MAX;
		}
		hits += k;
		named += full;
		requests++;
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(requests, 400);
	/* shared system prompts and follow-up turns do share blocks */
	ck_assert_msg(hits * 10 > named, "hits %llu of %llu",
		      (unsigned long long)hits, (unsigned long long)named);
	ck_assert_uint_lt(hits, named);
	/* Poisson at 10/s: 400 arrivals take about 40 s */
	ck_assert_msg(last_ts > 30000 && last_ts < 50000, "last %llu",
		      (unsigned long long)last_ts);
	kvfs_trace_close(t);
	fclose(f);
	free(info);
	free(text);
}
END_TEST

START_TEST(test_gen_deterministic)
{
	struct kvfs_trace_gen_params p;
	size_t la, lb, lc;
	char *a, *b, *c;

	kvfs_trace_gen_defaults(&p);
	p.requests = 100;
	a = gen_text(&p, &la);
	b = gen_text(&p, &lb);
	p.seed = 2;
	c = gen_text(&p, &lc);
	ck_assert(la == lb && !memcmp(a, b, la));
	ck_assert(la != lc || memcmp(a, c, la));
	free(a);
	free(b);
	free(c);

	/* requests 0: nothing at all */
	p.requests = 0;
	a = gen_text(&p, &la);
	ck_assert_uint_eq(la, 0);
	free(a);
}
END_TEST

/* with a steep skew nearly every session opens with system prompt 0 */
START_TEST(test_gen_skew)
{
	struct kvfs_trace_gen_params p;
	struct kvfs_trace_rec r;
	struct kvfs_trace *t;
	uint64_t first = UINT64_MAX, same = 0, n = 0;
	size_t len;
	char *text;
	FILE *f;

	kvfs_trace_gen_defaults(&p);
	p.requests = 300;
	p.follow = 0;
	p.skew = 8;
	p.sys_min = p.sys_max = 2048;
	text = gen_text(&p, &len);
	f = fmemopen(text, len, "r");
	ck_assert_int_eq(kvfs_trace_fopen(f, "gen", 0, &t), 0);
	while (kvfs_trace_next(t, &r) == 1) {
		if (first == UINT64_MAX)
			first = r.hash_ids[0];
		same += r.hash_ids[0] == first;
		n++;
	}
	ck_assert_uint_eq(n, 300);
	ck_assert_msg(same > 290, "%llu of 300", (unsigned long long)same);
	kvfs_trace_close(t);
	fclose(f);
	free(text);
}
END_TEST

START_TEST(test_gen_params)
{
	struct kvfs_trace_gen_params p, q;
	FILE *f;

	kvfs_trace_gen_defaults(&p);
	ck_assert_ptr_null(kvfs_trace_gen_check(&p));
	q = p;
	q.rate = 0;
	ck_assert_ptr_nonnull(kvfs_trace_gen_check(&q));
	q = p;
	q.follow = 1.5;
	ck_assert_ptr_nonnull(kvfs_trace_gen_check(&q));
	q = p;
	q.sessions = 0;
	ck_assert_ptr_nonnull(kvfs_trace_gen_check(&q));
	q = p;
	q.user_min = q.user_max + 1;
	ck_assert_ptr_nonnull(kvfs_trace_gen_check(&q));
	q = p;
	q.max_input = q.sys_max;
	ck_assert_ptr_nonnull(kvfs_trace_gen_check(&q));
	ck_assert_int_eq(kvfs_trace_gen(stdout, &q), -EINVAL);
	ck_assert_int_eq(kvfs_trace_gen(NULL, &p), -EINVAL);

	/* a full disk is an error, not a short trace */
	f = fopen("/dev/full", "w");
	if (f) {
		ck_assert_int_eq(kvfs_trace_gen(f, &p), -EIO);
		fclose(f);
	}
}
END_TEST

static Suite *trace_suite(void)
{
	Suite *s = suite_create("trace");
	TCase *tc = tcase_create("parse");

	tcase_add_test(tc, test_parse_good);
	tcase_add_test(tc, test_parse_forms);
	tcase_add_test(tc, test_parse_bad);
	tcase_add_test(tc, test_parse_depth_and_nul);
	tcase_add_test(tc, test_fuzz);
	suite_add_tcase(s, tc);
	tc = tcase_create("reader");
	tcase_add_test(tc, test_reader_lines);
	tcase_add_test(tc, test_reader_skip_bad);
	tcase_add_test(tc, test_reader_long_line);
	tcase_add_test(tc, test_reader_open);
	suite_add_tcase(s, tc);
	tc = tcase_create("tokens");
	tcase_add_test(tc, test_tokens);
	suite_add_tcase(s, tc);
	tc = tcase_create("gen");
	tcase_add_test(tc, test_gen_valid_chained);
	tcase_add_test(tc, test_gen_deterministic);
	tcase_add_test(tc, test_gen_skew);
	tcase_add_test(tc, test_gen_params);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(trace_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
