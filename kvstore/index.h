/*
 * index.h - the durable index: RocksDB (C API) under the store.
 *
 * RocksDB is the durable truth about what the pool holds; the store keeps
 * an in-memory table built from it at open and never reads RocksDB on a
 * lookup.  This module owns the key schema and the record encodings.
 *
 * Key schema (one default column family; integers big-endian in keys so
 * that RocksDB's bytewise order is numeric order):
 *
 *   key                                   value
 *   'm' "format"                          u32le KV_INDEX_FORMAT
 *   'm' "pool_uuid"                       16 bytes, uuid of the pool the
 *                                         records describe (pool.h)
 *   'n' name bytes (1..255)               namespace record, 16 bytes
 *   'b' u32be ns_id, 32-byte block hash   block record, 64 bytes, or 66 +
 *                                         the path's length (version 2)
 *   'd' u32be ns_id, path bytes           directory of an open namespace,
 *                                         8 bytes: creation time, ns
 *   'c' u32be slot                        close record of a block still
 *                                         being written: u32le ns_id,
 *                                         32-byte block hash, then a block
 *                                         record (version 1 or 2)
 *
 * Namespace record (little-endian):
 *
 *   offset  size  field
 *   0       4     id (1..), never reused while the index lives
 *   4       4     block_tokens
 *   8       8     creation time, ns since the epoch
 *   16      4     layout: 0 chain, 1 open (absent in 16-byte records
 *                 written before layouts: chain)
 *
 * Block record (little-endian):
 *
 *   offset  size  field
 *   0       1     record version (1)
 *   1       1     flags: bit 0 = has parent, bit 1 = spilled (its
 *                 bytes are in the slot's spill file, pool.h)
 *   2       2     reserved, 0
 *   4       4     slot in the pool
 *   8       8     size in bytes
 *   16      4     CRC-32C of the block's bytes
 *   20      4     reserved, 0
 *   24      8     seal time, ns since the epoch
 *   32      32    parent hash (zero without a parent)
 *   64      2     version 2 only: length of the path, 1..KV_INDEX_PATH_MAX
 *   66      n     version 2 only: the file's path in its open namespace
 *                 ("a/b/c.bin"); the block hash is kvfs_path_key(path)
 *
 * Version 1 records (64 bytes) are chain blocks, and open-namespace files
 * whose path this node never learned (a replica fetched or pushed by key).
 *
 * Close records.  A writer's close(2) returns before the mount publishes
 * its file (kvfs(7), Publication), so the close leaves a record of the
 * block as it is then (size, CRC, close time as seal time, its name or
 * path): a kvfsd killed before the publication publishes it at its next
 * open if the slot still holds exactly those bytes.  A slot has a close
 * record only while its block is being written: the block record that
 * seals it deletes it in the same batch (kv_index_put_block and
 * kv_index_move_block), and an abort deletes it before the slot is
 * reused.
 *
 * Writes go through the WAL without fsync (see store.h, "Durability").
 * Errors from RocksDB are logged with their text and returned as -EIO.
 */
#ifndef KVFS_INDEX_H
#define KVFS_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "src/common/hash.h"

#define KV_INDEX_FORMAT 1
#define KV_INDEX_NS_REC_LEN 20
#define KV_INDEX_NS_REC_LEN_V1 16
#define KV_INDEX_PATH_MAX 4096
#define KV_INDEX_BLOCK_REC_LEN 64
#define KV_INDEX_BLOCK_KEY_LEN (1 + 4 + KVFS_HASH_LEN)
#define KV_INDEX_CLOSED_KEY_LEN (1 + 4)

struct kv_index;

struct kv_ns_rec {
	uint32_t id;
	uint32_t block_tokens;
	uint64_t created_ns;
	uint32_t layout; /* 0 chain, 1 open */
};

struct kv_block_rec {
	uint32_t slot;
	uint32_t checksum;
	uint64_t size;
	uint64_t seal_ns;
	bool has_parent;
	bool spilled; /* bytes in the slot's spill file (pool.h) */
	uint8_t parent[KVFS_HASH_LEN];
	/* an open-namespace file's path (not NUL-terminated), or NULL; from
	 * a scan, it points into the record and lives as long as the call */
	const char *path;
	size_t path_len;
};

