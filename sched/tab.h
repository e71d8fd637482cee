/*
 * tab.h - private to sched/: an open-addressing hash table from 64-bit
 * keys to values of `width` 64-bit words, under the locality index, the
 * in-flight index and the replay's node caches.
 *
 * Layout: one array of cap slots of (1 + width) words, key first, so a
 * probe reads the key and its value from one cache line (width <= 3).
 * Keys are stored mixed by sched_tab_mix(), a bijection, which spreads
 * sequential trace ids as well as SHA-256 prefixes; a key's home slot is
 * the low bits of its mix.  A stored 0 marks an empty slot, so the one
 * key whose mix is 0 is filed as if its mix were 1: those two keys share
 * an entry (a 2^-64 chance per pair of SHA-256 prefixes; in the index it
 * would only misestimate a prefix, see locality.h).
 *
 * Linear probing with backward-shift deletion: no tombstones, so probe
 * chains are as short after a million evictions as after none.  The
 * table doubles when it would pass half full, and never shrinks.
 *
 * Not thread-safe: the owner serialises every call.
 */
#ifndef KVFS_SCHED_TAB_H
#define KVFS_SCHED_TAB_H

#include <stddef.h>
#include <stdint.h>

struct sched_tab {
	uint64_t *slot;	 /* cap * stride words */
	size_t cap;	 /* power of two */
	size_t n;	 /* keys held */
	uint32_t width;	 /* value words per key, 1..8 */
	uint32_t stride; /* 1 + width */
};

/* splitmix64's finalizer: a bijection on 64 bits, 0 stays 0 */
static inline uint64_t sched_tab_mix(uint64_t k)
{
	k ^= k >> 30;
	k *= 0xbf58476d1ce4e5b9ull;
	k ^= k >> 27;
	k *= 0x94d049bb133111ebull;
	k ^= k >> 31;
	return k ? k : 1;
}

/* room for expect keys without growing; -EINVAL for width 0 or > 8 */
int sched_tab_init(struct sched_tab *t, uint32_t width, size_t expect);
void sched_tab_release(struct sched_tab *t);

/* the slot a mixed key starts its probe at, for prefetching */
static inline const uint64_t *sched_tab_home(const struct sched_tab *t,
					     uint64_t mk)
{
	return t->slot + (mk & (t->cap - 1)) * t->stride;
}

/* value of mixed key mk, or NULL */
static inline uint64_t *sched_tab_find_mixed(const struct sched_tab *t,
					     uint64_t mk)
{
	size_t m = t->cap - 1;
	size_t i = mk & m;

	for (;;) {
		uint64_t *s = t->slot + i * t->stride;

		if (s[0] == mk)
			return s + 1;
		if (s[0] == 0)
			return NULL;
		i = (i + 1) & m;
	}
}

static inline uint64_t *sched_tab_find(const struct sched_tab *t, uint64_t key)
{
	return sched_tab_find_mixed(t, sched_tab_mix(key));
}

/*
 * Value of key, added zeroed when absent: 1 added, 0 found, -ENOMEM
 * (growing failed; the table is unchanged).  *val stays valid until the
 * next add or delete.
 */
int sched_tab_get(struct sched_tab *t, uint64_t key, uint64_t **val);

/* remove key; 0, or -ENOENT when absent */
int sched_tab_del(struct sched_tab *t, uint64_t key);
/* remove the key whose value val is (from a find or get just before) */
void sched_tab_del_val(struct sched_tab *t, uint64_t *val);

/*
 * Call fn on every value; fn returns 1 to delete that key, 0 to keep it.
 * Deleting while walking a linear-probe table would move keys behind the
 * walk, so kept keys are refiled into a fresh array of the same size:
 * O(cap), for rare whole-table work (a node's reset), never per request.
 * -ENOMEM leaves the table unchanged and fn uncalled.
 */
int sched_tab_filter(struct sched_tab *t, int (*fn)(uint64_t *val, void *arg),
		     void *arg);

#endif /* KVFS_SCHED_TAB_H */
