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

static struct lease_uid *uid_entry(struct kv_store *st, uint32_t uid)
{
	for (uint32_t i = 0; i < st->nlease_uids; i++)
		if (st->lease_uids[i].uid == uid)
			return &st->lease_uids[i];
	return NULL;
}

static void lease_unlink(struct kv_store *st, struct lease *l)
{
	struct lease_uid *u = uid_entry(st, l->owner.uid);

	if (u && --u->n == 0)
		*u = st->lease_uids[--st->nlease_uids];
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
	free(st->lease_uids);
	st->lease_uids = NULL;
	st->nlease_uids = st->lease_uids_cap = 0;
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

static const struct kv_lease_owner nobody = { .uid = KV_LEASE_NOBODY };

/* the count of uid, made (at 0) when absent; NULL without memory */
static struct lease_uid *uid_count(struct kv_store *st, uint32_t uid)
{
	struct lease_uid *u = uid_entry(st, uid), *p;
	uint32_t cap;

	if (u)
		return u;
	if (st->nlease_uids == st->lease_uids_cap) {
		cap = st->lease_uids_cap ? st->lease_uids_cap * 2 : 8;
		p = realloc(st->lease_uids, cap * sizeof(*p));
		if (!p)
			return NULL;
		st->lease_uids = p;
		st->lease_uids_cap = cap;
	}
	u = &st->lease_uids[st->nlease_uids++];
	u->uid = uid;
	u->n = 0;
	return u;
}

/* pin slots[0..n-1] under a new lease; lock held */
static int lease_new(struct kv_store *st, const uint32_t *slots, uint32_t n,
		     uint32_t ms, const struct kv_lease_owner *owner,
		     uint32_t uid_max, uint64_t *id)
{
	struct lease_uid *u;
	struct lease *l;

	if (st->nleases >= STORE_MAX_LEASES)
		return -EAGAIN;
	u = uid_count(st, owner->uid);
	if (!u)
		return -ENOMEM;
	if (uid_max && u->n >= uid_max)
		return -EDQUOT;
	l = malloc(sizeof(*l) + sizeof(uint32_t) * 2 * n);
	if (!l) {
		if (u->n == 0) /* made just now: take it back */
			*u = st->lease_uids[--st->nlease_uids];
		return -ENOMEM;
	}
	u->n++;
	l->id = st->next_lease++;
	if (l->id == 0)
		l->id = st->next_lease++;
	l->expires_ns = expiry(st, ms);
	l->n = n;
	l->owner = *owner;
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
long kv_store_match_owned(struct kv_store *st, uint32_t ns,
			  const uint8_t (*hashes)[KVFS_HASH_LEN], size_t n,
			  uint32_t lease_ms, const struct kv_lease_owner *owner,
			  uint32_t uid_max, uint64_t *lease)
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
		int err = lease_new(st, slots, (uint32_t)k, lease_ms,
				    owner ? owner : &nobody, uid_max, lease);

		if (err < 0)
			rc = err;
	}
out_unlock:
	pthread_mutex_unlock(&st->lock);
	if (slots != stack_slots)
		free(slots);
	return rc;
}

long kv_store_match(struct kv_store *st, uint32_t ns,
		    const uint8_t (*hashes)[KVFS_HASH_LEN], size_t n,
		    uint32_t lease_ms, uint64_t *lease)
{
	return kv_store_match_owned(st, ns, hashes, n, lease_ms, NULL, 0,
				    lease);
}

static void lease_info(const struct lease *l, struct kv_lease_info *li)
{
	li->id = l->id;
	li->expires_ns = l->expires_ns;
	li->blocks = l->n;
	li->owner = l->owner;
}

long kv_store_lease_list(struct kv_store *st, uint64_t after,
			 struct kv_lease_info *out, size_t max)
{
	struct lease *l, *last = NULL;
	long k = 0;

	if (!st || (!out && max))
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	lease_sweep_locked(st, kvfs_mono_ns());
	/* descending ids (store_int.h): those past after are a prefix, and
	 * its last entry is the smallest of them */
	for (l = st->leases; l && l->id > after; l = l->next)
		last = l;
	for (l = last; l && (size_t)k < max; l = l->prev)
		lease_info(l, &out[k++]);
	pthread_mutex_unlock(&st->lock);
	return k;
}

int kv_store_lease_stat(struct kv_store *st, uint64_t id,
			struct kv_lease_info *li)
{
	struct lease *l;
	int rc = -ENOENT;

	if (!st || !id || !li)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	lease_sweep_locked(st, kvfs_mono_ns());
	l = lease_find(st, id);
	if (l) {
		lease_info(l, li);
		rc = 0;
	}
	pthread_mutex_unlock(&st->lock);
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
