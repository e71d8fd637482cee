#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rocksdb/c.h>

#include "kvstore/index.h"
#include "src/common/log.h"
#include "src/common/le.h"

struct kv_index {
	rocksdb_t *db;
	rocksdb_options_t *opts;
	rocksdb_block_based_table_options_t *topts;
	rocksdb_filterpolicy_t *bloom; /* owned by topts once set */
	rocksdb_writeoptions_t *wopts;
	rocksdb_readoptions_t *ropts;
};

/* RocksDB reports errors as malloc'd strings: log once, return -EIO */
static int ix_err(char *err, const char *what)
{
	if (!err)
		return 0;
	kvfs_err("rocksdb %s: %s", what, err);
	rocksdb_free(err);
	return -EIO;
}

static void block_key(uint8_t key[KV_INDEX_BLOCK_KEY_LEN], uint32_t ns,
		      const uint8_t hash[KVFS_HASH_LEN])
{
	key[0] = 'b';
	key[1] = (uint8_t)(ns >> 24);
	key[2] = (uint8_t)(ns >> 16);
	key[3] = (uint8_t)(ns >> 8);
	key[4] = (uint8_t)ns;
	memcpy(key + 5, hash, KVFS_HASH_LEN);
}

/* 'n' + name; returns the key length or -EINVAL */
static int ns_key(uint8_t key[1 + KVFS_NS_MAX], const char *name)
{
	size_t len = name ? strlen(name) : 0;

	if (len == 0 || len > KVFS_NS_MAX)
		return -EINVAL;
	key[0] = 'n';
	memcpy(key + 1, name, len);
	return (int)(1 + len);
}

void kv_index_encode_block(const struct kv_block_rec *rec,
			   uint8_t out[KV_INDEX_BLOCK_REC_LEN])
{
	memset(out, 0, KV_INDEX_BLOCK_REC_LEN);
	out[0] = 1;
	out[1] = (rec->has_parent ? 1 : 0) | (rec->spilled ? 2 : 0);
	kv_put_le32(out + 4, rec->slot);
	kv_put_le64(out + 8, rec->size);
	kv_put_le32(out + 16, rec->checksum);
	kv_put_le64(out + 24, rec->seal_ns);
	if (rec->has_parent)
		memcpy(out + 32, rec->parent, KVFS_HASH_LEN);
}

int kv_index_decode_block(const void *buf, size_t len, struct kv_block_rec *rec)
{
	const uint8_t *p = buf;

	if (!buf || !rec || len < KV_INDEX_BLOCK_REC_LEN || (p[1] & ~3u))
		return -EINVAL;
	if (p[0] == 1 && len == KV_INDEX_BLOCK_REC_LEN) {
		rec->path = NULL;
		rec->path_len = 0;
	} else if (p[0] == 2 && len > KV_INDEX_BLOCK_REC_LEN + 2) {
		rec->path_len = kv_get_le16(p + KV_INDEX_BLOCK_REC_LEN);
		rec->path = (const char *)p + KV_INDEX_BLOCK_REC_LEN + 2;
		if (rec->path_len == 0 || rec->path_len > KV_INDEX_PATH_MAX ||
		    len != KV_INDEX_BLOCK_REC_LEN + 2 + rec->path_len ||
		    memchr(rec->path, '\0', rec->path_len))
			return -EINVAL;
	} else {
		return -EINVAL;
	}
	rec->has_parent = p[1] & 1;
	rec->spilled = (p[1] & 2) != 0;
	rec->slot = kv_get_le32(p + 4);
	rec->size = kv_get_le64(p + 8);
	rec->checksum = kv_get_le32(p + 16);
	rec->seal_ns = kv_get_le64(p + 24);
	memcpy(rec->parent, p + 32, KVFS_HASH_LEN);
	return 0;
}

static void ns_encode(const struct kv_ns_rec *rec,
		      uint8_t out[KV_INDEX_NS_REC_LEN])
{
	kv_put_le32(out, rec->id);
	kv_put_le32(out + 4, rec->block_tokens);
	kv_put_le64(out + 8, rec->created_ns);
	kv_put_le32(out + 16, rec->layout);
}

