#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/common/clock.h"
#include "src/common/log.h"
#include "kvstore/pool.h"
#include "src/common/le.h"

static const char pool_magic[8] = { 'K', 'V', 'F', 'S', 'P', 'O', 'O', 'L' };

/* header fields, offsets as in pool.h */
#define H_MAGIC 0
#define H_VERSION 8
#define H_HDRSIZE 12
#define H_SLOTSIZE 16
#define H_NSLOTS 24
#define H_DATAOFF 32
#define H_UUID 40
#define H_FMTTIME 56

struct kv_pool {
	int fd;
	uint8_t *base; /* whole file mapped MAP_SHARED */
	size_t map_len;
	uint64_t slot_size;
	uint32_t nslots;
	bool formatted;
	uint8_t uuid[KV_POOL_UUID_LEN];
	char *path;
	int spill_fd; /* the spill directory (pool.h), O_PATH-like: openat */

	/*
	 * Free slots as a stack, with each slot's position in it so that
	 * reserve() can pull an arbitrary slot out in O(1).  pos[s] ==
	 * KV_POOL_NO_SLOT means s is in use.  Guarded by lock.
	 */
	pthread_mutex_t lock;
	uint32_t *stack;
	uint32_t *pos;
	uint32_t nfree;
};

static int geom_valid(const struct kv_pool_geom *g)
{
	if (!g || g->slot_size == 0 || g->slot_size % KV_POOL_SLOT_ALIGN ||
	    g->nslots == 0 || g->nslots == KV_POOL_NO_SLOT)
		return 0;
	/* the file size must not overflow */
	if (g->slot_size > (UINT64_MAX - KV_POOL_HDR_SIZE) / g->nslots)
		return 0;
	return 1;
}

static uint64_t file_size(const struct kv_pool_geom *g)
{
	return KV_POOL_HDR_SIZE + g->slot_size * g->nslots;
}

/* 1 when hdr is a pool header of this version, 0 otherwise */
static int hdr_is_pool(const uint8_t *hdr, off_t len)
{
	return len >= (off_t)KV_POOL_HDR_SIZE &&
	       memcmp(hdr + H_MAGIC, pool_magic, sizeof(pool_magic)) == 0 &&
	       kv_get_le32(hdr + H_VERSION) == KV_POOL_VERSION &&
	       kv_get_le32(hdr + H_HDRSIZE) == KV_POOL_HDR_SIZE &&
	       kv_get_le64(hdr + H_DATAOFF) == KV_POOL_HDR_SIZE;
}

/*
 * Read the header with pread (not a mapping of the whole file, whose size
 * we do not trust yet) and decide: 0 attach, 1 must format, <0 error.
 */
static int pool_check(int fd, const char *path, const struct kv_pool_geom *g,
		      unsigned flags)
{
	uint8_t hdr[KV_POOL_HDR_SIZE];
	struct stat st;
	ssize_t n;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (st.st_size == 0)
		return 1; /* just created */
	n = pread(fd, hdr, sizeof(hdr), 0);
	if (n < 0)
		return -errno;
	if (!hdr_is_pool(hdr, n)) {
		if (flags & KV_POOL_REFORMAT)
			return 1;
		kvfs_err("%s is not a kvfs pool (or of another version); "
			 "refusing to format it without reformat",
			 path);
		return -EINVAL;
	}
	if (kv_get_le64(hdr + H_SLOTSIZE) != g->slot_size ||
	    kv_get_le32(hdr + H_NSLOTS) != g->nslots) {
		if (flags & KV_POOL_REFORMAT)
			return 1;
		kvfs_err("pool %s has %u slots of %llu bytes, asked for %u of "
			 "%llu; refusing to reformat it without reformat",
			 path, kv_get_le32(hdr + H_NSLOTS),
			 (unsigned long long)kv_get_le64(hdr + H_SLOTSIZE),
			 g->nslots, (unsigned long long)g->slot_size);
		return -EINVAL;
	}
	if ((uint64_t)st.st_size != file_size(g)) {
		if (flags & KV_POOL_REFORMAT)
			return 1;
		kvfs_err("pool %s is %lld bytes, its header says %llu", path,
			 (long long)st.st_size,
			 (unsigned long long)file_size(g));
		return -EINVAL;
	}
	return 0;
}

