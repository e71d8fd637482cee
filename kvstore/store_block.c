/*
 * store_block.c - the block table, LRU eviction and a block's life.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "src/common/clock.h"
#include "src/common/crc32c.h"
#include "src/common/log.h"
#include "kvstore/store_int.h"

/* sealed, visible block of (ns, hash) or NIL */
uint32_t blk_find_sealed(struct kv_store *st, uint32_t ns,
			 const uint8_t hash[KVFS_HASH_LEN])
{
	uint32_t s = tab_find(st, ns, hash);

	return s != NIL && st->blk[s].state == BLK_SEALED ? s : NIL;
}

bool blk_wait_closing(struct kv_store *st, uint32_t s, uint64_t *deadline)
{
	uint64_t now = kvfs_mono_ns(), end;
	struct timespec ts;

	if (s == NIL || st->blk[s].state != BLK_WRITING ||
	    !st->blk[s].closing_ns)
		return false;
	/* never past publish_wait_ms after the close: a writer that holds
	 * on to a descriptor costs each lookup nothing after that */
	end = st->blk[s].closing_ns +
	      (uint64_t)st->publish_wait_ms * 1000000ull;
	if (!*deadline || end < *deadline)
		*deadline = end;
	if (now >= *deadline)
		return false;
	ts.tv_sec = (time_t)(*deadline / 1000000000ull);
	ts.tv_nsec = (long)(*deadline % 1000000000ull);
	pthread_cond_timedwait(&st->settled, &st->lock, &ts);
	return true;
}

/* the sealed block of (ns, hash), after waiting for one whose writer has
 * closed it (lock held, dropped while waiting) */
static uint32_t find_visible(struct kv_store *st, uint32_t ns,
			     const uint8_t hash[KVFS_HASH_LEN])
{
	uint64_t deadline = 0;
	uint32_t s;

	while (blk_wait_closing(st, s = tab_find(st, ns, hash), &deadline))
		;
	return s != NIL && st->blk[s].state == BLK_SEALED ? s : NIL;
}

/* ---- LRU ----------------------------------------------------------- */

static struct lru *lru_of(struct kv_store *st, uint8_t list)
{
	return list == LIST_LEAF ? &st->leaf : &st->inner;
}

static void lru_del(struct kv_store *st, uint32_t slot)
{
	struct blk *b = &st->blk[slot];
	struct lru *l;

	if (b->list == LIST_NONE)
		return;
	l = lru_of(st, b->list);
	if (b->lru_prev != NIL)
		st->blk[b->lru_prev].lru_next = b->lru_next;
	else
		l->head = b->lru_next;
	if (b->lru_next != NIL)
		st->blk[b->lru_next].lru_prev = b->lru_prev;
	else
		l->tail = b->lru_prev;
	l->len--;
	b->list = LIST_NONE;
	b->lru_prev = b->lru_next = NIL;
}

static uint8_t list_for(const struct blk *b)
{
	return b->nchild ? LIST_INNER : LIST_LEAF;
}

/* link slot into l just before `next` (NIL: at the tail) */
static void lru_link(struct kv_store *st, struct lru *l, uint32_t slot,
		     uint32_t next)
{
	struct blk *b = &st->blk[slot];
	uint32_t prev = next != NIL ? st->blk[next].lru_prev : l->tail;

	b->lru_prev = prev;
	b->lru_next = next;
	if (prev != NIL)
		st->blk[prev].lru_next = slot;
	else
		l->head = slot;
	if (next != NIL)
		st->blk[next].lru_prev = slot;
	else
		l->tail = slot;
	l->len++;
}

/* a use: at the MRU end of the list its child count calls for */
void lru_add(struct kv_store *st, uint32_t slot)
{
	struct blk *b = &st->blk[slot];

	b->list = list_for(b);
	b->last_use = b->lru_stamp = ++st->tick;
	lru_link(st, lru_of(st, b->list), slot, lru_of(st, b->list)->head);
}

/* a use: only stamped; eviction promotes it lazily (store_int.h) */
void blk_touch(struct kv_store *st, uint32_t slot)
{
	st->blk[slot].last_use = ++st->tick;
}

