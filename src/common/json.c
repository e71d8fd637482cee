#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/json.h"

/* ---- writing -------------------------------------------------------- */

static int buf_grow(struct kvfs_buf *b, size_t more)
{
	size_t cap;
	char *p;

	if (b->err)
		return b->err;
	if (b->len + more + 1 <= b->cap)
		return 0;
	if (more > SIZE_MAX / 2 - b->len)
		goto out_nomem;
	cap = b->cap ? b->cap : 256;
	while (cap < b->len + more + 1)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p)
		goto out_nomem;
	b->p = p;
	b->cap = cap;
	return 0;
out_nomem:
	b->err = -ENOMEM;
	return b->err;
}

void kvfs_buf_add(struct kvfs_buf *b, const void *data, size_t len)
{
	if (buf_grow(b, len))
		return;
	memcpy(b->p + b->len, data, len);
	b->len += len;
	b->p[b->len] = '\0';
}

void kvfs_buf_puts(struct kvfs_buf *b, const char *s)
{
	kvfs_buf_add(b, s, strlen(s));
}

void kvfs_buf_printf(struct kvfs_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (buf_grow(b, 64))
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->err = -ENOMEM;
		return;
	}
	if ((size_t)n >= b->cap - b->len) {
		if (buf_grow(b, (size_t)n))
			return;
		va_start(ap, fmt);
		vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}

size_t kvfs_utf8_len(const unsigned char *p, size_t len)
{
	uint32_t cp;
	size_t n;

	if (len == 0)
		return 0;
	if (p[0] < 0x80)
		return 1;
	if (p[0] < 0xc2 || p[0] > 0xf4)
		return 0;
	n = p[0] < 0xe0 ? 2 : p[0] < 0xf0 ? 3 : 4;
	if (n > len)
		return 0;
	cp = p[0] & (0x3f >> (n - 1));
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	/* overlong forms, surrogates, beyond U+10FFFF */
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return n;
}

void kvfs_buf_json_str(struct kvfs_buf *b, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	const unsigned char *end = p + len;

	kvfs_buf_add(b, "\"", 1);
	while (p < end) {
		size_t n = kvfs_utf8_len(p, (size_t)(end - p));

		if (n == 0) {
			kvfs_buf_puts(b, "\\ufffd");
			p++;
		} else if (*p == '"' || *p == '\\') {
			kvfs_buf_add(b, "\\", 1);
			kvfs_buf_add(b, p++, 1);
		} else if (*p < 0x20 || *p == 0x7f) {
			kvfs_buf_printf(b, "\\u%04x", *p++);
		} else {
			kvfs_buf_add(b, p, n);
			p += n;
		}
	}
	kvfs_buf_add(b, "\"", 1);
}

int kvfs_buf_finish(struct kvfs_buf *b, char **out, size_t *len)
{
	if (!b->err && !b->p)
		buf_grow(b, 0);
	if (b->err) {
		int err = b->err;

		kvfs_buf_release(b);
		return err;
	}
	b->p[b->len] = '\0';
	*out = b->p;
	if (len)
		*len = b->len;
	b->p = NULL;
	b->len = b->cap = 0;
	return 0;
}

void kvfs_buf_release(struct kvfs_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
	b->err = 0;
}

/* ---- reading -------------------------------------------------------- */

struct parser {
	const char *p;
	const char *end;
	int depth;
};

static int parse_value(struct parser *ps, struct kvfs_json *j);

static void skip_ws(struct parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' ||
				   *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static int hex4(const char *p, uint32_t *v)
{
	*v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		int d = c >= '0' && c <= '9'   ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10
					       : -1;

		if (d < 0)
			return -EINVAL;
		*v = *v << 4 | (uint32_t)d;
	}
	return 0;
}

