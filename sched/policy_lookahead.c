/*
 * policy_lookahead.c - our policy: KVCache-centric scheduling that also
 * sees the prefixes requests still in flight will have written.
 *
 * What Algorithm 1 misses: a block enters the index only when the prefill
 * that wrote it is done, and a prefill of a long prompt takes seconds.  A
 * second turn of a session, or a burst on a new system prompt, arriving
 * in that window finds no cached prefix anywhere, so kvcache-centric
 * recomputes the whole prompt on the least-loaded instance.  The
 * scheduler itself knows better: it placed the first request, and an
 * instance serves its queue in order, so a request queued behind it on
 * the same instance will find its blocks written.  This policy counts
 * those blocks (the in-flight index, sched_int.h) as local on that
 * instance; a remote prefix is fetched only when that is faster than
 * recomputing it (a cost test, not a fixed ratio); and the decode
 * instance is picked by its load predicted for the moment the prefill
 * ends, not by its load now.
 */
#include "config.h"

#include "sched/sched_int.h"

static bool faster(const struct sched_plan *a, const struct sched_plan *b)
{
	if (a->ttft != b->ttft)
		return a->ttft < b->ttft;
	if (a->local != b->local)
		return a->local > b->local; /* less to copy in */
	return a->inst < b->inst;
}

/* plan p, made on some instance, moved to instance i with queue q: the
 * same numbers sched_plan_local / sched_plan_remote give there (queue +
 * xfer + prefill, xfer 0 when nothing is fetched) */
static void plan_on(const struct sched_plan *p, uint32_t i, double q,
		    struct sched_plan *out)
{
	*out = *p;
	out->inst = i;
	out->queue = q;
	out->ttft = q + p->xfer + p->prefill;
}

/*
 * The plans depend on the instance only through its queue and its local
 * blocks, and most instances hold none of the prompt: their two plans
 * are made once a decision, and only the queue once an instance; such
 * an instance's plan is written out only when it is no slower than the
 * best so far.
 */
void sched_pick_lookahead(struct sched *s, struct sched_ctx *c)
{
	struct sched_plan loc, rem, loc0, rem0;

	sched_plan_local(s, c, 0, 0, &loc0);
	sched_plan_remote(s, c, 0, 0, 1.0, &rem0);
	for (uint32_t i = 0; i < s->nprefill; i++) {
		uint32_t local = c->ahead[s->pf[i].node];
		const struct sched_plan *q = &loc;

		if (!local) {
			double w = sched_queue_at(s, i, c->now);
			double lt = w + loc0.xfer + loc0.prefill;
			double rt = w + rem0.xfer + rem0.prefill;

			if (i && (rt < lt ? rt : lt) > c->plan.ttft)
				continue;
			plan_on(rt < lt ? &rem0 : &loc0, i, w, &loc);
		} else {
			sched_plan_local(s, c, i, local, &loc);
			sched_plan_remote(s, c, i, local, 1.0, &rem);
			if (rem.ttft < loc.ttft)
				q = &rem;
		}
		if (i == 0 || faster(q, &c->plan))
			c->plan = *q;
	}
}
