/*
 * store.h - the node's block store: pool + durable index + in-memory table.
 *
 * A store owns one pool (pool.h) and one RocksDB index (index.h).  RocksDB
 * is the durable truth; an in-memory hash table, rebuilt at open, serves
 * every lookup, so no read path touches RocksDB.
 *
 * Block life:
 *
 *   kv_store_create  -> a slot owned by the writer: WRITING, invisible to
 *                       get/lookup/match (they miss), but a second create of
 *                       the same name is -EEXIST
 *   kv_store_write   -> bytes land in the slot (or write through
 *                       kv_store_wptr and declare the size)
 *   kv_store_seal    -> checksum, record made durable, SEALED: visible,
 *                       immutable, evictable when unreferenced
 *   kv_store_abort   -> the slot is freed, nothing was ever visible
 *
 * References: kv_store_get hands out a reference (an open file, a map);
 * kv_store_match pins a prefix under a lease.  A block with refs > 0 is
 * never evicted; kv_store_remove of a referenced block hides its name at
 * once and frees the slot when the last reference goes.
 *
 * Eviction: LRU over unreferenced sealed blocks, leaves first: a block with
 * a cached child in its chain is evicted only when no unreferenced leaf is
 * left, since a prefix match stops at the first miss and evicting a parent
 * wastes every cached descendant.  Allocation evicts as needed; when every
 * block is referenced it fails with -ENOSPC and no sealed block is touched.
 *
 * Locking: one mutex (store->lock) guards the table, the LRU lists, leases
 * and counters.  Block bytes are copied outside it: a WRITING slot belongs
 * to its writer alone, and a reference keeps a sealed slot from being
 * reused.  kv_store_match holds the lock from the first probe to the last
 * pin, so no eviction can run in the middle of a match.
 *
 * Durability: a seal writes its record through RocksDB's WAL without fsync,
 * and so does a writer's close (kv_store_closed) before the seal.
 * The pool lives in shared memory and dies with the machine anyway, so the
 * failure to survive is the death of the process, and the WAL is in the
 * kernel's page cache by then.  After a SIGKILL at any point, reopening
 * keeps every sealed block whose checksum verifies, drops (and counts) any
 * that do not, and frees every slot that was being written.
 *
 * Every call returns 0 (or a count) or a negative errno; bad arguments are
 * -EINVAL, and no call touches errno.
 */
#ifndef KVFS_STORE_H
#define KVFS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "src/common/hash.h"

struct kv_store;

struct kv_store_config {
	const char *pool_path; /* shared-memory file, e.g. /dev/shm/kvfs.pool */
	const char *index_dir; /* RocksDB directory, created when absent */
	uint64_t slot_size;    /* bytes per block slot, multiple of 4096 */
	uint32_t nslots;       /* blocks the pool holds */
	uint64_t capacity;     /* bytes the blocks may hold in all: a block
				* in a slot counts slot_size, a spilled one
				* its size; 0 means nslots * slot_size */
	uint32_t lease_ms;     /* default match lease; 0 means 10000 */
	bool reformat;	       /* format pool and index anew if they differ */
	bool prealloc;	       /* take the pool's pages at open (pool.h) */
	unsigned pool_mode;    /* the pool file's mode (pool.h); 0 means 0600 */
	uint32_t publish_wait_ms; /* kv_store_closing; 0 means 1000 */
};

/* per-namespace and whole-store counters (kv_store_stats) */
struct kv_stats {
	uint64_t blocks;    /* sealed blocks cached */
	uint64_t bytes;	    /* their sizes, summed */
	uint64_t writing;   /* blocks being written */
	uint64_t hits;	    /* get/lookup hits + blocks matched */
	uint64_t misses;    /* get/lookup misses + blocks past a match */
	uint64_t evictions; /* blocks evicted to make room or by request */
	uint64_t seals;
	uint64_t removed; /* blocks unlinked */
};

struct kv_store_stats {
	struct kv_stats total;
	uint64_t slots_total;
	uint64_t slots_free; /* not holding a sealed or writing block */
	uint64_t slot_size;
	uint64_t capacity;  /* bytes (kv_store_config) */
	uint64_t used;	    /* of them, charged to blocks */
	uint64_t spilled;   /* blocks bigger than a slot, in spill files */
	uint64_t leases;    /* live match leases */
	uint64_t pinned;    /* sealed blocks with refs > 0 */
	uint64_t recovered; /* sealed blocks found valid at open */
	uint64_t recovery_dropped; /* records dropped at open (bad checksum,
				    * slot out of range or reused, lost pool) */
};

