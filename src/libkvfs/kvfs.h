/*
 * kvfs.h - libkvfs: the C library an LLM engine links to reuse the KV
 * blocks of a kvfs node (kvfsd(8)).  libkvfs(3) is the overview; every
 * function has its own page.
 *
 * A handle (struct kvfs) is one connection to the daemon behind a
 * mountpoint.  What a handle takes - match leases, mapped blocks,
 * unfinished zero-copy writers - belongs to that connection: the daemon
 * releases all of it when the handle is disconnected or the process dies,
 * so a crashed engine pins nothing.
 *
 * Zero copy: kvfs_map() returns a pointer into the handle's own read-only
 * mapping of the node's pool file (mapped once per handle, on first use);
 * the daemon holds a reference on the block until kvfs_unmap(), so the
 * slot is neither evicted nor reused under the reader.  kvfs_alloc() hands
 * out a pointer into a fresh slot through a read-write mapping (made once,
 * on first use); the block becomes visible at kvfs_commit().  Mapping the
 * pool needs the file permissions the daemon gives it, which follow its
 * control socket's (kvfsd(8), ACCESS CONTROL): readers need read access,
 * zero-copy writers read and write.
 *
 * Every call returns 0 (or a count) or a negative errno and never relies
 * on errno; bad arguments (NULL, a bad namespace or hash) are -EINVAL.
 * A handle is not thread-safe: use one per thread, or a lock.
 */
#ifndef KVFS_H
#define KVFS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef KVFS_HASH_LEN
#define KVFS_HASH_LEN 32 /* bytes of one block hash */
#endif
#ifndef KVFS_HASH_HEX_LEN
#define KVFS_HASH_HEX_LEN 64 /* chars of its name, no NUL */
#endif

struct kvfs;
struct kvfs_wblock;

/* ---- connection ----------------------------------------------------- */

/*
 * Connect to the kvfsd serving mountpoint.  *out is the new handle, freed
 * by kvfs_disconnect().  -ENOENT / -ECONNREFUSED when no daemon answers,
 * -ENOMEM.
 */
int kvfs_connect(const char *mountpoint, struct kvfs **out);
/* release every lease, map and writer of k, close it.  NULL: no-op.
 * Pointers from kvfs_map() and kvfs_alloc() are invalid afterwards, and
 * writers still open are aborted and freed (their kvfs_wblock too). */
void kvfs_disconnect(struct kvfs *k);

/* ---- the hash chain (kvfs(7); the same code as kvctl hash) ---------- */

/* writes min(ntokens / block_tokens, max_out) hashes, returns the count;
 * -EINVAL a bad ns, block_tokens 0 or above 1048576, NULL tok or out
 * with a count above 0 */
long kvfs_hash_chain(const char *ns, uint32_t block_tokens, const uint32_t *tok,
		     size_t ntokens, uint8_t (*out)[KVFS_HASH_LEN],
		     size_t max_out);
/*
 * SGLang HiCache's page keys (kvfs(7), HASH CHAIN): the same chain with
 * no seed, so the first page hashes its tokens alone and no namespace
 * enters; page_tokens only cuts the tokens into pages.  The names an
 * engine's own file backend gives its pages in an open namespace.
 * Counts and errors as kvfs_hash_chain().  Since KVFS_1.2.
 */
long kvfs_hash_chain_sglang(uint32_t page_tokens, const uint32_t *tok,
			    size_t ntokens, uint8_t (*out)[KVFS_HASH_LEN],
			    size_t max_out);
/* lowercase hex into hex[KVFS_HASH_HEX_LEN + 1], NUL added */
void kvfs_hash_to_hex(const uint8_t h[KVFS_HASH_LEN],
		      char hex[KVFS_HASH_HEX_LEN + 1]);

/* ---- prefix match --------------------------------------------------- */

