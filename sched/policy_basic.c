/*
 * policy_basic.c - the baselines that do not weigh a prefill's cost:
 * random, round-robin, load, longest-prefix.  Each plans with the
 * instance's own cached prefix, which is what its engine will reuse.
 */
#include "config.h"

#include "sched/sched_int.h"

static void plan_at(struct sched *s, struct sched_ctx *c, uint32_t i)
{
	sched_plan_local(s, c, i, c->lens[s->pf[i].node], &c->plan);
}

void sched_pick_random(struct sched *s, struct sched_ctx *c)
{
	plan_at(s, c, (uint32_t)(sched_rand(s) % s->nprefill));
}

void sched_pick_round_robin(struct sched *s, struct sched_ctx *c)
{
	uint32_t i = s->rr_next;

	s->rr_next = (i + 1) % s->nprefill;
	plan_at(s, c, i);
}

/* least queued work: the shortest queue wait, lowest id on ties */
void sched_pick_load(struct sched *s, struct sched_ctx *c)
{
	uint32_t best = 0;
	double bq = sched_queue_at(s, 0, c->now);

	for (uint32_t i = 1; i < s->nprefill; i++) {
		double q = sched_queue_at(s, i, c->now);

		if (q < bq) {
			bq = q;
			best = i;
		}
	}
	plan_at(s, c, best);
}

void sched_pick_longest_prefix(struct sched *s, struct sched_ctx *c)
{
	uint32_t best = 0, blen = c->lens[s->pf[0].node];
	double bq = sched_queue_at(s, 0, c->now);

	for (uint32_t i = 1; i < s->nprefill; i++) {
		uint32_t len = c->lens[s->pf[i].node];
		double q = sched_queue_at(s, i, c->now);

		if (len > blen || (len == blen && q < bq)) {
			best = i;
			blen = len;
			bq = q;
		}
	}
	plan_at(s, c, best);
}
