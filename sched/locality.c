/*
 * locality.c - the block-locality index (locality.h).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched/locality.h"
#include "sched/tab.h"

struct sched_index {
	struct sched_tab tab; /* key -> holder bitmap of nwords */
	uint32_t nnodes;
	uint32_t nwords;
	uint64_t *node_blocks; /* [nnodes] */
};

/* keys whose slots are prefetched together: enough misses in flight to
 * hide DRAM latency, few enough that a short match wastes little */
#define PREFIX_BATCH 16

int sched_index_create(uint32_t nnodes, size_t expect_blocks,
		       struct sched_index **out)
{
	struct sched_index *ix;
	int rc;

	if (nnodes == 0 || nnodes > SCHED_MAX_NODES)
		return -EINVAL;
	ix = calloc(1, sizeof(*ix));
	if (!ix)
		return -ENOMEM;
	ix->nnodes = nnodes;
	ix->nwords = (nnodes + 63) / 64;
	ix->node_blocks = calloc(nnodes, sizeof(*ix->node_blocks));
	if (!ix->node_blocks) {
		rc = -ENOMEM;
		goto out_free_ix;
	}
	rc = sched_tab_init(&ix->tab, ix->nwords, expect_blocks);
	if (rc < 0)
		goto out_free_counts;
	*out = ix;
	return 0;

out_free_counts:
	free(ix->node_blocks);
out_free_ix:
	free(ix);
	return rc;
}

void sched_index_destroy(struct sched_index *ix)
{
	if (!ix)
		return;
	sched_tab_release(&ix->tab);
	free(ix->node_blocks);
	free(ix);
}

uint32_t sched_index_nodes(const struct sched_index *ix)
{
	return ix->nnodes;
}

int sched_index_insert(struct sched_index *ix, uint32_t node, uint64_t key)
{
	uint64_t bit = 1ull << (node & 63);
	uint64_t *m;
	int rc;

	if (node >= ix->nnodes)
		return -EINVAL;
	rc = sched_tab_get(&ix->tab, key, &m);
	if (rc < 0)
		return rc;
	if (m[node / 64] & bit)
		return 0;
	m[node / 64] |= bit;
	ix->node_blocks[node]++;
	return 1;
}

static bool mask_empty(const uint64_t *m, uint32_t nwords)
{
	for (uint32_t w = 0; w < nwords; w++)
		if (m[w])
			return false;
	return true;
}

int sched_index_evict(struct sched_index *ix, uint32_t node, uint64_t key)
{
	uint64_t bit = 1ull << (node & 63);
	uint64_t *m;

	if (node >= ix->nnodes)
		return -EINVAL;
	m = sched_tab_find(&ix->tab, key);
	if (!m || !(m[node / 64] & bit))
		return 0;
	m[node / 64] &= ~bit;
	ix->node_blocks[node]--;
	if (mask_empty(m, ix->nwords))
		sched_tab_del_val(&ix->tab, m);
	return 1;
}

struct reset_arg {
	uint32_t node;
	uint32_t nwords;
	long dropped;
};

static int reset_one(uint64_t *m, void *arg)
{
	struct reset_arg *a = arg;
	uint64_t bit = 1ull << (a->node & 63);

	if (m[a->node / 64] & bit) {
		m[a->node / 64] &= ~bit;
		a->dropped++;
	}
	return mask_empty(m, a->nwords);
}

long sched_index_reset_node(struct sched_index *ix, uint32_t node)
{
	struct reset_arg a = { .node = node, .nwords = ix->nwords };
	int rc;

	if (node >= ix->nnodes)
		return -EINVAL;
	if (ix->node_blocks[node] == 0)
		return 0;
	rc = sched_tab_filter(&ix->tab, reset_one, &a);
	if (rc < 0)
		return rc;
	ix->node_blocks[node] = 0;
	return a.dropped;
}

bool sched_index_holds(const struct sched_index *ix, uint32_t node,
		       uint64_t key)
{
	const uint64_t *m;

	if (node >= ix->nnodes)
		return false;
	m = sched_tab_find(&ix->tab, key);
	return m && (m[node / 64] >> (node & 63) & 1);
}

size_t sched_index_blocks(const struct sched_index *ix)
{
	return ix->tab.n;
}

uint64_t sched_index_node_blocks(const struct sched_index *ix, uint32_t node)
{
	return node < ix->nnodes ? ix->node_blocks[node] : 0;
}

/* ---- prefix ------------------------------------------------------------ */

struct walk {
	uint64_t alive[SCHED_NODE_WORDS]; /* still matching */
	uint64_t last[SCHED_NODE_WORDS];  /* alive before the last step */
	uint32_t nwords;
	uint32_t nnodes;
	uint32_t *lens; /* [nnodes] */
	bool done;	/* no node matches any more */
	uint32_t len;	/* the longest, once done */
};

static void walk_init(struct walk *w, uint32_t nnodes, uint32_t *lens)
{
	w->nwords = (nnodes + 63) / 64;
	w->nnodes = nnodes;
	w->lens = lens;
	w->done = false;
	w->len = 0;
	for (uint32_t i = 0; i < w->nwords; i++) {
		uint32_t bits = nnodes - i * 64;

		w->alive[i] = bits >= 64 ? ~0ull : (1ull << bits) - 1;
	}
}

/* block i has holders m (NULL: none): nodes alive but not in m matched
 * i blocks.  last is kept only when this step ends the walk, the one time
 * walk_end reads it, rather than copied at every step */
