/*
 * held.c - conductor-held queues (policies with .held, sched.h): the
 * order requests wait in, dispatch to an idle instance (late binding of
 * the prefix plan, stealing, CPP) and preemption at chunk boundaries.
 *
 * The order.  A request's TTFT includes every prefill served before it
 * on its instance, so serving the least remaining work first lowers the
 * mean.  Alone that starves long prompts; the SLO guard bounds it: a
 * request whose wait plus its own work reaches guard * slo_ttft is
 * urgent, and urgent requests go before every other, by the latest
 * start that meets the SLO (arrival + slo_ttft - work), earliest first
 * (guard 0: every request is urgent, and that is the whole order).  A
 * request that would miss the SLO anyway (wait + work over slo_ttft)
 * stops being urgent, so that it does not make the others miss too,
 * until it has waited twice slo_ttft.  So no request waits much more
 * than twice slo_ttft plus the urgent work ahead of it, and one that can
 * still meet the SLO waits about guard * slo_ttft plus that work.
 *
 * A request placed behind the request that writes its prefix (the
 * in-flight index) waits until that one's prefill is done, whatever the
 * order says; otherwise it would start first and recompute the prefix.
 *
 * Dispatch.  An idle instance takes the first request of its queue; an
 * instance with nothing eligible steals the head of another queue when
 * it can run it sooner than its instance would (its wait there, against
 * its prefill here with this node's cache).  The prefix plan is made
 * again at dispatch, from the index as it is then (late binding).  A
 * prefill estimated over cpp_threshold seconds, dispatched while other
 * instances sit idle with empty queues, is split over up to cpp_max of
 * them (chunked pipeline parallelism): its service is the fetch plus
 * prefill / (k * cpp_eff).
 *
 * Preemption.  At each chunk boundary (sched_progress) the running
 * request yields when a request that goes before it waits; it is queued
 * again on the same instance, pinned there (its computed tokens stay in
 * that engine), and resumes from them.  A CPP pipeline never yields.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched_int.h"

/* ---- the order ----------------------------------------------------------- */

static bool urgent(const struct sched *s, const struct sched_rec *e, double now)
{
	double t = now - e->arrive + e->work;

	if (t > s->cfg.slo_ttft && now - e->arrive < 2 * s->cfg.slo_ttft)
		return false;
	return t >= s->cfg.guard * s->cfg.slo_ttft;
}

/* a is served before b */
static bool goes_before(const struct sched *s, const struct sched_rec *a,
			const struct sched_rec *b, double now)
{
	bool ua = urgent(s, a, now), ub = urgent(s, b, now);

	if (ua != ub)
		return ua;
	if (!ua && a->work != b->work)
		return a->work < b->work;
	/* urgent: the latest start that meets the SLO first */
	if (a->arrive - a->work != b->arrive - b->work)
		return a->arrive - a->work < b->arrive - b->work;
	return a < b;
}

static const struct sched_rec *rec_at(const struct sched *s, uint64_t id)
{
	uint32_t k = (uint32_t)id - 1;

	if ((uint32_t)id == 0 || k >= s->nrec)
		return NULL;
	if (s->rec[k].phase == REC_FREE || s->rec[k].gen != id >> 32)
		return NULL;
	return &s->rec[k];
}

/* its writer's prefill is not done yet */
static bool writer_pending(const struct sched *s, const struct sched_rec *e)
{
	const struct sched_rec *w = e->writer ? rec_at(s, e->writer) : NULL;

	return w && w->phase == REC_PREFILL;
}

static bool eligible(const struct sched *s, const struct sched_rec *e)
{
	return e->pinned || !writer_pending(s, e);
}

/* the first eligible request of queue i (not pinned ones when stealing) */
static uint32_t queue_first(const struct sched *s, uint32_t i, double now,
			    bool stealing)
{
	uint32_t best = REC_NIL;

	for (uint32_t k = s->pf[i].hhead; k != REC_NIL; k = s->rec[k].hnext) {
		const struct sched_rec *e = &s->rec[k];

		if (!eligible(s, e) || (stealing && e->pinned))
			continue;
		if (best == REC_NIL || goes_before(s, e, &s->rec[best], now))
			best = k;
	}
	return best;
}

