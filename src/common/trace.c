/*
 * trace.c - Mooncake-format traces: reader, token rule, generator.
 *
 * The reader parses each line with a small JSON parser of its own rather
 * than building a tree (json.h): a trace line is one flat object whose
 * only big member is an array of integers, and streaming millions of
 * them through a general tree would allocate a node per id.  Every read
 * of a byte is checked against the end of the line first; nesting is
 * bounded (KVFS_TRACE_DEPTH), so no input can crash it or make it
 * recurse without limit, and a line longer than KVFS_TRACE_LINE_MAX is
 * refused without being held in memory.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/trace.h"

#define KEY_MAX                                                                \
	16 /* longest member name we compare; longer ones are skipped          \
	    */
#define NUM_TEXT_MAX 64 /* longest fractional timestamp we convert */

/* splitmix64: the stream behind tokens and the generator */
static uint64_t sm64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ==== parsing one line ============================================== */

struct jp {
	const unsigned char *start;
	const unsigned char *p;
	const unsigned char *end;
	char *err;
	size_t errlen;
};

struct jnum {
	bool neg;
	bool integer;  /* no fraction, no exponent */
	bool overflow; /* integer part above UINT64_MAX */
	uint64_t u;    /* integer part, when integer and !overflow */
	const unsigned char *text;
	size_t len;
};

