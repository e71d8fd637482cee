/*
 * flight.c - the in-flight index: blocks that queued requests will have
 * written on their prefill node (sched_int.h).
 */
#include "config.h"

#include <errno.h>

#include "sched/sched_int.h"

/* one counter per (block, node); the xor keeps the key space of one node
 * disjoint from another's for the small ids of traces, and the table
 * mixes the result */
static uint64_t cnt_key(uint64_t key, uint32_t node)
{
	return key ^ ((uint64_t)(node + 1) * 0x9e3779b97f4a7c15ull);
}

static void flight_drop(struct sched *s, uint32_t node, uint64_t key)
{
	uint64_t *cnt = sched_tab_find(&s->flight_cnt, cnt_key(key, node));

	if (!cnt)
		return;
	if (--*cnt)
		return;
	sched_tab_del_val(&s->flight_cnt, cnt);
	sched_index_evict(s->flight, node, key);
}

int sched_flight_add(struct sched *s, uint32_t node, const uint64_t *keys,
		     uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint64_t *cnt = NULL;
		int rc = sched_tab_get(&s->flight_cnt, cnt_key(keys[i], node),
				       &cnt);

		if (rc == 1)
			rc = sched_index_insert(s->flight, node, keys[i]);
		if (rc < 0) {
			/* undo this one (a fresh count is still 0) and the
			 * ones before it */
			if (cnt && *cnt == 0)
				sched_tab_del(&s->flight_cnt,
					      cnt_key(keys[i], node));
			sched_flight_del(s, node, keys, i);
			return rc;
		}
		++*cnt;
	}
	return 0;
}

void sched_flight_del(struct sched *s, uint32_t node, const uint64_t *keys,
		      uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		flight_drop(s, node, keys[i]);
}