static int ns_decode(const char *buf, size_t len, struct kv_ns_rec *rec)
{
	const uint8_t *p = (const uint8_t *)buf;

	if (len != KV_INDEX_NS_REC_LEN && len != KV_INDEX_NS_REC_LEN_V1)
		return -EINVAL;
	rec->id = kv_get_le32(p);
	rec->block_tokens = kv_get_le32(p + 4);
	rec->created_ns = kv_get_le64(p + 8);
	rec->layout = len == KV_INDEX_NS_REC_LEN ? kv_get_le32(p + 16) : 0;
	return rec->id && rec->block_tokens && rec->layout <= 1 ? 0 : -EINVAL;
}

static void ix_free_opts(struct kv_index *ix)
{
	if (ix->ropts)
		rocksdb_readoptions_destroy(ix->ropts);
	if (ix->wopts)
		rocksdb_writeoptions_destroy(ix->wopts);
	if (ix->opts)
		rocksdb_options_destroy(ix->opts);
	if (ix->topts)
		rocksdb_block_based_options_destroy(ix->topts);
}

int kv_index_open(const char *dir, struct kv_index **out)
{
	struct kv_index *ix;
	char *err = NULL;

	if (!dir || !*dir || !out)
		return -EINVAL;
	ix = calloc(1, sizeof(*ix));
	if (!ix)
		return -ENOMEM;
	ix->opts = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(ix->opts, 1);
	rocksdb_options_increase_parallelism(ix->opts, 2);
	/* point reads dominate (open scans aside): bloom filters spare a
	 * miss the SST reads, which also keeps kvbench's baseline fair */
	ix->topts = rocksdb_block_based_options_create();
	ix->bloom = rocksdb_filterpolicy_create_bloom(10);
	rocksdb_block_based_options_set_filter_policy(ix->topts, ix->bloom);
	rocksdb_options_set_block_based_table_factory(ix->opts, ix->topts);
	ix->wopts = rocksdb_writeoptions_create();
	/* WAL on, no fsync: see store.h "Durability" */
	rocksdb_writeoptions_set_sync(ix->wopts, 0);
	ix->ropts = rocksdb_readoptions_create();
	ix->db = rocksdb_open(ix->opts, dir, &err);
	if (err) {
		ix_err(err, "open");
		kvfs_err("cannot open the index in %s", dir);
		ix_free_opts(ix);
		free(ix);
		return -EIO;
	}
	*out = ix;
	return 0;
}

void kv_index_close(struct kv_index *ix)
{
	if (!ix)
		return;
	rocksdb_close(ix->db);
	ix_free_opts(ix);
	free(ix);
}

static int ix_put(struct kv_index *ix, const void *k, size_t kl, const void *v,
		  size_t vl)
{
	char *err = NULL;

	rocksdb_put(ix->db, ix->wopts, k, kl, v, vl, &err);
	return ix_err(err, "put");
}

static int ix_del(struct kv_index *ix, const void *k, size_t kl)
{
	char *err = NULL;

	rocksdb_delete(ix->db, ix->wopts, k, kl, &err);
	return ix_err(err, "delete");
}

int kv_index_clear(struct kv_index *ix)
{
	rocksdb_iterator_t *it;
	rocksdb_writebatch_t *wb;
	char *err = NULL;
	size_t kl;

	if (!ix)
		return -EINVAL;
	wb = rocksdb_writebatch_create();
	it = rocksdb_create_iterator(ix->db, ix->ropts);
	for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it);
	     rocksdb_iter_next(it)) {
		const char *k = rocksdb_iter_key(it, &kl);

		rocksdb_writebatch_delete(wb, k, kl);
	}
	rocksdb_iter_get_error(it, &err);
	rocksdb_iter_destroy(it);
	if (!err)
		rocksdb_write(ix->db, ix->wopts, wb, &err);
	rocksdb_writebatch_destroy(wb);
	return ix_err(err, "clear");
}

