/*
 * tokens.h - parse token-id lists typed by people or piped in by tools.
 *
 * Grammar (the same for a string and for a stream):
 *
 *   list      = sep* [ token ( sep+ token )* ] sep*
 *   sep       = ',' | ' ' | '\t' | '\n' | '\v' | '\f' | '\r'
 *   token     = digit+            decimal, value 0..4294967295
 *
 * Any run of separators counts as one, so "1,,2", "1, 2" and " 1\n2\n" all
 * give [1, 2], and an empty or separator-only input gives no tokens (that is
 * not an error: zero tokens hash to zero blocks).  Leading zeros are
 * allowed ("007" is 7); a sign ('+' or '-'), hex, or any other byte makes
 * the token bad.
 *
 * Both calls APPEND to a caller-owned array: *tok is NULL or a malloc'd
 * array holding *n tokens; on return it holds the old tokens followed by the
 * new ones.  The caller frees *tok with free(), on success and on error
 * alike.  On error *n is unchanged (tokens of a failed call are dropped) but
 * *tok may have been moved by realloc, so always use the updated pointer.
 *
 * Return 0, or a negative errno:
 *   -EINVAL  a bad token (err names it, quoted, e.g.
 *            bad token "12x": not a decimal number
 *            bad token "4294967296": out of range 0..4294967295)
 *            or NULL text/f/tok/n
 *   -ENOMEM  the array could not grow
 *   -EIO or the stream's errno: reading the stream failed
 * err (errlen bytes, NUL-terminated) receives one line without a trailing
 * newline; it may be NULL when errlen is 0.  Neither call prints anything.
 */
#ifndef KVFS_TOKENS_H
#define KVFS_TOKENS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int kvfs_tokens_parse(const char *text, uint32_t **tok, size_t *n, char *err,
		      size_t errlen);

/*
 * Read f to EOF in fixed-size chunks and parse it as above.  A token may
 * straddle two reads, and the input may be any length: memory grows with
 * the number of tokens, not the size of the text.  f is not closed.
 */
int kvfs_tokens_read_stream(FILE *f, uint32_t **tok, size_t *n, char *err,
			    size_t errlen);

#endif /* KVFS_TOKENS_H */