/* what lookup/stat tells about one block */
struct kv_block_info {
	uint32_t slot;
	uint32_t gen;	   /* with slot, names these bytes for their life: a
			    * name replaced by other bytes has another pair */
	uint32_t checksum; /* CRC-32C of the block's bytes */
	uint64_t size;
	uint64_t seal_ns; /* wall clock, ns since the epoch */
	uint32_t refs;
	bool has_parent;
	uint8_t parent[KVFS_HASH_LEN];
};

/* a reference from kv_store_get: data stays valid until kv_store_put;
 * size may exceed the slot size (a spilled block, mapped from its
 * spill file) */
struct kv_ref {
	const void *data;
	uint64_t size;
	uint32_t slot;
	uint32_t gen; /* guards against a stale or double put */
	/* data is a mapping of the slot's spill file, not the slot: what
	 * maps or registers the pool (libkvfs, rdma) or sends a slot's
	 * worth (the peer protocol) cannot take it */
	bool spilled;
	int fd; /* spilled: that file, the store's while the ref lives (FUSE
		 * passthrough registers it); else -1 */
};

int kv_store_open(const struct kv_store_config *cfg, struct kv_store **out);
/* closes pool and index; outstanding refs and leases are dropped */
void kv_store_close(struct kv_store *st);

/* ---- namespaces ---------------------------------------------------- */

/* a namespace's layout (kvfs(7), "Layouts") */
enum kv_layout {
	KV_LAYOUT_CHAIN = 0, /* names are kvfs chain hashes, nothing else */
	KV_LAYOUT_OPEN = 1,  /* any names and subdirectories (store_open.c) */
};

/* -EEXIST when present (with any block_tokens), -EINVAL on a bad name
 * (kvfs_ns_valid) or block_tokens outside 1..KVFS_BLOCK_TOKENS_MAX */
int kv_store_ns_create(struct kv_store *st, const char *name,
		       uint32_t block_tokens, uint32_t *id);
/* the same with a layout (enum kv_layout; -EINVAL for another value) */
int kv_store_ns_create_layout(struct kv_store *st, const char *name,
			      uint32_t block_tokens, unsigned layout,
			      uint32_t *id);
/* change the layout of an empty namespace: -ENOTEMPTY, -ENOENT, -EINVAL */
int kv_store_ns_set_layout(struct kv_store *st, const char *name,
			   unsigned layout);
/* the layout of namespace id (>= 0), or -ENOENT */
int kv_store_ns_layout(struct kv_store *st, uint32_t id);
/* -ENOENT when absent */
int kv_store_ns_find(struct kv_store *st, const char *name, uint32_t *id,
		     uint32_t *block_tokens);
/* the name (KVFS_NS_MAX + 1 bytes) of namespace id; -ENOENT */
int kv_store_ns_find_id(struct kv_store *st, uint32_t id, char *name);
/* change block_tokens: only while the namespace holds no block (names
 * depend on it), else -ENOTEMPTY; -ENOENT absent, -EINVAL bad value */
int kv_store_ns_set_block_tokens(struct kv_store *st, const char *name,
				 uint32_t block_tokens);
/* -ENOTEMPTY while it holds any block, sealed or being written */
int kv_store_ns_remove(struct kv_store *st, const char *name);
/* calls fn for each namespace in id order; a non-zero return stops the
 * walk and is returned.  fn runs under the store lock: call nothing. */
int kv_store_ns_foreach(struct kv_store *st,
			int (*fn)(const char *name, uint32_t id,
				  uint32_t block_tokens,
				  const struct kv_stats *s, void *arg),
			void *arg);

/* ---- writing ------------------------------------------------------- */

/*
 * Start a block: takes a slot (evicting if needed) and returns a write
 * handle in *wh.  The handle is the slot number itself, so a process that
 * maps the pool file finds the block at kv_pool_slot_offset(pool, *wh)
 * (the control socket's zero-copy writer relies on this).  parent is the hash
 * of the previous block in the chain, or NULL for the first block; it steers
 * eviction (leaves first). -EEXIST when the name is sealed or being written,
 * -ENOENT for an unknown namespace, -ENOSPC when every slot is referenced or
 * being written.
 */
int kv_store_create(struct kv_store *st, uint32_t ns,
		    const uint8_t hash[KVFS_HASH_LEN], const uint8_t *parent,
		    uint32_t *wh);
/* copy len bytes at off into the block, spilling it past its slot
 * (kv_store_wreserve's errors) */
int kv_store_write(struct kv_store *st, uint32_t wh, uint64_t off,
		   const void *buf, size_t len);
