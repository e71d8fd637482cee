/*
 * sched_int.h - private to sched/: the scheduler's state, the per-decision
 * context policies read, and the policy ops table.
 *
 * Books kept per instance (all estimates, from the cost model):
 *
 *   prefill  busy_until: when its queue is estimated to drain.  An accept
 *            appends the request's service (transfer + prefill) to it; a
 *            prefill_done resets it to now + the service still queued,
 *            so an estimate that was off does not linger.
 *   decode   running (requests decoding) and their context tokens, for
 *            the step time now; and a list of every request headed there
 *            or decoding, with its predicted decode interval
 *            [pred_start, pred_end), for the step time at a later moment.
 *
 * A request's context, as the decode books count it, is input + output/2:
 * its mean over its decode life.
 *
 * The in-flight index (policies with .lookahead): for each block a queued
 * request will write, the nodes of those requests' prefill instances, and
 * in flight_cnt how many such requests per (block, node), so the bit goes
 * when the last of them is done.  An instance serves its queue in order,
 * so a request placed behind them finds those blocks written when it
 * starts.
 */
#ifndef KVFS_SCHED_INT_H
#define KVFS_SCHED_INT_H

#include "sched/locality.h"
#include "sched/sched.h"
#include "sched/tab.h"

#define REC_NIL UINT32_MAX

enum rec_phase {
	REC_FREE = 0,
	REC_PREFILL,
	REC_DECODE,
};

/* an accepted request until sched_complete */
struct sched_rec {
	uint32_t gen; /* bumped on free: stale ids fail */
	uint8_t phase;
	uint32_t prefill;
	uint32_t decode;
	uint64_t ctx;	   /* context tokens on the decode books */
	uint64_t out;	   /* expected output tokens */
	double service;	   /* est prefill service, s */
	double step;	   /* est decode step when it was placed, s */
	double pred_start; /* predicted decode interval */
	double pred_end;
	double touched; /* last schedule or prefill_done, for sched_expire */
	uint32_t dprev, dnext; /* its decode instance's list */
	uint32_t next_free;
	uint32_t nkeys; /* in-flight blocks (lookahead only) */
	uint64_t *keys;
	/* held policies (held.c) */
	uint8_t hstate;	       /* HELD_* */
	uint8_t ninst;	       /* instances running it (CPP: > 1) */
	bool pinned;	       /* yielded: its computed tokens stay on
				* e->prefill, so it resumes there */
	uint32_t hprev, hnext; /* its instance's held queue */
	uint32_t nall;	       /* the prompt's keys, for late binding */
	uint64_t *all;
	uint64_t input;	     /* prompt tokens */
	uint64_t done;	     /* tokens computed before it yielded */
	uint64_t writer;     /* id of the request writing its prefix */
	uint32_t plan_local; /* blocks it counted on at placement */
	double arrive;	     /* when it was scheduled */
	double work;	     /* est service still to run, s */
};

enum held_state {
	HELD_NONE = 0,
	HELD_QUEUED,
	HELD_RUNNING,
};

struct sched_pf {
	uint32_t node;
	uint32_t queued; /* requests not done with prefill */
	double busy_until;
	double backlog; /* est service of those, s */
	/* held policies: the conductor's queue of this instance (in no
	 * order: the pick scans it) and the request it runs */
	uint32_t hhead;
	uint32_t hn;
	uint32_t run;	/* record, or REC_NIL when idle */
	double run_end; /* its estimated end */
};

struct sched_dc {
	uint32_t node;
	uint32_t running; /* requests decoding */
	uint32_t headed;  /* requests in prefill that will decode here */
	uint64_t ctx;	  /* context tokens of the running ones */
	uint32_t head;	  /* list of running and headed records */
};

struct sched {
	struct sched_config cfg;
	const struct sched_policy_ops *pol;
	uint32_t nprefill, ndecode, nnodes;
	struct sched_pf *pf;
	struct sched_dc *dc;
	struct sched_index *ix;	     /* cached blocks, from events */
	struct sched_index *flight;  /* lookahead: blocks to be written */
	struct sched_tab flight_cnt; /* (block, node) -> requests */
	struct sched_rec *rec;
	uint32_t nrec; /* records allocated */
	uint32_t free_head;
	uint32_t *lens;	 /* [nnodes] scratch: cached prefix */
	uint32_t *ahead; /* [nnodes] scratch: with in-flight */
	uint64_t rng;
	uint32_t rr_next;
	struct sched_load load;
};

/* one way to run a request on a prefill instance, with its estimates */
struct sched_plan {
	uint32_t inst;
	uint32_t local; /* blocks on the node when it starts */
	uint32_t reuse; /* blocks not recomputed */
	uint32_t src;	/* node fetched from, or SCHED_NO_NODE */
	double queue, xfer, prefill, ttft;
};

