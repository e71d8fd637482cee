/*
 * trace.h - Mooncake-format request traces: a streaming reader, a
 * generator, and the token rule that turns a trace into kvfs names.
 *
 * Shared by kvbench (engine, gen-trace) and the conductor's replay
 * (kvconductor replay, kvconductor gen-trace).
 *
 * FORMAT: JSON lines, one request a line, as released with the Mooncake
 * paper (FAST'25, FAST25-release/traces):
 *
 *   {"timestamp": 0, "input_length": 40160, "output_length": 6,
 *    "hash_ids": [0, 1, ...]}
 *
 *   field          JSON type                  meaning
 *   timestamp      number >= 0                arrival, ms after the first
 *   input_length   integer >= 0               prompt tokens
 *   output_length  integer >= 0               tokens generated
 *   hash_ids       array of integers >= 0     one id per 512-token block of
 *                                             the prompt, prefix-chained
 *
 * All four are required; other members are skipped (any JSON value, at
 * most KVFS_TRACE_DEPTH deep), a member given twice is an error.  Integers
 * are 0..UINT64_MAX written without fraction or exponent; a timestamp may
 * have them (it is rounded down to whole ms).  The ids must number
 * exactly ceil(input_length / 512).  Lines of only white space are
 * skipped (not counted as records or as bad lines); a "\r" before the
 * "\n" is white space too.  Arrival order is not checked: a replayer
 * that needs sorted timestamps sorts or refuses them itself.
 *
 * THE FULL-BLOCK RULE: kvfs names only full blocks (kvfs(7)), so a request
 * of input_length L has floor(L / 512) named blocks, the first
 * kvfs_trace_full_blocks() of its hash_ids; a trailing partial block is
 * computed by the engine but never cached, shared or counted.
 *
 * TOKENS: a trace has ids, not text.  kvfs_trace_tokens() gives each id
 * its 512 tokens (a splitmix64 stream seeded by the id), so requests that
 * share a hash_id share those tokens, and since ids are prefix-chained,
 * requests that share a prefix of ids share the kvfs names of it.
 *
 * Every call returns 0 (or a count) or a negative errno and never sets
 * errno.  A reader is not thread-safe; use one per thread.
 */
#ifndef KVFS_TRACE_H
#define KVFS_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define KVFS_TRACE_BLOCK_TOKENS 512u	/* tokens per hash_id */
#define KVFS_TRACE_LINE_MAX (16u << 20) /* longest line, bytes, "\n" too */
#define KVFS_TRACE_DEPTH 32		/* nesting of skipped members */
#define KVFS_TRACE_VOCAB 128256u	/* token ids are 0..VOCAB-1 */
#define KVFS_TRACE_ERR_MAX 256		/* bytes of an error message */

/* kvfs_trace_open() flags */
#define KVFS_TRACE_SKIP_BAD 0x1u /* count bad lines and go on */

struct kvfs_trace_rec {
	uint64_t timestamp_ms;
	uint64_t input_length;
	uint64_t output_length;
	/* n ids; owned by the reader (or by the caller of kvfs_trace_parse)
	 * and valid until the next call on it */
	const uint64_t *hash_ids;
	size_t n;
};

/* named (full) blocks of a request: floor(input_length / 512) */
static inline size_t kvfs_trace_full_blocks(const struct kvfs_trace_rec *r)
{
	return (size_t)(r->input_length / KVFS_TRACE_BLOCK_TOKENS);
}

/* ---- reading -------------------------------------------------------- */

struct kvfs_trace;

/*
 * Open path ("-": standard input) for reading.  flags: 0 or
 * KVFS_TRACE_SKIP_BAD.  -ENOMEM, or open(2)'s negative errno.
 */
int kvfs_trace_open(const char *path, unsigned flags, struct kvfs_trace **out);

/* the same on a stream the caller owns (not closed by kvfs_trace_close);
 * name is what error messages call it */
int kvfs_trace_fopen(FILE *f, const char *name, unsigned flags,
		     struct kvfs_trace **out);

/*
 * The next record: 1 and *rec filled, 0 at the end of the input, or a
 * negative errno:
 *
 *   -EINVAL   a bad line (not skipped): kvfs_trace_error() says
 *             "NAME:LINE: why"; the next call reads the line after it
 *   -EIO      reading failed (or the stream's own errno)
 *   -ENOMEM
 *
 * With KVFS_TRACE_SKIP_BAD a bad line is counted (kvfs_trace_skipped)
 * and its message kept (the first one, in kvfs_trace_error) instead.
 */
int kvfs_trace_next(struct kvfs_trace *t, struct kvfs_trace_rec *rec);