static int pool_format(struct kv_pool *p)
{
	uint8_t *h = p->base;

	if (getrandom(p->uuid, sizeof(p->uuid), 0) != sizeof(p->uuid))
		return -EIO;
	/* clear the old magic first: a kill mid-format leaves "not a pool" */
	memset(h, 0, KV_POOL_HDR_SIZE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	kv_put_le32(h + H_VERSION, KV_POOL_VERSION);
	kv_put_le32(h + H_HDRSIZE, KV_POOL_HDR_SIZE);
	kv_put_le64(h + H_SLOTSIZE, p->slot_size);
	kv_put_le32(h + H_NSLOTS, p->nslots);
	kv_put_le64(h + H_DATAOFF, KV_POOL_HDR_SIZE);
	memcpy(h + H_UUID, p->uuid, sizeof(p->uuid));
	kv_put_le64(h + H_FMTTIME, kvfs_wall_ns());
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	memcpy(h + H_MAGIC, pool_magic, sizeof(pool_magic));
	p->formatted = true;
	return 0;
}

static int pool_map(struct kv_pool *p, int must_format)
{
	struct kv_pool_geom g = { p->slot_size, p->nslots };
	uint64_t len = file_size(&g);

	if (len > SIZE_MAX)
		return -EFBIG;
	if (must_format) {
		/* drop old contents, then size the file; tmpfs keeps it
		 * sparse, so only written pages cost memory */
		if (ftruncate(p->fd, 0) < 0 || ftruncate(p->fd, (off_t)len) < 0)
			return -errno;
	}
	p->map_len = (size_t)len;
	p->base = mmap(NULL, p->map_len, PROT_READ | PROT_WRITE, MAP_SHARED,
		       p->fd, 0);
	if (p->base == MAP_FAILED) {
		p->base = NULL;
		return -errno;
	}
	if (must_format)
		return pool_format(p);
	memcpy(p->uuid, p->base + H_UUID, sizeof(p->uuid));
	return 0;
}

/* KV_POOL_PREALLOC: in steps, with a progress line every few seconds */
static int pool_prealloc(struct kv_pool *p)
{
	const uint64_t step = 256ull << 20, every = 3000000000ull;
	uint64_t t0 = kvfs_mono_ns(), last = t0, at = 0;

	while (at < p->map_len) {
		uint64_t n = p->map_len - at < step ? p->map_len - at : step;
		uint64_t now;

		if (fallocate(p->fd, 0, (off_t)at, (off_t)n) < 0) {
			int rc = -errno;

			if (rc == -EOPNOTSUPP)
				return 0; /* nothing to take ahead of time */
			kvfs_err("pool %s: taking its %llu bytes failed at "
				 "%llu: %s",
				 p->path, (unsigned long long)p->map_len,
				 (unsigned long long)at, strerror(-rc));
			return rc;
		}
#ifdef MADV_POPULATE_WRITE
		/* and map them: a first write into a slot takes no minor
		 * fault per page either (best effort: Linux 5.14 on) */
		madvise(p->base + at, n, MADV_POPULATE_WRITE);
#endif
		at += n;
		now = kvfs_mono_ns();
		if (now - last >= every && at < p->map_len) {
			kvfs_info("pool %s: %llu of %llu MiB taken", p->path,
				  (unsigned long long)(at >> 20),
				  (unsigned long long)(p->map_len >> 20));
			last = now;
		}
	}
	if (last != t0)
		kvfs_info("pool %s: all %llu MiB taken in %.1f s", p->path,
			  (unsigned long long)(p->map_len >> 20),
			  (double)(kvfs_mono_ns() - t0) / 1e9);
	return 0;
}

static int pool_lists_init(struct kv_pool *p)
{
	p->stack = malloc(sizeof(*p->stack) * p->nslots);
	p->pos = malloc(sizeof(*p->pos) * p->nslots);
	if (!p->stack || !p->pos)
		return -ENOMEM;
	/* lowest slot on top, so a fresh pool fills from slot 0 */
	for (uint32_t i = 0; i < p->nslots; i++) {
		p->stack[i] = p->nslots - 1 - i;
		p->pos[p->nslots - 1 - i] = i;
	}
	p->nfree = p->nslots;
	return pthread_mutex_init(&p->lock, NULL) ? -ENOMEM : 0;
}

/*
 * Open path without following a link at its end, creating it only where
 * nothing is (O_EXCL): a file or link planted under the predictable name
 * in /dev/shm is never created over, only checked by pool_trusted.
 * O_NONBLOCK keeps a FIFO or device planted there from blocking the open.
 */
static int pool_open_fd(const char *path, unsigned flags)
{
	const int base = O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
	int fd;

	/* bounded: only a file removed between the two opens loops */
	for (int tries = 0; tries < 3; tries++) {
		if (flags & KV_POOL_CREATE) {
			/* 0600 until pool_adopt sets the mode asked for */
			fd = open(path, base | O_CREAT | O_EXCL, 0600);
			if (fd >= 0 || errno != EEXIST)
				break;
		}
		fd = open(path, base);
		if (fd >= 0 || errno != ENOENT || !(flags & KV_POOL_CREATE))
			break;
	}
	if (fd >= 0)
		return fd;
	if (errno == ELOOP) {
		kvfs_err("pool %s is a symbolic link; refusing to follow it",
			 path);
		return -EPERM;
	}
	if (errno == EISDIR || errno == ENXIO) {
		kvfs_err("pool %s is not a regular file; refusing it", path);
		return -EPERM;
	}
	return -errno;
}

/*
 * Whoever else could write the file could rewrite sealed blocks under
 * the daemon, so only a plain file of ours is adopted, checked on the
 * open fd (a check by path could be raced): our euid's, one link (a hard
 * link could make -o reformat truncate another file), and writable by
 * group or others only as far as mode grants it.
 */
static int pool_trusted(int fd, const char *path, mode_t mode)
{
	struct stat st;
	mode_t extra;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode)) {
		kvfs_err("pool %s is not a regular file; refusing it", path);
		return -EPERM;
	}
	if (st.st_uid != geteuid()) {
		kvfs_err("pool %s is owned by uid %u, not by kvfsd's uid %u; "
			 "refusing to adopt it",
			 path, (unsigned)st.st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	if (st.st_nlink != 1) {
		kvfs_err("pool %s has %lu hard links; refusing to adopt it",
			 path, (unsigned long)st.st_nlink);
		return -EPERM;
	}
	extra = st.st_mode & (S_IWGRP | S_IWOTH) & ~mode;
	if (extra) {
		kvfs_err("pool %s is writable by %s (mode %04o); refusing to "
			 "adopt it",
			 path,
			 extra == (S_IWGRP | S_IWOTH) ? "group and others"
			 : extra == S_IWGRP	      ? "its group"
						      : "others",
			 (unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

/* ---- spill files (pool.h) ------------------------------------------ */

/* remove the files of the spill directory that keep does not want (all,
 * with keep NULL) */
static int spill_sweep(int dfd, bool (*keep)(uint32_t slot, void *arg),
		       void *arg)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	DIR *d;

	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -ENOMEM;
	}
	while ((de = readdir(d))) {
		char *end;
		unsigned long slot = strtoul(de->d_name, &end, 16);

		if (de->d_name[0] == '.')
			continue;
		if (keep && !*end && end - de->d_name == 8 &&
		    slot < UINT32_MAX && keep((uint32_t)slot, arg))
			continue;
		if (unlinkat(dfd, de->d_name, 0) < 0 && errno != ENOENT) {
			closedir(d);
			return -errno;
		}
	}
	closedir(d);
	return 0;
}

int kv_pool_spill_sweep(struct kv_pool *p,
			bool (*keep)(uint32_t slot, void *arg), void *arg)
{
	if (!p || !keep)
		return -EINVAL;
	return p->spill_fd < 0 ? 0 : spill_sweep(p->spill_fd, keep, arg);
}

/*
 * PATH.d: made by us (when create, at the first spill: a pool that never
 * spills leaves nothing beside its file), or adopted only when it is a
 * directory (not a link) that we own and nobody else may write to, for
 * the same reason as the pool file itself: spill files are blocks'
 * bytes.  0 with no directory (absent, not create); p->lock held or
 * not yet shared.
 */
static int spill_open(struct kv_pool *p, bool create)
{
	size_t len = strlen(p->path) + 3;
	char *dir = malloc(len);
	struct stat st;
	int rc = 0;

	if (!dir)
		return -ENOMEM;
	snprintf(dir, len, "%s.d", p->path);
	if (create && mkdir(dir, 0700) < 0 && errno != EEXIST)
		rc = -errno;
	if (rc == 0) {
		p->spill_fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
						O_CLOEXEC);
		if (p->spill_fd < 0)
			rc = errno == ENOENT && !create ? 1 : -errno;
	}
	if (rc == 1) {
		free(dir);
		return 0;
	}
	if (rc == 0 && fstat(p->spill_fd, &st) < 0)
		rc = -errno;
	if (rc == 0 && (st.st_uid != geteuid() || (st.st_mode & 0022))) {
		kvfs_err("spill directory %s: not ours alone (owner %u, mode "
			 "%o): refused",
			 dir, (unsigned)st.st_uid,
			 (unsigned)(st.st_mode & 07777));
		rc = -EPERM;
	}
	if (rc == 0 && p->formatted && !create)
		rc = spill_sweep(p->spill_fd, NULL, NULL);
	if (rc < 0 && rc != -EPERM)
		kvfs_err("spill directory %s: %s", dir, strerror(-rc));
	if (rc < 0 && p->spill_fd >= 0) {
		close(p->spill_fd);
		p->spill_fd = -1;
	}
	free(dir);
	return rc;
}

static void spill_name(char name[16], uint32_t slot)
{
	snprintf(name, 16, "%08x", slot);
}

int kv_pool_spill_open(struct kv_pool *p, uint32_t slot, bool create)
{
	char name[16];
	struct stat st;
	int fd;

	if (!p || slot >= p->nslots)
		return -EINVAL;
	spill_name(name, slot);
	if (create && p->spill_fd < 0) {
		pthread_mutex_lock(&p->lock);
		fd = p->spill_fd < 0 ? spill_open(p, true) : 0;
		pthread_mutex_unlock(&p->lock);
		if (fd < 0)
			return fd;
	}
	if (p->spill_fd < 0)
		return -ENOENT;
	if (create) {
		/* a file left by a block that is gone (a crash) */
		if (unlinkat(p->spill_fd, name, 0) < 0 && errno != ENOENT)
			return -errno;
		fd = openat(p->spill_fd, name,
			    O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    0600);
		return fd < 0 ? -errno : fd;
	}
	fd = openat(p->spill_fd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != geteuid() || st.st_nlink != 1) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

int kv_pool_spill_remove(struct kv_pool *p, uint32_t slot)
{
	char name[16];

	if (!p || slot >= p->nslots)
		return -EINVAL;
	if (p->spill_fd < 0)
		return 0;
	spill_name(name, slot);
	return unlinkat(p->spill_fd, name, 0) < 0 && errno != ENOENT ? -errno
								     : 0;
}

int kv_pool_punch(struct kv_pool *p, uint32_t slot)
{
	if (!p || slot >= p->nslots)
		return -EINVAL;
	if (fallocate(p->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      (off_t)kv_pool_slot_offset(p, slot),
		      (off_t)p->slot_size) < 0)
		return -errno;
	return 0;
}

int kv_pool_open(const char *path, const struct kv_pool_geom *g, unsigned flags,
		 struct kv_pool **out)
{
	return kv_pool_open_mode(path, g, flags, 0600, out);
}

int kv_pool_open_mode(const char *path, const struct kv_pool_geom *g,
		      unsigned flags, mode_t mode, struct kv_pool **out)
{
	struct kv_pool *p;
	int rc, fmt;

	if (!path || !*path || !out || !geom_valid(g) || (mode & ~0666u) ||
	    (flags &
	     ~(unsigned)(KV_POOL_CREATE | KV_POOL_REFORMAT | KV_POOL_PREALLOC)))
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->slot_size = g->slot_size;
	p->nslots = g->nslots;
	p->spill_fd = -1;
	p->path = strdup(path);
	if (!p->path) {
		rc = -ENOMEM;
		goto out_free;
	}
	p->fd = pool_open_fd(path, flags);
	if (p->fd < 0) {
		rc = p->fd;
		goto out_free;
	}
	rc = pool_trusted(p->fd, path, mode);
	if (rc < 0)
		goto out_close;
	/* a regular file now: blocking I/O as usual */
	if (fcntl(p->fd, F_SETFL, 0) < 0) {
		rc = -errno;
		goto out_close;
	}
	if (flock(p->fd, LOCK_EX | LOCK_NB) < 0) {
		rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		if (rc == -EBUSY)
			kvfs_err("pool %s is in use by another process", path);
		goto out_close;
	}
	fmt = pool_check(p->fd, path, g, flags);
	if (fmt < 0) {
		rc = fmt;
		goto out_close;
	}
	/* on the fd, never by path: the name may point elsewhere by now */
	if (fchmod(p->fd, mode) < 0) {
		rc = -errno;
		goto out_close;
	}
	rc = pool_map(p, fmt);
	if (rc == 0 && (flags & KV_POOL_PREALLOC))
		rc = pool_prealloc(p);
	if (rc < 0)
		goto out_unmap;
	rc = pool_lists_init(p);
	if (rc < 0)
		goto out_unmap;
	rc = spill_open(p, false);
	if (rc < 0)
		goto out_spill;
	*out = p;
	return 0;

out_spill:
	if (p->spill_fd >= 0)
		close(p->spill_fd);
out_unmap:
	if (p->base)
		munmap(p->base, p->map_len);
out_close:
	close(p->fd);
out_free:
	free(p->stack);
	free(p->pos);
	free(p->path);
	free(p);
	return rc;
}

void kv_pool_close(struct kv_pool *p)
{
	if (!p)
		return;
	munmap(p->base, p->map_len);
	if (p->spill_fd >= 0) {
		char *dir = malloc(strlen(p->path) + 3);

		close(p->spill_fd);
		/* gone when empty: nothing beside the pool file to remove */
		if (dir) {
			sprintf(dir, "%s.d", p->path);
			rmdir(dir);
			free(dir);
		}
	}
	close(p->fd); /* releases the flock */
	pthread_mutex_destroy(&p->lock);
	free(p->stack);
	free(p->pos);
	free(p->path);
	free(p);
}

bool kv_pool_formatted(const struct kv_pool *p)
{
	return p->formatted;
}

const uint8_t *kv_pool_uuid(const struct kv_pool *p)
{
	return p->uuid;
}

uint64_t kv_pool_slot_size(const struct kv_pool *p)
{
	return p->slot_size;
}

uint32_t kv_pool_nslots(const struct kv_pool *p)
{
	return p->nslots;
}

const char *kv_pool_path(const struct kv_pool *p)
{
	return p->path;
}

int kv_pool_fd(const struct kv_pool *p)
{
	return p->fd;
}

uint64_t kv_pool_data_offset(const struct kv_pool *p)
{
	(void)p; /* fixed in version 1; the header's data_offset says so */
	return KV_POOL_HDR_SIZE;
}

uint64_t kv_pool_data_len(const struct kv_pool *p)
{
	return (uint64_t)p->nslots * p->slot_size;
}

uint64_t kv_pool_file_size(const struct kv_pool *p)
{
	return kv_pool_data_offset(p) + kv_pool_data_len(p);
}

uint64_t kv_pool_slot_offset(const struct kv_pool *p, uint32_t slot)
{
	return kv_pool_data_offset(p) + (uint64_t)slot * p->slot_size;
}

void *kv_pool_slot(const struct kv_pool *p, uint32_t slot)
{
	if (!p || slot >= p->nslots)
		return NULL;
	return p->base + kv_pool_slot_offset(p, slot);
}

/* pull slot out of the free stack: swap the top into its place */
static void stack_take(struct kv_pool *p, uint32_t slot)
{
	uint32_t at = p->pos[slot];
	uint32_t top = p->stack[--p->nfree];

	p->stack[at] = top;
	p->pos[top] = at;
	p->pos[slot] = KV_POOL_NO_SLOT;
}

int kv_pool_alloc(struct kv_pool *p, uint32_t *slot)
{
	int rc = -ENOSPC;

	if (!p || !slot)
		return -EINVAL;
	pthread_mutex_lock(&p->lock);
	if (p->nfree) {
		*slot = p->stack[p->nfree - 1];
		stack_take(p, *slot);
		rc = 0;
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int kv_pool_free(struct kv_pool *p, uint32_t slot)
{
	int rc = -EINVAL;

	if (!p || slot >= p->nslots)
		return -EINVAL;
	pthread_mutex_lock(&p->lock);
	if (p->pos[slot] == KV_POOL_NO_SLOT) {
		p->stack[p->nfree] = slot;
		p->pos[slot] = p->nfree++;
		rc = 0;
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int kv_pool_reserve(struct kv_pool *p, uint32_t slot)
{
	int rc = -EBUSY;

	if (!p || slot >= p->nslots)
		return -EINVAL;
	pthread_mutex_lock(&p->lock);
	if (p->pos[slot] != KV_POOL_NO_SLOT) {
		stack_take(p, slot);
		rc = 0;
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

uint32_t kv_pool_nfree(struct kv_pool *p)
{
	uint32_t n;

	pthread_mutex_lock(&p->lock);
	n = p->nfree;
	pthread_mutex_unlock(&p->lock);
	return n;
}
