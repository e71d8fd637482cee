/*
 * sched_req.c - a request's life on the scheduler's books: decide,
 * admit, commit, prefill done, complete (sched.h, sched_int.h).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched_int.h"

/* ---- records ----------------------------------------------------------- */

static int rec_grow(struct sched *s)
{
	uint32_t n = s->nrec ? s->nrec * 2 : 64;
	struct sched_rec *r;

	if (n > UINT32_MAX / 2)
		return -ENOMEM;
	r = realloc(s->rec, n * sizeof(*r));
	if (!r)
		return -ENOMEM;
	memset(r + s->nrec, 0, (n - s->nrec) * sizeof(*r));
	/* new records go on the free list lowest first */
	for (uint32_t k = n; k-- > s->nrec;) {
		r[k].next_free = s->free_head;
		s->free_head = k;
	}
	s->rec = r;
	s->nrec = n;
	return 0;
}

static int rec_alloc(struct sched *s, uint32_t *out)
{
	int rc;

	if (s->free_head == REC_NIL) {
		rc = rec_grow(s);
		if (rc < 0)
			return rc;
	}
	*out = s->free_head;
	s->free_head = s->rec[*out].next_free;
	return 0;
}

static void rec_free(struct sched *s, uint32_t k)
{
	struct sched_rec *e = &s->rec[k];

	free(e->keys);
	e->keys = NULL;
	e->nkeys = 0;
	free(e->all);
	e->all = NULL;
	e->nall = 0;
	e->hstate = HELD_NONE;
	e->phase = REC_FREE;
	e->gen++;
	e->next_free = s->free_head;
	s->free_head = k;
}

/* ids are never 0: slot + 1 in the low half, the slot's gen above */
static uint64_t rec_id(const struct sched *s, uint32_t k)
{
	return (uint64_t)s->rec[k].gen << 32 | (k + 1);
}

uint64_t sched_rec_id(const struct sched *s, uint32_t k)
{
	return rec_id(s, k);
}

static struct sched_rec *rec_lookup(struct sched *s, uint64_t id, uint32_t *out)
{
	uint32_t k = (uint32_t)id - 1;

	if ((uint32_t)id == 0 || k >= s->nrec)
		return NULL;
	if (s->rec[k].phase == REC_FREE || s->rec[k].gen != id >> 32)
		return NULL;
	*out = k;
	return &s->rec[k];
}

static void dc_link(struct sched *s, uint32_t j, uint32_t k)
{
	struct sched_dc *d = &s->dc[j];

	s->rec[k].dprev = REC_NIL;
	s->rec[k].dnext = d->head;
	if (d->head != REC_NIL)
		s->rec[d->head].dprev = k;
	d->head = k;
}

static void dc_unlink(struct sched *s, uint32_t j, uint32_t k)
{
	struct sched_rec *e = &s->rec[k];

	if (e->dprev != REC_NIL)
		s->rec[e->dprev].dnext = e->dnext;
	else
		s->dc[j].head = e->dnext;
	if (e->dnext != REC_NIL)
		s->rec[e->dnext].dprev = e->dprev;
}

struct sched_rec *sched_rec_lookup(struct sched *s, uint64_t id, uint32_t *out)
{
	return rec_lookup(s, id, out);
}

/* ---- deciding ---------------------------------------------------------- */

static void ctx_init(struct sched *s, const struct sched_req *r, double now,
		     struct sched_ctx *c)
{
	memset(c, 0, sizeof(*c));
	c->req = r;
	c->now = now;
	c->lens = s->lens;
	if (s->pol->lookahead)
		c->ahead = s->ahead;
	c->best =
		sched_index_prefix2(s->ix, c->ahead ? s->flight : NULL, r->keys,
				    r->nkeys, s->lens, s->ahead, &c->best_node);
}

/* the lowest TTFT any instance could give, fetching or not */
static double best_ttft(const struct sched *s, const struct sched_ctx *c)
{
	struct sched_plan a, b;
	double best = c->plan.ttft;

	/* a held policy's own estimate already is its best over every
	 * instance, in its own queue order, not the FIFO one */
	if (s->pol->held)
		return best;
	sched_plan_min(s, c, NULL, 0, &a);
	sched_plan_min(s, c, NULL, 1.0, &b);
	if (a.ttft < best)
		best = a.ttft;
	return b.ttft < best ? b.ttft : best;
}