int kv_index_put_meta(struct kv_index *ix, const char *key, const void *val,
		      size_t len)
{
	char k[64];
	int kl;

	if (!ix || !key || (!val && len))
		return -EINVAL;
	kl = snprintf(k, sizeof(k), "m%s", key);
	if (kl < 2 || kl >= (int)sizeof(k))
		return -EINVAL;
	return ix_put(ix, k, (size_t)kl, val, len);
}

long kv_index_get_meta(struct kv_index *ix, const char *key, void *val,
		       size_t cap)
{
	char k[64], *v, *err = NULL;
	size_t vl;
	int kl;

	if (!ix || !key || (!val && cap))
		return -EINVAL;
	kl = snprintf(k, sizeof(k), "m%s", key);
	if (kl < 2 || kl >= (int)sizeof(k))
		return -EINVAL;
	v = rocksdb_get(ix->db, ix->ropts, k, (size_t)kl, &vl, &err);
	if (err)
		return ix_err(err, "get");
	if (!v)
		return -ENOENT;
	memcpy(val, v, vl < cap ? vl : cap);
	rocksdb_free(v);
	return (long)vl;
}

int kv_index_put_ns(struct kv_index *ix, const char *name,
		    const struct kv_ns_rec *rec)
{
	uint8_t key[1 + KVFS_NS_MAX], val[KV_INDEX_NS_REC_LEN];
	int kl;

	if (!ix || !rec)
		return -EINVAL;
	kl = ns_key(key, name);
	if (kl < 0)
		return kl;
	ns_encode(rec, val);
	return ix_put(ix, key, (size_t)kl, val, sizeof(val));
}

int kv_index_del_ns(struct kv_index *ix, const char *name)
{
	uint8_t key[1 + KVFS_NS_MAX];
	int kl;

	if (!ix)
		return -EINVAL;
	kl = ns_key(key, name);
	if (kl < 0)
		return kl;
	return ix_del(ix, key, (size_t)kl);
}

/* the whole record, version 2 with a path; returns its length */
static size_t
block_val(const struct kv_block_rec *rec,
	  uint8_t val[KV_INDEX_BLOCK_REC_LEN + 2 + KV_INDEX_PATH_MAX])
{
	kv_index_encode_block(rec, val);
	if (!rec->path)
		return KV_INDEX_BLOCK_REC_LEN;
	val[0] = 2;
	kv_put_le16(val + KV_INDEX_BLOCK_REC_LEN, (uint16_t)rec->path_len);
	memcpy(val + KV_INDEX_BLOCK_REC_LEN + 2, rec->path, rec->path_len);
	return KV_INDEX_BLOCK_REC_LEN + 2 + rec->path_len;
}

static bool rec_ok(const struct kv_block_rec *rec)
{
	return !rec->path ||
	       (rec->path_len && rec->path_len <= KV_INDEX_PATH_MAX);
}

/* a u32 stored big-endian in a key (index.h: keys sort numerically) */
static uint32_t key_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

/* 'c' u32be slot */
static void closed_key(uint8_t key[KV_INDEX_CLOSED_KEY_LEN], uint32_t slot)
{
	key[0] = 'c';
	key[1] = (uint8_t)(slot >> 24);
	key[2] = (uint8_t)(slot >> 16);
	key[3] = (uint8_t)(slot >> 8);
	key[4] = (uint8_t)slot;
}

/*
 * A block record goes in with the delete of its slot's close record, in
 * one batch: from then on the slot is the sealed block's, and recovery
 * must not publish it a second time (index.h, close records).
 */
int kv_index_put_block(struct kv_index *ix, uint32_t ns,
		       const uint8_t hash[KVFS_HASH_LEN],
		       const struct kv_block_rec *rec)
{
	uint8_t key[KV_INDEX_BLOCK_KEY_LEN], ckey[KV_INDEX_CLOSED_KEY_LEN];
	uint8_t val[KV_INDEX_BLOCK_REC_LEN + 2 + KV_INDEX_PATH_MAX];
	rocksdb_writebatch_t *wb;
	char *err = NULL;

	if (!ix || !hash || !rec || !rec_ok(rec))
		return -EINVAL;
	block_key(key, ns, hash);
	closed_key(ckey, rec->slot);
	wb = rocksdb_writebatch_create();
	rocksdb_writebatch_delete(wb, (const char *)ckey, sizeof(ckey));
	rocksdb_writebatch_put(wb, (const char *)key, sizeof(key),
			       (const char *)val, block_val(rec, val));
	rocksdb_write(ix->db, ix->wopts, wb, &err);
	rocksdb_writebatch_destroy(wb);
	return ix_err(err, "put");
}

