/*
 * store_open.c - files and directories of open namespaces (store.h, "open
 * namespaces").
 *
 * A file is an ordinary block keyed by kvfs_path_key(path) that also
 * remembers its path (blk.path, and version 2 of the block record), so
 * eviction, leases, references, events and replicas need nothing new.
 * Directories live in a chained hash table over (ns, path) plus a dense
 * array that kv_store_dir_next walks; each counts the files and
 * subdirectories directly in it, so rmdir's emptiness test and a
 * directory's link count cost nothing.  The namespace's own top directory
 * keeps its counts in store_ns.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/clock.h"
#include "src/common/crc32c.h"
#include "src/common/log.h"
#include "kvstore/store_int.h"

#define DIR_TAB_MIN 64u
#define FILES_CURSOR (1ull << 40) /* kv_store_dir_next: files from here */

/* ---- paths --------------------------------------------------------- */

/* 0 when path is a valid relative path (store.h), its length in *len */
static int path_check(const char *path, size_t *len)
{
	size_t n, c = 0;

	if (!path)
		return -EINVAL;
	n = strnlen(path, KV_STORE_PATH_MAX + 1);
	if (n == 0 || n > KV_STORE_PATH_MAX)
		return -EINVAL;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && path[i] != '/') {
			c++;
			continue;
		}
		if (c == 0 || c > 255)
			return -EINVAL;
		if ((c == 1 && path[i - 1] == '.') ||
		    (c == 2 && path[i - 1] == '.' && path[i - 2] == '.'))
			return -EINVAL;
		c = 0;
	}
	*len = n;
	return 0;
}

/* length of the directory part of path ("a/b" of "a/b/c"; 0 on top) */
static size_t parent_len(const char *path, size_t len)
{
	while (len && path[len - 1] != '/')
		len--;
	return len ? len - 1 : 0;
}

/* ---- the directory table (lock held) ------------------------------- */

static struct sdir *dir_find(struct kv_store *st, uint32_t ns, const char *path,
			     size_t len)
{
	struct sdir *d;

	if (!st->dir_tab_mask)
		return NULL;
	d = st->dir_tab[store_sip(st, ns, path, len) & st->dir_tab_mask];
	for (; d; d = d->next)
		if (d->ns == ns && d->len == len &&
		    memcmp(d->path, path, len) == 0)
			return d;
	return NULL;
}

