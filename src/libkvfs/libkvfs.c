/*
 * libkvfs.c - connect, match, zero-copy map and write (kvfs.h).
 *
 * Everything goes through the control socket (ctl_client.h), but for
 * kvfs_write, which goes through the mount like any other writer.  The
 * pool file is mapped at most twice per handle, once read-only for maps
 * and once read-write for zero-copy writers, each on first use: a block
 * is then a pointer into a mapping this process already has, and no map
 * costs an mmap(2).
 *
 * Nothing the daemon says is trusted as a pointer: every offset and size
 * is checked against the mapping before it becomes one.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/common/ctl_client.h"
#include "src/common/ctlproto.h"
#include "src/common/hash.h"
#include "src/common/json.h"
#include "src/libkvfs/kvfs.h"
#include "src/libkvfs/libkvfs_int.h"
#include "kvstore/pool.h"

/* one live kvfs_map: the pointer handed out and the daemon's ref */
struct kvfs_mapent {
	const void *ptr;
	uint64_t ref;
};

struct kvfs_wblock {
	struct kvfs *k;
	uint64_t ref;
	size_t cap;
	struct kvfs_wblock *prev, *next;
};

/* ---- connection ----------------------------------------------------- */

/* the daemon's pool path and slot size, from "status" */
static int read_status(struct kvfs *k)
{
	const struct kvfs_json *d;
	struct kvfs_json *j;
	const char *pool;
	int rc;

	rc = kvfs_ctl_request(k->ctl, "status", &j, NULL, NULL, 0);
	if (rc)
		return rc;
	d = kvfs_json_get(j, "daemon");
	pool = kvfs_json_str(kvfs_json_get(d, "pool"));
	if (!pool || pool[0] != '/' ||
	    kvfs_json_u64(kvfs_json_get(d, "slot_size"), &k->slot_size) ||
	    !k->slot_size || k->slot_size % KV_POOL_SLOT_ALIGN ||
	    k->slot_size > SIZE_MAX / 2) {
		rc = -EPROTO;
		goto out_free;
	}
	k->pool_path = strdup(pool);
	if (!k->pool_path)
		rc = -ENOMEM;
out_free:
	kvfs_json_free(j);
	return rc;
}

int kvfs_connect(const char *mountpoint, struct kvfs **out)
{
	struct stat sb;
	struct kvfs *k;
	int rc;

	if (!mountpoint || !*mountpoint || !out)
		return -EINVAL;
	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->mount = strdup(mountpoint);
	if (!k->mount) {
		rc = -ENOMEM;
		goto out_free;
	}
	k->no_mount = stat(mountpoint, &sb) == 0 && S_ISSOCK(sb.st_mode);
	rc = kvfs_ctl_connect(mountpoint, &k->ctl, NULL, 0);
	if (rc)
		goto out_free;
	rc = read_status(k);
	if (rc)
		goto out_close;
	*out = k;
	return 0;
out_close:
	kvfs_ctl_close(k->ctl);
out_free:
	free(k->mount);
	free(k);
	return rc;
}

static void pool_unmap(struct pool_map *m)
{
	if (m->base)
		munmap(m->base, m->len);
	m->base = NULL;
	m->len = 0;
}

void kvfs_disconnect(struct kvfs *k)
{
	struct kvfs_wblock *wb, *next;

	if (!k)
		return;
	/* copies in flight first: their slots stay referenced until the
	 * DMA is over, which needs the connection */
	libkvfs_gpu_close(k);
	/* closing the connection is what releases leases, maps and
	 * writers in the daemon (ctlproto.h); close it before the
	 * mappings go, so no slot is reused while still mapped here */
	kvfs_ctl_close(k->ctl);
	for (wb = k->writers; wb; wb = next) {
		next = wb->next;
		free(wb);
	}
	pool_unmap(&k->ro);
	pool_unmap(&k->rw);
	free(k->maps);
	free(k->pool_path);
	free(k->mount);
	free(k);
}

/* ---- the pool mappings ---------------------------------------------- */