int kv_index_put_closed(struct kv_index *ix, uint32_t ns,
			const uint8_t hash[KVFS_HASH_LEN],
			const struct kv_block_rec *rec)
{
	uint8_t key[KV_INDEX_CLOSED_KEY_LEN];
	uint8_t val[4 + KVFS_HASH_LEN + KV_INDEX_BLOCK_REC_LEN + 2 +
		    KV_INDEX_PATH_MAX];

	if (!ix || !hash || !rec || !rec_ok(rec))
		return -EINVAL;
	closed_key(key, rec->slot);
	kv_put_le32(val, ns);
	memcpy(val + 4, hash, KVFS_HASH_LEN);
	return ix_put(ix, key, sizeof(key), val,
		      4 + KVFS_HASH_LEN +
			      block_val(rec, val + 4 + KVFS_HASH_LEN));
}

int kv_index_del_closed(struct kv_index *ix, uint32_t slot)
{
	uint8_t key[KV_INDEX_CLOSED_KEY_LEN];

	if (!ix)
		return -EINVAL;
	closed_key(key, slot);
	return ix_del(ix, key, sizeof(key));
}

int kv_index_move_block(struct kv_index *ix, uint32_t ns,
			const uint8_t from_hash[KVFS_HASH_LEN],
			const uint8_t to_hash[KVFS_HASH_LEN],
			const struct kv_block_rec *rec)
{
	uint8_t from[KV_INDEX_BLOCK_KEY_LEN], to[KV_INDEX_BLOCK_KEY_LEN];
	uint8_t ckey[KV_INDEX_CLOSED_KEY_LEN];
	uint8_t val[KV_INDEX_BLOCK_REC_LEN + 2 + KV_INDEX_PATH_MAX];
	rocksdb_writebatch_t *wb;
	char *err = NULL;

	if (!ix || !from_hash || !to_hash || !rec || !rec_ok(rec))
		return -EINVAL;
	block_key(from, ns, from_hash);
	block_key(to, ns, to_hash);
	closed_key(ckey, rec->slot);
	wb = rocksdb_writebatch_create();
	rocksdb_writebatch_delete(wb, (const char *)ckey, sizeof(ckey));
	rocksdb_writebatch_delete(wb, (const char *)from, sizeof(from));
	rocksdb_writebatch_put(wb, (const char *)to, sizeof(to),
			       (const char *)val, block_val(rec, val));
	rocksdb_write(ix->db, ix->wopts, wb, &err);
	rocksdb_writebatch_destroy(wb);
	return ix_err(err, "rename");
}

/* 'd' u32be ns path; returns the key length or -EINVAL */
static int dir_key(uint8_t key[5 + KV_INDEX_PATH_MAX], uint32_t ns,
		   const char *path, size_t len)
{
	if (!path || len == 0 || len > KV_INDEX_PATH_MAX)
		return -EINVAL;
	key[0] = 'd';
	key[1] = (uint8_t)(ns >> 24);
	key[2] = (uint8_t)(ns >> 16);
	key[3] = (uint8_t)(ns >> 8);
	key[4] = (uint8_t)ns;
	memcpy(key + 5, path, len);
	return (int)(5 + len);
}

int kv_index_put_dir(struct kv_index *ix, uint32_t ns, const char *path,
		     size_t len, uint64_t created_ns)
{
	uint8_t key[5 + KV_INDEX_PATH_MAX], val[8];
	int kl = dir_key(key, ns, path, len);

	if (!ix || kl < 0)
		return -EINVAL;
	kv_put_le64(val, created_ns);
	return ix_put(ix, key, (size_t)kl, val, sizeof(val));
}