/* the slot itself, for zero-copy writers; the size is then declared with
 * kv_store_set_size.  NULL for a bad handle, and for a spilled block. */
void *kv_store_wptr(struct kv_store *st, uint32_t wh);
/* the declared size; growing it reads as zeros past the bytes written,
 * spilling past the slot (kv_store_wreserve's errors) */
int kv_store_set_size(struct kv_store *st, uint32_t wh, uint64_t size);
/*
 * Files bigger than a slot.  Make block wh able to hold bytes [0, end):
 * within its slot, nothing to do; past it, its bytes move to a spill
 * file of its own (pool.h), which the store's capacity is charged for.
 * -EFBIG when end exceeds the capacity itself, -ENOSPC when making room
 * would mean evicting what is referenced or being written; -EIO (or
 * another errno) when the spill file cannot be made.  Either way wh
 * stays as it was.
 */
int kv_store_wreserve(struct kv_store *st, uint32_t wh, uint64_t end);
/* where the bytes of block wh are: the slot (*mem, *fd -1) or, spilled,
 * its spill file at the same offsets (*fd, *mem NULL); the descriptor
 * stays the store's */
int kv_store_wtarget(struct kv_store *st, uint32_t wh, void **mem, int *fd);
/* current size of a block being written (highest byte written) */
int kv_store_wsize(struct kv_store *st, uint32_t wh, uint64_t *size);
/* make it durable and visible; -EIO when the index write fails (the block
 * is then aborted) */
int kv_store_seal(struct kv_store *st, uint32_t wh);
/* the same, with the CRC-32C of the block's bytes already computed by the
 * caller over the slot itself (a receiver that checked it on arrival):
 * the store records it without reading the bytes again.  A wrong crc
 * makes the block fail its check at the next open (recovery drops it). */
int kv_store_seal_crc(struct kv_store *st, uint32_t wh, uint32_t crc);
int kv_store_abort(struct kv_store *st, uint32_t wh);
/*
 * The writer closed a descriptor of block wh: its seal (or abort) is near
 * (kvfs(7), "Publication": the mount seals at the last close, which the
 * kernel reports after close(2) has returned).  Until it settles, get,
 * stat, lookup and match of its name wait for it, but never past
 * publish_wait_ms after that close, instead of missing it.  closing false:
 * the writer wrote again (a dup was closed, not the last descriptor).
 */
int kv_store_closing(struct kv_store *st, uint32_t wh, bool closing);

/*
 * Close-to-open durability (index.h, close records): the writer's close
 * (or fsync) of block wh is about to return 0, so its bytes as they are
 * now must survive a crash of this process even though the seal or
 * publication comes later (kvfs(7), Publication).  Records the block's
 * size, CRC-32C and, for a staging block, the path it is to be published
 * under (path_len bytes; NULL for a block with a name).  At the next
 * open, a block whose slot still holds exactly those bytes is sealed
 * (published, replacing an older file of the path, never a newer one);
 * one written since is dropped.  The seal then records that CRC without
 * reading the bytes again.  -EINVAL: not a block being written, or a
 * staging block without a path; -EIO: the index write failed.
 */
int kv_store_closed(struct kv_store *st, uint32_t wh, const char *path,
		    size_t path_len);
/* the block changes after kv_store_closed (a write, a resize, an unlink
 * of its path): its close record goes.  kv_store_write, kv_store_set_size
 * and abort do this themselves; a writer through kv_store_wptr calls it. */
int kv_store_reopened(struct kv_store *st, uint32_t wh);

/* ---- reading ------------------------------------------------------- */

/* take a reference on a sealed block; -ENOENT when not cached.  Counts a
 * hit or a miss and refreshes the block's LRU position. */
int kv_store_get(struct kv_store *st, uint32_t ns,
		 const uint8_t hash[KVFS_HASH_LEN], struct kv_ref *ref);
/* drop it; -EINVAL for a ref that is not live */
int kv_store_put(struct kv_store *st, struct kv_ref *ref);
/* metadata of a sealed block, no reference, no LRU change, no counters */
int kv_store_stat(struct kv_store *st, uint32_t ns,
		  const uint8_t hash[KVFS_HASH_LEN], struct kv_block_info *bi);
/* cached or not: 1 / 0, counted as a hit or miss, refreshes LRU */
int kv_store_lookup(struct kv_store *st, uint32_t ns,
		    const uint8_t hash[KVFS_HASH_LEN]);