/* map the pool file once: read-only for readers, read-write for writers */
int libkvfs_pool_map(struct kvfs *k, bool rw)
{
	struct pool_map *m = rw ? &k->rw : &k->ro;
	struct stat sb;
	void *p;
	int fd, rc = 0;

	if (m->base)
		return 0;
	fd = open(k->pool_path, (rw ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) < 0) {
		rc = -errno;
		goto out_close;
	}
	if (!S_ISREG(sb.st_mode) || sb.st_size < (off_t)KV_POOL_HDR_SIZE ||
	    (uint64_t)sb.st_size > SIZE_MAX) {
		rc = -EPROTO;
		goto out_close;
	}
	p = mmap(NULL, (size_t)sb.st_size, PROT_READ | (rw ? PROT_WRITE : 0),
		 MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		rc = -errno;
		goto out_close;
	}
	/* a path that names something other than a pool is no pool */
	if (memcmp(p, "KVFSPOOL", 8)) {
		munmap(p, (size_t)sb.st_size);
		rc = -EPROTO;
		goto out_close;
	}
	m->base = p;
	m->len = (size_t)sb.st_size;
out_close:
	close(fd);
	return rc;
}

/* [off, off + len) as the daemon gave it: page-aligned, past the header,
 * within one slot and inside the mapping */
static int check_span(const struct kvfs *k, const struct pool_map *m,
		      uint64_t off, uint64_t len)
{
	if (off < KV_POOL_HDR_SIZE || off % KV_POOL_SLOT_ALIGN ||
	    len > k->slot_size || off > m->len || len > m->len - off)
		return -EPROTO;
	return 0;
}

/* ---- requests ------------------------------------------------------- */

/* "VERB NS HEX [HEX2]" */
static int block_req(struct kvfs_buf *b, const char *verb, const char *ns,
		     const uint8_t *h, const uint8_t *h2)
{
	char hex[KVFS_HASH_HEX_LEN + 1];

	if (kvfs_ns_valid(ns) || !h)
		return -EINVAL;
	kvfs_buf_printf(b, "%s ", verb);
	kvfs_ctlp_pct_encode(b, ns, strlen(ns));
	kvfs_hash_to_hex(h, hex);
	kvfs_buf_printf(b, " %s", hex);
	if (h2) {
		kvfs_hash_to_hex(h2, hex);
		kvfs_buf_printf(b, " %s", hex);
	}
	return b->err;
}

static int call(struct kvfs *k, const char *req, struct kvfs_json **resp)
{
	return kvfs_ctl_request(k->ctl, req, resp, NULL, NULL, 0);
}

static int ref_call(struct kvfs *k, const char *verb, uint64_t ref,
		    const char *extra)
{
	char req[96];

	snprintf(req, sizeof(req), "%s %llu%s", verb, (unsigned long long)ref,
		 extra ? extra : "");
	return call(k, req, NULL);
}

/* "ref", "offset" and size_key of a map or alloc response */
static int span_fields(const struct kvfs_json *j, const char *size_key,
		       uint64_t *ref, uint64_t *off, uint64_t *len)
{
	if (kvfs_json_u64(kvfs_json_get(j, "ref"), ref) || !*ref ||
	    kvfs_json_u64(kvfs_json_get(j, "offset"), off) ||
	    kvfs_json_u64(kvfs_json_get(j, size_key), len))
		return -EPROTO;
	return 0;
}

/* ---- match ---------------------------------------------------------- */

long kvfs_match(struct kvfs *k, const char *ns,
		const uint8_t (*hashes)[KVFS_HASH_LEN], size_t n,
		uint32_t lease_ms, uint64_t *lease)
{
	if (!k)
		return -EINVAL;
	return kvfs_ctl_match(k->ctl, ns, hashes, n, lease_ms, lease);
}

int kvfs_release(struct kvfs *k, uint64_t lease)
{
	if (!k)
		return -EINVAL;
	return kvfs_ctl_unpin(k->ctl, lease);
}

/* ---- map ------------------------------------------------------------ */

/*
 * The live maps: a table of (ptr, ref) keyed by ptr, linear probing, at
 * most 3/4 full, so an unmap costs the same with 10 maps as with 60000.
 * An empty entry has ptr NULL (no map is at NULL: it lies in a mapping).
 */
static size_t map_home(const struct kvfs *k, const void *ptr)
{
	uint64_t x = (uint64_t)(uintptr_t)ptr;

	/* slots are page-aligned, so the low bits say nothing: mix them */
	x ^= x >> 29;
	x *= 0x9e3779b97f4a7c15ull;
	return (size_t)(x >> 32) & (k->maps_cap - 1);
}

static void map_put(struct kvfs *k, const void *ptr, uint64_t ref)
{
	size_t i = map_home(k, ptr);

	while (k->maps[i].ptr)
		i = (i + 1) & (k->maps_cap - 1);
	k->maps[i].ptr = ptr;
	k->maps[i].ref = ref;
	k->nmaps++;
}

/* room for n more maps, so that tracking after the daemon's answer
 * cannot fail */