static void walk_step(struct walk *w, const uint64_t *m, uint32_t i)
{
	bool any = false;

	for (uint32_t k = 0; k < w->nwords; k++)
		any |= (w->alive[k] & (m ? m[k] : 0)) != 0;
	if (!any)
		memcpy(w->last, w->alive, w->nwords * sizeof(uint64_t));
	for (uint32_t k = 0; k < w->nwords; k++) {
		uint64_t mk = m ? m[k] : 0;
		uint64_t drop = w->alive[k] & ~mk;

		while (drop) {
			w->lens[k * 64 + __builtin_ctzll(drop)] = i;
			drop &= drop - 1;
		}
		w->alive[k] &= mk;
	}
	if (!any) {
		w->done = true;
		w->len = i;
	}
}

static uint32_t lowest(const uint64_t *m, uint32_t nwords)
{
	for (uint32_t k = 0; k < nwords; k++)
		if (m[k])
			return k * 64 + __builtin_ctzll(m[k]);
	return SCHED_NO_NODE;
}

/* after the last key: the nodes still alive hold all n */
static uint32_t walk_end(struct walk *w, uint32_t n, uint32_t *best_node)
{
	const uint64_t *holders = w->done ? w->last : w->alive;

	if (!w->done) {
		for (uint32_t k = 0; k < w->nwords; k++)
			for (uint64_t a = w->alive[k]; a; a &= a - 1)
				w->lens[k * 64 + __builtin_ctzll(a)] = n;
		w->len = n;
	}
	if (best_node)
		*best_node =
			w->len ? lowest(holders, w->nwords) : SCHED_NO_NODE;
	return w->len;
}

static void prefetch_batch(const struct sched_tab *a, const struct sched_tab *b,
			   const uint64_t *keys, uint32_t n, uint64_t *mk)
{
	for (uint32_t j = 0; j < n; j++) {
		mk[j] = sched_tab_mix(keys[j]);
		__builtin_prefetch(sched_tab_home(a, mk[j]));
		if (b)
			__builtin_prefetch(sched_tab_home(b, mk[j]));
	}
}

/* the holders of a block in ix or also, into buf */
static const uint64_t *either(const uint64_t *a, const uint64_t *b,
			      uint32_t nwords, uint64_t *buf)
{
	if (!a || !b)
		return a ? a : b;
	for (uint32_t k = 0; k < nwords; k++)
		buf[k] = a[k] | b[k];
	return buf;
}

/* a block in flight on a node w still counts and the index does not
 * hold there: a walk counting in-flight blocks steps otherwise than w */
static bool parts(const struct walk *w, const uint64_t *m, const uint64_t *f)
{
	uint64_t differ = 0;

	for (uint32_t k = 0; k < w->nwords; k++)
		differ |= w->alive[k] & f[k] & ~(m ? m[k] : 0);
	return differ != 0;
}

/* u takes w's place in the walk, and the lengths w wrote so far */
static void walk_fork(struct walk *u, const struct walk *w)
{
	memcpy(u->alive, w->alive, w->nwords * sizeof(uint64_t));
	u->done = w->done;
	u->len = w->len;
	memcpy(u->lens, w->lens, w->nnodes * sizeof(*u->lens));
}

/*
 * u (with in-flight blocks) starts as w's twin and stays one while no key
 * of the prompt is in flight on a node u still counts: both would take
 * the same steps and write the same lengths.  Only w walks then; at the
 * first key where they part, u takes w's state and ulens the lengths
 * written so far, and from there each walks on its own.  Most prompts
 * have nothing in flight, so most walks are one walk, not two.
 */
uint32_t sched_index_prefix2(const struct sched_index *ix,
			     const struct sched_index *also,
			     const uint64_t *keys, uint32_t n, uint32_t *lens,
			     uint32_t *ulens, uint32_t *best_node)
{
	uint64_t mk[PREFIX_BATCH], buf[SCHED_NODE_WORDS];
	uint32_t i = 0, nwords = ix->nwords;
	bool twin = also != NULL;
	struct walk w, u;

	walk_init(&w, ix->nnodes, lens);
	walk_init(&u, ix->nnodes, ulens);
	u.done = !also;
	while (i < n && !(w.done && (twin || u.done))) {
		uint32_t b = n - i < PREFIX_BATCH ? n - i : PREFIX_BATCH;

		prefetch_batch(&ix->tab, also ? &also->tab : NULL, keys + i, b,
			       mk);
		for (uint32_t j = 0; j < b && !(w.done && (twin || u.done));
		     j++, i++) {
			const uint64_t *m =
				sched_tab_find_mixed(&ix->tab, mk[j]);
			const uint64_t *f =
				also ? sched_tab_find_mixed(&also->tab, mk[j])
				     : NULL;

			if (twin && f && parts(&w, m, f)) {
				twin = false;
				walk_fork(&u, &w);
			}
			if (!w.done)
				walk_step(&w, m, i);
			if (!twin && !u.done)
				walk_step(&u, either(m, f, nwords, buf), i);
		}
	}
	if (twin) {
		/* u took every step w took: the same lengths */
		walk_end(&w, n, best_node);
		memcpy(ulens, lens, w.nnodes * sizeof(*ulens));
		return w.len;
	}
	if (also)
		walk_end(&u, n, NULL);
	return walk_end(&w, n, best_node);
}

uint32_t sched_index_prefix(const struct sched_index *ix, const uint64_t *keys,
			    uint32_t n, uint32_t *lens, uint32_t *best_node)
{
	return sched_index_prefix2(ix, NULL, keys, n, lens, NULL, best_node);
}
