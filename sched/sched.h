/*
 * sched.h - the conductor's scheduling core: the global block-locality
 * index, instance load, TTFT/TBT estimates, routing policies and early
 * rejection.  `kvconductor replay` drives it from a trace and a simulated
 * clock; the conductor daemon will drive it from HTTP requests, kvfsd
 * block events (event.h) and engine completions, with the same calls.
 *
 * A cluster, as the scheduler sees it:
 *
 *   - nodes 0..nnodes-1, each a kvfsd with a DRAM pool; block events say
 *     which node holds which block;
 *   - prefill instances, one per node for now (prefill i on node i unless
 *     told), each serving its queue first come, first served;
 *   - decode instances, each running continuous batching.
 *
 * A request's life:
 *
 *   sched_schedule()      pick (prefill, decode) or reject; on accept the
 *                         request is queued on the prefill instance's
 *                         books and gets an id
 *   sched_prefill_done()  its prefill ended (first token): it leaves the
 *                         prefill queue and starts decoding
 *   sched_complete()      its last token, or it was cancelled in either
 *                         phase: the scheduler forgets it
 *
 * Times are seconds on any clock that does not jump (the daemon's
 * CLOCK_MONOTONIC, the replay's simulated time), passed by the caller, so
 * the core never reads a clock and replays are deterministic.
 *
 * Threads: none inside, and no locks: the owner serialises every call on
 * one struct sched (the daemon from its event loop).
 *
 * Every call returns 0 (or a count) or a negative errno and never sets
 * errno.  A decision is never an error: a rejection is a verdict in the
 * decision.
 */
#ifndef KVFS_SCHED_H
#define KVFS_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sched/cost.h"
#include "src/common/hash.h"

/* ---- configuration ----------------------------------------------------- */

enum sched_reject_mode {
	SCHED_REJECT_OFF = 0, /* admit every request */
	SCHED_REJECT_EARLY,   /* by the decode load at arrival */
	SCHED_REJECT_PREDICT, /* by the decode load predicted for the
			       * moment the request's prefill ends */
};

/*
 * What a config file sets (`kvconductor fit` writes one; replay and the
 * daemon read one with --config).  kvconductor(8) lists the keys.
 */
struct sched_config {
	struct sched_cost cost;
	double slo_ttft; /* s; default 30 */
	double slo_tbt;	 /* s; default 0.1 */
	/* kvcache-centric: fetch the best remote prefix when it is longer
	 * than the local one by more than this factor (Algorithm 1's
	 * kvcache_balancing_threshold; default 1: whenever longer) */
	double balance;
	enum sched_reject_mode reject;
	/* the queue policy (held.c): preemption points every this many
	 * prompt tokens (0: none); a request goes first once it has waited
	 * guard * slo_ttft less its own work; idle instances steal (0/1);
	 * CPP splits a prefill estimated over cpp_threshold s over up to
	 * cpp_max idle instances, at cpp_eff of a perfect split */
	uint32_t chunk_tokens;
	double guard;
	uint32_t steal;
	double cpp_threshold;
	uint32_t cpp_max;
	double cpp_eff;
};

#define SCHED_DEF_SLO_TTFT 30.0
#define SCHED_DEF_SLO_TBT 0.1
#define SCHED_DEF_BALANCE 1.0
#define SCHED_DEF_CHUNK_TOKENS 4096
#define SCHED_DEF_GUARD 0.75
#define SCHED_DEF_CPP_THRESHOLD 4.0
#define SCHED_DEF_CPP_MAX 4
#define SCHED_DEF_CPP_EFF 0.9
#define SCHED_CPP_LIMIT 8 /* cpp_max at most */

void sched_config_default(struct sched_config *c);
/* -EINVAL (msg says which field) for values no scheduler can use */
int sched_config_check(const struct sched_config *c, const char **msg);

/*
 * Read a config file on top of c: "key = value" lines, '#' comments.  An
 * unknown key, a bad value or a line that is not key = value is -EINVAL
 * with err set to "PATH:LINE: why"; c is then unchanged.  -ENOENT etc.
 * when the file cannot be read (err says so too).
 */
int sched_config_load(struct sched_config *c, const char *path, char *err,
		      size_t errlen);

/* every key, one a line, values exact (%.17g); header: comment lines
 * written first, each prefixed "# " (may be NULL).  -EIO on a short
 * write. */
int sched_config_write(const struct sched_config *c, const char *header,
		       FILE *f);

/* one "key=value" (a config file's key) on top of c, checked as a file
 * is; -EINVAL with err saying why, c then unchanged */
int sched_config_set(struct sched_config *c, const char *kv, char *err,
		     size_t errlen);