static int map_reserve(struct kvfs *k, size_t n)
{
	struct kvfs_mapent *old = k->maps;
	size_t cap = k->maps_cap ? k->maps_cap : 16, ocap = k->maps_cap;

	if (n > SIZE_MAX / 8 - k->nmaps)
		return -ENOMEM;
	while ((k->nmaps + n) * 4 > cap * 3)
		cap *= 2;
	if (cap == k->maps_cap)
		return 0;
	k->maps = calloc(cap, sizeof(*k->maps));
	if (!k->maps) {
		k->maps = old;
		return -ENOMEM;
	}
	k->maps_cap = cap;
	k->nmaps = 0;
	for (size_t i = 0; i < ocap; i++)
		if (old[i].ptr)
			map_put(k, old[i].ptr, old[i].ref);
	free(old);
	return 0;
}

/* the index of one map of ptr, or SIZE_MAX */
static size_t map_find(const struct kvfs *k, const void *ptr)
{
	size_t i;

	if (!k->maps_cap)
		return SIZE_MAX;
	for (i = map_home(k, ptr); k->maps[i].ptr;
	     i = (i + 1) & (k->maps_cap - 1))
		if (k->maps[i].ptr == ptr)
			return i;
	return SIZE_MAX;
}

/* take entry i out; the entries after it in its run move back into the
 * gap where their probe allows, so no tombstone is needed */
static uint64_t map_take(struct kvfs *k, size_t i)
{
	size_t mask = k->maps_cap - 1, j = i;
	uint64_t ref = k->maps[i].ref;

	for (;;) {
		j = (j + 1) & mask;
		if (!k->maps[j].ptr)
			break;
		/* j may fill the gap at i unless its home lies in (i, j] */
		if (((j - map_home(k, k->maps[j].ptr)) & mask) >=
		    ((j - i) & mask)) {
			k->maps[i] = k->maps[j];
			i = j;
		}
	}
	k->maps[i].ptr = NULL;
	k->nmaps--;
	return ref;
}

/* ask the daemon for the block; on success *ref pins it */
static int map_req(struct kvfs *k, const char *ns, const uint8_t *hash,
		   uint64_t *ref, uint64_t *off, uint64_t *len)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	struct kvfs_json *j;
	int rc;

	rc = block_req(&b, "map", ns, hash, NULL);
	if (!rc)
		rc = call(k, b.p, &j);
	kvfs_buf_release(&b);
	if (rc)
		return rc;
	rc = span_fields(j, "size", ref, off, len);
	kvfs_json_free(j);
	return rc;
}

int kvfs_map(struct kvfs *k, const char *ns, const uint8_t hash[KVFS_HASH_LEN],
	     const void **ptr, size_t *len)
{
	uint64_t ref, off, size;
	int rc;

	if (!k || !ns || !hash || !ptr || !len)
		return -EINVAL;
	if (kvfs_ns_valid(ns))
		return -EINVAL;
	/* map before asking, so a pool we may not read pins nothing */
	rc = libkvfs_pool_map(k, false);
	if (rc)
		return rc;
	rc = map_req(k, ns, hash, &ref, &off, &size);
	if (rc)
		return rc;
	rc = check_span(k, &k->ro, off, size);
	if (!rc)
		rc = map_reserve(k, 1);
	if (rc) {
		ref_call(k, "unmap", ref, NULL);
		return rc;
	}
	map_put(k, k->ro.base + off, ref);
	*ptr = k->ro.base + off;
	*len = (size_t)size;
	return 0;
}

/* "unmap REF..." for refs[0..n-1], posted: the answers ride with the
 * handle's next request (an error can only be a ref the daemon dropped
 * already, with a dead connection); the bytes stay valid to us until
 * then anyway, and ours is the only use of them */
static int unmap_post(struct kvfs *k, const uint64_t *refs, size_t n)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i += CTLP_HASHES_MAX) {
		b.len = 0;
		kvfs_buf_puts(&b, "unmap");
		for (size_t j = i; j < n && j < i + CTLP_HASHES_MAX; j++)
			kvfs_buf_printf(&b, " %llu",
					(unsigned long long)refs[j]);
		rc = b.err ? b.err : kvfs_ctl_post(k->ctl, b.p);
	}
	kvfs_buf_release(&b);
	return rc;
}

/* the spans of a mapv answer, checked; refs[] gets every ref that
 * parses, so that a bad answer can be unmapped again */
