/*
 * store_match.c - longest cached prefix and the leases that pin it.
 *
 * A lease pins the blocks a match found so that the engine can read them
 * without a race against eviction.  Leases expire on their own: the engine
 * may die, and a dead engine must not pin the pool forever.  Expiry is
 * lazy (every allocation, match and stats call sweeps once the earliest
 * lease is due), so no timer thread is needed.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "src/common/clock.h"
#include "kvstore/store_int.h"

static void lease_unlink(struct kv_store *st, struct lease *l)
{
	if (l->prev)
		l->prev->next = l->next;
	else
		st->leases = l->next;
	if (l->next)
		l->next->prev = l->prev;
	st->nleases--;
}

/* drop the lease's pins; a block whose slot moved on is skipped */
static void lease_free(struct kv_store *st, struct lease *l)
{
	for (uint32_t i = 0; i < l->n; i++) {
		uint32_t slot = l->slot_gen[2 * i];

		if (st->blk[slot].gen == l->slot_gen[2 * i + 1] &&
		    st->blk[slot].refs)
			blk_unref(st, slot);
	}
	free(l);
}

void lease_sweep_locked(struct kv_store *st, uint64_t now)
{
	struct lease *l, *next;
	uint64_t min = UINT64_MAX;

	if (now < st->lease_min_ns)
		return;
	for (l = st->leases; l; l = next) {
		next = l->next;
		if (l->expires_ns <= now) {
			lease_unlink(st, l);
			lease_free(st, l);
		} else if (l->expires_ns < min) {
			min = l->expires_ns;
		}
	}
	st->lease_min_ns = min;
}

void lease_drop_all(struct kv_store *st)
{
	while (st->leases) {
		struct lease *l = st->leases;

		lease_unlink(st, l);
		lease_free(st, l);
	}
	st->lease_min_ns = UINT64_MAX;
}

static struct lease *lease_find(struct kv_store *st, uint64_t id)
{
	for (struct lease *l = st->leases; l; l = l->next)
		if (l->id == id)
			return l;
	return NULL;
}

static uint64_t expiry(struct kv_store *st, uint32_t ms)
{
	return kvfs_mono_ns() + (uint64_t)(ms ? ms : st->lease_ms) * 1000000;
}

/* pin slots[0..n-1] under a new lease; lock held */
static int lease_new(struct kv_store *st, const uint32_t *slots, uint32_t n,
		     uint32_t ms, uint64_t *id)
{
	struct lease *l;

	if (st->nleases >= STORE_MAX_LEASES)
		return -EAGAIN;
	l = malloc(sizeof(*l) + sizeof(uint32_t) * 2 * n);
	if (!l)
		return -ENOMEM;
	l->id = st->next_lease++;
	if (l->id == 0)
		l->id = st->next_lease++;
	l->expires_ns = expiry(st, ms);
	l->n = n;
	for (uint32_t i = 0; i < n; i++) {
		blk_ref(st, slots[i]);
		l->slot_gen[2 * i] = slots[i];
		l->slot_gen[2 * i + 1] = st->blk[slots[i]].gen;
	}
	l->prev = NULL;
	l->next = st->leases;
	if (st->leases)
		st->leases->prev = l;
	st->leases = l;
	st->nleases++;
	if (l->expires_ns < st->lease_min_ns)
		st->lease_min_ns = l->expires_ns;
	*id = l->id;
	return 0;
}

/*
 * The whole walk runs under the store lock, so no block can be evicted
 * between its probe and its pin: what the caller is told is cached stays
 * cached while the lease lives.
 */
long kv_store_match(struct kv_store *st, uint32_t ns,
		    const uint8_t (*hashes)[KVFS_HASH_LEN], size_t n,
		    uint32_t lease_ms, uint64_t *lease)
{
	uint32_t stack_slots[64], *slots = stack_slots;
	uint64_t deadline = 0;
	long rc;
	size_t k;

	if (!st || (!hashes && n) || n > UINT32_MAX)
		return -EINVAL;
	if (lease)
		*lease = 0;
	if (lease && n > 64) {
		slots = malloc(sizeof(*slots) * n);
		if (!slots)
			return -ENOMEM;
	}
	pthread_mutex_lock(&st->lock);
again:
	lease_sweep_locked(st, kvfs_mono_ns());
	if (!store_ns_get(st, ns)) {
		rc = -ENOENT;
		goto out_unlock;
	}
	for (k = 0; k < n; k++) {
		uint32_t s = tab_find(st, ns, hashes[k]);

		/* its writer closed it: the seal is on its way (the lock was
		 * dropped meanwhile, so the walk starts over) */
		if (blk_wait_closing(st, s, &deadline))
			goto again;
		if (s == NIL || st->blk[s].state != BLK_SEALED)
			break;
		if (lease)
			slots[k] = s;
		else
			blk_touch(st, s);
	}
	store_count_lookup(st, store_ns_get(st, ns), k, n - k);
	rc = (long)k;
	if (lease && k) {
		int err = lease_new(st, slots, (uint32_t)k, lease_ms, lease);

		if (err < 0)
			rc = err;
	}
out_unlock:
	pthread_mutex_unlock(&st->lock);
	if (slots != stack_slots)
		free(slots);
	return rc;
}

int kv_store_lease_release(struct kv_store *st, uint64_t id)
{
	struct lease *l;
	int rc = -ENOENT;

	if (!st || !id)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	lease_sweep_locked(st, kvfs_mono_ns());
	l = lease_find(st, id);
	if (l) {
		lease_unlink(st, l);
		lease_free(st, l);
		rc = 0;
	}
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int kv_store_lease_renew(struct kv_store *st, uint64_t id, uint32_t lease_ms)
{
	struct lease *l;
	int rc = -ENOENT;

	if (!st || !id)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	lease_sweep_locked(st, kvfs_mono_ns());
	l = lease_find(st, id);
	if (l) {
		l->expires_ns = expiry(st, lease_ms);
		/* a shorter renewal may be the new earliest expiry */
		if (l->expires_ns < st->lease_min_ns)
			st->lease_min_ns = l->expires_ns;
		rc = 0;
	}
	pthread_mutex_unlock(&st->lock);
	return rc;
}

void kv_store_lease_sweep(struct kv_store *st)
{
	if (!st)
		return;
	pthread_mutex_lock(&st->lock);
	lease_sweep_locked(st, kvfs_mono_ns());
	pthread_mutex_unlock(&st->lock);
}
