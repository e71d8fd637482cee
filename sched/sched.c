/*
 * sched.c - the scheduler's life, block events and load (sched.h).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched_int.h"

#define DEF_EXPECT_BLOCKS 65536
#define FLIGHT_EXPECT 4096

static int setup_check(const struct sched_setup *su, uint32_t *nnodes)
{
	uint32_t top = 0;

	if (su->nprefill == 0 || su->nprefill > SCHED_MAX_INSTANCES ||
	    su->ndecode == 0 || su->ndecode > SCHED_MAX_INSTANCES)
		return -EINVAL;
	for (uint32_t i = 0; i < su->nprefill; i++) {
		uint32_t n = su->prefill_node ? su->prefill_node[i] : i;

		top = n + 1 > top ? n + 1 : top;
	}
	for (uint32_t j = 0; j < su->ndecode; j++) {
		uint32_t n =
			su->decode_node ? su->decode_node[j] : su->nprefill + j;

		top = n + 1 > top ? n + 1 : top;
	}
	if (su->nnodes && su->nnodes < top)
		return -EINVAL;
	*nnodes = su->nnodes ? su->nnodes : top;
	return *nnodes <= SCHED_MAX_NODES ? 0 : -EINVAL;
}

static void instances_init(struct sched *s, const struct sched_setup *su)
{
	for (uint32_t i = 0; i < s->nprefill; i++) {
		s->pf[i].node = su->prefill_node ? su->prefill_node[i] : i;
		s->pf[i].hhead = REC_NIL;
		s->pf[i].run = REC_NIL;
	}
	for (uint32_t j = 0; j < s->ndecode; j++) {
		s->dc[j].node =
			su->decode_node ? su->decode_node[j] : su->nprefill + j;
		s->dc[j].head = REC_NIL;
	}
}

static int alloc_books(struct sched *s)
{
	s->pf = calloc(s->nprefill, sizeof(*s->pf));
	s->dc = calloc(s->ndecode, sizeof(*s->dc));
	s->lens = calloc(s->nnodes, sizeof(*s->lens));
	s->ahead = calloc(s->nnodes, sizeof(*s->ahead));
	if (!s->pf || !s->dc || !s->lens || !s->ahead)
		return -ENOMEM;
	return 0;
}

static void free_books(struct sched *s)
{
	free(s->pf);
	free(s->dc);
	free(s->lens);
	free(s->ahead);
}

static int flight_init(struct sched *s)
{
	int rc = sched_index_create(s->nnodes, FLIGHT_EXPECT, &s->flight);

	if (rc < 0)
		return rc;
	rc = sched_tab_init(&s->flight_cnt, 1, FLIGHT_EXPECT);
	if (rc < 0) {
		sched_index_destroy(s->flight);
		s->flight = NULL;
	}
	return rc;
}

int sched_create(const struct sched_config *cfg, const struct sched_setup *su,
		 const struct sched_policy_ops *policy, struct sched **out)
{
	struct sched *s;
	uint32_t nnodes;
	int rc;

	if (!cfg || !su || !policy || sched_config_check(cfg, NULL) < 0 ||
	    setup_check(su, &nnodes) < 0)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	s->pol = policy;
	s->nprefill = su->nprefill;
	s->ndecode = su->ndecode;
	s->nnodes = nnodes;
	s->rng = su->seed;
	s->free_head = REC_NIL;
	s->load.nprefill = s->nprefill;
	s->load.ndecode = s->ndecode;
	rc = alloc_books(s);
	if (rc < 0)
		goto out_free_books;
	instances_init(s, su);
	rc = sched_index_create(nnodes,
				su->expect_blocks ? su->expect_blocks
						  : DEF_EXPECT_BLOCKS,
				&s->ix);
	if (rc < 0)
		goto out_free_books;
	if (policy->lookahead) {
		rc = flight_init(s);
		if (rc < 0)
			goto out_destroy_index;
	}
	*out = s;
	return 0;

out_destroy_index:
	sched_index_destroy(s->ix);
out_free_books:
	free_books(s);
	free(s);
	return rc;
}

void sched_destroy(struct sched *s)
{
	if (!s)
		return;
	for (uint32_t k = 0; k < s->nrec; k++) {
		free(s->rec[k].keys);
		free(s->rec[k].all);
	}
	free(s->rec);
	if (s->flight) {
		sched_index_destroy(s->flight);
		sched_tab_release(&s->flight_cnt);
	}
	sched_index_destroy(s->ix);
	free_books(s);
	free(s);
}

const struct sched_config *sched_get_config(const struct sched *s)
{
	return &s->cfg;
}

uint32_t sched_nnodes(const struct sched *s)
{
	return s->nnodes;
}

/* ---- block events ------------------------------------------------------ */

int sched_block_insert(struct sched *s, uint32_t node, uint64_t key)
{
	return sched_index_insert(s->ix, node, key);
}

int sched_block_evict(struct sched *s, uint32_t node, uint64_t key)
{
	return sched_index_evict(s->ix, node, key);
}

long sched_node_reset(struct sched *s, uint32_t node)
{
	return sched_index_reset_node(s->ix, node);
}

size_t sched_blocks(const struct sched *s)
{
	return sched_index_blocks(s->ix);
}

uint64_t sched_node_blocks(const struct sched *s, uint32_t node)
{
	return sched_index_node_blocks(s->ix, node);
}

bool sched_block_held(const struct sched *s, uint32_t node, uint64_t key)
{
	return sched_index_holds(s->ix, node, key);
}

/* ---- load -------------------------------------------------------------- */

void sched_get_load(const struct sched *s, struct sched_load *l)
{
	*l = s->load;
}

double sched_prefill_queue(const struct sched *s, uint32_t i, double now)
{
	return i < s->nprefill ? sched_queue_at(s, i, now) : 0;
}

uint32_t sched_decode_batch(const struct sched *s, uint32_t j)
{
	return j < s->ndecode ? s->dc[j].running : 0;
}