static void put_utf8(struct kvfs_buf *b, uint32_t cp)
{
	unsigned char u[4];
	size_t n;

	if (cp < 0x80) {
		u[0] = (unsigned char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (unsigned char)(0xc0 | cp >> 6);
		u[1] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (unsigned char)(0xe0 | cp >> 12);
		u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		u[0] = (unsigned char)(0xf0 | cp >> 18);
		u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		u[3] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	kvfs_buf_add(b, u, n);
}

/* \uXXXX, with a surrogate pair taken as one code point; p is past "\u" */
static int parse_uescape(struct parser *ps, struct kvfs_buf *b)
{
	uint32_t cp, lo;

	if (ps->end - ps->p < 4 || hex4(ps->p, &cp))
		return -EINVAL;
	ps->p += 4;
	if (cp >= 0xdc00 && cp <= 0xdfff)
		return -EINVAL;
	if (cp >= 0xd800 && cp <= 0xdbff) {
		if (ps->end - ps->p < 6 || ps->p[0] != '\\' ||
		    ps->p[1] != 'u' || hex4(ps->p + 2, &lo) || lo < 0xdc00 ||
		    lo > 0xdfff)
			return -EINVAL;
		ps->p += 6;
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
	}
	put_utf8(b, cp);
	return 0;
}

static int parse_escape(struct parser *ps, struct kvfs_buf *b)
{
	static const char from[] = "\"\\/bfnrt";
	static const char to[] = "\"\\/\b\f\n\r\t";
	const char *e;

	if (ps->p >= ps->end)
		return -EINVAL;
	if (*ps->p == 'u') {
		ps->p++;
		return parse_uescape(ps, b);
	}
	e = memchr(from, *ps->p, sizeof(from) - 1);
	if (!e)
		return -EINVAL;
	kvfs_buf_add(b, &to[e - from], 1);
	ps->p++;
	return 0;
}

/* a string literal at ps->p (the opening quote) into *out / *len */
static int parse_string(struct parser *ps, char **out, size_t *len)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	int rc = 0;

	ps->p++;
	while (!rc) {
		const unsigned char *u = (const unsigned char *)ps->p;
		size_t n;

		if (ps->p >= ps->end) {
			rc = -EINVAL;
		} else if (*ps->p == '"') {
			ps->p++;
			break;
		} else if (*ps->p == '\\') {
			ps->p++;
			rc = parse_escape(ps, &b);
		} else if (*u < 0x20) {
			rc = -EINVAL;
		} else {
			n = kvfs_utf8_len(u, (size_t)(ps->end - ps->p));
			if (n == 0)
				rc = -EINVAL;
			kvfs_buf_add(&b, ps->p, n);
			ps->p += n;
		}
	}
	if (rc) {
		kvfs_buf_release(&b);
		return rc;
	}
	return kvfs_buf_finish(&b, out, len);
}

static size_t digits(const char *p, const char *end)
{
	size_t n = 0;

	while (p + n < end && p[n] >= '0' && p[n] <= '9')
		n++;
	return n;
}

/* RFC 8259 number grammar; the text is kept, converted on demand */
static int parse_number(struct parser *ps, struct kvfs_json *j)
{
	const char *s = ps->p;
	size_t n;

	if (ps->p < ps->end && *ps->p == '-')
		ps->p++;
	n = digits(ps->p, ps->end);
	if (n == 0 || (n > 1 && *ps->p == '0'))
		return -EINVAL;
	ps->p += n;
	if (ps->p < ps->end && *ps->p == '.') {
		ps->p++;
		n = digits(ps->p, ps->end);
		if (n == 0)
			return -EINVAL;
		ps->p += n;
	}
	if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
		ps->p++;
		if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
			ps->p++;
		n = digits(ps->p, ps->end);
		if (n == 0)
			return -EINVAL;
		ps->p += n;
	}
	j->type = KVFS_JSON_NUM;
	j->len = (size_t)(ps->p - s);
	j->str = strndup(s, j->len);
	return j->str ? 0 : -ENOMEM;
}

static int parse_word(struct parser *ps, const char *w)
{
	size_t n = strlen(w);

	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, w, n))
		return -EINVAL;
	ps->p += n;
	return 0;
}

static struct kvfs_json *add_kid(struct kvfs_json *j, size_t *cap)
{
	struct kvfs_json *k;

	if (j->n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 4;

		k = realloc(j->kid, ncap * sizeof(*k));
		if (!k)
			return NULL;
		j->kid = k;
		*cap = ncap;
	}
	k = &j->kid[j->n++];
	memset(k, 0, sizeof(*k));
	return k;
}