int kv_index_del_dir(struct kv_index *ix, uint32_t ns, const char *path,
		     size_t len)
{
	uint8_t key[5 + KV_INDEX_PATH_MAX];
	int kl = dir_key(key, ns, path, len);

	if (!ix || kl < 0)
		return -EINVAL;
	return ix_del(ix, key, (size_t)kl);
}

int kv_index_del_block(struct kv_index *ix, uint32_t ns,
		       const uint8_t hash[KVFS_HASH_LEN])
{
	uint8_t key[KV_INDEX_BLOCK_KEY_LEN];

	if (!ix || !hash)
		return -EINVAL;
	block_key(key, ns, hash);
	return ix_del(ix, key, sizeof(key));
}

int kv_index_get_block(struct kv_index *ix, uint32_t ns,
		       const uint8_t hash[KVFS_HASH_LEN],
		       struct kv_block_rec *rec)
{
	uint8_t key[KV_INDEX_BLOCK_KEY_LEN];
	char *v, *err = NULL;
	size_t vl;
	int rc;

	if (!ix || !hash || !rec)
		return -EINVAL;
	block_key(key, ns, hash);
	v = rocksdb_get(ix->db, ix->ropts, (const char *)key, sizeof(key), &vl,
			&err);
	if (err)
		return ix_err(err, "get");
	if (!v)
		return -ENOENT;
	rc = kv_index_decode_block(v, vl, rec) ? -EIO : 0;
	rec->path = NULL; /* it pointed into v: only its length is left */
	rocksdb_free(v);
	return rc;
}

/* iterate the keys starting with prefix; step returns non-zero to stop */
static int ix_scan(struct kv_index *ix, char prefix,
		   int (*step)(const char *k, size_t kl, const char *v,
			       size_t vl, void *arg),
		   void *arg)
{
	rocksdb_iterator_t *it;
	char *err = NULL;
	int rc = 0;

	it = rocksdb_create_iterator(ix->db, ix->ropts);
	for (rocksdb_iter_seek(it, &prefix, 1); rocksdb_iter_valid(it);
	     rocksdb_iter_next(it)) {
		size_t kl, vl;
		const char *k = rocksdb_iter_key(it, &kl);
		const char *v = rocksdb_iter_value(it, &vl);

		if (kl == 0 || k[0] != prefix)
			break;
		rc = step(k, kl, v, vl, arg);
		if (rc)
			break;
	}
	rocksdb_iter_get_error(it, &err);
	rocksdb_iter_destroy(it);
	return err ? ix_err(err, "scan") : rc;
}

struct ns_scan {
	int (*fn)(const char *name, const struct kv_ns_rec *rec, void *arg);
	void *arg;
	uint64_t bad;
};

static int ns_step(const char *k, size_t kl, const char *v, size_t vl,
		   void *arg)
{
	struct ns_scan *s = arg;
	char name[KVFS_NS_MAX + 1];
	struct kv_ns_rec rec;

	if (kl < 2 || kl > 1 + KVFS_NS_MAX || ns_decode(v, vl, &rec)) {
		kvfs_warn("index: skipping a bad namespace record");
		s->bad++;
		return 0;
	}
	memcpy(name, k + 1, kl - 1);
	name[kl - 1] = '\0';
	return s->fn(name, &rec, s->arg);
}

int kv_index_scan_ns(struct kv_index *ix,
		     int (*fn)(const char *name, const struct kv_ns_rec *rec,
			       void *arg),
		     void *arg, uint64_t *bad)
{
	struct ns_scan s = { fn, arg, 0 };
	int rc;

	if (!ix || !fn)
		return -EINVAL;
	rc = ix_scan(ix, 'n', ns_step, &s);
	if (bad)
		*bad = s.bad;
	return rc;
}

struct block_scan {
	int (*fn)(uint32_t ns, const uint8_t hash[KVFS_HASH_LEN],
		  const struct kv_block_rec *rec, void *arg);
	void *arg;
	uint64_t bad;
};