static double best_tbt(const struct sched *s, const struct sched_ctx *c)
{
	double t = c->now + c->plan.ttft, best = c->tbt;

	for (uint32_t j = 0; j < s->ndecode; j++) {
		double v = s->cfg.reject == SCHED_REJECT_PREDICT
				   ? sched_tbt_at(s, j, c->req, t)
				   : sched_tbt_now(s, j, c->req);

		if (v < best)
			best = v;
	}
	return best;
}

/* Early rejection: refuse now what would miss its SLO anyway, rather than
 * spend a prefill on it, as Mooncake does under overload */
static enum sched_verdict admit(const struct sched *s,
				const struct sched_ctx *c)
{
	if (s->cfg.reject == SCHED_REJECT_OFF)
		return SCHED_ACCEPT;
	if (best_ttft(s, c) > s->cfg.slo_ttft)
		return SCHED_REJECT_TTFT;
	if (best_tbt(s, c) > s->cfg.slo_tbt)
		return SCHED_REJECT_TBT;
	return SCHED_ACCEPT;
}

static void fill_decision(const struct sched_ctx *c, struct sched_decision *d)
{
	const struct sched_plan *p = &c->plan;

	d->prefill = p->inst;
	d->decode = c->decode;
	d->local_blocks = p->local;
	d->reuse_blocks = p->reuse;
	d->src_node = p->src;
	d->xfer_blocks = p->src != SCHED_NO_NODE ? p->reuse - p->local : 0;
	d->est_queue = p->queue;
	d->est_xfer = p->xfer;
	d->est_prefill = p->prefill;
	d->est_ttft = p->ttft;
	d->est_tbt = c->tbt;
}

/* ---- committing -------------------------------------------------------- */

/*
 * Book the blocks this request will write on its prefill node into the
 * in-flight index: those past the node's cached prefix (the cached ones
 * are in the index already), fetched ones included.
 */
static int rec_keys(struct sched *s, struct sched_rec *e,
		    const struct sched_ctx *c)
{
	uint32_t from = c->lens[s->pf[e->prefill].node];
	uint32_t n = c->req->nkeys - from;
	int rc;

	if (!n)
		return 0;
	e->keys = malloc(n * sizeof(*e->keys));
	if (!e->keys)
		return -ENOMEM;
	memcpy(e->keys, c->req->keys + from, n * sizeof(*e->keys));
	e->nkeys = n;
	rc = sched_flight_add(s, s->pf[e->prefill].node, e->keys, e->nkeys);
	if (rc < 0) {
		free(e->keys);
		e->keys = NULL;
		e->nkeys = 0;
	}
	return rc;
}

static void pf_enqueue(struct sched_pf *pf, double now, double service)
{
	double start = pf->busy_until > now ? pf->busy_until : now;

	pf->busy_until = start + service;
	pf->backlog += service;
	pf->queued++;
}

static int commit(struct sched *s, const struct sched_ctx *c, uint64_t *id)
{
	struct sched_rec *e;
	uint32_t k;
	int rc;

	rc = rec_alloc(s, &k);
	if (rc < 0)
		return rc;
	e = &s->rec[k];
	e->prefill = c->plan.inst;
	e->decode = c->decode;
	if (s->pol->lookahead) {
		rc = rec_keys(s, e, c);
		if (rc < 0) {
			rec_free(s, k);
			return rc;
		}
	}
	e->phase = REC_PREFILL;
	e->ctx = sched_rec_ctx(c->req);
	e->out = c->req->output_tokens;
	e->service = c->plan.xfer + c->plan.prefill;
	/* the plain step time, not the TBT estimate: it times the decode */
	e->step = sched_cost_step(&s->cfg.cost, s->dc[e->decode].running + 1,
				  s->dc[e->decode].ctx + e->ctx);
	if (s->pol->held) {
		rc = sched_held_add(s, k, c);
		if (rc < 0) {
			if (e->keys)
				sched_flight_del(s, s->pf[e->prefill].node,
						 e->keys, e->nkeys);
			rec_free(s, k);
			return rc;
		}
	}
	pf_enqueue(&s->pf[e->prefill], c->now, e->service);
	e->pred_start = c->now + c->plan.ttft;
	e->pred_end = e->pred_start + (double)e->out * e->step;
	e->touched = c->now;
	s->dc[e->decode].headed++;
	dc_link(s, e->decode, k);
	s->load.accepted++;
	s->load.live++;
	*id = rec_id(s, k);
	return 0;
}

/* the longest of lens[] and the lowest node holding it, as the index
 * walk reports them */