#define REFILE_WALK 64

/*
 * Re-file after nchild crossed zero, keeping the block's age: a parent
 * whose last cached child was just evicted is often about as old as that
 * child and should be a victim soon, not made young.  The sorted insert
 * walks from the LRU end at most REFILE_WALK steps; a block younger than
 * that many blocks of its new list is hot anyway and goes to the MRU end.
 */
static void lru_refile(struct kv_store *st, uint32_t slot)
{
	struct blk *b = &st->blk[slot];
	uint8_t want = list_for(b);
	struct lru *l = lru_of(st, want);
	uint32_t cur, next = NIL;
	int steps = 0;

	if (b->list == LIST_NONE || b->list == want)
		return;
	lru_del(st, slot);
	for (cur = l->tail; cur != NIL && st->blk[cur].last_use < b->last_use;
	     cur = st->blk[cur].lru_prev) {
		if (++steps > REFILE_WALK) {
			cur = NIL;
			break;
		}
		next = cur;
	}
	b->list = want;
	b->lru_stamp = b->last_use; /* placed by its use: nothing to promote */
	/* cur is younger than b (or NIL: b is the youngest we saw) */
	lru_link(st, l, slot, cur == NIL ? l->head : next);
}

void blk_ref(struct kv_store *st, uint32_t slot)
{
	struct blk *b = &st->blk[slot];

	if (b->refs++ == 0) {
		lru_del(st, slot);
		st->pinned++;
	}
}

static void blk_release(struct kv_store *st, uint32_t slot);

void blk_unref(struct kv_store *st, uint32_t slot)
{
	struct blk *b = &st->blk[slot];

	if (--b->refs)
		return;
	st->pinned--;
	if (b->state == BLK_DEAD)
		blk_release(st, slot);
	else
		lru_add(st, slot);
}

/* ---- parent links -------------------------------------------------- */

void blk_link_parent(struct kv_store *st, uint32_t slot)
{
	struct blk *b = &st->blk[slot];
	uint32_t p;

	if (!b->has_parent)
		return;
	p = blk_find_sealed(st, b->ns, b->parent);
	if (p == NIL || p == slot)
		return;
	b->parent_slot = p;
	b->parent_gen = st->blk[p].gen;
	if (st->blk[p].nchild++ == 0)
		lru_refile(st, p);
}

static void blk_unlink_parent(struct kv_store *st, uint32_t slot)
{
	struct blk *b = &st->blk[slot];
	struct blk *p;

	if (b->parent_slot == NIL)
		return;
	p = &st->blk[b->parent_slot];
	/* gen differs: the parent went and its slot was reused */
	if (p->gen == b->parent_gen && p->state == BLK_SEALED && p->nchild &&
	    --p->nchild == 0)
		lru_refile(st, b->parent_slot);
	b->parent_slot = NIL;
}

/* ---- slot release and eviction ------------------------------------- */

/* back to the pool; gen moves on so stale refs and child links miss */
static void blk_release(struct kv_store *st, uint32_t slot)
{
	struct blk *b = &st->blk[slot];

	if (b->spilled) {
		if (b->spill_map)
			munmap(b->spill_map, b->size);
		close(b->spill_fd);
		kv_pool_spill_remove(st->pool, slot);
		b->spill_map = NULL;
		b->spilled = 0;
		st->spilled--;
	}
	st->used -= b->charged;
	b->charged = 0;
	b->state = BLK_FREE;
	free(b->path);
	b->path = NULL;
	b->staged = 0;
	b->gen++;
	b->nchild = 0;
	b->refs = 0;
	kv_pool_free(st->pool, slot);
}

/*
 * Take a sealed block out of the name space: record deleted first, so the
 * slot is never rewritten while a record still points at it.
 */
