#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/tokens.h"

#define TEXT_MAX 32	 /* bytes of a bad token quoted in err */
#define READ_CHUNK 16384 /* bytes per fread; tokens may straddle reads */
#define GROW_MIN 256	 /* first capacity when a stream grows the array */

/*
 * A byte-at-a-time scanner, so a token split across two reads needs no
 * carry buffer and a stream of any length parses in constant text memory.
 */
struct scan {
	uint64_t val;	     /* value so far; saturates past UINT32_MAX */
	size_t len;	     /* bytes of the current token, 0 between tokens */
	int bad;	     /* a byte other than 0-9 was seen */
	char text[TEXT_MAX]; /* first bytes of the token, for err */
};

/* the caller's array while a call runs; cap is what we know is allocated */
struct tokvec {
	uint32_t *v;
	size_t n;
	size_t cap;
};

static int is_sep(unsigned char c)
{
	return c == ',' || c == ' ' || (c >= '\t' && c <= '\r');
}

static int vec_reserve(struct tokvec *tv, size_t want)
{
	uint32_t *v;

	if (want <= tv->cap)
		return 0;
	if (want > SIZE_MAX / sizeof(*v))
		return -ENOMEM;
	v = realloc(tv->v, want * sizeof(*v));
	if (!v)
		return -ENOMEM;
	tv->v = v;
	tv->cap = want;
	return 0;
}

/* doubling keeps a long stream's pushes amortized O(1) */
static int vec_push(struct tokvec *tv, uint32_t val)
{
	if (tv->n == tv->cap) {
		/* cap <= SIZE_MAX / 4 (vec_reserve), so doubling cannot wrap */
		size_t want = tv->cap < GROW_MIN / 2 ? GROW_MIN : tv->cap * 2;
		int rc;

		rc = vec_reserve(tv, want);
		if (rc)
			return rc;
	}
	tv->v[tv->n++] = val;
	return 0;
}

/* quote the token's first bytes; escapes keep err one printable line */
static void quote_token(const struct scan *s, char *out, size_t outlen)
{
	size_t keep = s->len < TEXT_MAX ? s->len : TEXT_MAX;
	size_t o = 0;

	for (size_t i = 0; i < keep && o + 5 < outlen; i++) {
		unsigned char c = (unsigned char)s->text[i];

		if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
			o += (size_t)snprintf(out + o, outlen - o, "\\x%02x",
					      c);
		else
			out[o++] = (char)c;
	}
	out[o] = '\0';
	if (s->len > keep)
		snprintf(out + o, outlen - o, "...");
}

static int token_error(const struct scan *s, char *err, size_t errlen)
{
	char q[TEXT_MAX * 4 + 8];

	if (!err || errlen == 0)
		return -EINVAL;
	quote_token(s, q, sizeof(q));
	if (s->bad)
		snprintf(err, errlen,
			 "bad token \"%s\": not an unsigned decimal number", q);
	else
		snprintf(err, errlen,
			 "bad token \"%s\": out of range 0..4294967295", q);
	return -EINVAL;
}

/* a separator or the end of input closes the current token, if any */
static int scan_close(struct scan *s, struct tokvec *tv, char *err,
		      size_t errlen)
{
	int rc;

	if (s->len == 0)
		return 0;
	if (s->bad || s->val > UINT32_MAX)
		return token_error(s, err, errlen);
	rc = vec_push(tv, (uint32_t)s->val);
	if (rc && err && errlen)
		snprintf(err, errlen, "out of memory for %zu tokens",
			 tv->n + 1);
	memset(s, 0, sizeof(*s));
	return rc;
}

static void scan_byte(struct scan *s, unsigned char c)
{
	if (s->len < TEXT_MAX)
		s->text[s->len] = (char)c;
	s->len++;
	if (c < '0' || c > '9')
		s->bad = 1;
	else if (s->val <= UINT32_MAX) /* stop growing once out of range */
		s->val = s->val * 10 + (uint64_t)(c - '0');
}

static int scan_feed(struct scan *s, struct tokvec *tv, const char *p,
		     size_t len, char *err, size_t errlen)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)p[i];
		int rc;

		if (!is_sep(c)) {
			scan_byte(s, c);
			continue;
		}
		rc = scan_close(s, tv, err, errlen);
		if (rc)
			return rc;
	}
	return 0;
}

/* number of tokens in text, so a string is parsed with one realloc */
static size_t count_fields(const char *text)
{
	size_t count = 0;
	int in_tok = 0;

	for (; *text; text++) {
		int sep = is_sep((unsigned char)*text);

		if (!sep && !in_tok)
			count++;
		in_tok = !sep;
	}
	return count;
}

static int args_bad(const void *src, uint32_t **tok, size_t *n, char *err,
		    size_t errlen)
{
	if (src && tok && n)
		return 0;
	if (err && errlen)
		snprintf(err, errlen, "no input or no output array");
	return -EINVAL;
}

int kvfs_tokens_parse(const char *text, uint32_t **tok, size_t *n, char *err,
		      size_t errlen)
{
	struct scan s = { 0 };
	struct tokvec tv;
	size_t count;
	int rc;

	rc = args_bad(text, tok, n, err, errlen);
	if (rc)
		return rc;
	tv = (struct tokvec){ .v = *tok, .n = *n, .cap = *n };
	count = count_fields(text);
	rc = count > SIZE_MAX - tv.n ? -ENOMEM : vec_reserve(&tv, tv.n + count);
	if (!rc)
		rc = scan_feed(&s, &tv, text, strlen(text), err, errlen);
	if (!rc)
		rc = scan_close(&s, &tv, err, errlen);
	if (rc == -ENOMEM && err && errlen)
		snprintf(err, errlen, "out of memory for %zu tokens", count);
	*tok = tv.v;
	if (!rc)
		*n = tv.n;
	return rc;
}

/* fread reports why through errno, which the loop cleared beforehand */
static int read_error(char *err, size_t errlen)
{
	int e = errno > 0 ? errno : EIO;

	if (err && errlen)
		snprintf(err, errlen, "reading tokens: %s", strerror(e));
	return -e;
}

int kvfs_tokens_read_stream(FILE *f, uint32_t **tok, size_t *n, char *err,
			    size_t errlen)
{
	char buf[READ_CHUNK];
	struct scan s = { 0 };
	struct tokvec tv;
	size_t got;
	int rc;

	rc = args_bad(f, tok, n, err, errlen);
	if (rc)
		return rc;
	tv = (struct tokvec){ .v = *tok, .n = *n, .cap = *n };
	/* so a failed fread's reason is not confused with an older one */
	errno = 0;
	do {
		got = fread(buf, 1, sizeof(buf), f);
		rc = scan_feed(&s, &tv, buf, got, err, errlen);
	} while (!rc && got == sizeof(buf));
	if (!rc && ferror(f))
		rc = read_error(err, errlen);
	if (!rc)
		rc = scan_close(&s, &tv, err, errlen);
	*tok = tv.v;
	if (!rc)
		*n = tv.n;
	return rc;
}