static int mapv_spans(struct kvfs *k, const struct kvfs_json *maps,
		      size_t count, uint64_t *refs, size_t *nrefs,
		      const void **ptrs, size_t *lens)
{
	uint64_t off, len;
	int rc = 0;

	*nrefs = 0;
	for (size_t i = 0; i < count; i++) {
		const struct kvfs_json *m = &maps->kid[i];

		if (span_fields(m, "size", &refs[*nrefs], &off, &len)) {
			rc = -EPROTO;
			continue;
		}
		(*nrefs)++;
		if (check_span(k, &k->ro, off, len))
			rc = -EPROTO;
		else {
			ptrs[i] = k->ro.base + off;
			lens[i] = (size_t)len;
		}
	}
	return rc;
}

long kvfs_map_batch(struct kvfs *k, const char *ns,
		    const uint8_t (*hashes)[KVFS_HASH_LEN], size_t n,
		    const void **ptrs, size_t *lens)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	const struct kvfs_json *maps;
	struct kvfs_json *j;
	uint64_t count, *refs;
	size_t nrefs;
	int rc;

	if (!k || !ns || (n && (!hashes || !ptrs || !lens)) ||
	    kvfs_ns_valid(ns))
		return -EINVAL;
	if (n > CTLP_HASHES_MAX)
		return -E2BIG;
	rc = libkvfs_pool_map(k, false);
	if (!rc)
		rc = map_reserve(k, n);
	if (rc)
		return rc;
	refs = malloc((n ? n : 1) * sizeof(*refs));
	if (!refs)
		return -ENOMEM;
	rc = kvfs_ctl_prefix_req(&b, "mapv", ns, -1, hashes, n);
	if (!rc)
		rc = call(k, b.p, &j);
	kvfs_buf_release(&b);
	if (rc)
		goto out_free;
	maps = kvfs_json_get(j, "maps");
	if (kvfs_json_u64(kvfs_json_get(j, "count"), &count) || count > n ||
	    !maps || maps->type != KVFS_JSON_ARR || maps->n != count) {
		/* no telling which refs were taken: the daemon drops them
		 * when this handle goes */
		rc = -EPROTO;
		goto out_json;
	}
	rc = mapv_spans(k, maps, (size_t)count, refs, &nrefs, ptrs, lens);
	if (rc) {
		unmap_post(k, refs, nrefs);
		goto out_json;
	}
	for (size_t i = 0; i < count; i++)
		map_put(k, ptrs[i], refs[i]);
out_json:
	kvfs_json_free(j);
out_free:
	free(refs);
	return rc ? rc : (long)count;
}

int kvfs_unmap(struct kvfs *k, const void *ptr)
{
	uint64_t ref;
	size_t i;

	if (!k || !ptr)
		return -EINVAL;
	i = map_find(k, ptr);
	if (i == SIZE_MAX)
		return -EINVAL;
	ref = map_take(k, i);
	unmap_post(k, &ref, 1);
	return 0;
}

int kvfs_unmap_batch(struct kvfs *k, const void *const *ptrs, size_t n)
{
	uint64_t one, *refs = &one;
	size_t i, at;
	int rc = 0;

	if (!k || (!ptrs && n))
		return -EINVAL;
	if (n > 1) {
		refs = malloc(n * sizeof(*refs));
		if (!refs)
			return -ENOMEM;
	}
	/* take them all out first: a pointer not mapped (or once more
	 * than it is mapped) puts the others back and unmaps nothing */
	for (i = 0; i < n; i++) {
		at = ptrs[i] ? map_find(k, ptrs[i]) : SIZE_MAX;
		if (at == SIZE_MAX) {
			rc = -EINVAL;
			break;
		}
		refs[i] = map_take(k, at);
	}
	if (rc) /* no table growth: these fit where they were */
		while (i--)
			map_put(k, ptrs[i], refs[i]);
	else
		unmap_post(k, refs, n);
	if (refs != &one)
		free(refs);
	return rc;
}

/* ---- write through the mount ---------------------------------------- */