static int jp_msg(struct jp *j, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* a complaint about the record's meaning: no column */
static int jp_msg(struct jp *j, const char *fmt, ...)
{
	va_list ap;

	if (j->err && j->errlen) {
		va_start(ap, fmt);
		vsnprintf(j->err, j->errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* a complaint about the JSON itself, at the column where it went wrong */
static int jp_bad(struct jp *j, const char *what)
{
	if (j->p >= j->end)
		return jp_msg(j, "bad JSON: %s, found the end of the line",
			      what);
	return jp_msg(j, "bad JSON at column %zu: %s",
		      (size_t)(j->p - j->start) + 1, what);
}

static void jp_ws(struct jp *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' ||
				 *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static bool jp_at(const struct jp *j, unsigned char c)
{
	return j->p < j->end && *j->p == c;
}

static int jp_expect(struct jp *j, unsigned char c, const char *what)
{
	if (!jp_at(j, c))
		return jp_bad(j, what);
	j->p++;
	return 0;
}

static bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static int hex_val(unsigned char c)
{
	if (is_digit(c))
		return c - '0';
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* the byte a one-letter escape stands for, 0 for a bad one */
static unsigned char unescape(unsigned char c)
{
	static const char from[] = "\"\\/bfnrt";
	static const char to[] = "\"\\/\b\f\n\r\t";
	const char *p = c ? strchr(from, c) : NULL;

	return p ? (unsigned char)to[p - from] : 0;
}

/*
 * A string, j->p on its opening quote.  Its decoded bytes go to key
 * (KEY_MAX + 1 bytes, NUL-terminated) when key is not NULL; a name too
 * long or with a non-ASCII escape comes back as "" (it cannot be one we
 * know).  Bytes >= 0x80 are taken as they are: no member we read is
 * text, so UTF-8 validity would buy nothing.
 */
static int jp_string(struct jp *j, char *key)
{
	size_t n = 0;
	bool fits = true;

	j->p++;
	for (;;) {
		unsigned char c;
		int v = 0;

		if (j->p >= j->end)
			return jp_bad(j, "unterminated string");
		c = *j->p;
		if (c == '"')
			break;
		if (c < 0x20)
			return jp_bad(j, "control character in a string");
		if (c == '\\') {
			if (j->end - j->p < 2)
				return jp_bad(j, "unterminated escape");
			c = j->p[1];
			if (c == 'u') {
				if (j->end - j->p < 6)
					return jp_bad(j, "short \\u escape");
				for (int k = 2; k < 6; k++) {
					int h = hex_val(j->p[k]);

					if (h < 0)
						return jp_bad(j,
							      "bad \\u escape");
					v = v * 16 + h;
				}
				j->p += 6;
				c = (unsigned char)v;
				/* a NUL would cut the name short */
				fits = fits && v > 0 && v < 0x80;
			} else {
				c = unescape(c);
				if (!c)
					return jp_bad(j, "bad escape");
				j->p += 2;
			}
		} else {
			j->p++;
		}
		if (key && fits && n < KEY_MAX)
			key[n++] = (char)c;
		else
			fits = false;
	}
	j->p++;
	if (key)
		key[fits ? n : 0] = '\0';
	return 0;
}

/* a JSON number (RFC 8259 grammar), j->p on its first byte */
static int jp_number(struct jp *j, struct jnum *n)
{
	memset(n, 0, sizeof(*n));
	n->text = j->p;
	n->integer = true;
	if (jp_at(j, '-')) {
		n->neg = true;
		j->p++;
	}
	if (j->p >= j->end || !is_digit(*j->p))
		return jp_bad(j, "bad number");
	if (*j->p == '0') {
		j->p++;
		if (j->p < j->end && is_digit(*j->p))
			return jp_bad(j, "leading zero in a number");
	}
	while (j->p < j->end && is_digit(*j->p)) {
		unsigned d = *j->p++ - '0';

		if (n->u > (UINT64_MAX - d) / 10)
			n->overflow = true;
		else
			n->u = n->u * 10 + d;
	}
	if (jp_at(j, '.')) {
		n->integer = false;
		j->p++;
		if (j->p >= j->end || !is_digit(*j->p))
			return jp_bad(j, "digit expected after '.'");
		while (j->p < j->end && is_digit(*j->p))
			j->p++;
	}
	if (j->p < j->end && (*j->p | 0x20) == 'e') {
		n->integer = false;
		j->p++;
		if (jp_at(j, '+') || jp_at(j, '-'))
			j->p++;
		if (j->p >= j->end || !is_digit(*j->p))
			return jp_bad(j, "digit expected in the exponent");
		while (j->p < j->end && is_digit(*j->p))
			j->p++;
	}
	n->len = (size_t)(j->p - n->text);
	return 0;
}

static int jp_literal(struct jp *j, const char *word)
{
	size_t len = strlen(word);

	if ((size_t)(j->end - j->p) < len || memcmp(j->p, word, len))
		return jp_bad(j, "expected a value");
	j->p += len;
	return 0;
}

static int jp_skip(struct jp *j, int depth);

/* the members or elements of a container being skipped */
static int jp_skip_items(struct jp *j, int depth, bool object)
{
	unsigned char close = object ? '}' : ']';
	int rc;

	j->p++;
	jp_ws(j);
	if (jp_at(j, close)) {
		j->p++;
		return 0;
	}
	for (;;) {
		if (object) {
			if (!jp_at(j, '"'))
				return jp_bad(j, "expected a member name");
			rc = jp_string(j, NULL);
			if (rc)
				return rc;
			jp_ws(j);
			rc = jp_expect(j, ':', "expected ':'");
			if (rc)
				return rc;
			jp_ws(j);
		}
		rc = jp_skip(j, depth + 1);
		if (rc)
			return rc;
		jp_ws(j);
		if (jp_at(j, close)) {
			j->p++;
			return 0;
		}
		rc = jp_expect(j, ',',
			       object ? "expected ',' or '}'"
				      : "expected ',' or ']'");
		if (rc)
			return rc;
		jp_ws(j);
	}
}

/* any value; depth counts the containers around it */
static int jp_skip(struct jp *j, int depth)
{
	struct jnum n;

	if (j->p >= j->end)
		return jp_bad(j, "expected a value");
	switch (*j->p) {
	case '{':
	case '[':
		if (depth >= KVFS_TRACE_DEPTH)
			return jp_bad(j, "nested too deep");
		return jp_skip_items(j, depth, *j->p == '{');
	case '"':
		return jp_string(j, NULL);
	case 't':
		return jp_literal(j, "true");
	case 'f':
		return jp_literal(j, "false");
	case 'n':
		return jp_literal(j, "null");
	default:
		if (*j->p == '-' || is_digit(*j->p))
			return jp_number(j, &n);
		return jp_bad(j, "expected a value");
	}
}

/*
 * An integer 0..UINT64_MAX without fraction or exponent.  -EINVAL with
 * *why set when the value is a number of another kind (the caller names
 * it), or after a message of its own when it is no JSON number.
 */
static int jp_uint_val(struct jp *j, uint64_t *out, const char **why,
		       struct jnum *n)
{
	int rc;

	*why = NULL;
	if (j->p >= j->end || (*j->p != '-' && !is_digit(*j->p))) {
		*why = "is not a number";
		return -EINVAL;
	}
	rc = jp_number(j, n);
	if (rc)
		return rc;
	if (n->neg && (n->u || n->overflow || !n->integer))
		*why = "is negative";
	else if (!n->integer)
		*why = "is not an integer";
	else if (n->overflow)
		*why = "is out of range";
	if (*why)
		return -EINVAL;
	*out = n->u;
	return 0;
}

/* the number's text for a message: at most 32 bytes of it */
#define NUM_SHOW(n) (int)((n).len < 32 ? (n).len : 32), (const char *)(n).text

static int jp_uint(struct jp *j, const char *name, uint64_t *out)
{
	const char *why;
	struct jnum n = { 0 };
	int rc = jp_uint_val(j, out, &why, &n);

	if (!rc || !why)
		return rc;
	if (!n.len)
		return jp_msg(j, "%s %s", name, why);
	return jp_msg(j, "%s %s (%.*s)", name, why, NUM_SHOW(n));
}

/* the timestamp: any number >= 0, rounded down to whole ms */
static int jp_timestamp(struct jp *j, uint64_t *out)
{
	char text[NUM_TEXT_MAX + 1];
	struct jnum n;
	double d;
	int rc;

	if (j->p >= j->end || (*j->p != '-' && !is_digit(*j->p)))
		return jp_msg(j, "timestamp is not a number");
	rc = jp_number(j, &n);
	if (rc)
		return rc;
	if (n.integer && !n.overflow && (!n.neg || !n.u)) {
		*out = n.u;
		return 0;
	}
	if (n.len > NUM_TEXT_MAX)
		return jp_msg(j, "timestamp: number too long");
	memcpy(text, n.text, n.len);
	text[n.len] = '\0';
	d = strtod(text, NULL);
	/* the check is written so that a NaN fails it too */
	if (n.neg && d != 0)
		return jp_msg(j, "negative timestamp (%s)", text);
	if (!(d < 18446744073709549568.0))
		return jp_msg(j, "timestamp out of range (%s)", text);
	*out = (uint64_t)d;
	return 0;
}

static int ids_push(uint64_t **ids, size_t *cap, size_t n, uint64_t v)
{
	if (n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 64;
		uint64_t *p = realloc(*ids, ncap * sizeof(**ids));

		if (!p)
			return -ENOMEM;
		*ids = p;
		*cap = ncap;
	}
	(*ids)[n] = v;
	return 0;
}

static int jp_ids(struct jp *j, uint64_t **ids, size_t *cap, size_t *n)
{
	int rc;

	*n = 0;
	if (!jp_at(j, '['))
		return jp_msg(j, "hash_ids is not an array");
	j->p++;
	jp_ws(j);
	if (jp_at(j, ']')) {
		j->p++;
		return 0;
	}
	for (;;) {
		struct jnum num = { 0 };
		const char *why;
		uint64_t v;

		rc = jp_uint_val(j, &v, &why, &num);
		if (rc && why && num.len)
			return jp_msg(j, "hash_ids[%zu] %s (%.*s)", *n, why,
				      NUM_SHOW(num));
		if (rc && why)
			return jp_msg(j, "hash_ids[%zu] %s", *n, why);
		if (!rc)
			rc = ids_push(ids, cap, *n, v);
		if (rc)
			return rc;
		(*n)++;
		jp_ws(j);
		if (jp_at(j, ']')) {
			j->p++;
			return 0;
		}
		rc = jp_expect(j, ',', "expected ',' or ']' in hash_ids");
		if (rc)
			return rc;
		jp_ws(j);
	}
}

enum field { F_TS, F_IN, F_OUT, F_IDS, F_NFIELDS };

static const char *const field_names[F_NFIELDS] = {
	[F_TS] = "timestamp",
	[F_IN] = "input_length",
	[F_OUT] = "output_length",
	[F_IDS] = "hash_ids",
};

struct jrec {
	struct kvfs_trace_rec *rec;
	uint64_t **ids;
	size_t *cap;
	bool seen[F_NFIELDS];
};

static int jp_member(struct jp *j, struct jrec *r, const char *key)
{
	int f;

	for (f = 0; f < F_NFIELDS; f++)
		if (!strcmp(key, field_names[f]))
			break;
	if (f == F_NFIELDS)
		return jp_skip(j, 1);
	if (r->seen[f])
		return jp_msg(j, "duplicate field \"%s\"", field_names[f]);
	r->seen[f] = true;
	switch (f) {
	case F_TS:
		return jp_timestamp(j, &r->rec->timestamp_ms);
	case F_IN:
		return jp_uint(j, "input_length", &r->rec->input_length);
	case F_OUT:
		return jp_uint(j, "output_length", &r->rec->output_length);
	default:
		return jp_ids(j, r->ids, r->cap, &r->rec->n);
	}
}

static int jp_object(struct jp *j, struct jrec *r)
{
	char key[KEY_MAX + 1];
	int rc;

	rc = jp_expect(j, '{', "expected '{'");
	jp_ws(j);
	if (rc || jp_at(j, '}'))
		goto out_close;
	for (;;) {
		if (!jp_at(j, '"'))
			return jp_bad(j, "expected a member name");
		rc = jp_string(j, key);
		if (rc)
			return rc;
		jp_ws(j);
		rc = jp_expect(j, ':', "expected ':'");
		if (rc)
			return rc;
		jp_ws(j);
		rc = jp_member(j, r, key);
		if (rc)
			return rc;
		jp_ws(j);
		if (!jp_at(j, ','))
			break;
		j->p++;
		jp_ws(j);
	}
out_close:
	if (rc)
		return rc;
	return jp_expect(j, '}', "expected ',' or '}'");
}

/* the rules past the syntax: every field there, ids matching the length */
static int jp_check(struct jp *j, const struct jrec *r)
{
	const struct kvfs_trace_rec *rec = r->rec;
	uint64_t need;

	for (int f = 0; f < F_NFIELDS; f++)
		if (!r->seen[f])
			return jp_msg(j, "missing field \"%s\"",
				      field_names[f]);
	need = rec->input_length / KVFS_TRACE_BLOCK_TOKENS +
	       (rec->input_length % KVFS_TRACE_BLOCK_TOKENS != 0);
	if (rec->n != need)
		return jp_msg(j,
			      "%zu hash_ids, but input_length %llu needs "
			      "%llu (one per %u tokens, rounded up)",
			      rec->n, (unsigned long long)rec->input_length,
			      (unsigned long long)need,
			      KVFS_TRACE_BLOCK_TOKENS);
	return 0;
}

int kvfs_trace_parse(const char *line, size_t len, struct kvfs_trace_rec *rec,
		     uint64_t **ids, size_t *cap, char *err, size_t errlen)
{
	struct jp j = {
		.start = (const unsigned char *)line,
		.p = (const unsigned char *)line,
		.end = (const unsigned char *)line + len,
		.err = err,
		.errlen = errlen,
	};
	struct jrec r = { .rec = rec, .ids = ids, .cap = cap };
	int rc;

	if (err && errlen)
		err[0] = '\0';
	if (!rec || !ids || !cap || (!line && len))
		return -EINVAL;
	memset(rec, 0, sizeof(*rec));
	jp_ws(&j);
	if (j.p == j.end)
		return 0;
	rc = jp_object(&j, &r);
	if (rc)
		return rc;
	jp_ws(&j);
	if (j.p != j.end)
		return jp_bad(&j, "more after the object");
	rc = jp_check(&j, &r);
	if (rc)
		return rc;
	rec->hash_ids = *ids;
	return 1;
}

/* ==== the streaming reader ========================================== */

struct kvfs_trace {
	FILE *f;
	bool own; /* fclose at the end */
	unsigned flags;
	char *name;
	char *line; /* the current line, line_len bytes */
	size_t line_len, line_cap;
	uint64_t lineno;
	uint64_t skipped;
	uint64_t *ids;
	size_t ids_cap;
	char *err; /* err_cap bytes */
	size_t err_cap;
};

static int trace_new(FILE *f, bool own, const char *name, unsigned flags,
		     struct kvfs_trace **out)
{
	struct kvfs_trace *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->name = strdup(name ? name : "trace");
	t->err_cap = (t->name ? strlen(t->name) : 0) + KVFS_TRACE_ERR_MAX + 32;
	t->err = calloc(1, t->err_cap);
	if (!t->name || !t->err) {
		free(t->name);
		free(t->err);
		free(t);
		return -ENOMEM;
	}
	t->f = f;
	t->own = own;
	t->flags = flags;
	*out = t;
	return 0;
}

int kvfs_trace_fopen(FILE *f, const char *name, unsigned flags,
		     struct kvfs_trace **out)
{
	if (!f || !out || (flags & ~KVFS_TRACE_SKIP_BAD))
		return -EINVAL;
	return trace_new(f, false, name, flags, out);
}

int kvfs_trace_open(const char *path, unsigned flags, struct kvfs_trace **out)
{
	bool std_in;
	FILE *f;
	int rc;

	if (!path || !*path || !out || (flags & ~KVFS_TRACE_SKIP_BAD))
		return -EINVAL;
	std_in = !strcmp(path, "-");
	f = std_in ? stdin : fopen(path, "re");
	if (!f)
		return -errno;
	rc = trace_new(f, !std_in, std_in ? "stdin" : path, flags, out);
	if (rc && !std_in)
		fclose(f);
	return rc;
}

void kvfs_trace_close(struct kvfs_trace *t)
{
	if (!t)
		return;
	if (t->own)
		fclose(t->f);
	free(t->name);
	free(t->line);
	free(t->ids);
	free(t->err);
	free(t);
}

const char *kvfs_trace_error(const struct kvfs_trace *t)
{
	return t ? t->err : "";
}

uint64_t kvfs_trace_lineno(const struct kvfs_trace *t)
{
	return t ? t->lineno : 0;
}

uint64_t kvfs_trace_skipped(const struct kvfs_trace *t)
{
	return t ? t->skipped : 0;
}

static int line_grow(struct kvfs_trace *t)
{
	size_t cap = t->line_cap ? t->line_cap * 2 : 4096;
	char *p;

	if (cap > KVFS_TRACE_LINE_MAX)
		cap = KVFS_TRACE_LINE_MAX;
	p = realloc(t->line, cap);
	if (!p)
		return -ENOMEM;
	t->line = p;
	t->line_cap = cap;
	return 0;
}

/*
 * The next line into t->line (no "\n"): 1, or 0 at the end of the
 * input, -E2BIG for a line past KVFS_TRACE_LINE_MAX (read to its end and
 * dropped), -EIO.  getc_unlocked rather than getline: getline would hold
 * a line of any length in memory, and a NUL byte in it would go unseen.
 */
static int line_get(struct kvfs_trace *t)
{
	bool any = false, big = false;
	int c, rc;

	t->line_len = 0;
	while ((c = getc_unlocked(t->f)) != EOF) {
		any = true;
		if (c == '\n')
			break;
		if (big)
			continue;
		if (t->line_len + 1 >= KVFS_TRACE_LINE_MAX) {
			big = true;
			continue;
		}
		if (t->line_len == t->line_cap) {
			rc = line_grow(t);
			if (rc)
				return rc;
		}
		t->line[t->line_len++] = (char)c;
	}
	if (c == EOF && ferror(t->f))
		return errno > 0 ? -errno : -EIO;
	if (!any)
		return 0;
	return big ? -E2BIG : 1;
}

/* getc sets errno on a read error (ferror only says there was one):
 * clear it first to tell, and leave the caller's as it was */
static int line_read(struct kvfs_trace *t)
{
	int saved = errno, rc;

	errno = 0;
	rc = line_get(t);
	errno = saved;
	return rc;
}

/* a bad line: report it, or count it and go on */
static int bad_line(struct kvfs_trace *t, const char *why)
{
	if (!t->skipped || !(t->flags & KVFS_TRACE_SKIP_BAD))
		snprintf(t->err, t->err_cap, "%s:%llu: %s", t->name,
			 (unsigned long long)t->lineno, why);
	if (!(t->flags & KVFS_TRACE_SKIP_BAD))
		return -EINVAL;
	t->skipped++;
	return 0;
}

int kvfs_trace_next(struct kvfs_trace *t, struct kvfs_trace_rec *rec)
{
	char why[KVFS_TRACE_ERR_MAX];
	int rc;

	if (!t || !rec)
		return -EINVAL;
	for (;;) {
		rc = line_read(t);
		if (rc == 0 || (rc < 0 && rc != -E2BIG))
			return rc;
		t->lineno++;
		if (rc == -E2BIG) {
			snprintf(why, sizeof(why), "line longer than %u bytes",
				 KVFS_TRACE_LINE_MAX - 1);
		} else {
			rc = kvfs_trace_parse(t->line, t->line_len, rec,
					      &t->ids, &t->ids_cap, why,
					      sizeof(why));
			if (rc == 1 || rc == -ENOMEM)
				return rc;
			if (rc == 0)
				continue; /* blank */
		}
		rc = bad_line(t, why);
		if (rc)
			return rc;
	}
}

/* ==== tokens ======================================================== */

void kvfs_trace_block_tokens(uint64_t hash_id, uint32_t *tok, size_t ntok)
{
	uint64_t s = hash_id ^ KVFS_TRACE_TOKEN_SALT;

	for (size_t j = 0; j < ntok; j++)
		tok[j] = (uint32_t)((sm64(&s) >> 32) % KVFS_TRACE_VOCAB);
}

int kvfs_trace_tokens(const struct kvfs_trace_rec *r, uint32_t *tok,
		      size_t ntok)
{
	const size_t B = KVFS_TRACE_BLOCK_TOKENS;

	if (!r || (!tok && ntok) || (ntok && !r->hash_ids))
		return -EINVAL;
	if (r->n < ntok / B + (ntok % B != 0))
		return -EINVAL;
	for (size_t i = 0; ntok; i++) {
		size_t k = ntok < B ? ntok : B;

		kvfs_trace_block_tokens(r->hash_ids[i], tok, k);
		tok += k;
		ntok -= k;
	}
	return 0;
}

/* ==== the generator ================================================= */

/*
 * ln and exp of our own: libm is not linked into every program, and
 * these make the output the same bytes whatever libm a machine has.
 * Both are accurate to a few ulp over the ranges used (ln on (0, 1]
 * and [1, 2^32]; exp on [-800, 0]), far more than a workload needs.
 */
static double gen_ln(double x)
{
	union {
		double d;
		uint64_t u;
	} v = { .d = x };
	int e = (int)((v.u >> 52) & 0x7ff) - 1022;
	double m, z, z2, sum, term;

	/* x = m * 2^e with m in [0.5, 1); x is normal and > 0 here */
	v.u = (v.u & ~(0x7ffull << 52)) | (1022ull << 52);
	m = v.d;
	if (m < 0.70710678118654752) { /* keep z small: m in [0.707, 1.414) */
		m *= 2;
		e--;
	}
	/* ln m = 2 atanh z, z = (m - 1) / (m + 1), |z| < 0.172 */
	z = (m - 1) / (m + 1);
	z2 = z * z;
	sum = 0;
	term = z;
	for (int k = 1; k < 40; k += 2) {
		sum += term / k;
		term *= z2;
	}
	return 2 * sum + e * 0.69314718055994530942;
}

static double gen_exp(double x)
{
	double r, sum = 1, term = 1;
	int n;

	if (x < -700)
		return 0;
	/* x = n ln2 + r, |r| <= ln2 / 2, then e^x = 2^n e^r */
	n = (int)(x / 0.69314718055994530942 + (x < 0 ? -0.5 : 0.5));
	r = x - n * 0.69314718055994530942;
	for (int k = 1; k < 30; k++) {
		term *= r / k;
		sum += term;
	}
	for (; n < 0; n++)
		sum *= 0.5;
	for (; n > 0; n--)
		sum *= 2;
	return sum;
}

struct gen_sess {
	uint64_t *ids; /* ids of the full blocks of the last prompt */
	size_t n, cap;
	uint64_t len; /* tokens of the last prompt */
	uint64_t out; /* tokens of its answer */
};

struct gen_sys {
	uint64_t len;
	uint64_t *ids; /* floor(len / 512), given at first use */
	bool named;
};

struct gen {
	const struct kvfs_trace_gen_params *p;
	FILE *f;
	uint64_t rng;
	uint64_t next_id;
	double t_ms;
	double *cdf; /* Zipf, cumulative, sys_prompts entries */
	struct gen_sys *sys;
	struct gen_sess *sess; /* p->sessions; [0, nlive) are live */
	size_t nlive;
	uint64_t *line_ids; /* the request being written */
	size_t line_cap;
	double win_end_ms; /* bursts: the current window's end */
};

/* uniform on (0, 1], 53 bits */
static double gen_unit(struct gen *g)
{
	return (double)((sm64(&g->rng) >> 11) + 1) * (1.0 / 9007199254740992.0);
}

static uint64_t gen_range(struct gen *g, uint64_t lo, uint64_t hi)
{
	return lo + sm64(&g->rng) % (hi - lo + 1);
}

const char *kvfs_trace_gen_check(const struct kvfs_trace_gen_params *p)
{
	if (!p)
		return "no parameters";
	if (!(p->rate > 0 && p->rate <= 1e9))
		return "rate must be above 0 and at most 1e9 per second";
	if (!(p->skew >= 0 && p->skew <= 100))
		return "skew must lie in 0..100";
	if (!(p->follow >= 0 && p->follow <= 1))
		return "follow must lie in 0..1";
	if (p->sys_prompts > 1000000)
		return "at most 1000000 system prompts";
	if (p->sessions < 1 || p->sessions > 1000000)
		return "sessions must lie in 1..1000000";
	if (p->sys_min > p->sys_max || p->user_min > p->user_max ||
	    p->out_min > p->out_max)
		return "a length range has its minimum above its maximum";
	if (p->max_input > (1ull << 26))
		return "max_input above 67108864 tokens";
	if ((uint64_t)p->sys_max + p->user_max > p->max_input)
		return "max_input below the longest first turn "
		       "(sys_max + user_max)";
	if (!(p->burst >= 1 && p->burst <= 1e6) ||
	    !(p->burst_s > 0 && p->burst_s <= 1e6))
		return "burst must lie in 1..1e6 and its window above 0";
	if (!(p->long_frac >= 0 && p->long_frac <= 1))
		return "long_frac must lie in 0..1";
	if (p->long_min > p->long_max)
		return "a length range has its minimum above its maximum";
	if (p->long_frac > 0 &&
	    (uint64_t)p->sys_max + p->long_max > p->max_input)
		return "max_input below the longest document "
		       "(sys_max + long_max)";
	return NULL;
}

void kvfs_trace_gen_defaults(struct kvfs_trace_gen_params *p)
{
	memset(p, 0, sizeof(*p));
	p->requests = 1000;
	p->seed = 1;
	p->rate = 10;
	p->sys_prompts = 16;
	p->skew = 1.0;
	p->sys_min = 1024;
	p->sys_max = 8192;
	p->user_min = 64;
	p->user_max = 2048;
	p->out_min = 16;
	p->out_max = 512;
	p->sessions = 64;
	p->follow = 0.6;
	p->max_input = 65536;
	p->burst = 1;
	p->burst_s = 10;
	p->long_min = 32768;
	p->long_max = 131072;
}

static int gen_init(struct gen *g)
{
	const struct kvfs_trace_gen_params *p = g->p;
	double total = 0;

	g->rng = p->seed;
	g->sess = calloc(p->sessions, sizeof(*g->sess));
	if (!g->sess)
		return -ENOMEM;
	if (!p->sys_prompts)
		return 0;
	g->cdf = calloc(p->sys_prompts, sizeof(*g->cdf));
	g->sys = calloc(p->sys_prompts, sizeof(*g->sys));
	if (!g->cdf || !g->sys)
		return -ENOMEM;
	for (uint32_t k = 0; k < p->sys_prompts; k++) {
		total += gen_exp(-p->skew * gen_ln((double)k + 1));
		g->cdf[k] = total;
		g->sys[k].len = gen_range(g, p->sys_min, p->sys_max);
	}
	return 0;
}

static void gen_free(struct gen *g)
{
	if (g->sess)
		for (uint32_t i = 0; i < g->p->sessions; i++)
			free(g->sess[i].ids);
	if (g->sys)
		for (uint32_t k = 0; k < g->p->sys_prompts; k++)
			free(g->sys[k].ids);
	free(g->sess);
	free(g->sys);
	free(g->cdf);
	free(g->line_ids);
}

static int gen_ids_fit(uint64_t **ids, size_t *cap, size_t n)
{
	uint64_t *p;
	size_t ncap;

	if (n <= *cap)
		return 0;
	ncap = *cap ? *cap : 16;
	while (ncap < n)
		ncap *= 2;
	p = realloc(*ids, ncap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	*ids = p;
	*cap = ncap;
	return 0;
}

/* Zipf pick by inverting the cumulative weights */
static uint32_t gen_pick_sys(struct gen *g)
{
	double u = gen_unit(g) * g->cdf[g->p->sys_prompts - 1];
	uint32_t lo = 0, hi = g->p->sys_prompts - 1;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (g->cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* a session begins with system prompt k's full blocks (or nothing) */
static int gen_open(struct gen *g, struct gen_sess **out)
{
	const size_t B = KVFS_TRACE_BLOCK_TOKENS;
	struct gen_sess *s;
	struct gen_sys *y;
	size_t nfull;
	int rc;

	if (g->nlive == g->p->sessions) {
		/* full: a random client leaves; its slot is reused */
		s = &g->sess[gen_range(g, 0, g->nlive - 1)];
	} else {
		s = &g->sess[g->nlive++];
	}
	s->n = 0;
	s->len = 0;
	s->out = 0;
	*out = s;
	if (!g->p->sys_prompts)
		return 0;
	y = &g->sys[gen_pick_sys(g)];
	nfull = (size_t)(y->len / B);
	if (!y->named) {
		y->ids = malloc((nfull ? nfull : 1) * sizeof(*y->ids));
		if (!y->ids)
			return -ENOMEM;
		for (size_t i = 0; i < nfull; i++)
			y->ids[i] = g->next_id++;
		y->named = true;
	}
	rc = gen_ids_fit(&s->ids, &s->cap, nfull);
	if (rc)
		return rc;
	memcpy(s->ids, y->ids, nfull * sizeof(*s->ids));
	s->n = nfull;
	s->len = y->len;
	return 0;
}

/* session i ends: the last live one takes its place */
static void gen_end(struct gen *g, size_t i)
{
	struct gen_sess t = g->sess[i];

	g->nlive--;
	g->sess[i] = g->sess[g->nlive];
	g->sess[g->nlive] = t;
}

/* the session the next request belongs to, and its prompt length */
static int gen_next_sess(struct gen *g, struct gen_sess **out, uint64_t *len)
{
	const struct kvfs_trace_gen_params *p = g->p;
	uint64_t user = gen_range(g, p->user_min, p->user_max);

	if (p->long_frac > 0 && gen_unit(g) <= p->long_frac) {
		/* a document: a session of its own */
		user = gen_range(g, p->long_min, p->long_max);
	} else if (g->nlive && gen_unit(g) <= p->follow) {
		size_t i = gen_range(g, 0, g->nlive - 1);
		struct gen_sess *s = &g->sess[i];

		*len = s->len + s->out + user;
		if (*len <= p->max_input) {
			*out = s;
			return 0;
		}
		gen_end(g, i);
	}
	*len = 0;
	if (gen_open(g, out))
		return -ENOMEM;
	*len = (*out)->len + user;
	return 0;
}

static int gen_write(struct gen *g, uint64_t len, uint64_t out, size_t n)
{
	FILE *f = g->f;

	fprintf(f,
		"{\"timestamp\": %llu, \"input_length\": %llu, "
		"\"output_length\": %llu, \"hash_ids\": [",
		(unsigned long long)g->t_ms, (unsigned long long)len,
		(unsigned long long)out);
	for (size_t i = 0; i < n; i++)
		fprintf(f, i ? ", %llu" : "%llu",
			(unsigned long long)g->line_ids[i]);
	fputs("]}\n", f);
	return ferror(f) ? -EIO : 0;
}

/*
 * The next arrival with bursts: gaps at rate * burst inside busy
 * windows; a gap that runs past its window's end goes on in the next
 * busy one (the exponential has no memory, so cutting it is exact).
 */
static void gen_burst_gap(struct gen *g)
{
	const struct kvfs_trace_gen_params *p = g->p;
	double w = p->burst_s * 1000.0;
	double gap = -gen_ln(gen_unit(g)) * 1000.0 / (p->rate * p->burst);

	if (g->win_end_ms == 0)
		g->win_end_ms = w; /* the first window is busy */
	while (g->t_ms + gap > g->win_end_ms) {
		gap -= g->win_end_ms - g->t_ms;
		g->t_ms = g->win_end_ms;
		/* skip idle windows */
		while (gen_unit(g) > 1.0 / p->burst)
			g->t_ms += w;
		g->win_end_ms = g->t_ms + w;
	}
	g->t_ms += gap;
}

/*
 * One request: the session's full blocks keep their ids, every block
 * after them (the one that was partial included: it holds new tokens
 * now) gets a new id.
 */
static int gen_request(struct gen *g)
{
	const size_t B = KVFS_TRACE_BLOCK_TOKENS;
	struct gen_sess *s;
	uint64_t len, out;
	size_t n, nfull;
	int rc;

	rc = gen_next_sess(g, &s, &len);
	if (rc)
		return rc;
	out = gen_range(g, g->p->out_min, g->p->out_max);
	n = (size_t)((len + B - 1) / B);
	nfull = (size_t)(len / B);
	rc = gen_ids_fit(&g->line_ids, &g->line_cap, n);
	if (!rc)
		rc = gen_ids_fit(&s->ids, &s->cap, nfull);
	if (rc)
		return rc;
	memcpy(g->line_ids, s->ids, s->n * sizeof(*s->ids));
	for (size_t i = s->n; i < n; i++)
		g->line_ids[i] = g->next_id++;
	rc = gen_write(g, len, out, n);
	memcpy(s->ids, g->line_ids, nfull * sizeof(*s->ids));
	s->n = nfull;
	s->len = len;
	s->out = out;
	/* Poisson arrivals: exponential gaps of mean 1000 / rate ms */
	if (g->p->burst > 1)
		gen_burst_gap(g);
	else
		g->t_ms += -gen_ln(gen_unit(g)) * 1000.0 / g->p->rate;
	return rc;
}

int kvfs_trace_gen(FILE *f, const struct kvfs_trace_gen_params *p)
{
	struct gen g;
	int rc;

	if (!f || kvfs_trace_gen_check(p))
		return -EINVAL;
	memset(&g, 0, sizeof(g));
	g.p = p;
	g.f = f;
	rc = gen_init(&g);
	for (uint64_t r = 0; r < p->requests && !rc; r++)
		rc = gen_request(&g);
	gen_free(&g);
	if (!rc && fflush(f))
		rc = -EIO;
	return rc;
}
