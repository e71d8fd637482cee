/*
 * store.c - open, recovery, namespaces and stats of the block store.
 * Block operations are in store_block.c, prefix matches in store_match.c.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "src/common/clock.h"
#include "src/common/crc32c.h"
#include "src/common/log.h"
#include "kvstore/store_int.h"

struct store_ns *store_ns_get(struct kv_store *st, uint32_t id)
{
	return id < st->ns_cap ? st->ns[id] : NULL;
}

static struct store_ns *ns_by_name(struct kv_store *st, const char *name)
{
	for (uint32_t i = 1; i < st->ns_cap; i++)
		if (st->ns[i] && strcmp(st->ns[i]->name, name) == 0)
			return st->ns[i];
	return NULL;
}

/* install a namespace in the table, growing it; -ENOMEM */
static int ns_install(struct kv_store *st, const char *name,
		      const struct kv_ns_rec *rec)
{
	struct store_ns *n;

	if (rec->id >= st->ns_cap) {
		uint32_t cap = st->ns_cap ? st->ns_cap : 16;
		struct store_ns **t;

		while (cap <= rec->id)
			cap *= 2;
		t = realloc(st->ns, sizeof(*t) * cap);
		if (!t)
			return -ENOMEM;
		memset(t + st->ns_cap, 0, sizeof(*t) * (cap - st->ns_cap));
		st->ns = t;
		st->ns_cap = cap;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	snprintf(n->name, sizeof(n->name), "%s", name);
	n->id = rec->id;
	n->block_tokens = rec->block_tokens;
	n->created_ns = rec->created_ns;
	n->layout = rec->layout;
	st->ns[rec->id] = n;
	if (rec->id >= st->next_ns_id)
		st->next_ns_id = rec->id + 1;
	return 0;
}

/* ---- recovery ------------------------------------------------------ */

struct drop {
	uint32_t ns;
	uint8_t hash[KVFS_HASH_LEN];
};

struct recover {
	struct kv_store *st;
	struct drop *drop;
	size_t ndrop, cap;
	int err;
};

static int recover_ns(const char *name, const struct kv_ns_rec *rec, void *arg)
{
	struct kv_store *st = arg;

	if (kvfs_ns_valid(name) < 0 ||
	    rec->block_tokens > KVFS_BLOCK_TOKENS_MAX) {
		kvfs_warn("index: ignoring invalid namespace record");
		return 0;
	}
	return ns_install(st, name, rec);
}

static int drop_later(struct recover *r, uint32_t ns, const uint8_t *hash)
{
	if (r->ndrop == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 64;
		struct drop *d = realloc(r->drop, sizeof(*d) * cap);

		if (!d)
			return -ENOMEM;
		r->drop = d;
		r->cap = cap;
	}
	r->drop[r->ndrop].ns = ns;
	memcpy(r->drop[r->ndrop].hash, hash, KVFS_HASH_LEN);
	r->ndrop++;
	return 0;
}

/* why a record cannot be trusted, or NULL when it can */
static const char *recover_check(struct kv_store *st, uint32_t ns,
				 const uint8_t *hash,
				 const struct kv_block_rec *rec)
{
	if (!store_ns_get(st, ns))
		return "unknown namespace";
	uint32_t crc;

	if (rec->slot >= st->nslots)
		return "slot out of range";
	if (rec->size > st->slot_size && !rec->spilled)
		return "size larger than a slot";
	if (tab_find(st, ns, hash) != NIL)
		return "duplicate record";
	if (kv_pool_reserve(st->pool, rec->slot) < 0)
		return "slot claimed twice";
	if (blk_bytes_crc(st, rec->slot, rec->spilled, -1, rec->size, &crc) <
		    0 ||
	    crc != rec->checksum) {
		kv_pool_free(st->pool, rec->slot);
		return "checksum mismatch";
	}
	st->blk[rec->slot].size = rec->size;
	if (rec->spilled && blk_spill_attach(st, rec->slot) < 0) {
		kv_pool_free(st->pool, rec->slot);
		return "spill file unreadable";
	}
	return NULL;
}

static int recover_block(uint32_t ns, const uint8_t hash[KVFS_HASH_LEN],
			 const struct kv_block_rec *rec, void *arg)
{
	struct recover *r = arg;
	struct kv_store *st = r->st;
	const char *why = recover_check(st, ns, hash, rec);
	struct store_ns *n;
	struct blk *b;
	char hex[KVFS_HASH_HEX_LEN + 1];

	if (why) {
		kvfs_hash_to_hex(hash, hex);
		kvfs_warn("recovery: dropping block %s (ns %u): %s", hex, ns,
			  why);
		st->recovery_dropped++;
		return drop_later(r, ns, hash);
	}
	b = &st->blk[rec->slot];
	memcpy(b->hash, hash, KVFS_HASH_LEN);
	memcpy(b->parent, rec->parent, KVFS_HASH_LEN);
	b->has_parent = rec->has_parent;
	b->ns = ns;
	b->size = rec->size;
	b->checksum = rec->checksum;
	b->seal_ns = rec->seal_ns;
	b->state = BLK_SEALED;
	/* over the capacity, if it was lowered: later writes evict */
	b->charged = rec->spilled ? (rec->size + 4095) & ~(uint64_t)4095
				  : st->slot_size;
	st->used += b->charged;
	tab_insert(st, rec->slot);
	if (rec->path) {
		int rc = open_recover_file(st, rec->slot, rec->path,
					   rec->path_len);

		if (rc < 0)
			return rc;
	}
	n = store_ns_get(st, ns);
	n->s.blocks++;
	n->s.bytes += rec->size;
	st->total.blocks++;
	st->total.bytes += rec->size;
	st->recovered++;
	return 0;
}

static int by_seal_time(const void *a, const void *b, void *arg)
{
	const struct blk *blk = arg;
	uint64_t x = blk[*(const uint32_t *)a].seal_ns;
	uint64_t y = blk[*(const uint32_t *)b].seal_ns;

	return x < y ? -1 : x > y;
}

/*
 * After the scan: link children to parents, then fill the LRU lists oldest
 * first, so the least recently sealed block is the first victim (the true
 * access order died with the previous process).
 */
static int recover_lists(struct kv_store *st)
{
	uint32_t *order, n = 0;

	order = malloc(sizeof(*order) * (st->recovered ? st->recovered : 1));
	if (!order)
		return -ENOMEM;
	for (uint32_t s = 0; s < st->nslots; s++)
		if (st->blk[s].state == BLK_SEALED)
			order[n++] = s;
	for (uint32_t i = 0; i < n; i++)
		blk_link_parent(st, order[i]);
	qsort_r(order, n, sizeof(*order), by_seal_time, st->blk);
	for (uint32_t i = 0; i < n; i++)
		lru_add(st, order[i]);
	free(order);
	return 0;
}

/*
 * The index describes the pool whose uuid it recorded.  When the pool was
 * formatted (first start, lost to a reboot, reformat) its block records
 * describe bytes that no longer exist: they are dropped, the namespaces
 * kept.  Returns 1 when the pool is not the one recorded, 0 when it is.
 */
static int recover_pool_identity(struct kv_store *st)
{
	uint8_t uuid[KV_POOL_UUID_LEN];
	uint32_t fmt = KV_INDEX_FORMAT, have;
	long len;
	int rc;

	len = kv_index_get_meta(st->ix, "format", &have, sizeof(have));
	if (len == (long)sizeof(have) && have != KV_INDEX_FORMAT) {
		kvfs_err("index format %u, this kvfs reads %u", have,
			 KV_INDEX_FORMAT);
		return -EINVAL;
	}
	if (len == -ENOENT) {
		rc = kv_index_put_meta(st->ix, "format", &fmt, sizeof(fmt));
		if (rc < 0)
			return rc;
	}
	len = kv_index_get_meta(st->ix, "pool_uuid", uuid, sizeof(uuid));
	if (len == (long)sizeof(uuid) && !kv_pool_formatted(st->pool) &&
	    memcmp(uuid, kv_pool_uuid(st->pool), sizeof(uuid)) == 0)
		return 0;
	rc = kv_index_put_meta(st->ix, "pool_uuid", kv_pool_uuid(st->pool),
			       KV_POOL_UUID_LEN);
	return rc < 0 ? rc : 1;
}

static int recover_lost(uint32_t ns, const uint8_t hash[KVFS_HASH_LEN],
			const struct kv_block_rec *rec, void *arg)
{
	struct recover *r = arg;

	r->st->recovery_dropped++;
	return drop_later(r, ns, hash);
}

static int recover_dir(uint32_t ns, const char *path, size_t len,
		       uint64_t created_ns, void *arg)
{
	return open_recover_dir(arg, ns, path, len, created_ns);
}

/* ---- close records (index.h) ----------------------------------------- */

struct closed {
	uint32_t ns;
	uint8_t hash[KVFS_HASH_LEN];
	struct kv_block_rec rec; /* rec.path: path below, or NULL */
	char *path;
};

struct closed_scan {
	struct closed *v;
	size_t n, cap;
};

static int closed_collect(uint32_t ns, const uint8_t hash[KVFS_HASH_LEN],
			  const struct kv_block_rec *rec, void *arg)
{
	struct closed_scan *cs = arg;
	struct closed *c;

	if (cs->n == cs->cap) {
		size_t cap = cs->cap ? cs->cap * 2 : 16;

		c = realloc(cs->v, sizeof(*c) * cap);
		if (!c)
			return -ENOMEM;
		cs->v = c;
		cs->cap = cap;
	}
	c = &cs->v[cs->n];
	c->ns = ns;
	memcpy(c->hash, hash, KVFS_HASH_LEN);
	c->rec = *rec;
	c->path = NULL;
	if (rec->path) {
		c->path = strndup(rec->path, rec->path_len);
		if (!c->path)
			return -ENOMEM;
	}
	c->rec.path = c->path;
	cs->n++;
	return 0;
}

static int by_close_time(const void *a, const void *b)
{
	uint64_t x = ((const struct closed *)a)->rec.seal_ns;
	uint64_t y = ((const struct closed *)b)->rec.seal_ns;

	return x < y ? -1 : x > y;
}

/* why a close record is not to be published, or NULL when it is */
static const char *closed_check(struct kv_store *st, const struct closed *c)
{
	struct store_ns *n = store_ns_get(st, c->ns);
	struct kv_block_rec old;

	if (!n)
		return "unknown namespace";
	if (c->path && n->layout != KV_LAYOUT_OPEN)
		return "a path in a chain namespace";
	uint32_t crc;

	if (c->rec.slot >= st->nslots ||
	    (c->rec.size > st->slot_size && !c->rec.spilled))
		return "slot or size out of range";
	if (blk_bytes_crc(st, c->rec.slot, c->rec.spilled, -1, c->rec.size,
			  &crc) < 0 ||
	    crc != c->rec.checksum)
		return "written again after its close";
	if (kv_index_get_block(st->ix, c->ns, c->hash, &old) == 0) {
		if (old.slot == c->rec.slot)
			return "sealed already";
		if (old.seal_ns > c->rec.seal_ns)
			return "a newer file holds its name";
	}
	return NULL;
}

/*
 * Blocks whose writer's close returned before this process died, and
 * which it never got to seal: sealed now, oldest close first, so that the
 * block records scanned next include them.  With a pool that is not the
 * one recorded, their bytes are gone: dropped.
 */
static int recover_closed(struct kv_store *st, bool lost)
{
	struct closed_scan cs = { 0 };
	uint64_t bad = 0, sealed = 0;
	char hex[KVFS_HASH_HEX_LEN + 1];
	int rc = kv_index_scan_closed(st->ix, closed_collect, &cs, &bad);

	st->recovery_dropped += bad;
	if (rc == 0 && cs.n)
		qsort(cs.v, cs.n, sizeof(*cs.v), by_close_time);
	for (size_t i = 0; rc == 0 && i < cs.n; i++) {
		struct closed *c = &cs.v[i];
		const char *why =
			lost ? "the pool is new" : closed_check(st, c);

		if (!why) {
			/* the block record's put deletes the close record */
			rc = kv_index_put_block(st->ix, c->ns, c->hash,
						&c->rec);
			sealed += rc == 0;
			continue;
		}
		kvfs_hash_to_hex(c->hash, hex);
		kvfs_info("recovery: not publishing closed file %s (ns %u): %s",
			  c->path ? c->path : hex, c->ns, why);
		rc = kv_index_del_closed(st->ix, c->rec.slot);
	}
	for (size_t i = 0; i < cs.n; i++)
		free(cs.v[i].path);
	free(cs.v);
	if (sealed)
		kvfs_info("recovery: %llu files closed before the last exit "
			  "published",
			  (unsigned long long)sealed);
	return rc;
}

/* a spill file is kept when its slot holds a spilled sealed block */
static bool spill_kept(uint32_t slot, void *arg)
{
	struct kv_store *st = arg;

	return slot < st->nslots && st->blk[slot].spilled;
}

static int store_recover(struct kv_store *st)
{
	struct recover r = { .st = st };
	uint64_t bad = 0;
	int lost, rc;

	lost = recover_pool_identity(st);
	if (lost < 0)
		return lost;
	rc = kv_index_scan_ns(st->ix, recover_ns, st, &bad);
	if (rc < 0)
		return rc;
	rc = kv_index_scan_dirs(st->ix, recover_dir, st, &bad);
	if (rc < 0)
		return rc;
	rc = recover_closed(st, lost);
	if (rc < 0)
		return rc;
	rc = kv_index_scan_blocks(st->ix, lost ? recover_lost : recover_block,
				  &r, &bad);
	st->recovery_dropped += bad;
	for (size_t i = 0; rc >= 0 && i < r.ndrop; i++)
		rc = kv_index_del_block(st->ix, r.drop[i].ns, r.drop[i].hash);
	free(r.drop);
	if (rc < 0)
		return rc;
	if (lost && r.ndrop)
		kvfs_warn("pool %s is not the one the index describes (new "
			  "or reformatted): %zu block records dropped",
			  kv_pool_path(st->pool), r.ndrop);
	else if (st->recovery_dropped)
		kvfs_warn("recovery: %llu sealed blocks failed verification "
			  "and were dropped",
			  (unsigned long long)st->recovery_dropped);
	rc = kv_pool_spill_sweep(st->pool, spill_kept, st);
	if (rc < 0)
		kvfs_warn("recovery: sweeping spill files: %s", strerror(-rc));
	return recover_lists(st);
}

/* ---- open / close -------------------------------------------------- */

static int store_tables(struct kv_store *st)
{
	pthread_condattr_t ca;

	st->blk = tab_map(sizeof(*st->blk) * st->nslots);
	if (!st->blk)
		return -ENOMEM;
	if (tab_alloc(st) < 0)
		return -ENOMEM;
	for (uint32_t s = 0; s < st->nslots; s++)
		st->blk[s].parent_slot = NIL;
	st->leaf.head = st->leaf.tail = NIL;
	st->inner.head = st->inner.tail = NIL;
	st->next_ns_id = 1;
	st->lease_min_ns = UINT64_MAX;
	if (getrandom(&st->sip_k0, sizeof(st->sip_k0), 0) < 0 ||
	    getrandom(&st->sip_k1, sizeof(st->sip_k1), 0) < 0 ||
	    getrandom(&st->next_lease, sizeof(st->next_lease), 0) < 0)
		return -EIO;
	st->next_lease = (st->next_lease >> 1) | 1; /* never 0 */
	if (pthread_mutex_init(&st->lock, NULL))
		return -ENOMEM;
	if (pthread_condattr_init(&ca) ||
	    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) ||
	    pthread_cond_init(&st->settled, &ca)) {
		pthread_mutex_destroy(&st->lock);
		return -ENOMEM;
	}
	pthread_condattr_destroy(&ca);
	return 0;
}