static int block_step(const char *k, size_t kl, const char *v, size_t vl,
		      void *arg)
{
	struct block_scan *s = arg;
	const uint8_t *u = (const uint8_t *)k;
	struct kv_block_rec rec;
	uint32_t ns;

	if (kl != KV_INDEX_BLOCK_KEY_LEN ||
	    kv_index_decode_block(v, vl, &rec)) {
		kvfs_warn("index: skipping a bad block record");
		s->bad++;
		return 0;
	}
	ns = key_be32(u + 1);
	return s->fn(ns, u + 5, &rec, s->arg);
}

/* a scan of block-like records (prefix 'b' or 'c') through step */
static int scan_records(struct kv_index *ix, char prefix,
			int (*step)(const char *k, size_t kl, const char *v,
				    size_t vl, void *arg),
			int (*fn)(uint32_t ns,
				  const uint8_t hash[KVFS_HASH_LEN],
				  const struct kv_block_rec *rec, void *arg),
			void *arg, uint64_t *bad)
{
	struct block_scan s = { fn, arg, 0 };
	int rc;

	if (!ix || !fn)
		return -EINVAL;
	rc = ix_scan(ix, prefix, step, &s);
	if (bad)
		*bad = s.bad;
	return rc;
}

int kv_index_scan_blocks(struct kv_index *ix,
			 int (*fn)(uint32_t ns,
				   const uint8_t hash[KVFS_HASH_LEN],
				   const struct kv_block_rec *rec, void *arg),
			 void *arg, uint64_t *bad)
{
	return scan_records(ix, 'b', block_step, fn, arg, bad);
}

static int closed_step(const char *k, size_t kl, const char *v, size_t vl,
		       void *arg)
{
	struct block_scan *s = arg;
	const uint8_t *u = (const uint8_t *)v;
	struct kv_block_rec rec;
	uint32_t slot;

	if (kl != KV_INDEX_CLOSED_KEY_LEN || vl < 4 + KVFS_HASH_LEN ||
	    kv_index_decode_block(u + 4 + KVFS_HASH_LEN, vl - 4 - KVFS_HASH_LEN,
				  &rec)) {
		kvfs_warn("index: skipping a bad close record");
		s->bad++;
		return 0;
	}
	slot = key_be32((const uint8_t *)k + 1);
	if (slot != rec.slot) {
		kvfs_warn("index: skipping a close record of another slot");
		s->bad++;
		return 0;
	}
	return s->fn(kv_get_le32(u), u + 4, &rec, s->arg);
}

int kv_index_scan_closed(struct kv_index *ix,
			 int (*fn)(uint32_t ns,
				   const uint8_t hash[KVFS_HASH_LEN],
				   const struct kv_block_rec *rec, void *arg),
			 void *arg, uint64_t *bad)
{
	return scan_records(ix, 'c', closed_step, fn, arg, bad);
}

struct dir_scan {
	int (*fn)(uint32_t ns, const char *path, size_t len,
		  uint64_t created_ns, void *arg);
	void *arg;
	uint64_t bad;
};

static int dir_step(const char *k, size_t kl, const char *v, size_t vl,
		    void *arg)
{
	struct dir_scan *s = arg;
	const uint8_t *u = (const uint8_t *)k;
	uint32_t ns;

	if (kl < 6 || kl > 5 + KV_INDEX_PATH_MAX || vl != 8 ||
	    memchr(k + 5, '\0', kl - 5)) {
		kvfs_warn("index: skipping a bad directory record");
		s->bad++;
		return 0;
	}
	ns = key_be32(u + 1);
	return s->fn(ns, k + 5, kl - 5, kv_get_le64((const uint8_t *)v),
		     s->arg);
}

int kv_index_scan_dirs(struct kv_index *ix,
		       int (*fn)(uint32_t ns, const char *path, size_t len,
				 uint64_t created_ns, void *arg),
		       void *arg, uint64_t *bad)
{
	struct dir_scan s = { fn, arg, 0 };
	int rc;

	if (!ix || !fn)
		return -EINVAL;
	rc = ix_scan(ix, 'd', dir_step, &s);
	if (bad)
		*bad = s.bad;
	return rc;
}
