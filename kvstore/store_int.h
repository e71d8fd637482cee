/*
 * store_int.h - private to kvstore/store*.c: the store's in-memory state.
 *
 * Everything in struct kv_store below "lock" is guarded by it.
 *
 * Blocks live in an array indexed by pool slot: a sealed or writing block
 * occupies exactly one slot, so the table needs no allocation per block and
 * its size is fixed at open.  The hash table (store_tab.c) is open
 * addressing over (hash bits, slot) pairs, so a miss is decided without
 * touching any block; the LRU lists link through lru_prev/lru_next (slot
 * numbers, NIL terminated).
 *
 * LRU lists hold only SEALED blocks with refs == 0, so eviction takes the
 * tail in O(1) and never meets a pinned block.  A block is on the leaf
 * list when no cached child names it as parent, else on the inner list.
 * A use only stamps last_use (one store into a line the lookup already
 * touched); the block is moved to the MRU end lazily, when eviction meets
 * it at the tail with last_use newer than lru_stamp, the tick at which it
 * was linked.  This is LRU with lazy promotion: the same victims, without
 * two random list neighbours written on every hit.  A block that changes
 * lists keeps its age (see lru_refile).
 *
 * Parent links: a sealed child that found its parent cached counted itself
 * in parent->nchild and remembers (parent_slot, parent_gen).  A slot's gen
 * is bumped each time it is freed, so a child whose parent was evicted and
 * whose slot was reused never decrements a stranger.
 */
#ifndef KVFS_STORE_INT_H
#define KVFS_STORE_INT_H

#include <pthread.h>

#include "kvstore/index.h"
#include "kvstore/pool.h"
#include "kvstore/store.h"

#define NIL UINT32_MAX
#define STORE_MAX_LEASES 65536
#define STORE_DEFAULT_LEASE_MS 10000
#define STORE_PUBLISH_WAIT_MS 1000

enum blk_state {
	BLK_FREE = 0,
	BLK_WRITING, /* owned by a writer; in the hash table, invisible */
	BLK_SEALED,  /* visible, immutable */
	BLK_DEAD,    /* removed while referenced; slot freed on last put */
};

enum blk_list {
	LIST_NONE = 0,
	LIST_LEAF,
	LIST_INNER,
};

/* laid out so that a lookup reads one cache line: hash, ns, state */
struct blk {
	uint8_t hash[KVFS_HASH_LEN];
	uint32_t ns;
	uint8_t state;
	uint8_t list;
	uint8_t has_parent;
	uint8_t staged;	 /* WRITING with no name yet (kv_store_create_staging):
			  * not in the hash table */
	uint8_t closed;	 /* WRITING, and its close record is in the index
			  * (kv_store_closed): close_crc is its bytes' CRC */
	uint8_t spilled; /* its bytes are in spill_fd, not the slot */
	uint8_t pad[2];
	uint32_t refs;
	uint32_t gen;
	uint64_t last_use;  /* st->tick at its last use */
	uint64_t lru_stamp; /* st->tick when linked into its list */
	/* cold: writes, eviction, stat */
	uint32_t lru_prev;
	uint32_t lru_next;
	uint32_t nchild;
	uint32_t parent_slot; /* NIL unless counted in a parent */
	uint32_t parent_gen;
	uint32_t checksum;
	uint32_t close_crc;
	int spill_fd;	  /* spilled: the slot's spill file (pool.h) */
	void *spill_map;  /* spilled and sealed: spill_fd mapped read-only,
			   * what kv_store_get hands out; NULL when empty */
	uint64_t charged; /* bytes of st->capacity it holds: slot_size, or
			   * what its spill file may grow to */
	uint64_t size;
	uint64_t seal_ns;
	uint8_t parent[KVFS_HASH_LEN];
	char *path;	     /* an open namespace's file: its path; else NULL */
	uint64_t closing_ns; /* WRITING, and its writer closed a descriptor
			      * then (monotonic): lookups wait for the seal
			      * until publish_wait_ms after it; 0: not */
};

