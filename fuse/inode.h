/*
 * inode.h - the mount's inode table: (namespace id, block hash) <-> ino.
 *
 * Why a table and not slot numbers: a slot is reused after an eviction
 * while the kernel may still hold the old inode and its cached pages, so
 * an ino meaning "slot 7" would come to name other bytes.  Here an ino is
 * handed out once per key from a 64-bit counter and never reused, so a
 * kernel inode always stands for one name and, names being content
 * addresses, for one content.  That is what makes keep_cache safe even
 * across eviction and re-creation of a block.
 *
 * Lifetime: an entry lives while the kernel holds lookups on it.
 * inode_lookup counts one (call it once per entry the kernel accepts:
 * fuse_reply_entry, fuse_reply_create), inode_forget drops n, and at zero
 * the entry is freed.  An entry may be unhashed (unlink, eviction seen):
 * it keeps its ino for the kernel's remaining references, but its key maps
 * to a fresh ino at the next lookup, so the kernel never mistakes a new
 * block for the one it still holds.
 *
 * Inos below INODE_FIRST belong to the caller (root, .kvfs and its files);
 * the table never hands them out and ignores forgets on them.
 *
 * Besides the mapping, each block entry carries what the mount needs to
 * answer for an inode its store no longer knows: whether its creator is
 * still writing it, how many files are open on it, and its last known size
 * and seal time (getattr of a block unlinked while open).
 *
 * Locking: one mutex inside the table.  Every call takes it briefly and
 * calls nothing outside the table while holding it, so callers may hold
 * any lock of their own.  Calls return 0 or a negative errno.
 */
#ifndef KVFS_INODE_H
#define KVFS_INODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "src/common/hash.h"

#define INODE_FIRST 16u /* first ino the table hands out */

enum inode_kind {
	INODE_NS = 1, /* a namespace directory: key is the ns id */
	INODE_BLOCK,  /* a block: key is (ns id, hash); in an open namespace
		       * the hash is kvfs_path_key of its path */
	INODE_DIR,    /* a directory inside an open namespace: key is (ns id,
		       * kvfs_path_key of its path) */
};

/* a snapshot of one entry (inode_get) */
struct inode_info {
	enum inode_kind kind;
	uint32_t ns;
	uint8_t hash[KVFS_HASH_LEN]; /* INODE_BLOCK only */
	bool hashed;		     /* its key still maps to it */
	bool writing;		     /* created, not yet sealed or aborted */
	uint64_t closing_ns;	     /* a writer of it closed a descriptor then
				      * (monotonic): a publication is near; 0 not */
	bool have_attr;		     /* size and seal_ns were recorded */
	bool missed;	/* while writing, a lookup of its name was answered
			 * "no such block" (inode_note_miss) */
	uint32_t nopen; /* open files on it */
	uint64_t size;
	uint64_t seal_ns; /* wall clock; 0 while writing */
};

/* one block entry in an inode_blocks snapshot */
struct inode_ref {
	uint64_t ino;
	uint32_t ns;
	uint8_t hash[KVFS_HASH_LEN];
};

struct inode_table;

int inode_table_new(struct inode_table **out);
/* frees every entry, referenced or not; NULL is a no-op */
void inode_table_free(struct inode_table *t);

/*
 * Find the hashed entry for the key, or add one with a new ino, and count
 * one kernel lookup on it.  hash is ignored (may be NULL) for INODE_NS.
 * -ENOMEM; -EOVERFLOW should the 64-bit counter ever run out.
 */
int inode_lookup(struct inode_table *t, enum inode_kind kind, uint32_t ns,
		 const uint8_t *hash, uint64_t *ino);
/* a new entry with the key that the key does not map to (a private
 * staging file whose name a published file holds), one lookup counted */
int inode_lookup_private(struct inode_table *t, enum inode_kind kind,
			 uint32_t ns, const uint8_t *hash, uint64_t *ino);
/* one more kernel lookup on ino, hashed or not: -ENOENT when the table
 * has no such entry (any more) */
