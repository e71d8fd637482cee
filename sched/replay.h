/*
 * replay.h - discrete-event replay of a Mooncake-format trace through the
 * scheduling core (sched.h), for `kvconductor replay`.
 *
 * The simulated cluster:
 *
 *   - prefill instance i on node i, serving its queue in order; a
 *     request's service there is: fetch the planned remote blocks the
 *     node lacks when it starts (if their source still holds them), then
 *     prefill the rest, both timed by the cost model (cost.h).  What the
 *     node holds is read when the request starts, not when it was
 *     scheduled: blocks written meanwhile count, evicted ones do not;
 *   - each node caches at most cache_blocks blocks and evicts as kvstore
 *     does: LRU, leaves first (a block whose chain child is cached goes
 *     after the leaves); every insert and evict is fed to the scheduler
 *     as a block event, as kvfsd would send it;
 *   - when a prefill ends, the prompt's full blocks are cached on its
 *     node, its first token is out (TTFT), and it joins its decode
 *     instance at the next step boundary; the KV copy to the decode
 *     instance is taken as overlapped with the prefill (Mooncake streams
 *     it layer by layer);
 *   - a decode instance runs continuous batching: a step over B requests
 *     holding C context tokens lasts step(B, C); every request in it gets
 *     one token.
 *
 * The replay's clock is the cost model itself, so the scheduler's
 * estimates are wrong only where it cannot know: future arrivals,
 * evictions, and blocks written while a request waited.
 *
 * TBT of a request: the mean of the longest 10% of its token intervals
 * (at least one); the first interval runs from the first token to the
 * end of its first decode step.  Percentiles are nearest-rank.
 */
#ifndef KVFS_SCHED_REPLAY_H
#define KVFS_SCHED_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sched/sched.h"

/* a trace in memory, in arrival order (stable: equal times keep their
 * line order) */
struct sched_trace {
	size_t n;
	double *arrival;  /* s after the first line's timestamp */
	uint64_t *input;  /* tokens */
	uint64_t *output; /* tokens, 0 read as 1 */
	size_t *first;	  /* request i's keys: keys[first[i]..] */
	uint32_t *nkeys;  /* its full blocks */
	uint64_t *keys;	  /* hash_ids of full blocks only */
	uint64_t skipped; /* bad lines skipped (skip_bad) */
};

/*
 * Read a trace with the shared reader (src/trace.h).  A bad line is
 * -EINVAL with err "PATH:LINE: why", unless skip_bad, when it is counted
 * in t->skipped.  -ENOMEM, or the reader's errno (err says so).
 */
int sched_trace_load(const char *path, bool skip_bad, struct sched_trace *t,
		     char *err, size_t errlen);
void sched_trace_free(struct sched_trace *t);

struct sched_replay_opts {
	const struct sched_config *cfg;
	const struct sched_policy_ops *policy;
	uint32_t nprefill;
	uint32_t ndecode;
	uint64_t cache_blocks; /* per node, >= 1 */
	double speed;	       /* arrivals this many times faster, > 0 */
	uint64_t seed;	       /* random policy */
	/* called about every 1/64 of the requests; may be NULL */
	void (*progress)(void *arg, size_t done, size_t total);
	void *progress_arg;
};

struct sched_replay_result {
	char policy[32];
	uint64_t requests; /* in the trace */
	uint64_t served;
	uint64_t rejected, rejected_ttft, rejected_tbt;
	uint64_t blocks;     /* full blocks of served prompts */
	uint64_t hit_local;  /* of those, on the prefill node at start */
	uint64_t hit_remote; /* fetched from another node */
	uint64_t evictions;
	double hit_rate; /* (hit_local + hit_remote) / blocks */
	double ttft_mean, ttft_p50, ttft_p90, ttft_p99; /* s, served */
	double ttft_max;
	double speed;			  /* the run's */
	double tbt_p50, tbt_p90, tbt_p99; /* s, served with >= 2 tokens */
	uint64_t slo_met;		  /* TTFT and TBT both within SLO */
	double attainment;		  /* slo_met / requests */
	double span;	     /* s of simulated time, first arrival to
			      * last token */
	double arrival_span; /* s from first to last arrival */
	double capacity;     /* slo_met / arrival_span, req/s */
	double cpu_s;	     /* CPU time of the replay */
	double wall_s;
};

/* -EINVAL (bad options), -ENOMEM, or a scheduler error */
int sched_replay_run(const struct sched_trace *t,
		     const struct sched_replay_opts *o,
		     struct sched_replay_result *r);

#endif /* KVFS_SCHED_REPLAY_H */