int kv_store_open(const struct kv_store_config *cfg, struct kv_store **out)
{
	struct kv_pool_geom g;
	struct kv_store *st;
	int rc;

	if (!cfg || !out || !cfg->pool_path || !cfg->index_dir)
		return -EINVAL;
	g.slot_size = cfg->slot_size;
	g.nslots = cfg->nslots;
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->lease_ms = cfg->lease_ms ? cfg->lease_ms : STORE_DEFAULT_LEASE_MS;
	st->publish_wait_ms = cfg->publish_wait_ms ? cfg->publish_wait_ms
						   : STORE_PUBLISH_WAIT_MS;
	rc = kv_pool_open_mode(
		cfg->pool_path, &g,
		KV_POOL_CREATE | (cfg->reformat ? KV_POOL_REFORMAT : 0) |
			(cfg->prealloc ? KV_POOL_PREALLOC : 0),
		cfg->pool_mode ? cfg->pool_mode : 0600, &st->pool);
	if (rc < 0)
		goto out_free;
	st->nslots = g.nslots;
	st->slot_size = g.slot_size;
	st->capacity = cfg->capacity ? cfg->capacity
				     : (uint64_t)g.nslots * g.slot_size;
	rc = kv_index_open(cfg->index_dir, &st->ix);
	if (rc < 0)
		goto out_pool;
	rc = store_tables(st);
	if (rc < 0)
		goto out_index;
	rc = store_recover(st);
	if (rc < 0)
		goto out_index;
	*out = st;
	return 0;

out_index:
	kv_index_close(st->ix);
out_pool:
	kv_pool_close(st->pool);
out_free:
	open_free(st);
	if (st->blk)
		for (uint32_t s = 0; s < st->nslots; s++)
			free(st->blk[s].path);
	tab_unmap(st->blk, sizeof(*st->blk) * st->nslots);
	tab_free(st);
	if (st->ns)
		for (uint32_t i = 0; i < st->ns_cap; i++)
			free(st->ns[i]);
	free(st->ns);
	free(st);
	return rc;
}