int blk_unpublish(struct kv_store *st, uint32_t slot, bool del_record)
{
	struct blk *b = &st->blk[slot];
	struct store_ns *n = store_ns_get(st, b->ns);
	int rc;

	rc = del_record ? kv_index_del_block(st->ix, b->ns, b->hash) : 0;
	if (rc < 0)
		return rc;
	if (b->path)
		open_count(st, b->ns, b->path, -1);
	lru_del(st, slot);
	tab_remove(st, slot);
	blk_unlink_parent(st, slot);
	if (st->event_fn)
		st->event_fn(st->event_arg, KV_STORE_GONE, b->ns, b->hash);
	st->total.blocks--;
	st->total.bytes -= b->size;
	if (n) {
		n->s.blocks--;
		n->s.bytes -= b->size;
	}
	return 0;
}

static void count_eviction(struct kv_store *st, uint32_t ns)
{
	struct store_ns *n = store_ns_get(st, ns);

	st->total.evictions++;
	if (n)
		n->s.evictions++;
}

/*
 * The LRU block of l: a tail used since it was linked goes to the MRU end
 * (stamped with that use) and the next tail is looked at.  Each block is
 * promoted at most once per use, so this is amortized O(1).
 */
static uint32_t lru_victim(struct kv_store *st, struct lru *l)
{
	uint32_t v;

	while ((v = l->tail) != NIL) {
		struct blk *b = &st->blk[v];

		if (b->last_use == b->lru_stamp)
			break;
		lru_del(st, v);
		b->list = list_for(b);
		b->lru_stamp = b->last_use;
		lru_link(st, l, v, l->head);
	}
	return v;
}

/* evict the best victim: LRU leaf, else LRU inner block; -ENOSPC */
static int evict_one(struct kv_store *st)
{
	uint32_t v = lru_victim(st, &st->leaf);
	uint32_t ns;
	int rc;

	if (v == NIL)
		v = lru_victim(st, &st->inner);
	if (v == NIL)
		return -ENOSPC;
	ns = st->blk[v].ns;
	rc = blk_unpublish(st, v, true);
	if (rc < 0)
		return rc;
	blk_release(st, v);
	count_eviction(st, ns);
	return 0;
}

/*
 * Room for need more bytes within the capacity, evicting LRU blocks as
 * needed, and charged: -EFBIG when the capacity itself is smaller,
 * -ENOSPC when what holds the rest cannot be evicted.  Lock held.
 */
static int make_room(struct kv_store *st, uint64_t need)
{
	int rc;

	if (need > st->capacity)
		return -EFBIG;
	while (st->used + need > st->capacity) {
		rc = evict_one(st);
		if (rc < 0)
			return rc;
	}
	st->used += need;
	return 0;
}

int blk_slot_alloc(struct kv_store *st, uint32_t *slot)
{
	int rc;

	lease_sweep_locked(st, kvfs_mono_ns());
	rc = make_room(st, st->slot_size);
	if (rc < 0)
		return rc == -EFBIG ? -ENOSPC : rc;
	while ((rc = kv_pool_alloc(st->pool, slot)) == -ENOSPC) {
		rc = evict_one(st);
		if (rc < 0) {
			st->used -= st->slot_size;
			return rc;
		}
	}
	st->blk[*slot].charged = st->slot_size;
	return rc;
}

void store_count_lookup(struct kv_store *st, struct store_ns *n, uint64_t hits,
			uint64_t misses)
{
	st->total.hits += hits;
	st->total.misses += misses;
	if (n) {
		n->s.hits += hits;
		n->s.misses += misses;
	}
}

/* ---- writing ------------------------------------------------------- */

void blk_start(struct kv_store *st, uint32_t slot, uint32_t ns,
	       const uint8_t *hash, const uint8_t *parent)
{
	struct blk *b = &st->blk[slot];
	struct store_ns *n = store_ns_get(st, ns);

	if (hash)
		memcpy(b->hash, hash, KVFS_HASH_LEN);
	else
		memset(b->hash, 0, KVFS_HASH_LEN);
	b->has_parent = parent != NULL;
	if (parent)
		memcpy(b->parent, parent, KVFS_HASH_LEN);
	else
		memset(b->parent, 0, KVFS_HASH_LEN);
	b->staged = hash ? 0 : 1;
	b->closed = 0;
	b->ns = ns;
	b->size = 0;
	b->refs = 0;
	b->nchild = 0;
	b->parent_slot = NIL;
	b->list = LIST_NONE;
	b->state = BLK_WRITING;
	if (hash)
		tab_insert(st, slot);
	n->s.writing++;
	st->total.writing++;
}