/* one table entry: low 32 bits of the keyed hash (home and tag), slot */
struct tab_ent {
	uint32_t h;
	uint32_t slot; /* NIL: empty */
};

struct lru {
	uint32_t head; /* most recently used */
	uint32_t tail; /* next victim */
	uint64_t len;
};

struct store_ns {
	char name[KVFS_NS_MAX + 1];
	uint32_t id;
	uint32_t block_tokens;
	uint64_t created_ns;
	uint32_t layout;       /* enum kv_layout */
	uint32_t nfiles, nsub; /* open: entries of its top directory */
	struct kv_stats s;
};

/* a directory of an open namespace (store_open.c) */
struct sdir {
	struct sdir *next; /* hash chain */
	uint32_t ns;
	uint32_t idx; /* in st->dirs */
	uint32_t nfiles, nsub;
	uint64_t created_ns;
	size_t len;
	char path[]; /* NUL-terminated */
};

/* st->leases is newest first, and ids only grow (next_lease starts at a
 * random value below 2^63), so the list is in descending id order:
 * kv_store_lease_list walks it backwards */
struct lease {
	uint64_t id;
	uint64_t expires_ns; /* monotonic */
	uint32_t n;
	struct kv_lease_owner owner;
	struct lease *prev, *next;
	uint32_t slot_gen[]; /* n pairs: slot, gen */
};

struct kv_store {
	struct kv_pool *pool;
	struct kv_index *ix;
	uint32_t nslots;
	uint64_t slot_size;
	uint64_t capacity; /* bytes the blocks may hold in all (store.h) */
	uint32_t lease_ms;
	uint64_t sip_k0, sip_k1; /* keyed table hash: names are chosen by
				  * clients, so buckets must not be */

	pthread_mutex_t lock;
	pthread_cond_t settled; /* a WRITING block was sealed or aborted */
	uint32_t publish_wait_ms;
	struct blk *blk;
	struct tab_ent *tab;
	uint32_t tab_mask; /* capacity - 1, capacity >= 2 * nslots */
	struct lru leaf, inner;
	uint64_t tick; /* use counter behind blk.last_use */

	struct store_ns **ns; /* by id; NULL for removed ids */
	uint32_t ns_cap;
	uint32_t next_ns_id;

	struct lease *leases;
	uint64_t nleases;
	/* live leases per owner uid, for kv_store_match_owned's cap: one
	 * entry per uid holding any (few: the users of one machine), so a
	 * linear search; an entry goes when its count drops to 0 */
	struct lease_uid {
		uint32_t uid;
		uint32_t n;
	} * lease_uids;
	uint32_t nlease_uids, lease_uids_cap;
	uint64_t next_lease;
	uint64_t lease_min_ns; /* earliest expiry, UINT64_MAX when none */

	struct sdir **dirs;	  /* the walk order of kv_store_dir_next: a
				   * directory keeps its index for life, a removed
				   * one leaves a NULL that a later one reuses */
	uint32_t ndirs, dirs_cap; /* entries used (holes included), room */
	uint32_t *dir_free;	  /* indexes of the holes */
	uint32_t ndir_free;
	struct sdir **dir_tab; /* chained, by store_sip of ns and path */
	uint32_t dir_tab_mask; /* 0: not allocated yet */

	kv_store_event_fn event_fn; /* kv_store_set_event_hook, under lock */
	void *event_arg;

	struct kv_stats total;
	uint64_t used;	  /* bytes charged (blk.charged, summed) */
	uint64_t spilled; /* blocks whose bytes are in spill files */
	uint64_t pinned;
	uint64_t recovered;
	uint64_t recovery_dropped;
};

/* store.c */
struct store_ns *store_ns_get(struct kv_store *st, uint32_t id);

/* store_tab.c: all called with st->lock held (tab_alloc at open) */
void *tab_map(size_t len); /* zeroed, huge pages advised */
void tab_unmap(void *p, size_t len);
int tab_alloc(struct kv_store *st);
void tab_free(struct kv_store *st);
uint32_t tab_find(struct kv_store *st, uint32_t ns,
		  const uint8_t hash[KVFS_HASH_LEN]);