/* "off", "early", "predict" <-> the mode; -EINVAL for another name */
int sched_reject_parse(const char *name, enum sched_reject_mode *out);
const char *sched_reject_name(enum sched_reject_mode m);

/* ---- policies ---------------------------------------------------------- */

/*
 * A routing policy.  Policies are static tables inside sched/; a caller
 * only names one.  In table order:
 *
 *   random          uniform over prefill instances
 *   round-robin     in turn
 *   load            least queued work
 *   longest-prefix  longest cached prefix on the instance, ties by load
 *   cache-aware     lowest queue + prefill, counting only the instance's
 *                   own cached prefix
 *   kvcache-centric Mooncake's Algorithm 1: lowest transfer + queue +
 *                   prefill over all instances, fetching the best remote
 *                   prefix when it beats the local one (config balance)
 *   lookahead       ours: kvcache-centric that also counts the blocks that
 *                   requests already queued on an instance will have
 *                   written when this one starts there, and picks the
 *                   decode instance by its load predicted for the end of
 *                   the prefill
 *   queue           ours: conductor-held queues (held.c), shortest
 *                   remaining work first with an SLO guard, chunk
 *                   preemption, stealing and CPP; an instance learns its
 *                   next request from sched_next()
 */
struct sched_policy_ops;

/* NULL for an unknown name */
const struct sched_policy_ops *sched_policy_find(const char *name);
size_t sched_policy_count(void);
/* i < sched_policy_count(), in table order */
const struct sched_policy_ops *sched_policy_at(size_t i);
const char *sched_policy_name(const struct sched_policy_ops *p);
const char *sched_policy_summary(const struct sched_policy_ops *p);
/* the conductor holds the queues: accepted requests wait until an idle
 * instance asks sched_next() */
bool sched_policy_held(const struct sched_policy_ops *p);

/* ---- the scheduler ----------------------------------------------------- */

#define SCHED_MAX_INSTANCES 256

struct sched_setup {
	uint32_t nprefill;	      /* 1..SCHED_MAX_INSTANCES */
	uint32_t ndecode;	      /* 1..SCHED_MAX_INSTANCES */
	const uint32_t *prefill_node; /* [nprefill]; NULL: node i */
	const uint32_t *decode_node;  /* [ndecode]; NULL: nprefill + j */
	uint32_t nnodes;	      /* 0: one past the highest node named */
	size_t expect_blocks;	      /* index sizing hint; 0: 65536 */
	uint64_t seed;		      /* of the random policy */
};

struct sched;

/* cfg and su are copied.  -EINVAL (bad setup or config), -ENOMEM */
int sched_create(const struct sched_config *cfg, const struct sched_setup *su,
		 const struct sched_policy_ops *policy, struct sched **out);
void sched_destroy(struct sched *s);

const struct sched_config *sched_get_config(const struct sched *s);
/* nodes of the index: su->nnodes, or one past the highest node named */
uint32_t sched_nnodes(const struct sched *s);

/* ---- block events ------------------------------------------------------ */

/* index key of a kvfs v1 block name: its first 8 bytes, little-endian
 * (why 64 bits suffice: locality.h) */
static inline uint64_t sched_key_from_hash(const uint8_t h[KVFS_HASH_LEN])
{
	uint64_t k = 0;

	for (int i = 7; i >= 0; i--)
		k = k << 8 | h[i];
	return k;
}

/* node now holds / dropped the block: 1 news, 0 nothing changed,
 * -EINVAL (node out of range), -ENOMEM */
int sched_block_insert(struct sched *s, uint32_t node, uint64_t key);
int sched_block_evict(struct sched *s, uint32_t node, uint64_t key);
/* node lost everything (restart, or a gap in its event stream): blocks
 * dropped, or -EINVAL/-ENOMEM.  O(index), rare. */
long sched_node_reset(struct sched *s, uint32_t node);

size_t sched_blocks(const struct sched *s);
uint64_t sched_node_blocks(const struct sched *s, uint32_t node);
/* node holds key, as far as the index knows (false for a node out of
 * range) */
bool sched_block_held(const struct sched *s, uint32_t node, uint64_t key);

/* ---- requests ---------------------------------------------------------- */

struct sched_req {
	const uint64_t *keys; /* keys of the prompt's full blocks, in chain
			       * order; only read during the call */
	uint32_t nkeys;
	uint64_t input_tokens;	/* prompt tokens, >= nkeys * block_tokens */
	uint64_t output_tokens; /* expected generated tokens (>= 1) */
};

enum sched_verdict {
	SCHED_ACCEPT = 0,
	SCHED_REJECT_TTFT, /* no prefill instance meets the TTFT SLO */
	SCHED_REJECT_TBT,  /* no decode instance meets the TBT SLO */
};

