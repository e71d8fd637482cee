/*
 * replay_cache.c - a simulated node's block cache: LRU, leaves first, as
 * kvstore evicts (replay_int.h).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched/replay_int.h"

enum { LIST_NONE, LIST_LEAF, LIST_INNER };

#define REFILE_WALK 64

int sim_cache_init(struct sim_cache *c, uint64_t max, sim_event_fn ev,
		   void *arg)
{
	if (max == 0 || max >= SIM_NIL)
		return -EINVAL;
	memset(c, 0, sizeof(*c));
	c->max = (uint32_t)max;
	c->free_head = SIM_NIL;
	c->leaf.head = c->leaf.tail = SIM_NIL;
	c->inner.head = c->inner.tail = SIM_NIL;
	c->event = ev;
	c->event_arg = arg;
	return sched_tab_init(&c->tab, 1, max < 4096 ? max : 4096);
}

void sim_cache_release(struct sim_cache *c)
{
	sched_tab_release(&c->tab);
	free(c->e);
	c->e = NULL;
}

static struct sim_lru *lru_of(struct sim_cache *c, uint8_t list)
{
	return list == LIST_LEAF ? &c->leaf : &c->inner;
}

static void lru_del(struct sim_cache *c, uint32_t k)
{
	struct sim_ent *e = &c->e[k];
	struct sim_lru *l = lru_of(c, e->list);

	if (e->prev != SIM_NIL)
		c->e[e->prev].next = e->next;
	else
		l->head = e->next;
	if (e->next != SIM_NIL)
		c->e[e->next].prev = e->prev;
	else
		l->tail = e->prev;
	e->list = LIST_NONE;
}

/* link k into list just before next (toward the head); SIM_NIL: tail */
static void lru_link(struct sim_cache *c, uint8_t list, uint32_t k,
		     uint32_t next)
{
	struct sim_lru *l = lru_of(c, list);
	struct sim_ent *e = &c->e[k];
	uint32_t prev = next != SIM_NIL ? c->e[next].prev : l->tail;

	e->list = list;
	e->prev = prev;
	e->next = next;
	if (prev != SIM_NIL)
		c->e[prev].next = k;
	else
		l->head = k;
	if (next != SIM_NIL)
		c->e[next].prev = k;
	else
		l->tail = k;
}

static uint8_t list_for(const struct sim_ent *e)
{
	return e->nchild ? LIST_INNER : LIST_LEAF;
}

static void touch(struct sim_cache *c, uint32_t k)
{
	struct sim_ent *e = &c->e[k];
	uint8_t list = e->list;

	e->last_use = ++c->tick;
	lru_del(c, k);
	lru_link(c, list, k, lru_of(c, list)->head);
}

/* after nchild crossed zero: the other list, at the place its age calls
 * for (kvstore's lru_refile: a parent whose last child went is about as
 * old as that child and should go soon, not be made young) */
static void refile(struct sim_cache *c, uint32_t k)
{
	struct sim_ent *e = &c->e[k];
	uint8_t want = list_for(e);
	uint32_t cur, next = SIM_NIL;
	int steps = 0;

	if (e->list == want)
		return;
	lru_del(c, k);
	for (cur = lru_of(c, want)->tail;
	     cur != SIM_NIL && c->e[cur].last_use < e->last_use;
	     cur = c->e[cur].prev) {
		if (++steps > REFILE_WALK) {
			lru_link(c, want, k, lru_of(c, want)->head);
			return;
		}
		next = cur;
	}
	lru_link(c, want, k, next);
}

static uint32_t find(const struct sim_cache *c, uint64_t key)
{
	const uint64_t *v = sched_tab_find(&c->tab, key);

	return v ? (uint32_t)*v : SIM_NIL;
}

uint32_t sim_cache_prefix(const struct sim_cache *c, const uint64_t *keys,
			  uint32_t n)
{
	uint32_t i = 0;

	while (i < n && find(c, keys[i]) != SIM_NIL)
		i++;
	return i;
}

void sim_cache_touch(struct sim_cache *c, const uint64_t *keys, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = find(c, keys[i]);

		if (k != SIM_NIL)
			touch(c, k);
	}
}

static void evict_one(struct sim_cache *c)
{
	uint32_t k = c->leaf.tail != SIM_NIL ? c->leaf.tail : c->inner.tail;
	struct sim_ent *e = &c->e[k];

	lru_del(c, k);
	if (e->parent != SIM_NIL && c->e[e->parent].gen == e->parent_gen) {
		struct sim_ent *p = &c->e[e->parent];

		if (--p->nchild == 0)
			refile(c, e->parent);
	}
	sched_tab_del(&c->tab, e->key);
	if (c->event)
		c->event(c->event_arg, 2, e->key);
	e->gen++;
	e->next = c->free_head;
	c->free_head = k;
	c->n--;
}

static int ent_alloc(struct sim_cache *c, uint32_t *out)
{
	uint32_t n;
	struct sim_ent *e;

	if (c->free_head != SIM_NIL) {
		*out = c->free_head;
		c->free_head = c->e[*out].next;
		return 0;
	}
	if (c->cap == c->max)
		return -ENOSPC;
	n = c->cap ? c->cap * 2 : 1024;
	if (n > c->max)
		n = c->max;
	e = realloc(c->e, n * sizeof(*e));
	if (!e)
		return -ENOMEM;
	memset(e + c->cap, 0, (n - c->cap) * sizeof(*e));
	c->e = e;
	*out = c->cap++;
	/* the rest of the new room is handed out from cap up */
	for (uint32_t k = n; k-- > c->cap;) {
		e[k].next = c->free_head;
		c->free_head = k;
	}
	c->cap = n;
	return 0;
}

/* cache key as parent's child (parent SIM_NIL for a chain's first) */
static int put_one(struct sim_cache *c, uint64_t key, uint32_t parent,
		   uint32_t *out)
{
	struct sim_ent *e;
	uint64_t *v;
	uint32_t k;
	int rc;

	rc = ent_alloc(c, &k);
	if (rc < 0)
		return rc;
	rc = sched_tab_get(&c->tab, key, &v);
	if (rc < 0) {
		c->e[k].next = c->free_head;
		c->free_head = k;
		return rc;
	}
	*v = k;
	e = &c->e[k];
	e->key = key;
	e->nchild = 0;
	e->parent = parent;
	e->parent_gen = parent != SIM_NIL ? c->e[parent].gen : 0;
	e->last_use = ++c->tick;
	lru_link(c, LIST_LEAF, k, c->leaf.head);
	if (parent != SIM_NIL && c->e[parent].nchild++ == 0)
		refile(c, parent);
	c->n++;
	if (c->event)
		c->event(c->event_arg, 1, key);
	*out = k;
	return 0;
}

long sim_cache_put_chain(struct sim_cache *c, const uint64_t *keys, uint32_t n)
{
	uint32_t parent = SIM_NIL;
	long evicted = 0;

	/* more than max would evict the chain's own head to fit its tail */
	if (n > c->max)
		n = c->max;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = find(c, keys[i]);
		int rc;

		if (k != SIM_NIL) {
			touch(c, k);
			parent = k;
			continue;
		}
		if (c->n == c->max) {
			evict_one(c);
			evicted++;
			/* the parent is the chain's newest block, never the
			 * LRU victim while an older leaf exists (replay.h) */
			parent = i ? find(c, keys[i - 1]) : SIM_NIL;
		}
		rc = put_one(c, keys[i], parent, &parent);
		if (rc < 0)
			return rc;
	}
	return evicted;
}