static double run_left(const struct sched *s, uint32_t i, double now)
{
	const struct sched_pf *pf = &s->pf[i];

	return pf->run != REC_NIL && pf->run_end > now ? pf->run_end - now : 0;
}

/* ---- estimates, for the policy ----------------------------------------- */

/* a new request of that work goes after the urgent ones and those with
 * less work; one urgent from the start (work over guard * slo_ttft)
 * goes after the urgent ones only */
double sched_held_wait(const struct sched *s, uint32_t i, double work,
		       double now, uint32_t *behind)
{
	bool first = work >= s->cfg.guard * s->cfg.slo_ttft;
	double wait = run_left(s, i, now);
	uint32_t n = 0;

	for (uint32_t k = s->pf[i].hhead; k != REC_NIL; k = s->rec[k].hnext) {
		const struct sched_rec *e = &s->rec[k];

		if (urgent(s, e, now) || (!first && e->work <= work))
			wait += e->work;
		else
			n++;
	}
	if (behind)
		*behind = n;
	return wait;
}

/* wait of queued request k on its instance: what goes before it */
static double queued_wait(const struct sched *s, uint32_t k, double now)
{
	uint32_t i = s->rec[k].prefill;
	double wait = run_left(s, i, now);

	for (uint32_t q = s->pf[i].hhead; q != REC_NIL; q = s->rec[q].hnext)
		if (q != k && goes_before(s, &s->rec[q], &s->rec[k], now))
			wait += s->rec[q].work;
	return wait;
}

/*
 * The request on instance i that writes r's first ahead blocks: one
 * whose prompt has r's block ahead - 1 at the same place (block keys are
 * chained, so it shares the whole prefix), running or else not waiting
 * for a writer itself.  Its estimated end, or -1 when there is none.
 */
double sched_held_writer_end(const struct sched *s, uint32_t i,
			     const struct sched_req *r, uint32_t ahead,
			     double now, uint64_t *writer)
{
	const struct sched_pf *pf = &s->pf[i];
	uint64_t key = r->keys[ahead - 1];

	if (pf->run != REC_NIL) {
		const struct sched_rec *e = &s->rec[pf->run];

		if (e->nall >= ahead && e->all[ahead - 1] == key) {
			*writer = sched_rec_id(s, pf->run);
			return pf->run_end;
		}
	}
	for (uint32_t k = pf->hhead; k != REC_NIL; k = s->rec[k].hnext) {
		const struct sched_rec *e = &s->rec[k];

		if (e->nall < ahead || e->all[ahead - 1] != key ||
		    writer_pending(s, e))
			continue;
		*writer = sched_rec_id(s, k);
		return now + queued_wait(s, k, now) + e->work;
	}
	return -1;
}

/* ---- the queues -------------------------------------------------------- */

static void q_link(struct sched *s, uint32_t i, uint32_t k)
{
	struct sched_pf *pf = &s->pf[i];
	struct sched_rec *e = &s->rec[k];

	e->hprev = REC_NIL;
	e->hnext = pf->hhead;
	if (pf->hhead != REC_NIL)
		s->rec[pf->hhead].hprev = k;
	pf->hhead = k;
	pf->hn++;
	e->hstate = HELD_QUEUED;
}

static void q_unlink(struct sched *s, uint32_t k)
{
	struct sched_rec *e = &s->rec[k];
	struct sched_pf *pf = &s->pf[e->prefill];

	if (e->hprev != REC_NIL)
		s->rec[e->hprev].hnext = e->hnext;
	else
		pf->hhead = e->hnext;
	if (e->hnext != REC_NIL)
		s->rec[e->hnext].hprev = e->hprev;
	pf->hn--;
	e->hstate = HELD_NONE;
}