static void ctx_from_lens(struct sched *s, const uint32_t *lens,
			  struct sched_ctx *c)
{
	memcpy(s->lens, lens, s->nnodes * sizeof(*lens));
	c->best = 0;
	c->best_node = SCHED_NO_NODE;
	for (uint32_t n = 0; n < s->nnodes; n++)
		if (lens[n] > c->best) {
			c->best = lens[n];
			c->best_node = n;
		}
}

static int decide(struct sched *s, struct sched_ctx *c,
		  struct sched_decision *d)
{
	s->pol->pick_prefill(s, c);
	if (s->pol->pick_decode)
		s->pol->pick_decode(s, c);
	else
		sched_decode_now(s, c);
	fill_decision(c, d);
	d->held = s->pol->held;
	d->verdict = admit(s, c);
	switch (d->verdict) {
	case SCHED_REJECT_TTFT:
		s->load.rejected_ttft++;
		return 0;
	case SCHED_REJECT_TBT:
		s->load.rejected_tbt++;
		return 0;
	case SCHED_ACCEPT:
		break;
	}
	return commit(s, c, &d->id);
}

static bool req_ok(const struct sched *s, const struct sched_req *r)
{
	return r && (!r->nkeys || r->keys) &&
	       r->input_tokens >= (uint64_t)r->nkeys * s->cfg.cost.block_tokens;
}

int sched_schedule(struct sched *s, const struct sched_req *r, double now,
		   struct sched_decision *d)
{
	struct sched_ctx c;

	if (!s || !d || !req_ok(s, r))
		return -EINVAL;
	memset(d, 0, sizeof(*d));
	ctx_init(s, r, now, &c);
	return decide(s, &c, d);
}

int sched_schedule_lens(struct sched *s, const struct sched_req *r,
			const uint32_t *lens, double now,
			struct sched_decision *d)
{
	struct sched_ctx c;

	if (!s || !d || !lens || !req_ok(s, r) || s->pol->lookahead)
		return -EINVAL;
	memset(d, 0, sizeof(*d));
	memset(&c, 0, sizeof(c));
	c.req = r;
	c.now = now;
	c.lens = s->lens;
	ctx_from_lens(s, lens, &c);
	return decide(s, &c, d);
}

/* ---- after the decision ------------------------------------------------ */

/* the request leaves its prefill instance's queue; the next one there
 * starts now, so the queue is estimated to drain after what is left */
static void pf_leave(struct sched *s, struct sched_rec *e, double now)
{
	struct sched_pf *pf = &s->pf[e->prefill];

	pf->queued--;
	pf->backlog -= e->service;
	if (pf->queued == 0 || pf->backlog < 0)
		pf->backlog = 0;
	pf->busy_until = now + pf->backlog;
	if (e->keys) {
		sched_flight_del(s, pf->node, e->keys, e->nkeys);
		free(e->keys);
		e->keys = NULL;
		e->nkeys = 0;
	}
}

int sched_prefill_done(struct sched *s, uint64_t id, double now)
{
	struct sched_rec *e;
	struct sched_dc *dc;
	uint32_t k;

	e = rec_lookup(s, id, &k);
	if (!e)
		return -ENOENT;
	if (e->phase != REC_PREFILL)
		return -EALREADY;
	sched_held_drop(s, k);
	pf_leave(s, e, now);
	dc = &s->dc[e->decode];
	dc->headed--;
	dc->running++;
	dc->ctx += e->ctx;
	e->phase = REC_DECODE;
	e->pred_start = now;
	e->pred_end = now + (double)e->out * e->step;
	e->touched = now;
	return 0;
}

int sched_complete(struct sched *s, uint64_t id, double now)
{
	struct sched_rec *e;
	struct sched_dc *dc;
	uint32_t k;

	e = rec_lookup(s, id, &k);
	if (!e)
		return -ENOENT;
	dc = &s->dc[e->decode];
	if (e->phase == REC_PREFILL) {
		sched_held_drop(s, k);
		pf_leave(s, e, now);
		dc->headed--;
	} else {
		dc->running--;
		dc->ctx -= e->ctx;
	}
	dc_unlink(s, e->decode, k);
	rec_free(s, k);
	s->load.live--;
	return 0;
}

uint64_t sched_expire(struct sched *s, double now, double ttl)
{
	uint64_t n = 0;

	for (uint32_t k = 0; k < s->nrec; k++)
		if (s->rec[k].phase != REC_FREE &&
		    now - s->rec[k].touched >= ttl &&
		    sched_complete(s, rec_id(s, k), now) == 0)
			n++;
	return n;
}