/* open (creating when absent) the index in dir; -EIO with the reason
 * logged when RocksDB refuses (for instance another process holds it) */
int kv_index_open(const char *dir, struct kv_index **out);
void kv_index_close(struct kv_index *ix);
/* delete every record (used when the pool was formatted anew) */
int kv_index_clear(struct kv_index *ix);

int kv_index_put_meta(struct kv_index *ix, const char *key, const void *val,
		      size_t len);
/* copies at most cap bytes; returns the value's length, -ENOENT absent */
long kv_index_get_meta(struct kv_index *ix, const char *key, void *val,
		       size_t cap);

int kv_index_put_ns(struct kv_index *ix, const char *name,
		    const struct kv_ns_rec *rec);
int kv_index_del_ns(struct kv_index *ix, const char *name);

int kv_index_put_block(struct kv_index *ix, uint32_t ns,
		       const uint8_t hash[KVFS_HASH_LEN],
		       const struct kv_block_rec *rec);
int kv_index_del_block(struct kv_index *ix, uint32_t ns,
		       const uint8_t hash[KVFS_HASH_LEN]);
/* rename: put the record under to_hash and delete from_hash, atomically */
int kv_index_move_block(struct kv_index *ix, uint32_t ns,
			const uint8_t from_hash[KVFS_HASH_LEN],
			const uint8_t to_hash[KVFS_HASH_LEN],
			const struct kv_block_rec *rec);

/* close records (above): rec->slot is the key; put replaces */
int kv_index_put_closed(struct kv_index *ix, uint32_t ns,
			const uint8_t hash[KVFS_HASH_LEN],
			const struct kv_block_rec *rec);
int kv_index_del_closed(struct kv_index *ix, uint32_t slot);
/* every close record, in slot order; as kv_index_scan_blocks */
int kv_index_scan_closed(struct kv_index *ix,
			 int (*fn)(uint32_t ns,
				   const uint8_t hash[KVFS_HASH_LEN],
				   const struct kv_block_rec *rec, void *arg),
			 void *arg, uint64_t *bad);

/* directories of open namespaces */
int kv_index_put_dir(struct kv_index *ix, uint32_t ns, const char *path,
		     size_t len, uint64_t created_ns);
int kv_index_del_dir(struct kv_index *ix, uint32_t ns, const char *path,
		     size_t len);
int kv_index_scan_dirs(struct kv_index *ix,
		       int (*fn)(uint32_t ns, const char *path, size_t len,
				 uint64_t created_ns, void *arg),
		       void *arg, uint64_t *bad);

/* a direct RocksDB point read: -ENOENT when absent, -EIO on a bad record.
 * The store never calls it on a lookup; kvbench uses it as the baseline. */
int kv_index_get_block(struct kv_index *ix, uint32_t ns,
		       const uint8_t hash[KVFS_HASH_LEN],
		       struct kv_block_rec *rec);

/* full scans at open; fn's non-zero return stops the scan and is returned.
 * Undecodable records are logged, skipped and counted in *bad. */
int kv_index_scan_ns(struct kv_index *ix,
		     int (*fn)(const char *name, const struct kv_ns_rec *rec,
			       void *arg),
		     void *arg, uint64_t *bad);
int kv_index_scan_blocks(struct kv_index *ix,
			 int (*fn)(uint32_t ns,
				   const uint8_t hash[KVFS_HASH_LEN],
				   const struct kv_block_rec *rec, void *arg),
			 void *arg, uint64_t *bad);

/* encoders, exposed for tests of the on-disk format */
void kv_index_encode_block(const struct kv_block_rec *rec,
			   uint8_t out[KV_INDEX_BLOCK_REC_LEN]);
int kv_index_decode_block(const void *buf, size_t len,
			  struct kv_block_rec *rec);

#endif /* KVFS_INDEX_H */