/*
 * Longest cached prefix of hashes[0..n-1]: returns the number of leading
 * sealed blocks (0..n).  When lease is not NULL and the count is > 0, the
 * matched blocks are pinned under a new lease (id in *lease) that lasts
 * lease_ms (0: the store's default) unless released or renewed first; a
 * client that dies therefore never pins forever.  *lease is 0 when nothing
 * was pinned.  -EAGAIN when too many leases are live.
 */
long kv_store_match(struct kv_store *st, uint32_t ns,
		    const uint8_t (*hashes)[KVFS_HASH_LEN], size_t n,
		    uint32_t lease_ms, uint64_t *lease);
/*
 * Who holds a lease, as the caller vouches for it (the control socket:
 * its peer's SO_PEERCRED).  The store only keeps it: kv_store_lease_list
 * shows it, and kv_store_match_owned counts the leases of one uid.
 */
#define KV_LEASE_NOBODY UINT32_MAX /* uid of a lease kv_store_match made */
struct kv_lease_owner {
	uint32_t uid;
	int32_t pid;   /* 0: not known */
	uint64_t conn; /* the caller's tag (ctl: its connection id), or 0 */
	bool scoped;   /* released when conn closes (ctl's "match") */
};
/*
 * kv_store_match with the new lease tagged with owner, and a cap: when
 * uid_max > 0 and owner->uid holds uid_max live leases already, nothing
 * is pinned and the call is -EDQUOT.  The store keeps a count per uid,
 * so the cap costs a search among the uids holding leases, not a walk
 * of the leases.
 */
long kv_store_match_owned(struct kv_store *st, uint32_t ns,
			  const uint8_t (*hashes)[KVFS_HASH_LEN], size_t n,
			  uint32_t lease_ms, const struct kv_lease_owner *owner,
			  uint32_t uid_max, uint64_t *lease);
/* one live lease, as kv_store_lease_list and kv_store_lease_stat tell */
struct kv_lease_info {
	uint64_t id;
	uint64_t expires_ns; /* monotonic (clock.h) */
	uint32_t blocks;     /* pinned when it was made */
	struct kv_lease_owner owner;
};
/* the live leases with id > after, in id order, at most max of them:
 * returns how many were written to out[] (0: none left) */
long kv_store_lease_list(struct kv_store *st, uint64_t after,
			 struct kv_lease_info *out, size_t max);
/* one live lease; -ENOENT for an unknown or expired one */
int kv_store_lease_stat(struct kv_store *st, uint64_t lease,
			struct kv_lease_info *li);
/* -ENOENT for an unknown or expired lease */
int kv_store_lease_release(struct kv_store *st, uint64_t lease);
int kv_store_lease_renew(struct kv_store *st, uint64_t lease,
			 uint32_t lease_ms);
/* expire due leases now (they also expire lazily on store calls) */
void kv_store_lease_sweep(struct kv_store *st);

/*
 * Walk a namespace's sealed blocks without loading them all: writes the
 * first sealed block of ns at a slot >= *cursor to hash and sets *cursor
 * past it.  Returns 1 with a block, 0 at the end, -ENOENT for an unknown
 * namespace.  Blocks sealed or evicted during a walk may or may not be
 * seen; none is seen twice.  Start with *cursor = 0.
 */
int kv_store_ns_next(struct kv_store *st, uint32_t ns, uint64_t *cursor,
		     uint8_t hash[KVFS_HASH_LEN], struct kv_block_info *bi);

/* ---- removal ------------------------------------------------------- */

/* evict one sealed block now: -EBUSY while referenced, -ENOENT absent */
int kv_store_evict(struct kv_store *st, uint32_t ns,
		   const uint8_t hash[KVFS_HASH_LEN]);
/* unlink: the name goes now, the slot when the last reference does */
int kv_store_remove(struct kv_store *st, uint32_t ns,
		    const uint8_t hash[KVFS_HASH_LEN]);

/* ---- open namespaces ----------------------------------------------- */

/*
 * Files of an open namespace (store_open.c).  A file is a block whose key
 * is kvfs_path_key(path) and which remembers its path, so everything
 * keyed by (ns, hash) above works on it unchanged: get, stat, remove,
 * evict, leases, events, replicas.  What is added:
 *
 *  - staging: kv_store_create_staging takes a slot with no name at all,
 *    so any number of writers may stage files for one path at once;
 *  - publication: kv_store_publish seals a staging block under a path, in
 *    one step replacing the file that path had (its readers keep their
 *    references and bytes; the slot is freed at their last put);
 *  - kv_store_rename moves a sealed file to another path, replacing too;
 *  - directories, durable in the index; a file's parent must exist.
 *
 * A path is relative to the namespace: components of 1..255 bytes (no '/',
 * no NUL, not "." or ".."), joined by '/', at most KV_STORE_PATH_MAX bytes.
 * Calls on a chain namespace are -EINVAL.  A path is a file or a directory,
 * never both.  A block being written by key (kv_store_create: a replica)
 * whose name a file is published or renamed onto meanwhile loses it: its
 * seal aborts it with -EEXIST.
 */
