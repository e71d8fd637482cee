/*
 * json.h - JSON text out (a growing buffer) and in (a small tree), for the
 * control protocol (ctlproto.h), MOUNT/.kvfs/stats and kvctl.
 *
 * Writing: struct kvfs_buf collects text.  An allocation failure is sticky:
 * every later append is a no-op and kvfs_buf_finish() reports -ENOMEM, so a
 * writer appends freely and checks once at the end.
 *
 * Strings: JSON text is UTF-8, kvfs names are bytes.  kvfs_buf_json_str()
 * writes bytes that are not valid UTF-8 as U+FFFD, so the output is always
 * valid JSON; wherever the exact bytes matter the protocol sends them
 * percent-encoded as well (ctlproto.h).
 *
 * Reading: kvfs_json_parse() builds a tree that the caller frees with
 * kvfs_json_free().  It is strict RFC 8259 (no comments, no trailing
 * commas, nothing after the value but whitespace), nests at most
 * KVFS_JSON_DEPTH deep, and keeps each number's text so that 64-bit
 * counters read back exactly (kvfs_json_u64), not through a double.
 */
#ifndef KVFS_JSON_H
#define KVFS_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- writing -------------------------------------------------------- */

struct kvfs_buf {
	char *p; /* NUL-terminated while err == 0 and p != NULL */
	size_t len;
	size_t cap;
	int err; /* 0 or -ENOMEM, sticky */
};

#define KVFS_BUF_INIT                                                          \
	{                                                                      \
		NULL, 0, 0, 0                                                  \
	}

void kvfs_buf_add(struct kvfs_buf *b, const void *data, size_t len);
void kvfs_buf_puts(struct kvfs_buf *b, const char *s);
void kvfs_buf_printf(struct kvfs_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* a JSON string literal of len bytes, quotes included */
void kvfs_buf_json_str(struct kvfs_buf *b, const char *s, size_t len);
/* hand the text over: *out (malloc'd, NUL-terminated, never NULL on
 * success) and *len; or -ENOMEM, and the buffer is freed either way */
int kvfs_buf_finish(struct kvfs_buf *b, char **out, size_t *len);
void kvfs_buf_release(struct kvfs_buf *b);

/*
 * Length of the valid UTF-8 sequence at p[0..len-1]: 1..4, or 0 when the
 * bytes there are not one (overlong forms, surrogates, > U+10FFFF,
 * truncated).
 */
size_t kvfs_utf8_len(const unsigned char *p, size_t len);

/* ---- reading -------------------------------------------------------- */

#define KVFS_JSON_DEPTH 32

enum kvfs_json_type {
	KVFS_JSON_NULL,
	KVFS_JSON_BOOL,
	KVFS_JSON_NUM,
	KVFS_JSON_STR,
	KVFS_JSON_ARR,
	KVFS_JSON_OBJ,
};

struct kvfs_json {
	enum kvfs_json_type type;
	char *key;	       /* member name inside an object, else NULL */
	char *str;	       /* STR: decoded, NUL-terminated; NUM: its text */
	size_t len;	       /* STR: bytes in str (may hold a NUL) */
	bool b;		       /* BOOL */
	struct kvfs_json *kid; /* ARR/OBJ: n children */
	size_t n;
};

/* -EINVAL for text that is not one JSON value, -ENOMEM */
int kvfs_json_parse(const char *text, size_t len, struct kvfs_json **out);
void kvfs_json_free(struct kvfs_json *j);

/* member of an object, NULL when j is not an object or lacks it */
const struct kvfs_json *kvfs_json_get(const struct kvfs_json *j,
				      const char *key);
/* string value, NULL when j is not a string */
const char *kvfs_json_str(const struct kvfs_json *j);
/* an integer 0..UINT64_MAX written without fraction or exponent, or a
 * decimal string of one (lease ids are sent as strings); -EINVAL else */
int kvfs_json_u64(const struct kvfs_json *j, uint64_t *v);
/* any number; -EINVAL when j is not one */
int kvfs_json_double(const struct kvfs_json *j, double *v);
/* true only for the literal true */
bool kvfs_json_true(const struct kvfs_json *j);

#endif /* KVFS_JSON_H */