struct sched_decision {
	enum sched_verdict verdict;
	uint64_t id;	  /* handle for the calls below; 0 if rejected */
	uint32_t prefill; /* prefill instance */
	uint32_t decode;  /* decode instance */
	/* prefix blocks the prefill node will hold when the request starts
	 * there (cached now, or written by requests queued ahead of it) */
	uint32_t local_blocks;
	uint32_t reuse_blocks; /* prefix blocks not recomputed */
	uint32_t xfer_blocks;  /* of those, fetched from src_node first */
	uint32_t src_node;     /* SCHED_NO_NODE when nothing is fetched */
	double est_queue;      /* s: queue wait on the prefill instance */
	double est_xfer;       /* s: fetching xfer_blocks */
	double est_prefill;    /* s: computing the rest */
	double est_ttft;       /* s: the three above */
	double est_tbt;	       /* s: decode step time when it joins */
	bool held; /* queued on the conductor: sched_next dispatches it */
};

#ifndef SCHED_NO_NODE
#define SCHED_NO_NODE UINT32_MAX
#endif

/*
 * Decide where r runs, at time now.  Returns 0 with *d filled (accepted
 * or rejected), or -EINVAL (keys NULL with nkeys > 0, zero input) or
 * -ENOMEM (nothing was committed).
 */
int sched_schedule(struct sched *s, const struct sched_req *r, double now,
		   struct sched_decision *d);

/*
 * sched_schedule() with each node's cached prefix given, lens[node] for
 * node < sched_nnodes(s), instead of read from the index: for a baseline
 * that finds the prefixes its own way (`kvconductor bench` scans every
 * node's block list) and must then decide exactly as the index path
 * does.  -EINVAL also for lookahead policies, whose decision needs the
 * in-flight index too.
 */
int sched_schedule_lens(struct sched *s, const struct sched_req *r,
			const uint32_t *lens, double now,
			struct sched_decision *d);

/* the prefill of id ended at now; -ENOENT for an unknown or finished id,
 * -EALREADY when it was reported before */
int sched_prefill_done(struct sched *s, uint64_t id, double now);

/* id finished decoding, or was cancelled in either phase; -ENOENT */
int sched_complete(struct sched *s, uint64_t id, double now);

/*
 * Forget, as sched_complete would, every request whose last call
 * (sched_schedule, or sched_prefill_done) is ttl or more seconds before
 * now: an engine that died, or a client that never reports, must not
 * hold an instance's books for ever.  Their ids then answer -ENOENT.
 * Returns how many went.  O(records ever live at once); the daemon calls
 * it about once a second.
 */
uint64_t sched_expire(struct sched *s, double now, double ttl);

/* ---- held queues (policies with sched_policy_held) -------------------- */

/* what an idle instance runs next */
struct sched_dispatch {
	uint64_t id;
	uint32_t prefill; /* the instance that asked, inst[0] */
	uint32_t decode;
	uint32_t ninst; /* instances of the pipeline; 1: no CPP */
	uint32_t inst[SCHED_CPP_LIMIT];
	uint32_t local_blocks, reuse_blocks, xfer_blocks;
	uint32_t src_node;     /* SCHED_NO_NODE when nothing is fetched */
	uint64_t done_tokens;  /* computed before it yielded, kept there */
	uint32_t chunk_tokens; /* report progress every this many; 0 none */
	bool stolen;	       /* it was queued on another instance */
	double est_service;    /* s: fetch + prefill (split when CPP) */
};

/*
 * Instance i is idle at now: 1 and *out when a request is dispatched to
 * it (from its own queue, or stolen from another's; with CPP every
 * instance of out->inst is busy with it too), 0 when nothing can run
 * there, -EINVAL (i out of range, or not a held policy), -EBUSY (i is
 * running a request).
 */
int sched_next(struct sched *s, uint32_t i, double now,
	       struct sched_dispatch *out);

/*
 * The prefill of id has computed done prompt tokens (a chunk boundary):
 * 0 continue, 1 yield (a shorter request waits; id is queued again on the
 * same instance, whose computed tokens it keeps, and the instance is
 * idle), -ENOENT, -EINVAL (not running).
 */
int sched_progress(struct sched *s, uint64_t id, uint64_t done, double now);

/* ---- load, for status pages and tests ---------------------------------- */

struct sched_load {
	uint32_t nprefill, ndecode;
	uint64_t accepted, rejected_ttft, rejected_tbt, live;
};

void sched_get_load(const struct sched *s, struct sched_load *l);
/* estimated queue wait of prefill instance i at now, s */
double sched_prefill_queue(const struct sched *s, uint32_t i, double now);
/* requests decoding on decode instance j now */
uint32_t sched_decode_batch(const struct sched *s, uint32_t j);

#endif /* KVFS_SCHED_H */
