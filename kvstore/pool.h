/*
 * pool.h - the node's DRAM pool: one shared-memory file of fixed-size slots.
 *
 * The file (default under /dev/shm) is divided at format time into nslots
 * slots of slot_size bytes with logical block ids 0..nslots-1, as Mooncake
 * does.  It outlives the process that owns it (not a reboot), so a
 * restarted kvfsd re-attaches it; which slots hold sealed blocks is the
 * index's business (index.h), the pool only knows geometry and which slots
 * are handed out in this process.
 *
 * File layout (little-endian, page 0 is the header):
 *
 *   offset  size  field
 *   0       8     magic "KVFSPOOL"
 *   8       4     version (KV_POOL_VERSION)
 *   12      4     header size (4096)
 *   16      8     slot_size (bytes, multiple of 4096)
 *   24      4     nslots
 *   28      4     reserved, 0
 *   32      8     data_offset (4096): slot i is at data_offset + i*slot_size
 *   40      16    uuid: random, new at every format; the index remembers
 *                 it, so a pool lost to a reboot is never mistaken for the
 *                 one the index describes
 *   56      8     format time, ns since the epoch
 *
 * The magic is written last when formatting, so a format cut short by a
 * kill leaves a file that reopens as "not a pool", never as a valid one.
 *
 * One process owns a pool at a time (flock); a second open is -EBUSY.
 *
 * The default name is predictable and /dev/shm writable by all, so the
 * file is created with O_EXCL, no open follows a link at its end, and an
 * existing file is adopted only when it is a regular file with one link,
 * owned by our euid, writable by group and others no more than the mode
 * asked for (kv_pool_open_mode): else -EPERM, the reason logged, with
 * or without KV_POOL_REFORMAT.  Someone else's pool could have its
 * sealed blocks rewritten behind the daemon's back.
 *
 * Spill files.  A file bigger than a slot keeps its slot number as its
 * id, and its bytes in a file of their own, PATH.d/<slot as 8 hex
 * digits>, on the same tmpfs: the directory is made 0700 at the first
 * spill (or adopted only when it is a directory, not a link, that our
 * euid owns and nobody else may write), emptied whenever the pool is
 * formatted, removed at close when empty, and each file is created
 * O_EXCL and never opened through a link.  The
 * slot's own pages are punched out (kv_pool_punch) while it spills.
 *
 * Thread safety: alloc/free/reserve/nfree take the pool's mutex and may be
 * called from any thread; slot pointers are stable for the pool's life.
 */
#ifndef KVFS_POOL_H
#define KVFS_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define KV_POOL_VERSION 1
#define KV_POOL_HDR_SIZE 4096u
#define KV_POOL_UUID_LEN 16
#define KV_POOL_SLOT_ALIGN 4096u
#define KV_POOL_NO_SLOT UINT32_MAX

struct kv_pool;

struct kv_pool_geom {
	uint64_t slot_size; /* multiple of KV_POOL_SLOT_ALIGN, > 0 */
	uint32_t nslots;    /* 1 .. UINT32_MAX - 1 */
};

enum kv_pool_flags {
	KV_POOL_CREATE = 1 << 0,   /* create the file when it is absent */
	KV_POOL_REFORMAT = 1 << 1, /* format even over a valid pool */
	/*
	 * Take every page of the file at open (fallocate): writes into a
	 * fresh slot then never fault pages in one at a time (a first pass
	 * over a sparse pool writes at half the speed of later ones), and a
	 * file system too full to hold the pool is found at open, as
	 * -ENOSPC, instead of by a SIGBUS when a write reaches the page.
	 */
	KV_POOL_PREALLOC = 1 << 2,
};

/*
 * Open (or create) the pool at path with geometry g.
 *  - absent file: created and formatted with KV_POOL_CREATE, else -ENOENT
 *  - valid header, same geometry: attached, contents kept
 *  - valid header, other geometry, or not a pool: -EINVAL (the reason is
 *    logged) unless KV_POOL_REFORMAT, which formats it anew
 *  - bad geometry in g: -EINVAL; owned by another process: -EBUSY
 *  - a link, not a regular file, or not ours (above): -EPERM
 * All slots start free; the caller reserves those it knows to be in use.
 */
int kv_pool_open(const char *path, const struct kv_pool_geom *g, unsigned flags,
		 struct kv_pool **out);
/*
 * kv_pool_open with the file's mode (permission bits within 0666;
 * kv_pool_open's is 0600), set with fchmod on every open: kvfsd gives
 * those allowed on its control socket the pool too (kvfsd(8), ACCESS
 * CONTROL), so their write bits on an existing pool are no reason to
 * refuse it.  Other bits: -EINVAL.
 */
int kv_pool_open_mode(const char *path, const struct kv_pool_geom *g,
		      unsigned flags, mode_t mode, struct kv_pool **out);
/* unmaps and closes; the file stays.  NULL is a no-op. */
void kv_pool_close(struct kv_pool *p);

/* true when this open formatted the file: no slot holds anything */
bool kv_pool_formatted(const struct kv_pool *p);
const uint8_t *kv_pool_uuid(const struct kv_pool *p);
uint64_t kv_pool_slot_size(const struct kv_pool *p);
uint32_t kv_pool_nslots(const struct kv_pool *p);
const char *kv_pool_path(const struct kv_pool *p);
int kv_pool_fd(const struct kv_pool *p);
/*
 * The layout, for those who map or register the pool themselves (libkvfs
 * through the control socket, the rdma engine): slots lie contiguous from
 * kv_pool_data_offset, kv_pool_data_len bytes in all, and the file is
 * kv_pool_file_size bytes.  Nobody else recomputes them.
 */
uint64_t kv_pool_data_offset(const struct kv_pool *p);
uint64_t kv_pool_data_len(const struct kv_pool *p);
uint64_t kv_pool_file_size(const struct kv_pool *p);
/* byte offset of a slot in the file (slot < nslots) */
uint64_t kv_pool_slot_offset(const struct kv_pool *p, uint32_t slot);

/* address of slot (slot < nslots, else NULL) */
void *kv_pool_slot(const struct kv_pool *p, uint32_t slot);

/* O(1). -ENOSPC when no slot is free. */
int kv_pool_alloc(struct kv_pool *p, uint32_t *slot);
/* O(1). -EINVAL when slot is out of range or already free. */
int kv_pool_free(struct kv_pool *p, uint32_t slot);
/* mark a given slot used (recovery). -EINVAL out of range, -EBUSY used. */
int kv_pool_reserve(struct kv_pool *p, uint32_t slot);
uint32_t kv_pool_nfree(struct kv_pool *p);

/* slot's spill file (above): a new empty one (create; any file left
 * under its name goes first) or the one there is.  Returns the
 * descriptor (O_RDWR, close-on-exec) or -errno; -EPERM for a file that
 * is not a regular file of ours with one link. */
int kv_pool_spill_open(struct kv_pool *p, uint32_t slot, bool create);
/* remove slot's spill file; 0 when there is none */
int kv_pool_spill_remove(struct kv_pool *p, uint32_t slot);
/* remove every spill file whose slot keep does not claim (recovery: a
 * file being written when the last owner died) */
int kv_pool_spill_sweep(struct kv_pool *p,
			bool (*keep)(uint32_t slot, void *arg), void *arg);
/* give the slot's pages back to tmpfs (its bytes read as zeros) */
int kv_pool_punch(struct kv_pool *p, uint32_t slot);

#endif /* KVFS_POOL_H */
