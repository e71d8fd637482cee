/*
 * estimate.c - TTFT and TBT estimates from the books (sched_int.h) and
 * the cost model, shared by every policy and by admission.
 */
#include "config.h"

#include "sched/sched_int.h"

double sched_queue_at(const struct sched *s, uint32_t i, double now)
{
	double q = s->pf[i].busy_until - now;

	return q > 0 ? q : 0;
}

void sched_plan_local(const struct sched *s, const struct sched_ctx *c,
		      uint32_t i, uint32_t local, struct sched_plan *p)
{
	const struct sched_cost *cost = &s->cfg.cost;
	uint64_t n = c->req->input_tokens;

	p->inst = i;
	p->local = local;
	p->reuse = local;
	p->src = SCHED_NO_NODE;
	p->queue = sched_queue_at(s, i, c->now);
	p->xfer = 0;
	p->prefill = sched_cost_prefill(cost, n,
					sched_cost_block_tok(cost, local, n));
	p->ttft = p->queue + p->prefill;
}

void sched_plan_remote(const struct sched *s, const struct sched_ctx *c,
		       uint32_t i, uint32_t local, double balance,
		       struct sched_plan *p)
{
	const struct sched_cost *cost = &s->cfg.cost;
	uint64_t n = c->req->input_tokens;

	sched_plan_local(s, c, i, local, p);
	if (c->best <= local || (double)c->best <= balance * (double)local)
		return;
	p->reuse = c->best;
	p->src = c->best_node;
	p->xfer = sched_cost_transfer(cost, c->best - local);
	p->prefill = sched_cost_prefill(cost, n,
					sched_cost_block_tok(cost, c->best, n));
	p->ttft = p->queue + p->xfer + p->prefill;
}

/* a beats b: lower TTFT, then shorter queue (less load), then lower id */
static bool plan_better(const struct sched_plan *a, const struct sched_plan *b)
{
	if (a->ttft != b->ttft)
		return a->ttft < b->ttft;
	if (a->queue != b->queue)
		return a->queue < b->queue;
	return a->inst < b->inst;
}

void sched_plan_min(const struct sched *s, const struct sched_ctx *c,
		    const uint32_t *lens, double balance, struct sched_plan *p)
{
	struct sched_plan q;

	if (!lens)
		lens = c->lens;
	for (uint32_t i = 0; i < s->nprefill; i++) {
		uint32_t local = lens[s->pf[i].node];

		if (balance > 0)
			sched_plan_remote(s, c, i, local, balance, &q);
		else
			sched_plan_local(s, c, i, local, &q);
		if (i == 0 || plan_better(&q, p))
			*p = q;
	}
}

/*
 * The TBT a request will measure in a batch of that size and context: the
 * mean of its longest k = ceil((out - 1) / 10) token intervals.  One of
 * them, the first, also waits for the step in progress when it joined (up
 * to a whole step), so the mean is step * (1 + 1/k), not one step.
 */
static double tbt_of(const struct sched *s, const struct sched_req *r,
		     uint64_t batch, uint64_t ctx)
{
	uint64_t ivl = r->output_tokens > 1 ? r->output_tokens - 1 : 1;
	double k = (double)((ivl + 9) / 10);

	return sched_cost_step(&s->cfg.cost, batch, ctx) * (1 + 1 / k);
}

double sched_tbt_now(const struct sched *s, uint32_t j,
		     const struct sched_req *r)
{
	const struct sched_dc *d = &s->dc[j];

	return tbt_of(s, r, d->running + 1, d->ctx + sched_rec_ctx(r));
}

double sched_tbt_at(const struct sched *s, uint32_t j,
		    const struct sched_req *r, double t)
{
	uint64_t batch = 1, ctx = sched_rec_ctx(r);

	for (uint32_t k = s->dc[j].head; k != REC_NIL; k = s->rec[k].dnext) {
		const struct sched_rec *e = &s->rec[k];

		if (e->pred_start <= t && t < e->pred_end) {
			batch++;
			ctx += e->ctx;
		}
	}
	return tbt_of(s, r, batch, ctx);
}

static void decode_pick(struct sched *s, struct sched_ctx *c, bool predict)
{
	double t = c->now + c->plan.ttft;

	for (uint32_t j = 0; j < s->ndecode; j++) {
		double tbt = predict ? sched_tbt_at(s, j, c->req, t)
				     : sched_tbt_now(s, j, c->req);

		bool tie = tbt == c->tbt &&
			   s->dc[j].headed < s->dc[c->decode].headed;

		if (j == 0 || tbt < c->tbt || tie) {
			c->decode = j;
			c->tbt = tbt;
		}
	}
}

void sched_decode_now(struct sched *s, struct sched_ctx *c)
{
	decode_pick(s, c, false);
}

void sched_decode_predict(struct sched *s, struct sched_ctx *c)
{
	decode_pick(s, c, true);
}