int sched_held_add(struct sched *s, uint32_t k, const struct sched_ctx *c)
{
	struct sched_rec *e = &s->rec[k];
	uint32_t n = c->req->nkeys;

	e->all = malloc((n ? n : 1) * sizeof(*e->all));
	if (!e->all)
		return -ENOMEM;
	if (n)
		memcpy(e->all, c->req->keys, n * sizeof(*e->all));
	e->nall = n;
	e->input = c->req->input_tokens;
	e->done = 0;
	e->pinned = false;
	e->ninst = 0;
	e->writer = c->writer;
	e->plan_local = c->plan.local;
	e->arrive = c->now;
	e->work = c->plan.xfer + c->plan.prefill;
	q_link(s, c->plan.inst, k);
	return 0;
}

void sched_held_drop(struct sched *s, uint32_t k)
{
	struct sched_rec *e = &s->rec[k];

	if (e->hstate == HELD_QUEUED) {
		q_unlink(s, k);
	} else if (e->hstate == HELD_RUNNING) {
		for (uint32_t i = 0; i < s->nprefill; i++)
			if (s->pf[i].run == k)
				s->pf[i].run = REC_NIL;
		e->hstate = HELD_NONE;
	}
}

/* ---- dispatch ----------------------------------------------------------- */

/* the request of record e, as the policy's estimates read one */
static void rec_req(const struct sched_rec *e, struct sched_req *r)
{
	r->keys = e->all;
	r->nkeys = e->nall;
	r->input_tokens = e->input;
	r->output_tokens = e->out;
}

/* the best plan for e on instance i, from the index as it is now */
static void replan(struct sched *s, uint32_t i, const struct sched_rec *e,
		   double now, struct sched_plan *p)
{
	const struct sched_cost *cost = &s->cfg.cost;
	struct sched_req r;
	struct sched_ctx c;
	struct sched_plan rem;

	rec_req(e, &r);
	memset(&c, 0, sizeof(c));
	c.req = &r;
	c.now = now;
	c.lens = s->lens;
	c.best = sched_index_prefix(s->ix, r.keys, r.nkeys, s->lens,
				    &c.best_node);
	sched_plan_local(s, &c, i, s->lens[s->pf[i].node], p);
	if (e->pinned) {
		/* its computed tokens stay in this engine */
		uint64_t have = sched_cost_block_tok(cost, p->local, e->input);

		p->prefill = sched_cost_prefill(
			cost, e->input, have > e->done ? have : e->done);
	} else {
		sched_plan_remote(s, &c, i, p->local, 1.0, &rem);
		if (rem.xfer + rem.prefill < p->prefill)
			*p = rem;
	}
	p->queue = 0;
	p->ttft = p->xfer + p->prefill;
}

/* the gain of stealing the head of queue j onto idle instance i, s */
static double steal_gain(struct sched *s, uint32_t i, uint32_t k, double now)
{
	struct sched_plan p;

	replan(s, i, &s->rec[k], now, &p);
	return queued_wait(s, k, now) + s->rec[k].work - p.ttft;
}

static uint32_t steal_pick(struct sched *s, uint32_t i, double now)
{
	uint32_t best = REC_NIL;
	double gain = 0;

	for (uint32_t j = 0; j < s->nprefill; j++) {
		uint32_t k;
		double g;

		if (j == i || !s->pf[j].hn)
			continue;
		k = queue_first(s, j, now, true);
		if (k == REC_NIL)
			continue;
		g = steal_gain(s, i, k, now);
		if (g > gain) {
			gain = g;
			best = k;
		}
	}
	return best;
}

/* idle instances with nothing queued join a CPP pipeline led by i */
static uint32_t cpp_gather(const struct sched *s, uint32_t i, uint32_t *inst)
{
	uint32_t n = 1;

	inst[0] = i;
	for (uint32_t j = 0; j < s->nprefill && n < s->cfg.cpp_max; j++)
		if (j != i && s->pf[j].run == REC_NIL && !s->pf[j].hn)
			inst[n++] = j;
	return n;
}