static int dir_tab_grow(struct kv_store *st)
{
	uint32_t cap =
		st->dir_tab_mask ? (st->dir_tab_mask + 1) * 2 : DIR_TAB_MIN;
	struct sdir **t = calloc(cap, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (uint32_t i = 0; i < st->ndirs; i++) {
		struct sdir *d = st->dirs[i];
		uint32_t h;

		if (!d)
			continue;
		h = store_sip(st, d->ns, d->path, d->len) & (cap - 1);
		d->next = t[h];
		t[h] = d;
	}
	free(st->dir_tab);
	st->dir_tab = t;
	st->dir_tab_mask = cap - 1;
	return 0;
}

/* counts of the directory holding path (the namespace's top one too) */
static uint32_t *counts_of(struct kv_store *st, uint32_t ns, const char *path,
			   size_t len, bool sub)
{
	size_t pl = parent_len(path, len);
	struct store_ns *n;
	struct sdir *d;

	if (pl == 0) {
		n = store_ns_get(st, ns);
		return n ? (sub ? &n->nsub : &n->nfiles) : NULL;
	}
	d = dir_find(st, ns, path, pl);
	return d ? (sub ? &d->nsub : &d->nfiles) : NULL;
}

void open_count(struct kv_store *st, uint32_t ns, const char *path, int delta)
{
	uint32_t *c = counts_of(st, ns, path, strlen(path), false);

	if (c)
		*c += (uint32_t)delta;
}

/* install a directory in memory; its parent must be there */
static int dir_install(struct kv_store *st, uint32_t ns, const char *path,
		       size_t len, uint64_t created_ns)
{
	uint32_t *parent, h, idx;
	struct sdir *d;

	if (!st->ndir_free && st->ndirs == st->dirs_cap) {
		uint32_t cap = st->dirs_cap ? st->dirs_cap * 2 : DIR_TAB_MIN;
		struct sdir **a = realloc(st->dirs, sizeof(*a) * cap);
		uint32_t *f;

		if (!a)
			return -ENOMEM;
		st->dirs = a;
		f = realloc(st->dir_free, sizeof(*f) * cap);
		if (!f)
			return -ENOMEM;
		st->dir_free = f;
		st->dirs_cap = cap;
	}
	/* at most one directory per bucket on average */
	if (!st->dir_tab_mask || st->ndirs > st->dir_tab_mask) {
		int rc = dir_tab_grow(st);

		if (rc < 0)
			return rc;
	}
	d = calloc(1, sizeof(*d) + len + 1);
	if (!d)
		return -ENOMEM;
	d->ns = ns;
	d->len = len;
	d->created_ns = created_ns;
	memcpy(d->path, path, len);
	h = store_sip(st, ns, path, len) & st->dir_tab_mask;
	d->next = st->dir_tab[h];
	st->dir_tab[h] = d;
	idx = st->ndir_free ? st->dir_free[--st->ndir_free] : st->ndirs++;
	d->idx = idx;
	st->dirs[idx] = d;
	parent = counts_of(st, ns, path, len, true);
	if (parent)
		(*parent)++;
	return 0;
}

static void dir_uninstall(struct kv_store *st, struct sdir *d)
{
	uint32_t *parent = counts_of(st, d->ns, d->path, d->len, true);
	struct sdir **pp;

	if (parent)
		(*parent)--;
	pp = &st->dir_tab[store_sip(st, d->ns, d->path, d->len) &
			  st->dir_tab_mask];
	while (*pp != d)
		pp = &(*pp)->next;
	*pp = d->next;
	/* a hole, not a move: a walk past it sees every other directory
	 * once (a new one may fill it, seen or not) */
	st->dirs[d->idx] = NULL;
	st->dir_free[st->ndir_free++] = d->idx;
	free(d);
}

/* make every missing directory above path (durable); lock held */
static int dirs_ensure(struct kv_store *st, uint32_t ns, const char *path,
		       size_t len)
{
	uint8_t key[KVFS_HASH_LEN];
	size_t pl = parent_len(path, len);
	int rc;

	if (pl == 0 || dir_find(st, ns, path, pl))
		return 0;
	/* a path is a file or a directory, never both */
	rc = kvfs_path_key(path, pl, key);
	if (rc == 0 && blk_find_sealed(st, ns, key) != NIL)
		rc = -ENOTDIR;
	if (rc < 0)
		return rc;
	rc = dirs_ensure(st, ns, path, pl);
	if (rc == 0)
		rc = kv_index_put_dir(st->ix, ns, path, pl, kvfs_wall_ns());
	if (rc == 0)
		rc = dir_install(st, ns, path, pl, kvfs_wall_ns());
	return rc;
}

void open_free(struct kv_store *st)
{
	for (uint32_t i = 0; i < st->ndirs; i++)
		free(st->dirs[i]);
	free(st->dirs);
	free(st->dir_free);
	free(st->dir_tab);
	st->dirs = NULL;
	st->dir_free = NULL;
	st->dir_tab = NULL;
	st->ndirs = st->dirs_cap = st->dir_tab_mask = st->ndir_free = 0;
}

/* ---- recovery ------------------------------------------------------ */

int open_recover_dir(struct kv_store *st, uint32_t ns, const char *path,
		     size_t len, uint64_t created_ns)
{
	struct store_ns *n = store_ns_get(st, ns);
	char buf[KV_STORE_PATH_MAX + 1];
	size_t l;
	int rc;

	if (!n || n->layout != KV_LAYOUT_OPEN || len > KV_STORE_PATH_MAX)
		return 0; /* an orphan: harmless, ignored */
	memcpy(buf, path, len);
	buf[len] = '\0';
	if (path_check(buf, &l) < 0 || dir_find(st, ns, buf, len))
		return 0;
	/* records come in key order: a parent sorts before its children,
	 * but a parent whose record was lost is made again */
	rc = dirs_ensure(st, ns, buf, len);
	return rc < 0 ? rc : dir_install(st, ns, buf, len, created_ns);
}

int open_recover_file(struct kv_store *st, uint32_t slot, const char *path,
		      size_t len)
{
	struct blk *b = &st->blk[slot];
	int rc;

	b->path = strndup(path, len);
	if (!b->path)
		return -ENOMEM;
	rc = dirs_ensure(st, b->ns, b->path, len);
	if (rc == -ENOTDIR) {
		/* under a name that is a file: reachable by key only */
		free(b->path);
		b->path = NULL;
		return 0;
	}
	if (rc == 0)
		open_count(st, b->ns, b->path, 1);
	return rc;
}

/* ---- files --------------------------------------------------------- */

static struct store_ns *open_ns(struct kv_store *st, uint32_t ns)
{
	struct store_ns *n = store_ns_get(st, ns);

	return n && n->layout == KV_LAYOUT_OPEN ? n : NULL;
}

/* 0 for an open namespace, -EINVAL for a chain one, -ENOENT */
static int open_check(struct kv_store *st, uint32_t ns)
{
	struct store_ns *n = store_ns_get(st, ns);

	return !n ? -ENOENT : n->layout == KV_LAYOUT_OPEN ? 0 : -EINVAL;
}

/* the directory that would hold path exists (lock held) */
static bool parent_exists(struct kv_store *st, uint32_t ns, const char *path,
			  size_t len)
{
	size_t pl = parent_len(path, len);

	return pl == 0 || dir_find(st, ns, path, pl);
}

/* a block being written under key (a replica coming by key) loses the
 * name to a file published or renamed there now: lock held */
static void supersede(struct kv_store *st, uint32_t ns,
		      const uint8_t key[KVFS_HASH_LEN])
{
	uint32_t w = tab_find(st, ns, key);

	if (w != NIL && st->blk[w].state == BLK_WRITING) {
		tab_remove(st, w);
		st->blk[w].staged = 2;
	}
}

int kv_store_create_staging(struct kv_store *st, uint32_t ns, uint32_t *wh)
{
	struct store_ns *n;
	uint32_t slot;
	int rc;

	if (!st || !wh)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	n = store_ns_get(st, ns);
	rc = !n ? -ENOENT : n->layout != KV_LAYOUT_OPEN ? -EINVAL : 0;
	if (rc == 0)
		rc = blk_slot_alloc(st, &slot);
	if (rc == 0) {
		blk_start(st, slot, ns, NULL, NULL); /* no name: staged */
		*wh = slot;
	}
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int kv_store_publish(struct kv_store *st, uint32_t wh, const char *path,
		     bool noreplace)
{
	struct blk *b = blk_writing(st, wh);
	uint8_t key[KVFS_HASH_LEN];
	struct kv_block_rec rec;
	uint32_t old;
	size_t len;
	char *p;
	int rc;

	if (!b || !b->staged || path_check(path, &len) < 0 ||
	    kvfs_path_key(path, len, key) < 0)
		return -EINVAL;
	p = strdup(path);
	if (!p)
		return -ENOMEM;
	/* the checksum outside the lock: the slot is the writer's alone */
	memset(&rec, 0, sizeof(rec));
	rec.slot = wh;
	rec.size = b->size;
	rc = blk_seal_crc(st, b, wh, &rec.checksum);
	if (rc == 0)
		rc = blk_spill_seal(st, b);
	if (rc < 0) {
		free(p);
		pthread_mutex_lock(&st->lock);
		blk_abort(st, wh);
		pthread_mutex_unlock(&st->lock);
		return -EIO;
	}
	rec.spilled = b->spilled;
	rec.seal_ns = kvfs_wall_ns();
	rec.path = p;
	rec.path_len = len;

	pthread_mutex_lock(&st->lock);
	if (!open_ns(st, b->ns)) {
		rc = -ENOENT;
		goto out_keep;
	}
	if (!parent_exists(st, b->ns, p, len)) {
		rc = -ENOENT;
		goto out_keep;
	}
	if (dir_find(st, b->ns, p, len)) {
		rc = -EISDIR;
		goto out_keep;
	}
	old = blk_find_sealed(st, b->ns, key);
	if (old != NIL && noreplace) {
		rc = -EEXIST;
		goto out_keep;
	}
	supersede(st, b->ns, key);
	/* one put: the old file's record, same key, is overwritten */
	rc = kv_index_put_block(st->ix, b->ns, key, &rec);
	if (rc < 0) {
		blk_abort(st, wh);
		goto out_keep;
	}
	if (old != NIL && blk_unpublish(st, old, false) == 0)
		blk_drop(st, old);
	memcpy(b->hash, key, KVFS_HASH_LEN);
	b->path = p;
	b->staged = 0;
	tab_insert(st, wh);
	blk_sealed(st, wh, &rec);
	pthread_mutex_unlock(&st->lock);
	return 0;

out_keep:
	pthread_mutex_unlock(&st->lock);
	free(p);
	return rc;
}

int kv_store_rename(struct kv_store *st, uint32_t ns, const char *from,
		    const char *to, bool noreplace)
{
	uint8_t kfrom[KVFS_HASH_LEN], kto[KVFS_HASH_LEN];
	struct kv_block_rec rec;
	size_t flen, tlen;
	uint32_t s, t;
	struct blk *b;
	char *p;
	int rc;

	if (!st || path_check(from, &flen) < 0 || path_check(to, &tlen) < 0 ||
	    kvfs_path_key(from, flen, kfrom) < 0 ||
	    kvfs_path_key(to, tlen, kto) < 0)
		return -EINVAL;
	p = strdup(to);
	if (!p)
		return -ENOMEM;
	pthread_mutex_lock(&st->lock);
	rc = open_check(st, ns);
	if (rc < 0)
		goto out_unlock;
	s = blk_find_sealed(st, ns, kfrom);
	if (s == NIL || !parent_exists(st, ns, p, tlen)) {
		rc = -ENOENT;
		goto out_unlock;
	}
	if (dir_find(st, ns, p, tlen)) {
		rc = -EISDIR;
		goto out_unlock;
	}
	if (memcmp(kfrom, kto, KVFS_HASH_LEN) == 0) {
		rc = 0; /* rename(2) of a name onto itself does nothing */
		goto out_unlock;
	}
	t = blk_find_sealed(st, ns, kto);
	if (t != NIL && noreplace) {
		rc = -EEXIST;
		goto out_unlock;
	}
	supersede(st, ns, kto);
	b = &st->blk[s];
	memset(&rec, 0, sizeof(rec));
	rec.slot = s;
	rec.size = b->size;
	rec.checksum = b->checksum;
	rec.seal_ns = b->seal_ns;
	rec.spilled = b->spilled; /* its bytes stay where they are */
	rec.path = p;
	rec.path_len = tlen;
	rc = kv_index_move_block(st->ix, ns, kfrom, kto, &rec);
	if (rc < 0)
		goto out_unlock;
	if (t != NIL && blk_unpublish(st, t, false) == 0)
		blk_drop(st, t);
	/* the same slot, references and LRU place under its new key */
	tab_remove(st, s);
	if (b->path)
		open_count(st, ns, b->path, -1);
	if (st->event_fn)
		st->event_fn(st->event_arg, KV_STORE_GONE, ns, b->hash);
	free(b->path);
	b->path = p;
	p = NULL;
	memcpy(b->hash, kto, KVFS_HASH_LEN);
	tab_insert(st, s);
	open_count(st, ns, b->path, 1);
	if (st->event_fn)
		st->event_fn(st->event_arg, KV_STORE_SEALED, ns, b->hash);
out_unlock:
	pthread_mutex_unlock(&st->lock);
	free(p);
	return rc;
}

long kv_store_path(struct kv_store *st, uint32_t ns,
		   const uint8_t hash[KVFS_HASH_LEN], char *buf, size_t cap)
{
	uint32_t s;
	long rc;

	if (!st || !hash || !buf)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	s = blk_find_sealed(st, ns, hash);
	if (s == NIL) {
		rc = -ENOENT;
	} else if (!st->blk[s].path) {
		rc = -ENODATA;
	} else {
		rc = (long)strlen(st->blk[s].path);
		if ((size_t)rc < cap)
			memcpy(buf, st->blk[s].path, (size_t)rc + 1);
		else
			rc = -ERANGE;
	}
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int kv_store_set_path(struct kv_store *st, uint32_t ns, const char *path)
{
	uint8_t key[KVFS_HASH_LEN];
	struct kv_block_rec rec;
	struct blk *b;
	uint32_t s;
	size_t len;
	char *p;
	int rc;

	if (!st || path_check(path, &len) < 0 ||
	    kvfs_path_key(path, len, key) < 0)
		return -EINVAL;
	p = strdup(path);
	if (!p)
		return -ENOMEM;
	pthread_mutex_lock(&st->lock);
	rc = open_check(st, ns);
	if (rc < 0)
		goto out_unlock;
	s = blk_find_sealed(st, ns, key);
	if (s == NIL) {
		rc = -ENOENT;
		goto out_unlock;
	}
	b = &st->blk[s];
	rc = 0;
	if (b->path)
		goto out_unlock; /* it has one: the same, by its key */
	rc = dirs_ensure(st, ns, p, len);
	if (rc < 0)
		goto out_unlock;
	memset(&rec, 0, sizeof(rec));
	rec.slot = s;
	rec.size = b->size;
	rec.checksum = b->checksum;
	rec.seal_ns = b->seal_ns;
	rec.has_parent = b->has_parent;
	rec.spilled = b->spilled;
	memcpy(rec.parent, b->parent, KVFS_HASH_LEN);
	rec.path = p;
	rec.path_len = len;
	rc = kv_index_put_block(st->ix, ns, key, &rec);
	if (rc == 0) {
		b->path = p;
		p = NULL;
		open_count(st, ns, b->path, 1);
	}
out_unlock:
	pthread_mutex_unlock(&st->lock);
	free(p);
	return rc;
}

/* ---- directories --------------------------------------------------- */

int kv_store_dir_create(struct kv_store *st, uint32_t ns, const char *path)
{
	uint8_t key[KVFS_HASH_LEN];
	uint64_t now = kvfs_wall_ns();
	size_t len;
	int rc;

	if (!st || path_check(path, &len) < 0 ||
	    kvfs_path_key(path, len, key) < 0)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	if (!open_ns(st, ns))
		rc = store_ns_get(st, ns) ? -EINVAL : -ENOENT;
	else if (!parent_exists(st, ns, path, len))
		rc = -ENOENT;
	else if (dir_find(st, ns, path, len) ||
		 blk_find_sealed(st, ns, key) != NIL)
		rc = -EEXIST;
	else
		rc = kv_index_put_dir(st->ix, ns, path, len, now);
	if (rc == 0) {
		rc = dir_install(st, ns, path, len, now);
		if (rc < 0)
			kv_index_del_dir(st->ix, ns, path, len);
	}
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int kv_store_dir_remove(struct kv_store *st, uint32_t ns, const char *path)
{
	struct sdir *d;
	size_t len;
	int rc;

	if (!st || path_check(path, &len) < 0)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	rc = open_check(st, ns);
	d = rc ? NULL : dir_find(st, ns, path, len);
	if (rc)
		;
	else if (!d)
		rc = -ENOENT;
	else if (d->nfiles || d->nsub)
		rc = -ENOTEMPTY;
	else
		rc = kv_index_del_dir(st->ix, ns, path, len);
	if (rc == 0)
		dir_uninstall(st, d);
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int kv_store_dir_exists(struct kv_store *st, uint32_t ns, const char *path)
{
	size_t len = path ? strlen(path) : 0;
	int rc;

	if (!st || !path)
		return 0;
	pthread_mutex_lock(&st->lock);
	rc = open_ns(st, ns) && (len == 0 || dir_find(st, ns, path, len));
	pthread_mutex_unlock(&st->lock);
	return rc;
}

long kv_store_dir_count(struct kv_store *st, uint32_t ns, const char *path)
{
	size_t len = path ? strlen(path) : 0;
	struct store_ns *n;
	struct sdir *d;
	long rc = -ENOENT;

	if (!st || !path)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	n = open_ns(st, ns);
	if (!n && store_ns_get(st, ns))
		rc = -EINVAL;
	if (n && len == 0) {
		rc = (long)n->nfiles + n->nsub;
	} else if (n) {
		d = dir_find(st, ns, path, len);
		if (d)
			rc = (long)d->nfiles + d->nsub;
	}
	pthread_mutex_unlock(&st->lock);
	return rc;
}

/* path is directly in dir (dlen bytes; 0 for the top): its name or NULL */
static const char *child_name(const char *path, size_t len, const char *dir,
			      size_t dlen)
{
	size_t pl = parent_len(path, len);

	if (pl != dlen || (dlen && memcmp(path, dir, dlen) != 0))
		return NULL;
	return dlen ? path + dlen + 1 : path;
}

static int name_out(const char *name, char *out, size_t cap)
{
	size_t n = strlen(name);

	if (n >= cap)
		return -ERANGE;
	memcpy(out, name, n + 1);
	return 1;
}

int kv_store_dir_next(struct kv_store *st, uint32_t ns, const char *dir,
		      uint64_t *cursor, char *name, size_t cap, bool *is_dir)
{
	size_t dlen = dir ? strlen(dir) : 0;
	const char *nm;
	int rc = 0;

	if (!st || !dir || !cursor || !name || !is_dir)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	rc = open_check(st, ns);
	if (rc == 0 && dlen && !dir_find(st, ns, dir, dlen))
		rc = -ENOENT;
	if (rc < 0)
		goto out_unlock;
	for (uint64_t i = *cursor; i < FILES_CURSOR && i < st->ndirs; i++) {
		struct sdir *d = st->dirs[i];

		if (!d || d->ns != ns)
			continue;
		nm = child_name(d->path, d->len, dir, dlen);
		if (!nm)
			continue;
		*cursor = i + 1;
		*is_dir = true;
		rc = name_out(nm, name, cap);
		goto out_unlock;
	}
	for (uint64_t s = *cursor < FILES_CURSOR ? 0 : *cursor - FILES_CURSOR;
	     s < st->nslots; s++) {
		const struct blk *b = &st->blk[s];

		if (b->state != BLK_SEALED || b->ns != ns || !b->path)
			continue;
		nm = child_name(b->path, strlen(b->path), dir, dlen);
		if (!nm)
			continue;
		*cursor = FILES_CURSOR + s + 1;
		*is_dir = false;
		rc = name_out(nm, name, cap);
		goto out_unlock;
	}
	*cursor = FILES_CURSOR + st->nslots;
out_unlock:
	pthread_mutex_unlock(&st->lock);
	return rc;
}