static int write_all(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int write_in_place(struct kvfs *k, const char *ns,
			  const uint8_t hash[KVFS_HASH_LEN], const void *buf,
			  size_t len)
{
	struct kvfs_wblock *wb;
	size_t cap;
	void *p;
	int rc = kvfs_alloc(k, ns, hash, NULL, &p, &cap, &wb);

	if (rc)
		return rc;
	if (len > cap) {
		kvfs_abort(wb);
		return -EFBIG;
	}
	memcpy(p, buf, len);
	return kvfs_commit(wb, len);
}

int kvfs_write(struct kvfs *k, const char *ns,
	       const uint8_t hash[KVFS_HASH_LEN], const void *buf, size_t len)
{
	char hex[KVFS_HASH_HEX_LEN + 1], path[PATH_MAX];
	struct stat sb;
	int fd, rc;

	if (!k || !hash || (!buf && len) || kvfs_ns_valid(ns))
		return -EINVAL;
	/* connected to a control socket, not a mount (kvfsd --no-mount):
	 * through a writer of the pool instead */
	if (k->no_mount)
		return write_in_place(k, ns, hash, buf, len);
	/* this goes around the socket: the unmaps posted on it are served
	 * first, or a slot this handle let go may still look taken.  A
	 * broken connection does not stop the write: its close drops them */
	(void)kvfs_ctl_settle(k->ctl);
	kvfs_hash_to_hex(hash, hex);
	if (snprintf(path, sizeof(path), "%s/%s/%s", k->mount, ns, hex) >=
	    (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
	if (fd < 0)
		return -errno;
	/* a failed write makes the daemon abort the block at close, so a
	 * half-written block is never sealed under its name */
	rc = write_all(fd, buf, len);
	/* the close seals: its error is the seal's */
	if (close(fd) < 0 && !rc)
		rc = -errno;
	/* the close publishes the block only when kvfsd gets RELEASE, which
	 * the kernel sends after close(2) has returned; a lookup of the name
	 * waits for that in kvfsd (the writer's entry is never cached), so
	 * that a map or a GPU copy right after this finds the block */
	if (!rc)
		(void)stat(path, &sb);
	return rc;
}

/* ---- zero-copy writer ----------------------------------------------- */

static int alloc_req(struct kvfs *k, const char *ns, const uint8_t *hash,
		     const uint8_t *parent, uint64_t *ref, uint64_t *off,
		     uint64_t *cap)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	struct kvfs_json *j;
	int rc;

	rc = block_req(&b, "alloc", ns, hash, parent);
	if (!rc)
		rc = call(k, b.p, &j);
	kvfs_buf_release(&b);
	if (rc)
		return rc;
	rc = span_fields(j, "cap", ref, off, cap);
	kvfs_json_free(j);
	return rc;
}

static void wb_link(struct kvfs *k, struct kvfs_wblock *wb)
{
	wb->next = k->writers;
	if (k->writers)
		k->writers->prev = wb;
	k->writers = wb;
}

static void wb_free(struct kvfs_wblock *wb)
{
	if (wb->prev)
		wb->prev->next = wb->next;
	else
		wb->k->writers = wb->next;
	if (wb->next)
		wb->next->prev = wb->prev;
	free(wb);
}

int kvfs_alloc(struct kvfs *k, const char *ns,
	       const uint8_t hash[KVFS_HASH_LEN], const uint8_t *parent,
	       void **ptr, size_t *cap, struct kvfs_wblock **wb)
{
	struct kvfs_wblock *w;
	uint64_t ref, off, len;
	int rc;

	if (!k || !ns || !hash || !ptr || !cap || !wb || kvfs_ns_valid(ns))
		return -EINVAL;
	rc = libkvfs_pool_map(k, true);
	if (rc)
		return rc;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	rc = alloc_req(k, ns, hash, parent, &ref, &off, &len);
	if (rc)
		goto out_free;
	rc = check_span(k, &k->rw, off, len);
	if (rc) {
		ref_call(k, "abort", ref, NULL);
		goto out_free;
	}
	w->k = k;
	w->ref = ref;
	w->cap = (size_t)len;
	wb_link(k, w);
	*ptr = k->rw.base + off;
	*cap = w->cap;
	*wb = w;
	return 0;
out_free:
	free(w);
	return rc;
}

int libkvfs_commit_crc(struct kvfs_wblock *wb, size_t len, const uint32_t *crc)
{
	char extra[48];
	int rc;

	if (!wb)
		return -EINVAL;
	if (len > wb->cap)
		return -EFBIG;
	if (crc)
		snprintf(extra, sizeof(extra), " %zu %08x", len, *crc);
	else
		snprintf(extra, sizeof(extra), " %zu", len);
	rc = ref_call(wb->k, "commit", wb->ref, extra);
	wb_free(wb);
	return rc;
}

int kvfs_commit(struct kvfs_wblock *wb, size_t len)
{
	return libkvfs_commit_crc(wb, len, NULL);
}

int kvfs_abort(struct kvfs_wblock *wb)
{
	int rc;

	if (!wb)
		return -EINVAL;
	rc = ref_call(wb->k, "abort", wb->ref, NULL);
	wb_free(wb);
	return rc;
}
