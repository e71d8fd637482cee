/*
 * policy_queue.c - our second policy: placement onto conductor-held
 * queues (held.c says how they are served).
 *
 * On each instance the request would reuse what lookahead counts there
 * (the cached prefix, or the in-flight one when the request that writes
 * it is queued or running on that instance: then it waits for that
 * writer), or fetch a longer remote prefix when that is faster.  Its
 * work w is the fetch plus the prefill.  In the instance's queue order
 * it waits for the running request and every queued one that goes before
 * it, and it delays by w each one it goes before.  The placement
 * minimises the sum, own TTFT + delay imposed on others: the increase of
 * the TTFT sum, which is what the mean measures.  Ties: lower own TTFT,
 * then more blocks local, then the lower instance.
 */
#include "config.h"

#include <string.h>

#include "sched/sched_int.h"

struct cand {
	struct sched_plan plan;
	double cost;
	uint64_t writer;
};

static bool cand_better(const struct cand *a, const struct cand *b)
{
	if (a->cost != b->cost)
		return a->cost < b->cost;
	if (a->plan.ttft != b->plan.ttft)
		return a->plan.ttft < b->plan.ttft;
	if (a->plan.local != b->plan.local)
		return a->plan.local > b->plan.local;
	return a->plan.inst < b->plan.inst;
}

/* the plan's work on instance i with local blocks: fetch + prefill, and
 * what is reused from where; its queue and ttft are the caller's */
static void plan_work(const struct sched *s, const struct sched_ctx *c,
		      uint32_t i, uint32_t local, struct sched_plan *p)
{
	struct sched_plan rem;

	sched_plan_local(s, c, i, local, p);
	if (c->best > local) { /* else the remote plan is the local one */
		sched_plan_remote(s, c, i, local, 1.0, &rem);
		if (rem.xfer + rem.prefill < p->prefill)
			*p = rem;
	}
}

/*
 * The work depends on the instance only through its local blocks, and
 * most instances hold none of the prompt: their plan is made once a
 * decision (zero), not once an instance.
 */
static void cand_on(struct sched *s, struct sched_ctx *c, uint32_t i,
		    const struct sched_plan *zero, struct cand *o)
{
	uint32_t node = s->pf[i].node, local = c->lens[node], behind;
	double writer_end = -1, work, wait;

	o->writer = 0;
	if (c->ahead && c->ahead[node] > local) {
		writer_end = sched_held_writer_end(s, i, c->req, c->ahead[node],
						   c->now, &o->writer);
		if (writer_end >= 0)
			local = c->ahead[node];
	}
	if (local) {
		plan_work(s, c, i, local, &o->plan);
	} else {
		o->plan = *zero;
		o->plan.inst = i;
	}
	work = o->plan.xfer + o->plan.prefill;
	wait = sched_held_wait(s, i, work, c->now, &behind);
	if (writer_end - c->now > wait)
		wait = writer_end - c->now;
	o->plan.queue = wait;
	o->plan.ttft = wait + work;
	o->cost = o->plan.ttft + work * (double)behind;
}

/* instance i's node holds some of the prompt, cached or in flight */
static bool holds_some(const struct sched *s, const struct sched_ctx *c,
		       uint32_t i)
{
	uint32_t node = s->pf[i].node;

	return c->lens[node] || (c->ahead && c->ahead[node]);
}

/*
 * The best candidate is the least by cand_better, a strict total order,
 * so the order instances are looked at does not change it.  Those that
 * hold some of the prompt go first; each other one costs at least the
 * zero plan's work (waits and work are never negative: the cost model's
 * coefficients are not, sched_cost_check), so once a candidate costs
 * less, none of them can win and their queues are not walked.
 */
void sched_pick_queue(struct sched *s, struct sched_ctx *c)
{
	struct sched_plan zero;
	struct cand best, o;
	bool have = false;
	double work0;

	plan_work(s, c, 0, 0, &zero);
	work0 = zero.xfer + zero.prefill;
	memset(&best, 0, sizeof(best));
	for (uint32_t i = 0; i < s->nprefill; i++) {
		if (!holds_some(s, c, i))
			continue;
		cand_on(s, c, i, &zero, &o);
		if (!have || cand_better(&o, &best))
			best = o;
		have = true;
	}
	for (uint32_t i = 0; i < s->nprefill && !(have && best.cost < work0);
	     i++) {
		if (holds_some(s, c, i))
			continue;
		cand_on(s, c, i, &zero, &o);
		if (!have || cand_better(&o, &best))
			best = o;
		have = true;
	}
	c->plan = best.plan;
	c->writer = best.writer;
}
