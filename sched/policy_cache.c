/*
 * policy_cache.c - policies that weigh a prefill's cost against queues:
 * local cache-aware and Mooncake's KVCache-centric (Algorithm 1).
 */
#include "config.h"

#include "sched/sched_int.h"

/* lowest queue + prefill, each instance reusing only its own cache */
void sched_pick_cache_aware(struct sched *s, struct sched_ctx *c)
{
	sched_plan_min(s, c, NULL, 0, &c->plan);
}

/*
 * Algorithm 1: lowest transfer + queue + prefill over all instances; an
 * instance whose own prefix is shorter than the best one anywhere by more
 * than the balancing factor fetches the best one first.  Fetching
 * replicates a hot prefix onto the instance that ran it, which spreads
 * the hot prefix's load instead of queueing it all on its first holder.
 */
void sched_pick_kvcache_centric(struct sched *s, struct sched_ctx *c)
{
	sched_plan_min(s, c, NULL, s->cfg.balance, &c->plan);
}
