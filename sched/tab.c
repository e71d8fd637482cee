/*
 * tab.c - the open-addressing table under sched/'s indexes (tab.h).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sched/tab.h"

#define TAB_MIN_CAP 16
#define TAB_HUGE (2u << 20)

/*
 * Zeroed slot array.  A big one is 2 MiB aligned and asks for huge pages:
 * a decision probes a few hundred random slots of a table of tens of MB,
 * and with 4 KiB pages nearly every probe would miss the TLB too.
 */
static uint64_t *slots_alloc(size_t cap, uint32_t stride)
{
	size_t bytes = cap * stride * sizeof(uint64_t);
	uint64_t *p;

	if (bytes < TAB_HUGE)
		return calloc(cap * stride, sizeof(uint64_t));
	bytes = (bytes + TAB_HUGE - 1) & ~((size_t)TAB_HUGE - 1);
	p = aligned_alloc(TAB_HUGE, bytes);
	if (!p)
		return NULL;
	madvise(p, bytes, MADV_HUGEPAGE);
	memset(p, 0, bytes);
	return p;
}

static size_t cap_for(size_t expect)
{
	size_t cap = TAB_MIN_CAP;

	while (cap / 2 < expect && cap < ((size_t)1 << 40))
		cap <<= 1;
	return cap;
}

int sched_tab_init(struct sched_tab *t, uint32_t width, size_t expect)
{
	if (width == 0 || width > 8)
		return -EINVAL;
	memset(t, 0, sizeof(*t));
	t->width = width;
	t->stride = width + 1;
	t->cap = cap_for(expect);
	t->slot = slots_alloc(t->cap, t->stride);
	return t->slot ? 0 : -ENOMEM;
}

void sched_tab_release(struct sched_tab *t)
{
	free(t->slot);
	t->slot = NULL;
	t->cap = t->n = 0;
}

/* n words: strides are 2..9 words, too short for a memcpy call to pay */
static void copy_words(uint64_t *dst, const uint64_t *src, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		dst[i] = src[i];
}

/* file a (mixed key, value) into an array known to have room */
static uint64_t *place(uint64_t *slot, size_t cap, uint32_t stride,
		       const uint64_t *entry)
{
	size_t m = cap - 1;
	size_t i = entry[0] & m;

	while (slot[i * stride])
		i = (i + 1) & m;
	copy_words(slot + i * stride, entry, stride);
	return slot + i * stride + 1;
}

static int grow(struct sched_tab *t)
{
	size_t cap = t->cap * 2;
	uint64_t *slot = slots_alloc(cap, t->stride);

	if (!slot)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++) {
		const uint64_t *e = t->slot + i * t->stride;

		if (e[0])
			place(slot, cap, t->stride, e);
	}
	free(t->slot);
	t->slot = slot;
	t->cap = cap;
	return 0;
}

int sched_tab_get(struct sched_tab *t, uint64_t key, uint64_t **val)
{
	uint64_t mk = sched_tab_mix(key);
	size_t m = t->cap - 1, i = mk & m;
	uint64_t *s;
	int rc;

	/* one probe finds the key or the empty slot it would take */
	for (;; i = (i + 1) & m) {
		s = t->slot + i * t->stride;
		if (s[0] == mk) {
			*val = s + 1;
			return 0;
		}
		if (s[0] == 0)
			break;
	}
	if ((t->n + 1) * 2 > t->cap) {
		uint64_t entry[9] = { mk };

		rc = grow(t);
		if (rc < 0)
			return rc;
		s = place(t->slot, t->cap, t->stride, entry) - 1;
	} else {
		s[0] = mk;
	}
	t->n++;
	*val = s + 1;
	return 1;
}

/*
 * Backward shift: walk the run after the hole and move back every key
 * whose home does not lie cyclically in (hole, its slot], so every key
 * stays reachable from its home without tombstones.
 */
static void del_at(struct sched_tab *t, size_t hole)
{
	size_t m = t->cap - 1;
	size_t i = hole;

	for (;;) {
		uint64_t *s;
		size_t home;

		i = (i + 1) & m;
		s = t->slot + i * t->stride;
		if (!s[0])
			break;
		home = s[0] & m;
		if (((i - home) & m) < ((i - hole) & m))
			continue;
		copy_words(t->slot + hole * t->stride, s, t->stride);
		hole = i;
	}
	for (uint32_t w = 0; w < t->stride; w++)
		t->slot[hole * t->stride + w] = 0;
	t->n--;
}

void sched_tab_del_val(struct sched_tab *t, uint64_t *val)
{
	del_at(t, (size_t)(val - 1 - t->slot) / t->stride);
}

int sched_tab_del(struct sched_tab *t, uint64_t key)
{
	uint64_t *v = sched_tab_find(t, key);

	if (!v)
		return -ENOENT;
	sched_tab_del_val(t, v);
	return 0;
}

int sched_tab_filter(struct sched_tab *t, int (*fn)(uint64_t *val, void *arg),
		     void *arg)
{
	uint64_t *slot = slots_alloc(t->cap, t->stride);
	size_t n = 0;

	if (!slot)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++) {
		uint64_t *e = t->slot + i * t->stride;

		if (!e[0] || fn(e + 1, arg))
			continue;
		place(slot, t->cap, t->stride, e);
		n++;
	}
	free(t->slot);
	t->slot = slot;
	t->n = n;
	return 0;
}