/* move e's books (queue estimate, in-flight blocks) to instance i */
static int books_move(struct sched *s, struct sched_rec *e, uint32_t i,
		      double service, double now)
{
	struct sched_pf *from = &s->pf[e->prefill], *to = &s->pf[i];
	int rc;

	if (e->keys && from->node != to->node) {
		rc = sched_flight_add(s, to->node, e->keys, e->nkeys);
		if (rc < 0)
			return rc;
		sched_flight_del(s, from->node, e->keys, e->nkeys);
	}
	if (e->prefill != i) {
		from->queued--;
		from->backlog -= e->service;
		if (!from->queued || from->backlog < 0)
			from->backlog = 0;
		from->busy_until = now + from->backlog;
		to->queued++;
		to->backlog += service;
	} else {
		to->backlog += service - e->service;
		if (to->backlog < 0)
			to->backlog = 0;
	}
	to->busy_until = now + to->backlog;
	e->prefill = i;
	e->service = service;
	return 0;
}

static int dispatch(struct sched *s, uint32_t i, uint32_t k, double now,
		    struct sched_dispatch *out)
{
	struct sched_rec *e = &s->rec[k];
	struct sched_plan p;
	double service;
	uint32_t n = 1;
	int rc;

	replan(s, i, e, now, &p);
	memset(out, 0, sizeof(*out));
	service = p.xfer + p.prefill;
	if (!e->pinned && s->cfg.cpp_max > 1 &&
	    p.prefill > s->cfg.cpp_threshold) {
		n = cpp_gather(s, i, out->inst);
		if (n > 1)
			service = p.xfer +
				  p.prefill / ((double)n * s->cfg.cpp_eff);
	}
	out->stolen = e->prefill != i;
	q_unlink(s, k);
	rc = books_move(s, e, i, service, now);
	if (rc < 0) {
		q_link(s, e->prefill, k);
		return rc;
	}
	out->inst[0] = i;
	for (uint32_t m = 0; m < n; m++) {
		s->pf[out->inst[m]].run = k;
		s->pf[out->inst[m]].run_end = now + service;
	}
	e->hstate = HELD_RUNNING;
	e->ninst = (uint8_t)n;
	e->work = service;
	e->touched = now;
	out->id = sched_rec_id(s, k);
	out->prefill = i;
	out->decode = e->decode;
	out->ninst = n;
	out->local_blocks = p.local;
	out->reuse_blocks = p.reuse;
	out->src_node = p.src;
	out->xfer_blocks = p.src != SCHED_NO_NODE ? p.reuse - p.local : 0;
	out->done_tokens = e->pinned ? e->done : 0;
	out->chunk_tokens = n > 1 ? 0 : s->cfg.chunk_tokens;
	out->est_service = service;
	return 1;
}

int sched_next(struct sched *s, uint32_t i, double now,
	       struct sched_dispatch *out)
{
	uint32_t k;

	if (!s || !out || !s->pol->held || i >= s->nprefill)
		return -EINVAL;
	if (s->pf[i].run != REC_NIL)
		return -EBUSY;
	k = queue_first(s, i, now, false);
	if (k == REC_NIL && s->cfg.steal)
		k = steal_pick(s, i, now);
	if (k == REC_NIL)
		return 0;
	return dispatch(s, i, k, now, out);
}

int sched_progress(struct sched *s, uint64_t id, uint64_t done, double now)
{
	struct sched_rec *e;
	uint32_t k, b;
	double left;

	if (!s)
		return -EINVAL;
	e = sched_rec_lookup(s, id, &k);
	if (!e)
		return -ENOENT;
	if (e->phase != REC_PREFILL || e->hstate != HELD_RUNNING)
		return -EINVAL;
	if (done > e->input)
		done = e->input;
	if (done > e->done)
		e->done = done;
	e->touched = now;
	if (e->ninst > 1)
		return 0;
	left = sched_cost_prefill(&s->cfg.cost, e->input, e->done);
	e->work = left;
	s->pf[e->prefill].run_end = now + left;
	if (!s->cfg.chunk_tokens)
		return 0;
	b = queue_first(s, e->prefill, now, false);
	if (b == REC_NIL || !goes_before(s, &s->rec[b], e, now))
		return 0;
	s->pf[e->prefill].run = REC_NIL;
	e->pinned = true;
	e->ninst = 0;
	q_link(s, e->prefill, k);
	return 1;
}
