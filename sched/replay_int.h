/*
 * replay_int.h - private to sched/replay*.c: the simulated nodes' caches
 * and the replay's statistics helpers.
 */
#ifndef KVFS_SCHED_REPLAY_INT_H
#define KVFS_SCHED_REPLAY_INT_H

#include <stdint.h>

#include "sched/replay.h"
#include "sched/tab.h"

#define SIM_NIL UINT32_MAX

/* ---- a node's block cache (replay_cache.c) ----------------------------- */

/*
 * Evicts as kvstore does (kvstore/store.h): LRU over two lists, leaves
 * (no cached chain child) before inner blocks, and a block that changes
 * list keeps its age.  Lists run MRU (head) to LRU (tail).  Nothing is
 * pinned in the replay, so a victim is always a leaf in practice; the
 * inner list is there so a parent is never freed under its children.
 */
struct sim_ent {
	uint64_t key;
	uint64_t last_use;
	uint32_t parent;     /* entry of its chain parent, or SIM_NIL */
	uint32_t parent_gen; /* that entry's gen when linked */
	uint32_t gen;	     /* bumped when the entry is freed */
	uint32_t nchild;
	uint32_t prev, next;
	uint8_t list;
};

struct sim_lru {
	uint32_t head, tail;
};

/* what a cache tells the scheduler: op 1 insert, 2 evict */
typedef void (*sim_event_fn)(void *arg, int op, uint64_t key);

struct sim_cache {
	struct sched_tab tab; /* key -> entry */
	struct sim_ent *e;
	uint32_t n, cap, max; /* entries live, allocated, allowed */
	uint32_t free_head;
	struct sim_lru leaf, inner;
	uint64_t tick;
	sim_event_fn event;
	void *event_arg;
};

int sim_cache_init(struct sim_cache *c, uint64_t max, sim_event_fn ev,
		   void *arg);
void sim_cache_release(struct sim_cache *c);
/* how many of keys[0..n) are cached, in order */
uint32_t sim_cache_prefix(const struct sim_cache *c, const uint64_t *keys,
			  uint32_t n);
/* a use of the cached keys[0..n) */
void sim_cache_touch(struct sim_cache *c, const uint64_t *keys, uint32_t n);
/* cache the chain keys[0..n) (at most max of it), evicting as needed;
 * returns evictions, or -ENOMEM */
long sim_cache_put_chain(struct sim_cache *c, const uint64_t *keys, uint32_t n);

/* ---- statistics (replay_stats.c) --------------------------------------- */

/* nearest-rank percentile p (0..1) of v[0..n), sorting v; 0 for n == 0 */
double sim_percentile(double *v, size_t n, double p);
/* mean of the longest ceil(n / 10) of v[0..n) (reorders v); 0 for none:
 * a request's TBT, from all its intervals */
double sim_tbt(float *v, size_t n);

/* the same kept on the fly: heap holds the k largest values pushed so
 * far (a min-heap of *n <= k entries); sim_top_mean is their mean */
void sim_top_push(float *heap, uint32_t *n, uint32_t k, float v);
double sim_top_mean(const float *heap, uint32_t n);

#endif /* KVFS_SCHED_REPLAY_INT_H */