/* an array or object; ps->p is at '[' or '{' */
static int parse_container(struct parser *ps, struct kvfs_json *j)
{
	bool obj = *ps->p == '{';
	char close = obj ? '}' : ']';
	size_t cap = 0;
	int rc;

	j->type = obj ? KVFS_JSON_OBJ : KVFS_JSON_ARR;
	if (++ps->depth > KVFS_JSON_DEPTH)
		return -EINVAL;
	ps->p++;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == close) {
		ps->p++;
		ps->depth--;
		return 0;
	}
	for (;;) {
		struct kvfs_json *k = add_kid(j, &cap);

		if (!k)
			return -ENOMEM;
		skip_ws(ps);
		if (obj) {
			if (ps->p >= ps->end || *ps->p != '"')
				return -EINVAL;
			rc = parse_string(ps, &k->key, NULL);
			if (rc)
				return rc;
			skip_ws(ps);
			if (ps->p >= ps->end || *ps->p++ != ':')
				return -EINVAL;
		}
		rc = parse_value(ps, k);
		if (rc)
			return rc;
		skip_ws(ps);
		if (ps->p >= ps->end)
			return -EINVAL;
		if (*ps->p == close)
			break;
		if (*ps->p++ != ',')
			return -EINVAL;
	}
	ps->p++;
	ps->depth--;
	return 0;
}

static int parse_value(struct parser *ps, struct kvfs_json *j)
{
	skip_ws(ps);
	if (ps->p >= ps->end)
		return -EINVAL;
	switch (*ps->p) {
	case '{':
	case '[':
		return parse_container(ps, j);
	case '"':
		j->type = KVFS_JSON_STR;
		return parse_string(ps, &j->str, &j->len);
	case 't':
		j->type = KVFS_JSON_BOOL;
		j->b = true;
		return parse_word(ps, "true");
	case 'f':
		j->type = KVFS_JSON_BOOL;
		return parse_word(ps, "false");
	case 'n':
		j->type = KVFS_JSON_NULL;
		return parse_word(ps, "null");
	default:
		return parse_number(ps, j);
	}
}

static void json_free_kids(struct kvfs_json *j)
{
	for (size_t i = 0; i < j->n; i++)
		json_free_kids(&j->kid[i]);
	free(j->kid);
	free(j->key);
	free(j->str);
}

void kvfs_json_free(struct kvfs_json *j)
{
	if (!j)
		return;
	json_free_kids(j);
	free(j);
}

int kvfs_json_parse(const char *text, size_t len, struct kvfs_json **out)
{
	struct parser ps = { text, text + len, 0 };
	struct kvfs_json *j;
	int rc;

	if (!text || !out)
		return -EINVAL;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	rc = parse_value(&ps, j);
	if (!rc) {
		skip_ws(&ps);
		if (ps.p != ps.end)
			rc = -EINVAL;
	}
	if (rc) {
		kvfs_json_free(j);
		return rc;
	}
	*out = j;
	return 0;
}

const struct kvfs_json *kvfs_json_get(const struct kvfs_json *j,
				      const char *key)
{
	if (!j || j->type != KVFS_JSON_OBJ)
		return NULL;
	for (size_t i = 0; i < j->n; i++)
		if (strcmp(j->kid[i].key, key) == 0)
			return &j->kid[i];
	return NULL;
}

const char *kvfs_json_str(const struct kvfs_json *j)
{
	return j && j->type == KVFS_JSON_STR ? j->str : NULL;
}

int kvfs_json_u64(const struct kvfs_json *j, uint64_t *v)
{
	const char *s;
	uint64_t x = 0;
	size_t len;

	if (!j || (j->type != KVFS_JSON_NUM && j->type != KVFS_JSON_STR))
		return -EINVAL;
	s = j->str;
	len = strlen(s);
	if (len == 0 || len > 20 || strspn(s, "0123456789") != len ||
	    len != j->len)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		uint64_t d = (uint64_t)(s[i] - '0');

		if (x > (UINT64_MAX - d) / 10)
			return -EINVAL;
		x = x * 10 + d;
	}
	*v = x;
	return 0;
}

int kvfs_json_double(const struct kvfs_json *j, double *v)
{
	if (!j || j->type != KVFS_JSON_NUM)
		return -EINVAL;
	*v = strtod(j->str, NULL);
	return 0;
}

bool kvfs_json_true(const struct kvfs_json *j)
{
	return j && j->type == KVFS_JSON_BOOL && j->b;
}