#define KV_STORE_PATH_MAX 4096

/* a slot owned by the writer, with no name: invisible, never -EEXIST.
 * Written, sealed (published) or aborted like kv_store_create's. */
int kv_store_create_staging(struct kv_store *st, uint32_t ns, uint32_t *wh);
/*
 * Seal staging block wh as the file path.  An existing file of that path
 * is replaced, or with noreplace -EEXIST and wh stays the writer's.
 * -ENOENT when path's directory does not exist (wh stays too); -EIO when
 * the index write fails (wh is then aborted).
 */
int kv_store_publish(struct kv_store *st, uint32_t wh, const char *path,
		     bool noreplace);
/* move a sealed file; an existing `to` is replaced unless noreplace
 * (-EEXIST).  -ENOENT: no file `from`, or no directory for `to`. */
int kv_store_rename(struct kv_store *st, uint32_t ns, const char *from,
		    const char *to, bool noreplace);
/* the path of sealed file (ns, hash) into buf (NUL-terminated); its
 * length, -ENOENT for no such file, -ENODATA for a file whose path this
 * node does not know (a replica that came by key), -ERANGE when cap is
 * too small */
long kv_store_path(struct kv_store *st, uint32_t ns,
		   const uint8_t hash[KVFS_HASH_LEN], char *buf, size_t cap);
/* teach a pathless replica its path (kvfs_path_key(path) must be its
 * hash, else -EINVAL); its directories are made as needed */
int kv_store_set_path(struct kv_store *st, uint32_t ns, const char *path);

/* -EEXIST, -ENOENT (no parent directory), -EINVAL (bad path) */
int kv_store_dir_create(struct kv_store *st, uint32_t ns, const char *path);
/* -ENOTEMPTY while it holds a file or a directory; -ENOENT */
int kv_store_dir_remove(struct kv_store *st, uint32_t ns, const char *path);
/* 1 when path ("" is the namespace itself) is a directory, else 0 */
int kv_store_dir_exists(struct kv_store *st, uint32_t ns, const char *path);
/* entries directly in directory path: files + subdirectories */
long kv_store_dir_count(struct kv_store *st, uint32_t ns, const char *path);

/*
 * Walk directory dir ("" for the namespace) without loading it: writes the
 * next entry's name (cap >= 256) and whether it is a directory, moves
 * *cursor past it, and returns 1; 0 at the end; -ENOENT for a directory
 * that is gone.  Subdirectories come first, then files in slot order.
 * Entries made or removed during a walk may or may not be seen, every
 * other entry is seen once; a file replaced during the walk is a new
 * entry, so its name may be seen twice.  Start with *cursor = 0; cursors
 * stay below 2^62.
 */
int kv_store_dir_next(struct kv_store *st, uint32_t ns, const char *dir,
		      uint64_t *cursor, char *name, size_t cap, bool *is_dir);

/* ---- stats --------------------------------------------------------- */

int kv_store_stats(struct kv_store *st, struct kv_store_stats *out);
/* one namespace's counters; -ENOENT when absent */
int kv_store_ns_stats(struct kv_store *st, uint32_t ns, struct kv_stats *out);

uint64_t kv_store_slot_size(const struct kv_store *st);
/* the pool behind the store, for its layout (pool.h); owned by st */
struct kv_pool;
const struct kv_pool *kv_store_pool(const struct kv_store *st);

/* ---- events -------------------------------------------------------- */

enum kv_store_event {
	KV_STORE_SEALED = 1, /* a block became visible */
	KV_STORE_GONE = 2,   /* a sealed block left the name space
			      * (evicted, kv_store_evict, kv_store_remove) */
};

/*
 * Call fn on every event from now on (NULL: stop).  fn runs under the
 * store lock, on whichever thread caused the event: it must only record
 * the event (queue it) and call nothing of the store.
 */
typedef void (*kv_store_event_fn)(void *arg, enum kv_store_event ev,
				  uint32_t ns,
				  const uint8_t hash[KVFS_HASH_LEN]);
void kv_store_set_event_hook(struct kv_store *st, kv_store_event_fn fn,
			     void *arg);

#endif /* KVFS_STORE_H */