int inode_lookup_ino(struct inode_table *t, uint64_t ino);
/* map the key (kind of ino, ino's ns, hash) to ino, unhashing whatever
 * entry it mapped to: 1 when there was one, 0 when not; -ENOENT for an
 * unknown ino */
int inode_rekey(struct inode_table *t, uint64_t ino, const uint8_t *hash);
/* the path of an open namespace's entry ("" for none); a copy is kept */
int inode_set_path(struct inode_table *t, uint64_t ino, const char *path);
/* the path into buf: its length, -ENOENT, -ERANGE */
long inode_path(struct inode_table *t, uint64_t ino, char *buf, size_t cap);
/* undo one inode_lookup whose entry the kernel did not get */
void inode_unlookup(struct inode_table *t, uint64_t ino);
/* drop n kernel lookups; the entry goes at zero */
void inode_forget(struct inode_table *t, uint64_t ino, uint64_t n);

/* the entry of ino; -ENOENT when the table has none */
int inode_get(struct inode_table *t, uint64_t ino, struct inode_info *out);
/* the ino the key maps to now, without counting a lookup; 0 when none */
uint64_t inode_find(struct inode_table *t, enum inode_kind kind, uint32_t ns,
		    const uint8_t *hash);

/* the key no longer maps to ino (see the header comment) */
void inode_unhash(struct inode_table *t, uint64_t ino);

/* per-block state; -ENOENT for an unknown ino, -EINVAL for a directory */
int inode_set_writing(struct inode_table *t, uint64_t ino, bool writing);
int inode_set_attr(struct inode_table *t, uint64_t ino, uint64_t size,
		   uint64_t seal_ns);
/* a writer closed a descriptor (closing) or wrote again, or the file was
 * published or thrown away (not closing: waiters wake) */
int inode_set_closing(struct inode_table *t, uint64_t ino, bool closing);
/*
 * Wait at most ms milliseconds for ino's publication (closing_ns back to
 * 0): a lookup of a name whose writer has closed it waits for the
 * kernel's asynchronous RELEASE, so that close(); open() elsewhere finds
 * the file.  Returns 0 once it is not closing, -ETIMEDOUT.
 */
int inode_wait_written(struct inode_table *t, uint64_t ino, unsigned ms);
/*
 * A lookup of the block key is about to ask the store: when the key's
 * entry is being written, the answer will be "no such block", which the
 * kernel may cache; mark it missed.  Called before asking the store, so
 * that a seal that clears writing afterwards (inode_take_missed) either
 * sees the mark or the store already answers with the sealed block.
 */
void inode_note_miss(struct inode_table *t, uint32_t ns,
		     const uint8_t hash[KVFS_HASH_LEN]);
/* whether ino was marked missed since it was last set writing; clears it */
bool inode_take_missed(struct inode_table *t, uint64_t ino);
/* count an open (delta 1) or a release (delta -1) */
int inode_open(struct inode_table *t, uint64_t ino, int delta);

/*
 * FUSE passthrough (fs_io.c): the kernel takes one backing file per inode,
 * shared by every open of it.  inode_backing_get counts one more open on
 * ino's backing id and returns it (> 0), or 0 when it has none;
 * inode_backing_set gives it id with one open counted; inode_backing_put
 * drops one and returns the id to close when it was the last, else 0.
 * The caller serializes get and set (fs_io.c's lock).
 */
int32_t inode_backing_get(struct inode_table *t, uint64_t ino);
int inode_backing_set(struct inode_table *t, uint64_t ino, int32_t id);
int32_t inode_backing_put(struct inode_table *t, uint64_t ino);

/*
 * A malloc'd snapshot of every hashed block entry that is not being
 * written, for a caller that checks them against the store without
 * holding the table.  Returns the count (*out NULL when 0) or -ENOMEM.
 */
long inode_blocks(struct inode_table *t, struct inode_ref **out);

/* entries in the table (both kinds) */
size_t inode_count(struct inode_table *t);

#endif /* KVFS_INODE_H */
