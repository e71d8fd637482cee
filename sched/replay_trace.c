/*
 * replay_trace.c - a Mooncake-format trace into memory, through the
 * shared reader (src/trace.h), in arrival order.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/replay.h"
#include "src/common/trace.h"

struct trace_buf {
	struct sched_trace t;
	size_t cap;   /* requests the arrays hold */
	size_t kcap;  /* keys the key array holds */
	size_t nk;    /* keys used */
	uint64_t *ts; /* timestamps, ms, in line order */
};

static int grow(void **p, size_t n, size_t size)
{
	void *q = realloc(*p, n * size);

	if (!q)
		return -ENOMEM;
	*p = q;
	return 0;
}

static int reqs_fit(struct trace_buf *b)
{
	size_t n;

	if (b->t.n < b->cap)
		return 0;
	n = b->cap ? b->cap * 2 : 1024;
	if (grow((void **)&b->ts, n, sizeof(*b->ts)) ||
	    grow((void **)&b->t.input, n, sizeof(*b->t.input)) ||
	    grow((void **)&b->t.output, n, sizeof(*b->t.output)) ||
	    grow((void **)&b->t.first, n, sizeof(*b->t.first)) ||
	    grow((void **)&b->t.nkeys, n, sizeof(*b->t.nkeys)))
		return -ENOMEM;
	b->cap = n;
	return 0;
}

static int keys_fit(struct trace_buf *b, size_t more)
{
	size_t n = b->kcap ? b->kcap : 16384;

	if (b->nk + more <= b->kcap)
		return 0;
	while (n < b->nk + more)
		n *= 2;
	if (grow((void **)&b->t.keys, n, sizeof(*b->t.keys)))
		return -ENOMEM;
	b->kcap = n;
	return 0;
}

static int add_rec(struct trace_buf *b, const struct kvfs_trace_rec *r)
{
	size_t full = kvfs_trace_full_blocks(r), i = b->t.n;

	if (full > UINT32_MAX || reqs_fit(b) || keys_fit(b, full))
		return -ENOMEM;
	b->ts[i] = r->timestamp_ms;
	b->t.input[i] = r->input_length;
	b->t.output[i] = r->output_length ? r->output_length : 1;
	b->t.first[i] = b->nk;
	b->t.nkeys[i] = (uint32_t)full;
	memcpy(b->t.keys + b->nk, r->hash_ids, full * sizeof(uint64_t));
	b->nk += full;
	b->t.n++;
	return 0;
}

struct ts_idx {
	uint64_t ts;
	size_t i;
};

static int by_time(const void *a, const void *b)
{
	const struct ts_idx *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i; /* stable: line order */
}

/* permute the per-request arrays into order[] */
static int reorder(struct trace_buf *b, const size_t *order)
{
	size_t n = b->t.n;
	uint64_t *in = malloc(n * sizeof(*in)), *out = malloc(n * sizeof(*out));
	size_t *first = malloc(n * sizeof(*first));
	uint32_t *nk = malloc(n * sizeof(*nk));
	uint64_t *ts = malloc(n * sizeof(*ts));
	int rc = -ENOMEM;

	if (!in || !out || !first || !nk || !ts)
		goto out_free;
	for (size_t k = 0; k < n; k++) {
		size_t i = order[k];

		in[k] = b->t.input[i];
		out[k] = b->t.output[i];
		first[k] = b->t.first[i];
		nk[k] = b->t.nkeys[i];
		ts[k] = b->ts[i];
	}
	memcpy(b->t.input, in, n * sizeof(*in));
	memcpy(b->t.output, out, n * sizeof(*out));
	memcpy(b->t.first, first, n * sizeof(*first));
	memcpy(b->t.nkeys, nk, n * sizeof(*nk));
	memcpy(b->ts, ts, n * sizeof(*ts));
	rc = 0;
out_free:
	free(in);
	free(out);
	free(first);
	free(nk);
	free(ts);
	return rc;
}

/* arrival order and times in s after the earliest line */
static int finish(struct trace_buf *b)
{
	size_t n = b->t.n, *order;
	struct ts_idx *ti;
	bool sorted = true;
	int rc = 0;

	for (size_t i = 1; i < n && sorted; i++)
		sorted = b->ts[i - 1] <= b->ts[i];
	if (!sorted) {
		order = malloc(n * sizeof(*order));
		ti = malloc(n * sizeof(*ti));
		if (!order || !ti) {
			free(order);
			free(ti);
			return -ENOMEM;
		}
		for (size_t i = 0; i < n; i++)
			ti[i] = (struct ts_idx){ b->ts[i], i };
		qsort(ti, n, sizeof(*ti), by_time);
		for (size_t i = 0; i < n; i++)
			order[i] = ti[i].i;
		free(ti);
		rc = reorder(b, order);
		free(order);
		if (rc < 0)
			return rc;
	}
	b->t.arrival = malloc((n ? n : 1) * sizeof(*b->t.arrival));
	if (!b->t.arrival)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		b->t.arrival[i] = (double)(b->ts[i] - b->ts[0]) / 1000.0;
	return 0;
}

static int read_all(struct kvfs_trace *tr, struct trace_buf *b, char *err,
		    size_t errlen)
{
	struct kvfs_trace_rec rec;
	int rc;

	while ((rc = kvfs_trace_next(tr, &rec)) == 1) {
		rc = add_rec(b, &rec);
		if (rc < 0) {
			snprintf(err, errlen, "%s", strerror(-rc));
			return rc;
		}
	}
	if (rc < 0)
		snprintf(err, errlen, "%s",
			 kvfs_trace_error(tr)[0] ? kvfs_trace_error(tr)
						 : strerror(-rc));
	return rc;
}

int sched_trace_load(const char *path, bool skip_bad, struct sched_trace *t,
		     char *err, size_t errlen)
{
	struct trace_buf b;
	struct kvfs_trace *tr;
	int rc;

	memset(&b, 0, sizeof(b));
	rc = kvfs_trace_open(path, skip_bad ? KVFS_TRACE_SKIP_BAD : 0, &tr);
	if (rc < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		return rc;
	}
	rc = read_all(tr, &b, err, errlen);
	b.t.skipped = kvfs_trace_skipped(tr);
	kvfs_trace_close(tr);
	if (rc == 0) {
		rc = finish(&b);
		if (rc < 0)
			snprintf(err, errlen, "%s", strerror(-rc));
	}
	free(b.ts);
	if (rc < 0) {
		sched_trace_free(&b.t);
		return rc;
	}
	*t = b.t;
	return 0;
}

void sched_trace_free(struct sched_trace *t)
{
	free(t->arrival);
	free(t->input);
	free(t->output);
	free(t->first);
	free(t->nkeys);
	free(t->keys);
	memset(t, 0, sizeof(*t));
}