/*
 * Longest cached prefix of hashes[0..n-1] in namespace ns, one round
 * trip.  Returns K (0..n): hashes 0..K-1 are cached.  With lease_ms > 0
 * and K > 0 the K blocks are pinned under *lease until kvfs_release(),
 * lease_ms, or the handle's end, whichever comes first; *lease is 0 when
 * nothing was pinned.  lease may be NULL only with lease_ms == 0.
 * -ENOENT unknown namespace, -E2BIG more than 16000 hashes, -EAGAIN too
 * many live leases.
 */
long kvfs_match(struct kvfs *k, const char *ns,
		const uint8_t (*hashes)[KVFS_HASH_LEN], size_t n,
		uint32_t lease_ms, uint64_t *lease);
/* -ENOENT for a lease released or expired already */
int kvfs_release(struct kvfs *k, uint64_t lease);

/* ---- zero-copy read ------------------------------------------------- */

/*
 * Map one sealed block: *ptr points at its *len bytes inside the pool,
 * read-only, valid until kvfs_unmap(k, *ptr) or kvfs_disconnect(k); the
 * block is not evicted meanwhile.  No byte is copied.  -ENOENT when the
 * block is not cached (or the namespace is unknown), -EACCES when the
 * pool may not be read, -EPROTO when the daemon's answer does not fit
 * the pool.
 */
int kvfs_map(struct kvfs *k, const char *ns, const uint8_t hash[KVFS_HASH_LEN],
	     const void **ptr, size_t *len);
/* -EINVAL for a pointer kvfs_map did not return (or unmapped already) */
int kvfs_unmap(struct kvfs *k, const void *ptr);

/*
 * Map the longest cached prefix of hashes[0..n-1] in ns in one round
 * trip: returns K (0..n), and blocks 0..K-1 are mapped as by kvfs_map(),
 * ptrs[i] and lens[i] for each (entries K..n-1 are left alone).  Each is
 * unmapped by kvfs_unmap() or, many at once, kvfs_unmap_batch().
 * -ENOENT unknown namespace, -E2BIG more than 16000 hashes, -EAGAIN the
 * handle would hold more than 65536 maps; else as kvfs_map().
 */
long kvfs_map_batch(struct kvfs *k, const char *ns,
		    const uint8_t (*hashes)[KVFS_HASH_LEN], size_t n,
		    const void **ptrs, size_t *lens);
/* unmap n pointers at once (one request, not waited for); -EINVAL when
 * one of them is not mapped (or is named more often than it is), and
 * then none is unmapped */
int kvfs_unmap_batch(struct kvfs *k, const void *const *ptrs, size_t n);

/* ---- writing -------------------------------------------------------- */

/*
 * Store len bytes as block hash of ns through the mount (create, write,
 * close: the close seals it), or, connected to a control socket (kvfsd
 * --no-mount), through kvfs_alloc() and kvfs_commit().  -EEXIST when it
 * is cached already, -ENOENT
 * unknown namespace, -EFBIG larger than a slot, -ENOSPC pool full of
 * referenced blocks.
 */
int kvfs_write(struct kvfs *k, const char *ns,
	       const uint8_t hash[KVFS_HASH_LEN], const void *buf, size_t len);

/*
 * Zero-copy writer: a fresh slot for block hash of ns (parent: the hash
 * before it in the chain, or NULL for the first block; it steers
 * eviction).  *ptr is writable for *cap bytes; nobody sees the block
 * until kvfs_commit(*wb, len) seals its first len bytes, and
 * kvfs_abort(*wb) drops it.  Either call frees *wb.  -EEXIST cached or
 * being written, -ENOSPC no free slot, -EACCES the pool is not writable
 * for this process.
 */
int kvfs_alloc(struct kvfs *k, const char *ns,
	       const uint8_t hash[KVFS_HASH_LEN], const uint8_t *parent,
	       void **ptr, size_t *cap, struct kvfs_wblock **wb);
/* -EFBIG len > cap (the writer stays, abort it); else wb is freed */
int kvfs_commit(struct kvfs_wblock *wb, size_t len);
int kvfs_abort(struct kvfs_wblock *wb);

/* ---- GPU (CUDA) ----------------------------------------------------- */