void kv_store_close(struct kv_store *st)
{
	if (!st)
		return;
	lease_drop_all(st);
	kv_index_close(st->ix);
	kv_pool_close(st->pool);
	for (uint32_t i = 0; i < st->ns_cap; i++)
		free(st->ns[i]);
	free(st->ns);
	open_free(st);
	for (uint32_t s = 0; s < st->nslots; s++)
		free(st->blk[s].path);
	tab_unmap(st->blk, sizeof(*st->blk) * st->nslots);
	tab_free(st);
	pthread_cond_destroy(&st->settled);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

uint64_t kv_store_slot_size(const struct kv_store *st)
{
	return st->slot_size;
}

const struct kv_pool *kv_store_pool(const struct kv_store *st)
{
	return st->pool;
}

/* ---- namespaces ---------------------------------------------------- */

int kv_store_ns_create(struct kv_store *st, const char *name,
		       uint32_t block_tokens, uint32_t *id)
{
	return kv_store_ns_create_layout(st, name, block_tokens,
					 KV_LAYOUT_CHAIN, id);
}

int kv_store_ns_layout(struct kv_store *st, uint32_t id)
{
	struct store_ns *n;
	int rc;

	if (!st)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	n = store_ns_get(st, id);
	rc = n ? (int)n->layout : -ENOENT;
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int kv_store_ns_set_layout(struct kv_store *st, const char *name,
			   unsigned layout)
{
	struct kv_ns_rec rec;
	struct store_ns *n;
	int rc;

	if (!st || kvfs_ns_valid(name) < 0 || layout > KV_LAYOUT_OPEN)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	n = ns_by_name(st, name);
	if (!n) {
		rc = -ENOENT;
	} else if (n->s.blocks || n->s.writing || n->nsub || n->nfiles) {
		rc = n->layout == layout ? 0 : -ENOTEMPTY;
	} else {
		rec.id = n->id;
		rec.block_tokens = n->block_tokens;
		rec.created_ns = n->created_ns;
		rec.layout = layout;
		rc = kv_index_put_ns(st->ix, name, &rec);
		if (rc == 0)
			n->layout = layout;
	}
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int kv_store_ns_create_layout(struct kv_store *st, const char *name,
			      uint32_t block_tokens, unsigned layout,
			      uint32_t *id)
{
	struct kv_ns_rec rec;
	int rc;

	if (!st || kvfs_ns_valid(name) < 0 || block_tokens == 0 ||
	    block_tokens > KVFS_BLOCK_TOKENS_MAX || layout > KV_LAYOUT_OPEN)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	if (ns_by_name(st, name)) {
		rc = -EEXIST;
		goto out_unlock;
	}
	rec.id = st->next_ns_id;
	rec.block_tokens = block_tokens;
	rec.created_ns = kvfs_wall_ns();
	rec.layout = layout;
	if (rec.id == NIL) {
		rc = -ENOSPC;
		goto out_unlock;
	}
	rc = kv_index_put_ns(st->ix, name, &rec);
	if (rc < 0)
		goto out_unlock;
	rc = ns_install(st, name, &rec);
	if (rc < 0) {
		kv_index_del_ns(st->ix, name);
		goto out_unlock;
	}
	if (id)
		*id = rec.id;
out_unlock:
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int kv_store_ns_find(struct kv_store *st, const char *name, uint32_t *id,
		     uint32_t *block_tokens)
{
	struct store_ns *n;
	int rc = -ENOENT;

	if (!st || kvfs_ns_valid(name) < 0)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	n = ns_by_name(st, name);
	if (n) {
		if (id)
			*id = n->id;
		if (block_tokens)
			*block_tokens = n->block_tokens;
		rc = 0;
	}
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int kv_store_ns_find_id(struct kv_store *st, uint32_t id, char *name)
{
	struct store_ns *n;
	int rc = -ENOENT;

	if (!st || !name)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	n = store_ns_get(st, id);
	if (n) {
		memcpy(name, n->name, sizeof(n->name));
		rc = 0;
	}
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int kv_store_ns_set_block_tokens(struct kv_store *st, const char *name,
				 uint32_t block_tokens)
{
	struct kv_ns_rec rec;
	struct store_ns *n;
	int rc;

	if (!st || kvfs_ns_valid(name) < 0 || block_tokens == 0 ||
	    block_tokens > KVFS_BLOCK_TOKENS_MAX)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	n = ns_by_name(st, name);
	if (!n) {
		rc = -ENOENT;
		goto out_unlock;
	}
	if (n->s.blocks || n->s.writing || n->nsub) {
		rc = -ENOTEMPTY;
		goto out_unlock;
	}
	rec.id = n->id;
	rec.block_tokens = block_tokens;
	rec.created_ns = n->created_ns;
	rec.layout = n->layout;
	rc = kv_index_put_ns(st->ix, name, &rec);
	if (rc == 0)
		n->block_tokens = block_tokens;
out_unlock:
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int kv_store_ns_remove(struct kv_store *st, const char *name)
{
	struct store_ns *n;
	int rc;

	if (!st || kvfs_ns_valid(name) < 0)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	n = ns_by_name(st, name);
	if (!n) {
		rc = -ENOENT;
		goto out_unlock;
	}
	if (n->s.blocks || n->s.writing || n->nsub) {
		rc = -ENOTEMPTY;
		goto out_unlock;
	}
	rc = kv_index_del_ns(st->ix, name);
	if (rc < 0)
		goto out_unlock;
	/* the id is not reused: a DEAD block may still carry it */
	st->ns[n->id] = NULL;
	free(n);
out_unlock:
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int kv_store_ns_foreach(struct kv_store *st,
			int (*fn)(const char *name, uint32_t id,
				  uint32_t block_tokens,
				  const struct kv_stats *s, void *arg),
			void *arg)
{
	int rc = 0;

	if (!st || !fn)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	for (uint32_t i = 1; i < st->ns_cap && !rc; i++) {
		struct store_ns *n = st->ns[i];

		if (n)
			rc = fn(n->name, n->id, n->block_tokens, &n->s, arg);
	}
	pthread_mutex_unlock(&st->lock);
	return rc;
}

/* ---- stats --------------------------------------------------------- */

int kv_store_stats(struct kv_store *st, struct kv_store_stats *out)
{
	if (!st || !out)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	lease_sweep_locked(st, kvfs_mono_ns());
	out->total = st->total;
	out->slots_total = st->nslots;
	out->slots_free = kv_pool_nfree(st->pool);
	out->slot_size = st->slot_size;
	out->capacity = st->capacity;
	out->used = st->used;
	out->spilled = st->spilled;
	out->leases = st->nleases;
	out->pinned = st->pinned;
	out->recovered = st->recovered;
	out->recovery_dropped = st->recovery_dropped;
	pthread_mutex_unlock(&st->lock);
	return 0;
}

int kv_store_ns_stats(struct kv_store *st, uint32_t ns, struct kv_stats *out)
{
	struct store_ns *n;
	int rc = -ENOENT;

	if (!st || !out)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	n = store_ns_get(st, ns);
	if (n) {
		*out = n->s;
		rc = 0;
	}
	pthread_mutex_unlock(&st->lock);
	return rc;
}