int kv_store_create(struct kv_store *st, uint32_t ns,
		    const uint8_t hash[KVFS_HASH_LEN], const uint8_t *parent,
		    uint32_t *wh)
{
	struct store_ns *n;
	uint32_t slot;
	int rc;

	if (!st || !hash || !wh)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	n = store_ns_get(st, ns);
	if (!n) {
		rc = -ENOENT;
		goto out_unlock;
	}
	if (tab_find(st, ns, hash) != NIL) {
		rc = -EEXIST;
		goto out_unlock;
	}
	rc = blk_slot_alloc(st, &slot);
	if (rc < 0)
		goto out_unlock;
	blk_start(st, slot, ns, hash, parent);
	*wh = slot;
out_unlock:
	pthread_mutex_unlock(&st->lock);
	return rc;
}

/* the writer's block, or NULL; the caller holds no lock: a WRITING slot
 * is only ever changed by its writer, so reading its state is enough */
struct blk *blk_writing(struct kv_store *st, uint32_t wh)
{
	struct blk *b;
	uint8_t state;

	if (!st || wh >= st->nslots)
		return NULL;
	b = &st->blk[wh];
	pthread_mutex_lock(&st->lock);
	state = b->state;
	pthread_mutex_unlock(&st->lock);
	return state == BLK_WRITING ? b : NULL;
}

static int pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int kv_store_write(struct kv_store *st, uint32_t wh, uint64_t off,
		   const void *buf, size_t len)
{
	struct blk *b = blk_writing(st, wh);
	int rc;

	if (!b || (!buf && len))
		return -EINVAL;
	if (off > UINT64_MAX - len)
		return -EFBIG;
	rc = kv_store_wreserve(st, wh, off + len);
	if (rc < 0)
		return rc;
	blk_unclose(st, b, wh);
	if (!b->spilled)
		memcpy((uint8_t *)kv_pool_slot(st->pool, wh) + off, buf, len);
	else if (pwrite_all(b->spill_fd, buf, len, off) < 0)
		return -EIO;
	if (off + len > b->size)
		b->size = off + len;
	return 0;
}

void *kv_store_wptr(struct kv_store *st, uint32_t wh)
{
	struct blk *b = blk_writing(st, wh);

	return b && !b->spilled ? kv_pool_slot(st->pool, wh) : NULL;
}

/*
 * Move a block being written out of its slot into a spill file (pool.h):
 * the file gets the bytes written so far, the slot's pages go back.  The
 * caller charged the capacity for it; the slot's own charge is its.
 */
static int spill(struct kv_store *st, struct blk *b, uint32_t wh)
{
	int fd = kv_pool_spill_open(st->pool, wh, true);
	int rc;

	if (fd < 0)
		return fd;
	rc = pwrite_all(fd, kv_pool_slot(st->pool, wh), b->size, 0);
	if (rc == 0 && ftruncate(fd, (off_t)b->size) < 0)
		rc = -errno;
	if (rc < 0) {
		close(fd);
		kv_pool_spill_remove(st->pool, wh);
		return rc;
	}
	kv_pool_punch(st->pool, wh);
	b->spill_fd = fd;
	b->spill_map = NULL;
	b->spilled = 1;
	return 0;
}

int kv_store_wreserve(struct kv_store *st, uint32_t wh, uint64_t end)
{
	struct blk *b = blk_writing(st, wh);
	uint64_t want, room;
	int rc;

	if (!b)
		return -EINVAL;
	room = b->spilled ? b->charged : st->slot_size;
	if (end <= room)
		return 0;
	if (end > st->capacity)
		return -EFBIG;
	/* charged ahead, an eighth more, so that a file written in small
	 * pieces takes the lock and makes room now and then, not at every
	 * write; the seal gives back what it did not use */
	want = end + end / 8;
	want = (want + 65535) & ~(uint64_t)65535;
	if (want > st->capacity)
		want = end;
	pthread_mutex_lock(&st->lock);
	rc = make_room(st, want - b->charged);
	if (rc < 0 && want > end) {
		want = end;
		rc = make_room(st, want - b->charged);
	}
	pthread_mutex_unlock(&st->lock);
	if (rc < 0)
		return rc;
	if (!b->spilled) {
		rc = spill(st, b, wh);
		if (rc < 0) {
			pthread_mutex_lock(&st->lock);
			st->used -= want - b->charged;
			pthread_mutex_unlock(&st->lock);
			return rc;
		}
		pthread_mutex_lock(&st->lock);
		st->spilled++;
		pthread_mutex_unlock(&st->lock);
	}
	b->charged = want;
	return 0;
}