/* what a policy sees of one decision */
struct sched_ctx {
	const struct sched_req *req;
	double now;
	const uint32_t *lens;	/* [nnodes] cached prefix blocks per node */
	uint32_t best;		/* longest cached prefix on any node */
	uint32_t best_node;	/* a node holding it, SCHED_NO_NODE if 0 */
	const uint32_t *ahead;	/* [nnodes] lookahead only: with in-flight */
	struct sched_plan plan; /* pick_prefill's choice */
	uint32_t decode;	/* pick_decode's choice */
	double tbt;		/* its estimated step time */
	uint64_t writer;	/* held: id of the request writing the
				 * prefix counted in plan.local, or 0 */
};

struct sched_policy_ops {
	const char *name;
	const char *summary; /* one line, for help */
	bool lookahead;	     /* keep the in-flight index, fill ctx->ahead */
	bool held;	     /* the conductor holds the queues (held.c) */
	/* set c->plan with one of the sched_plan_* helpers */
	void (*pick_prefill)(struct sched *s, struct sched_ctx *c);
	/* set c->decode and c->tbt; NULL: sched_decode_now */
	void (*pick_decode)(struct sched *s, struct sched_ctx *c);
};

/* ---- estimates, for policies (estimate.c) ------------------------------ */

double sched_queue_at(const struct sched *s, uint32_t i, double now);

/* instance i, local blocks (the node's cached prefix, or any count the
 * policy trusts to be there at start), no fetch */
void sched_plan_local(const struct sched *s, const struct sched_ctx *c,
		      uint32_t i, uint32_t local, struct sched_plan *p);

/* instance i with local blocks, fetching the best remote prefix when it
 * is longer than local by more than factor balance (Algorithm 1) */
void sched_plan_remote(const struct sched *s, const struct sched_ctx *c,
		       uint32_t i, uint32_t local, double balance,
		       struct sched_plan *p);

/* the lowest-TTFT plan over all instances, locals from lens (NULL: the
 * cached prefix), fetching as sched_plan_remote when balance > 0 */
void sched_plan_min(const struct sched *s, const struct sched_ctx *c,
		    const uint32_t *lens, double balance, struct sched_plan *p);

/* decode step time on instance j if the request joined now, and if it
 * joined at time t by the predicted intervals */
double sched_tbt_now(const struct sched *s, uint32_t j,
		     const struct sched_req *r);
double sched_tbt_at(const struct sched *s, uint32_t j,
		    const struct sched_req *r, double t);

/* the default pick_decode: lowest sched_tbt_now, ties by fewer headed */
void sched_decode_now(struct sched *s, struct sched_ctx *c);
/* lowest sched_tbt_at(now + plan.ttft), ties as above */
void sched_decode_predict(struct sched *s, struct sched_ctx *c);

static inline uint64_t sched_rec_ctx(const struct sched_req *r)
{
	return r->input_tokens + r->output_tokens / 2;
}

/* splitmix64 step, for the random policy */
static inline uint64_t sched_rand(struct sched *s)
{
	uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ---- policies' choices (policy_*.c), listed in policy.c ---------------- */

void sched_pick_random(struct sched *s, struct sched_ctx *c);
void sched_pick_round_robin(struct sched *s, struct sched_ctx *c);
void sched_pick_load(struct sched *s, struct sched_ctx *c);
void sched_pick_longest_prefix(struct sched *s, struct sched_ctx *c);
void sched_pick_cache_aware(struct sched *s, struct sched_ctx *c);
void sched_pick_kvcache_centric(struct sched *s, struct sched_ctx *c);
void sched_pick_lookahead(struct sched *s, struct sched_ctx *c);
void sched_pick_queue(struct sched *s, struct sched_ctx *c);

/* ---- held queues (held.c) ---------------------------------------------- */

uint64_t sched_rec_id(const struct sched *s, uint32_t k);
struct sched_rec *sched_rec_lookup(struct sched *s, uint64_t id, uint32_t *out);
/* request k, just committed on c->plan.inst, joins that queue */
int sched_held_add(struct sched *s, uint32_t k, const struct sched_ctx *c);
/* k leaves the held books (prefill done or cancelled) */
void sched_held_drop(struct sched *s, uint32_t k);
/* the queue policy's estimates, for pick_prefill */
double sched_held_wait(const struct sched *s, uint32_t i, double work,
		       double now, uint32_t *behind);
double sched_held_writer_end(const struct sched *s, uint32_t i,
			     const struct sched_req *r, uint32_t ahead,
			     double now, uint64_t *writer);

/* ---- the in-flight index (flight.c) ------------------------------------ */

int sched_flight_add(struct sched *s, uint32_t node, const uint64_t *keys,
		     uint32_t n);
void sched_flight_del(struct sched *s, uint32_t node, const uint64_t *keys,
		      uint32_t n);

#endif /* KVFS_SCHED_INT_H */