/* "NAME:LINE: why" of the last error ("" when none) */
const char *kvfs_trace_error(const struct kvfs_trace *t);
/* line number of the last line read, 1-based (0 before the first) */
uint64_t kvfs_trace_lineno(const struct kvfs_trace *t);
/* bad lines skipped so far (KVFS_TRACE_SKIP_BAD) */
uint64_t kvfs_trace_skipped(const struct kvfs_trace *t);
void kvfs_trace_close(struct kvfs_trace *t);

/*
 * Parse one line (len bytes, no "\n"; it need not be NUL-terminated and
 * may hold NULs).  The ids go to *ids, a caller-owned array of *cap
 * entries that grows with realloc (free it with free(), on error too);
 * rec->hash_ids points into it.  Returns 1 for a record, 0 for a blank
 * line, -EINVAL (err gets "why", without the line number) or -ENOMEM.
 */
int kvfs_trace_parse(const char *line, size_t len, struct kvfs_trace_rec *rec,
		     uint64_t **ids, size_t *cap, char *err, size_t errlen);

/* ---- tokens --------------------------------------------------------- */

/*
 * The first ntok tokens of the prompt of r (ntok <= r->n * 512): block i
 * holds the tokens of r->hash_ids[i].  Token j of an id's block is
 * (splitmix64 output j of the state id ^ KVFS_TRACE_TOKEN_SALT) >> 32,
 * modulo KVFS_TRACE_VOCAB.  A stable rule: it decides kvfs names.
 */
#define KVFS_TRACE_TOKEN_SALT 0x6b7666732d747263ull /* "kvfs-trc" */

void kvfs_trace_block_tokens(uint64_t hash_id, uint32_t *tok, size_t ntok);
int kvfs_trace_tokens(const struct kvfs_trace_rec *r, uint32_t *tok,
		      size_t ntok);

/* ---- generating ----------------------------------------------------- */

/*
 * A synthetic workload, the shape of the Mooncake traces:
 *
 *   - arrivals are a Poisson process of `rate` requests per second;
 *   - a request opens a new session with probability 1 - follow (always
 *     when no session is live): one of sys_prompts shared system prompts,
 *     picked with Zipf popularity (weight of prompt k is 1/(k+1)^skew),
 *     then user text; at most `sessions` are live, and a new one past
 *     that replaces a random live one;
 *   - otherwise it is the next turn of a random live session: the whole
 *     previous prompt, that turn's output, and new user text, so its ids
 *     extend the previous prompt's full blocks; a session whose next turn
 *     would pass max_input tokens ends and a new one opens instead;
 *   - bursts (burst > 1): time runs in windows of burst_s seconds, each
 *     busy with chance 1 / burst (the others get no arrival) at rate *
 *     burst, so the mean rate stays `rate`;
 *   - long-context tail (long_frac > 0): with that chance a request opens
 *     a session whose first user text (a document) has long_min..long_max
 *     tokens.
 *
 * Ids are handed out in order of first use, so the output is
 * prefix-chained: two requests share an id only if they share the prefix
 * up to it (a block that was partial gets a new id when it fills).
 * Lengths are uniform in their [min, max] ranges.  The same parameters
 * give the same bytes on every machine.
 */
struct kvfs_trace_gen_params {
	uint64_t requests; /* lines to write */
	uint64_t seed;
	double rate;		     /* mean arrivals per second, > 0 */
	uint32_t sys_prompts;	     /* 0: sessions start with user text */
	double skew;		     /* Zipf exponent, >= 0 */
	uint32_t sys_min, sys_max;   /* system prompt tokens */
	uint32_t user_min, user_max; /* user text tokens per turn */
	uint32_t out_min, out_max;   /* output tokens per request */
	uint32_t sessions;	     /* live sessions at most, >= 1 */
	double follow;		     /* 0..1 */
	uint64_t max_input;	     /* prompt tokens at most */
	double burst;		     /* >= 1; 1: plain Poisson */
	double burst_s;		     /* window, s */
	double long_frac;	     /* 0..1 */
	uint32_t long_min, long_max; /* document tokens */
};

/* requests 1000, seed 1, rate 10/s, 16 system prompts of 1024..8192
 * tokens at skew 1.0, user text 64..2048, output 16..512, 64 sessions,
 * follow 0.6, max_input 65536, burst 1 in 10 s windows, long_frac 0 of
 * 32768..131072 tokens */
void kvfs_trace_gen_defaults(struct kvfs_trace_gen_params *p);

/* "why" for parameters kvfs_trace_gen refuses, NULL when they are fine */
const char *kvfs_trace_gen_check(const struct kvfs_trace_gen_params *p);

/*
 * Write p->requests lines to f.  -EINVAL for bad parameters, -ENOMEM,
 * -EIO (or the stream's errno) when writing fails.  f is not closed.
 */
int kvfs_trace_gen(FILE *f, const struct kvfs_trace_gen_params *p);

#endif /* KVFS_TRACE_H */