int kv_store_wtarget(struct kv_store *st, uint32_t wh, void **mem, int *fd)
{
	struct blk *b = blk_writing(st, wh);

	if (!b || !mem || !fd)
		return -EINVAL;
	*mem = b->spilled ? NULL : kv_pool_slot(st->pool, wh);
	*fd = b->spilled ? b->spill_fd : -1;
	return 0;
}

int blk_bytes_crc(struct kv_store *st, uint32_t slot, bool spilled, int fd,
		  uint64_t size, uint32_t *crc)
{
	bool own = false;
	struct stat sb;
	void *p;
	int rc = 0;

	if (!spilled) {
		if (size > st->slot_size)
			return -EINVAL;
		*crc = kvfs_crc32c(0, kv_pool_slot(st->pool, slot), size);
		return 0;
	}
	if (fd < 0) {
		fd = kv_pool_spill_open(st->pool, slot, false);
		if (fd < 0)
			return fd;
		own = true;
	}
	if (fstat(fd, &sb) < 0)
		rc = -errno;
	else if ((uint64_t)sb.st_size < size)
		rc = -ENODATA;
	if (rc == 0 && size == 0)
		*crc = kvfs_crc32c(0, "", 0);
	if (rc == 0 && size) {
		p = mmap(NULL, size, PROT_READ, MAP_SHARED | MAP_POPULATE, fd,
			 0);
		if (p == MAP_FAILED) {
			rc = -errno;
		} else {
			*crc = kvfs_crc32c(0, p, size);
			munmap(p, size);
		}
	}
	if (own)
		close(fd);
	return rc;
}

