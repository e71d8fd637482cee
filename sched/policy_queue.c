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

static void cand_on(struct sched *s, struct sched_ctx *c, uint32_t i,
		    struct cand *o)
{
	uint32_t node = s->pf[i].node, local = c->lens[node], behind;
	double writer_end = -1, work, wait;
	struct sched_plan loc, rem;

	o->writer = 0;
	if (c->ahead && c->ahead[node] > local) {
		writer_end = sched_held_writer_end(s, i, c->req, c->ahead[node],
						   c->now, &o->writer);
		if (writer_end >= 0)
			local = c->ahead[node];
	}
	sched_plan_local(s, c, i, local, &loc);
	o->plan = loc;
	if (c->best > local) { /* else the remote plan is the local one */
		sched_plan_remote(s, c, i, local, 1.0, &rem);
		if (rem.xfer + rem.prefill < loc.prefill)
			o->plan = rem;
	}
	work = o->plan.xfer + o->plan.prefill;
	wait = sched_held_wait(s, i, work, c->now, &behind);
	if (writer_end - c->now > wait)
		wait = writer_end - c->now;
	o->plan.queue = wait;
	o->plan.ttft = wait + work;
	o->cost = o->plan.ttft + work * (double)behind;
}

void sched_pick_queue(struct sched *s, struct sched_ctx *c)
{
	struct cand best, o;

	memset(&best, 0, sizeof(best));
	for (uint32_t i = 0; i < s->nprefill; i++) {
		cand_on(s, c, i, &o);
		if (i == 0 || cand_better(&o, &best))
			best = o;
	}
	c->plan = best.plan;
	c->writer = best.writer;
}