/*
 * Copies between the pool and GPU memory, asynchronous on the caller's
 * CUDA stream (a cudaStream_t passed as void *; NULL is the default
 * stream), with the stream's device current (cudaSetDevice).  Work queued
 * on that stream after a copy is ordered after it, as for any
 * cudaMemcpyAsync.  Each copy call returns *cp, the copy in flight: it
 * holds the daemon's references (maps for copies to the device, writers
 * for copies from it) until kvfs_copy_wait() or a kvfs_copy_poll() that
 * finds it complete drops them, on the caller's thread, and frees *cp.
 * Copies from the device seal their blocks only then.  Every copy must
 * be waited or polled to its end; kvfs_disconnect() waits for those left
 * (aborting their writers) and frees them.
 *
 * Every call returns -ENOTSUP in a build without CUDA, and -ENODEV where
 * CUDA finds no GPU (cudaGetDeviceCount fails or counts 0), whatever the
 * arguments.  CUDA's own errors become -EINVAL (a bad device pointer or
 * stream), -ENOMEM, or -EIO.
 */
struct kvfs_copy;

/* one block of a batched copy */
struct kvfs_gpu_block {
	const uint8_t *hash;   /* its name, KVFS_HASH_LEN bytes */
	const uint8_t *parent; /* from the device: as for kvfs_alloc() */
	void *dev;	       /* device memory: the block's bytes */
	size_t len; /* to the device: room at dev in, the block's size out;
		     * from it: bytes to store */
};

/*
 * Pin the pool for DMA, once per handle: the read-write mapping where
 * this process may write the pool, else the read-only one (with
 * cudaHostRegisterReadOnly).  The copies call it on first use; call it
 * early to pay for pinning (it touches every page of the pool) before the
 * first request.  -EACCES the pool may not be read, -ENOTSUP the device
 * cannot pin a read-only mapping (copies still work, unpinned).
 */
int kvfs_gpu_register(struct kvfs *k);

/*
 * Copy block hash of ns into device memory dev (room for cap bytes);
 * *len (may be NULL) receives its size.  -ENOENT not cached, -EFBIG
 * larger than cap.
 */
int kvfs_copy_to_device(struct kvfs *k, const char *ns,
			const uint8_t hash[KVFS_HASH_LEN], void *dev,
			size_t cap, size_t *len, void *stream,
			struct kvfs_copy **cp);
/*
 * Store len bytes of device memory dev as a new block hash of ns (parent
 * as for kvfs_alloc()), sealed when the copy is waited for.  kvfs_alloc()'s
 * errors, -EFBIG len larger than a slot, -EACCES the pool is not writable
 * for this process.
 */
int kvfs_copy_from_device(struct kvfs *k, const char *ns,
			  const uint8_t hash[KVFS_HASH_LEN],
			  const uint8_t *parent, const void *dev, size_t len,
			  void *stream, struct kvfs_copy **cp);
/*
 * The same for n blocks at once (a request's prefix), one *cp for all:
 * every block is mapped (or allocated) before any copy is queued, and
 * when one fails nothing is copied and nothing stays referenced.
 */
int kvfs_copy_to_device_batch(struct kvfs *k, const char *ns,
			      struct kvfs_gpu_block *blocks, size_t n,
			      void *stream, struct kvfs_copy **cp);
int kvfs_copy_from_device_batch(struct kvfs *k, const char *ns,
				const struct kvfs_gpu_block *blocks, size_t n,
				void *stream, struct kvfs_copy **cp);

/*
 * Block until cp's copies are done, then drop its references (sealing
 * the blocks of a copy from the device) and free cp.  0, or -EIO when a
 * copy failed on the device (its blocks are then aborted), or a seal's
 * error.
 */
int kvfs_copy_wait(struct kvfs_copy *cp);
/* kvfs_copy_wait() when cp is complete; -EAGAIN (cp stays) while not */
int kvfs_copy_poll(struct kvfs_copy *cp);

#ifdef __cplusplus
}
#endif

#endif /* KVFS_H */