/* a spilled block's bytes mapped for its readers (kv_store_get) */
static int spill_map(struct blk *b)
{
	void *p;

	b->spill_map = NULL;
	if (!b->size)
		return 0;
	p = mmap(NULL, b->size, PROT_READ, MAP_SHARED | MAP_POPULATE,
		 b->spill_fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	b->spill_map = p;
	return 0;
}

int blk_spill_attach(struct kv_store *st, uint32_t slot)
{
	struct blk *b = &st->blk[slot];
	int fd = kv_pool_spill_open(st->pool, slot, false);
	int rc;

	if (fd < 0)
		return fd;
	b->spill_fd = fd;
	rc = spill_map(b);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	b->spilled = 1;
	st->spilled++;
	return 0;
}

/* the seal of a spilled block: its file cut to its size and mapped, and
 * the capacity it was charged ahead given back (whole pages kept) */
int blk_spill_seal(struct kv_store *st, struct blk *b)
{
	uint64_t keep = (b->size + 4095) & ~(uint64_t)4095;

	if (!b->spilled)
		return 0;
	if (ftruncate(b->spill_fd, (off_t)b->size) < 0)
		return -errno;
	if (keep < b->charged) {
		pthread_mutex_lock(&st->lock);
		st->used -= b->charged - keep;
		b->charged = keep;
		pthread_mutex_unlock(&st->lock);
	}
	return spill_map(b);
}

int kv_store_set_size(struct kv_store *st, uint32_t wh, uint64_t size)
{
	struct blk *b = blk_writing(st, wh);

	int rc;

	if (!b)
		return -EINVAL;
	rc = kv_store_wreserve(st, wh, size);
	if (rc < 0)
		return rc;
	if (size != b->size)
		blk_unclose(st, b, wh);
	/* a spill file grows with zeros, as a slot's hole reads */
	if (b->spilled && ftruncate(b->spill_fd, (off_t)size) < 0)
		return -errno;
	b->size = size;
	return 0;
}

void blk_unclose(struct kv_store *st, struct blk *b, uint32_t slot)
{
	if (!b->closed)
		return;
	/* a failed delete leaves a record whose CRC no longer matches the
	 * slot (or whose slot is reused): recovery drops such a record */
	kv_index_del_closed(st->ix, slot);
	b->closed = 0;
}

/* the CRC of a live block's bytes, wherever they are */
static int blk_crc(struct kv_store *st, const struct blk *b, uint32_t slot,
		   uint32_t *crc)
{
	return blk_bytes_crc(st, slot, b->spilled,
			     b->spilled ? b->spill_fd : -1, b->size, crc);
}

int blk_seal_crc(struct kv_store *st, const struct blk *b, uint32_t slot,
		 uint32_t *crc)
{
	if (b->closed) {
		*crc = b->close_crc;
		return 0;
	}
	return blk_crc(st, b, slot, crc);
}

int kv_store_closed(struct kv_store *st, uint32_t wh, const char *path,
		    size_t path_len)
{
	struct blk *b = blk_writing(st, wh);
	uint8_t key[KVFS_HASH_LEN];
	struct kv_block_rec rec;
	int rc;

	if (!b || (b->staged == 1 && !path) || (path && !path_len))
		return -EINVAL;
	if (b->staged == 2)
		return 0; /* its name went to another file: never sealed */
	if (b->staged) {
		rc = kvfs_path_key(path, path_len, key);
		if (rc < 0)
			return rc;
	} else {
		memcpy(key, b->hash, KVFS_HASH_LEN);
		path = NULL;
	}
	memset(&rec, 0, sizeof(rec));
	rec.slot = wh;
	rec.size = b->size;
	rc = blk_crc(st, b, wh, &rec.checksum);
	if (rc < 0)
		return rc;
	rec.seal_ns = kvfs_wall_ns();
	rec.has_parent = b->has_parent;
	rec.spilled = b->spilled;
	memcpy(rec.parent, b->parent, KVFS_HASH_LEN);
	rec.path = path;
	rec.path_len = path ? path_len : 0;
	rc = kv_index_put_closed(st->ix, b->ns, key, &rec);
	if (rc < 0)
		return rc;
	b->close_crc = rec.checksum;
	b->closed = 1;
	return 0;
}

int kv_store_reopened(struct kv_store *st, uint32_t wh)
{
	struct blk *b = blk_writing(st, wh);

	if (!b)
		return -EINVAL;
	blk_unclose(st, b, wh);
	return 0;
}

int kv_store_wsize(struct kv_store *st, uint32_t wh, uint64_t *size)
{
	struct blk *b = blk_writing(st, wh);

	if (!b || !size)
		return -EINVAL;
	*size = b->size;
	return 0;
}

/* undo a create; lock held */
void blk_abort(struct kv_store *st, uint32_t slot)
{
	struct store_ns *n = store_ns_get(st, st->blk[slot].ns);

	if (!st->blk[slot].staged)
		tab_remove(st, slot);
	blk_unclose(st, &st->blk[slot], slot);
	st->blk[slot].closing_ns = 0;
	pthread_cond_broadcast(&st->settled);
	if (n)
		n->s.writing--;
	st->total.writing--;
	blk_release(st, slot);
}

void blk_sealed(struct kv_store *st, uint32_t slot,
		const struct kv_block_rec *rec)
{
	struct blk *b = &st->blk[slot];
	struct store_ns *n = store_ns_get(st, b->ns);

	b->checksum = rec->checksum;
	b->seal_ns = rec->seal_ns;
	b->state = BLK_SEALED;
	b->closed = 0; /* its record went with the block record's put */
	b->closing_ns = 0;
	pthread_cond_broadcast(&st->settled);
	n->s.writing--;
	n->s.blocks++;
	n->s.bytes += b->size;
	n->s.seals++;
	st->total.writing--;
	st->total.blocks++;
	st->total.bytes += b->size;
	st->total.seals++;
	if (b->path)
		open_count(st, b->ns, b->path, 1);
	blk_link_parent(st, slot);
	lru_add(st, slot);
	if (st->event_fn)
		st->event_fn(st->event_arg, KV_STORE_SEALED, b->ns, b->hash);
}

static int seal(struct kv_store *st, uint32_t wh, const uint32_t *crc)
{
	struct blk *b = blk_writing(st, wh);
	struct kv_block_rec rec;
	int rc;

	/* a staging block has no name to seal under: kv_store_publish */
	if (!b || b->staged == 1)
		return -EINVAL;
	/* its name went to a file published meanwhile: that one wins */
	if (b->staged == 2) {
		pthread_mutex_lock(&st->lock);
		blk_abort(st, wh);
		pthread_mutex_unlock(&st->lock);
		return -EEXIST;
	}
	/* checksum and record outside the lock: the slot is ours alone */
	memset(&rec, 0, sizeof(rec));
	rec.slot = wh;
	rec.size = b->size;
	rc = 0;
	if (crc)
		rec.checksum = *crc;
	else
		rc = blk_seal_crc(st, b, wh, &rec.checksum);
	rec.seal_ns = kvfs_wall_ns();
	rec.has_parent = b->has_parent;
	rec.spilled = b->spilled;
	memcpy(rec.parent, b->parent, KVFS_HASH_LEN);
	if (rc == 0)
		rc = blk_spill_seal(st, b);
	if (rc == 0)
		rc = kv_index_put_block(st->ix, b->ns, b->hash, &rec);

	pthread_mutex_lock(&st->lock);
	if (rc < 0)
		blk_abort(st, wh);
	else
		blk_sealed(st, wh, &rec);
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int kv_store_seal(struct kv_store *st, uint32_t wh)
{
	return seal(st, wh, NULL);
}

int kv_store_seal_crc(struct kv_store *st, uint32_t wh, uint32_t crc)
{
	return seal(st, wh, &crc);
}

int kv_store_closing(struct kv_store *st, uint32_t wh, bool closing)
{
	if (!blk_writing(st, wh))
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	st->blk[wh].closing_ns = closing ? kvfs_mono_ns() : 0;
	if (!closing) /* written to again: nobody waits for it any more */
		pthread_cond_broadcast(&st->settled);
	pthread_mutex_unlock(&st->lock);
	return 0;
}

int kv_store_abort(struct kv_store *st, uint32_t wh)
{
	if (!blk_writing(st, wh))
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	blk_abort(st, wh);
	pthread_mutex_unlock(&st->lock);
	return 0;
}

/* ---- reading ------------------------------------------------------- */

static void fill_info(const struct blk *b, uint32_t slot,
		      struct kv_block_info *bi);

int kv_store_get(struct kv_store *st, uint32_t ns,
		 const uint8_t hash[KVFS_HASH_LEN], struct kv_ref *ref)
{
	uint32_t s;

	if (!st || !hash || !ref)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	s = find_visible(st, ns, hash);
	store_count_lookup(st, store_ns_get(st, ns), s != NIL, s == NIL);
	if (s != NIL) {
		blk_ref(st, s);
		ref->spilled = st->blk[s].spilled;
		ref->fd = st->blk[s].spilled ? st->blk[s].spill_fd : -1;
		ref->data = !st->blk[s].spilled	   ? kv_pool_slot(st->pool, s)
			    : st->blk[s].spill_map ? st->blk[s].spill_map
						   : (const void *)"";
		ref->size = st->blk[s].size;
		ref->slot = s;
		ref->gen = st->blk[s].gen;
	}
	pthread_mutex_unlock(&st->lock);
	return s != NIL ? 0 : -ENOENT;
}

int kv_store_put(struct kv_store *st, struct kv_ref *ref)
{
	struct blk *b;
	int rc = -EINVAL;

	if (!st || !ref || ref->slot >= st->nslots)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	b = &st->blk[ref->slot];
	if ((b->state == BLK_SEALED || b->state == BLK_DEAD) &&
	    b->gen == ref->gen && b->refs) {
		blk_unref(st, ref->slot);
		ref->slot = NIL; /* a second put is refused */
		ref->data = NULL;
		rc = 0;
	}
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int kv_store_stat(struct kv_store *st, uint32_t ns,
		  const uint8_t hash[KVFS_HASH_LEN], struct kv_block_info *bi)
{
	uint32_t s;

	if (!st || !hash || !bi)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	s = find_visible(st, ns, hash);
	if (s != NIL)
		fill_info(&st->blk[s], s, bi);
	pthread_mutex_unlock(&st->lock);
	return s != NIL ? 0 : -ENOENT;
}

int kv_store_lookup(struct kv_store *st, uint32_t ns,
		    const uint8_t hash[KVFS_HASH_LEN])
{
	uint32_t s;

	if (!st || !hash)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	s = find_visible(st, ns, hash);
	store_count_lookup(st, store_ns_get(st, ns), s != NIL, s == NIL);
	if (s != NIL)
		blk_touch(st, s);
	pthread_mutex_unlock(&st->lock);
	return s != NIL;
}

static void fill_info(const struct blk *b, uint32_t slot,
		      struct kv_block_info *bi)
{
	bi->slot = slot;
	bi->gen = b->gen;
	bi->checksum = b->checksum;
	bi->size = b->size;
	bi->seal_ns = b->seal_ns;
	bi->refs = b->refs;
	bi->has_parent = b->has_parent;
	memcpy(bi->parent, b->parent, KVFS_HASH_LEN);
}

/* the cursor is a slot number: a block keeps its slot for life */
int kv_store_ns_next(struct kv_store *st, uint32_t ns, uint64_t *cursor,
		     uint8_t hash[KVFS_HASH_LEN], struct kv_block_info *bi)
{
	int rc = 0;

	if (!st || !cursor || !hash)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	if (!store_ns_get(st, ns)) {
		rc = -ENOENT;
		goto out_unlock;
	}
	for (uint64_t s = *cursor; s < st->nslots; s++) {
		const struct blk *b = &st->blk[s];

		if (b->state != BLK_SEALED || b->ns != ns)
			continue;
		memcpy(hash, b->hash, KVFS_HASH_LEN);
		if (bi)
			fill_info(b, (uint32_t)s, bi);
		*cursor = s + 1;
		rc = 1;
		goto out_unlock;
	}
	*cursor = st->nslots;
out_unlock:
	pthread_mutex_unlock(&st->lock);
	return rc;
}

void kv_store_set_event_hook(struct kv_store *st, kv_store_event_fn fn,
			     void *arg)
{
	pthread_mutex_lock(&st->lock);
	st->event_fn = fn;
	st->event_arg = arg;
	pthread_mutex_unlock(&st->lock);
}

/* ---- removal ------------------------------------------------------- */

int kv_store_evict(struct kv_store *st, uint32_t ns,
		   const uint8_t hash[KVFS_HASH_LEN])
{
	uint32_t s;
	int rc;

	if (!st || !hash)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	lease_sweep_locked(st, kvfs_mono_ns());
	s = blk_find_sealed(st, ns, hash);
	if (s == NIL) {
		rc = -ENOENT;
	} else if (st->blk[s].refs) {
		rc = -EBUSY;
	} else {
		rc = blk_unpublish(st, s, true);
		if (rc == 0) {
			blk_release(st, s);
			count_eviction(st, ns);
		}
	}
	pthread_mutex_unlock(&st->lock);
	return rc;
}

void blk_drop(struct kv_store *st, uint32_t slot)
{
	struct store_ns *n = store_ns_get(st, st->blk[slot].ns);

	st->total.removed++;
	if (n)
		n->s.removed++;
	if (st->blk[slot].refs)
		st->blk[slot].state = BLK_DEAD;
	else
		blk_release(st, slot);
}

int kv_store_remove(struct kv_store *st, uint32_t ns,
		    const uint8_t hash[KVFS_HASH_LEN])
{
	uint32_t s;
	int rc = -ENOENT;

	if (!st || !hash)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	s = blk_find_sealed(st, ns, hash);
	if (s != NIL) {
		rc = blk_unpublish(st, s, true);
		if (rc == 0)
			blk_drop(st, s);
	}
	pthread_mutex_unlock(&st->lock);
	return rc;
}
