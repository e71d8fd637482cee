/*
 * policy.c - the table of routing policies (sched.h lists them) and
 * lookup by name.
 */
#include "config.h"

#include <string.h>

#include "sched/sched_int.h"

static const struct sched_policy_ops policies[] = {
	{
		.name = "random",
		.summary = "uniform over prefill instances",
		.pick_prefill = sched_pick_random,
	},
	{
		.name = "round-robin",
		.summary = "prefill instances in turn",
		.pick_prefill = sched_pick_round_robin,
	},
	{
		.name = "load",
		.summary = "least queued prefill work",
		.pick_prefill = sched_pick_load,
	},
	{
		.name = "longest-prefix",
		.summary =
			"longest cached prefix on the instance, ties by load",
		.pick_prefill = sched_pick_longest_prefix,
	},
	{
		.name = "cache-aware",
		.summary = "lowest queue + prefill, own cached prefix only",
		.pick_prefill = sched_pick_cache_aware,
	},
	{
		.name = "kvcache-centric",
		.summary =
			"lowest transfer + queue + prefill (Mooncake Alg. 1)",
		.pick_prefill = sched_pick_kvcache_centric,
	},
	{
		.name = "lookahead",
		.summary = "kvcache-centric + in-flight prefixes, predicted "
			   "decode",
		.lookahead = true,
		.pick_prefill = sched_pick_lookahead,
		.pick_decode = sched_decode_predict,
	},
	{
		.name = "queue",
		.summary = "held queues: least work first, SLO guard, "
			   "preemption, stealing, CPP",
		.lookahead = true,
		.held = true,
		.pick_prefill = sched_pick_queue,
		.pick_decode = sched_decode_predict,
	},
};

#define NPOLICIES (sizeof(policies) / sizeof(policies[0]))

const struct sched_policy_ops *sched_policy_find(const char *name)
{
	for (size_t i = 0; name && i < NPOLICIES; i++)
		if (!strcmp(policies[i].name, name))
			return &policies[i];
	return NULL;
}

size_t sched_policy_count(void)
{
	return NPOLICIES;
}

const struct sched_policy_ops *sched_policy_at(size_t i)
{
	return i < NPOLICIES ? &policies[i] : NULL;
}

const char *sched_policy_name(const struct sched_policy_ops *p)
{
	return p->name;
}

const char *sched_policy_summary(const struct sched_policy_ops *p)
{
	return p->summary;
}

bool sched_policy_held(const struct sched_policy_ops *p)
{
	return p && p->held;
}