void tab_insert(struct kv_store *st, uint32_t slot);
void tab_remove(struct kv_store *st, uint32_t slot);
/* keyed hash of (ns, bytes), for the directory table */
uint32_t store_sip(const struct kv_store *st, uint32_t ns, const void *p,
		   size_t len);

/* store_block.c: all called with st->lock held */
void lru_add(struct kv_store *st, uint32_t slot);
void blk_ref(struct kv_store *st, uint32_t slot);
void blk_unref(struct kv_store *st, uint32_t slot);
void blk_touch(struct kv_store *st, uint32_t slot);
void blk_link_parent(struct kv_store *st, uint32_t slot);
void store_count_lookup(struct kv_store *st, struct store_ns *n, uint64_t hits,
			uint64_t misses);
/* take a sealed block out of the name space (its record too, unless the
 * caller already overwrote it), then free its slot or, while referenced,
 * leave it DEAD; counted as removed */
int blk_unpublish(struct kv_store *st, uint32_t slot, bool del_record);
void blk_drop(struct kv_store *st, uint32_t slot);
/* a WRITING block whose record is durable becomes SEALED and visible */
void blk_sealed(struct kv_store *st, uint32_t slot,
		const struct kv_block_rec *rec);
void blk_abort(struct kv_store *st, uint32_t slot);
uint32_t blk_find_sealed(struct kv_store *st, uint32_t ns,
			 const uint8_t hash[KVFS_HASH_LEN]);
/* slot s is a block whose writer has closed it: wait until it settles or
 * *deadline (monotonic ns; 0: not set yet, set here) passes.  True when
 * it waited (the lock was dropped: look again), false when it is not
 * such a block or the time is up. */
bool blk_wait_closing(struct kv_store *st, uint32_t s, uint64_t *deadline);
struct blk *blk_writing(struct kv_store *st, uint32_t wh);
int blk_slot_alloc(struct kv_store *st, uint32_t *slot);
/* a freshly allocated slot becomes a block being written in ns: under
 * hash (in the hash table), or with hash NULL a staging block (staged) */
void blk_start(struct kv_store *st, uint32_t slot, uint32_t ns,
	       const uint8_t *hash, const uint8_t *parent);

/* store_open.c, lock held */
/* a file entered (+1) or left (-1) its directory's counts */
void open_count(struct kv_store *st, uint32_t ns, const char *path, int delta);
/* recovery: a directory record, and a file's path (directories made) */
int open_recover_dir(struct kv_store *st, uint32_t ns, const char *path,
		     size_t len, uint64_t created_ns);
int open_recover_file(struct kv_store *st, uint32_t slot, const char *path,
		      size_t len);
void open_free(struct kv_store *st);

/* the close record of a WRITING block goes (a write after the close, an
 * abort): called without the lock, or with it from blk_abort */
void blk_unclose(struct kv_store *st, struct blk *b, uint32_t slot);
/* the CRC a seal records: the close record's when the bytes have not
 * changed since, else computed over the slot now */
int blk_seal_crc(struct kv_store *st, const struct blk *b, uint32_t slot,
		 uint32_t *crc);
/* a spilled block being sealed: its file cut to size and mapped, the
 * capacity charged ahead given back (store_block.c) */
int blk_spill_seal(struct kv_store *st, struct blk *b);

/*
 * The CRC-32C of a block's first size bytes, in its slot or, spilled, in
 * the slot's spill file (opened for the purpose when fd < 0): 0 or
 * -errno (-ENODATA: the file is shorter).  No lock needed.
 */
int blk_bytes_crc(struct kv_store *st, uint32_t slot, bool spilled, int fd,
		  uint64_t size, uint32_t *crc);
/* a recovered spilled block: its file opened and mapped; lock held */
int blk_spill_attach(struct kv_store *st, uint32_t slot);

/* store_match.c */
void lease_sweep_locked(struct kv_store *st, uint64_t now);
void lease_drop_all(struct kv_store *st);

#endif /* KVFS_STORE_INT_H */
