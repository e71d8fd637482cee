/*
 * fs_notify.c - keeping the kernel's long-lived dentries honest.
 *
 * Sealed blocks are cached by the kernel for TMO_SEALED and misses for
 * TMO_NEGATIVE (fs_int.h).  Two events make such an entry wrong early:
 *
 *  - a seal: other openers may hold a negative dentry for the name; it is
 *    invalidated at once, so a block is visible as soon as it is sealed;
 *  - a block leaving the store behind the kernel's back (eviction to make
 *    room, kvctl evict): the positive dentry would keep stat(2) and
 *    O_EXCL creates believing in it.  The store has no eviction hook, so
 *    once a second, when its eviction or removal counters moved, the
 *    blocks the kernel holds (the inode table) are checked against the
 *    store and the dentries of the missing ones invalidated.
 *
 * Invalidations run on this module's own thread, never in a request
 * handler: the kernel takes the parent directory's lock to invalidate,
 * and a handler of an operation holding that lock would deadlock.  For
 * the same reason the thread must be stopped while the session still
 * answers requests (kvfs_fs_stop before fuse_session_exit).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/common/clock.h"
#include "fuse/fs_int.h"
#include "src/common/log.h"

#define NOTIFY_QUEUE                                                           \
	4096		       /* pending invalidations; more are dropped,     \
				* the timeouts then bound the staleness */
#define SWEEP_NS 1000000000ull /* at most one sweep a second */

struct notify_item {
	fuse_ino_t parent;
	char name[KVFS_NS_MAX + 1];
};

struct notify {
	struct fuse_session *se;
	pthread_t thread;
	pthread_mutex_t lock; /* guards everything below */
	pthread_cond_t cond;
	bool running;
	bool stop;
	struct notify_item *q; /* ring of NOTIFY_QUEUE */
	size_t head;
	size_t len;
	uint64_t dropped;
};

static void inval(struct notify *nt, fuse_ino_t parent, const char *name)
{
	int rc = fuse_lowlevel_notify_inval_entry(nt->se, parent, name,
						  strlen(name));

	/* -ENOENT: the kernel has no such dentry (or parent), fine */
	if (rc < 0 && rc != -ENOENT)
		kvfs_debug("notify: invalidate %s: %s", name, strerror(-rc));
}

void fs_notify_entry(struct kvfs_fs *fs, fuse_ino_t parent, const char *name)
{
	struct notify *nt = fs->nt;
	struct notify_item *it;

	if (!nt || strlen(name) > KVFS_NS_MAX)
		return;
	pthread_mutex_lock(&nt->lock);
	if (!nt->running || nt->stop) {
		pthread_mutex_unlock(&nt->lock);
		return;
	}
	if (nt->len == NOTIFY_QUEUE) {
		nt->dropped++;
	} else {
		it = &nt->q[(nt->head + nt->len++) % NOTIFY_QUEUE];
		it->parent = parent;
		strcpy(it->name, name);
		pthread_cond_signal(&nt->cond);
	}
	pthread_mutex_unlock(&nt->lock);
}

void fs_notify_block(struct kvfs_fs *fs, uint32_t ns,
		     const uint8_t hash[KVFS_HASH_LEN])
{
	char hex[KVFS_HASH_HEX_LEN + 1];
	/* the kernel holds no dentry under a directory it does not hold */
	uint64_t parent = inode_find(fs->it, INODE_NS, ns, NULL);

	if (!parent)
		return;
	kvfs_hash_to_hex(hash, hex);
	fs_notify_entry(fs, parent, hex);
}

void fs_notify_ino(struct kvfs_fs *fs, fuse_ino_t ino, uint32_t ns,
		   const uint8_t hash[KVFS_HASH_LEN])
{
	char path[KV_STORE_PATH_MAX + 1];
	const char *name;
	fuse_ino_t parent;

	if (inode_path(fs->it, ino, path, sizeof(path)) <= 0)
		fs_notify_block(fs, ns, hash);
	else if (fs_open_dentry(fs, ns, path, &parent, &name))
		fs_notify_entry(fs, parent, name);
}

/* ---- the sweep ----------------------------------------------------- */

static void sweep(struct kvfs_fs *fs)
{
	struct inode_ref *v;
	char hex[KVFS_HASH_HEX_LEN + 1], path[KV_STORE_PATH_MAX + 1];
	struct kv_block_info bi;
	long n = inode_blocks(fs->it, &v);

	for (long i = 0; i < n; i++) {
		const char *name = hex;
		fuse_ino_t parent;

		if (kv_store_stat(fs->st, v[i].ns, v[i].hash, &bi) != -ENOENT)
			continue;
		inode_unhash(fs->it, v[i].ino);
		/* an open namespace's file: its directory and last name */
		if (inode_path(fs->it, v[i].ino, path, sizeof(path)) > 0) {
			if (fs_open_dentry(fs, v[i].ns, path, &parent, &name))
				inval(fs->nt, parent, name);
			continue;
		}
		parent = inode_find(fs->it, INODE_NS, v[i].ns, NULL);
		if (!parent)
			continue;
		kvfs_hash_to_hex(v[i].hash, hex);
		inval(fs->nt, parent, hex);
	}
	if (n > 0)
		free(v);
}

/* sweep when blocks left the store since the last sweep */
static void maybe_sweep(struct kvfs_fs *fs, uint64_t *seen, uint64_t *last)
{
	struct kv_store_stats s;
	uint64_t now = kvfs_mono_ns(), gone;

	if (now - *last < SWEEP_NS || kv_store_stats(fs->st, &s) < 0)
		return;
	gone = s.total.evictions + s.total.removed;
	if (gone == *seen)
		return;
	/* counters first: what leaves during the sweep moves them again */
	*seen = gone;
	*last = now;
	sweep(fs);
}

/* ---- the thread ---------------------------------------------------- */

static bool wait_work(struct notify *nt)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += 1;
	while (!nt->stop && nt->len == 0)
		if (pthread_cond_timedwait(&nt->cond, &nt->lock, &ts) ==
		    ETIMEDOUT)
			break;
	return !nt->stop;
}

static void *notify_main(void *arg)
{
	struct kvfs_fs *fs = arg;
	struct notify *nt = fs->nt;
	struct notify_item it;
	uint64_t seen = 0, last = 0;
	struct kv_store_stats s;

	if (kv_store_stats(fs->st, &s) == 0)
		seen = s.total.evictions + s.total.removed;
	pthread_mutex_lock(&nt->lock);
	while (wait_work(nt)) {
		while (nt->len && !nt->stop) {
			it = nt->q[nt->head];
			nt->head = (nt->head + 1) % NOTIFY_QUEUE;
			nt->len--;
			pthread_mutex_unlock(&nt->lock);
			inval(nt, it.parent, it.name);
			pthread_mutex_lock(&nt->lock);
		}
		pthread_mutex_unlock(&nt->lock);
		maybe_sweep(fs, &seen, &last);
		pthread_mutex_lock(&nt->lock);
	}
	pthread_mutex_unlock(&nt->lock);
	return NULL;
}

int kvfs_fs_start(struct kvfs_fs *fs, struct fuse_session *se)
{
	struct notify *nt;
	pthread_condattr_t ca;
	int rc;

	if (fs->nt)
		return -EALREADY;
	nt = calloc(1, sizeof(*nt));
	if (!nt)
		return -ENOMEM;
	nt->q = calloc(NOTIFY_QUEUE, sizeof(*nt->q));
	if (!nt->q) {
		free(nt);
		return -ENOMEM;
	}
	nt->se = se;
	pthread_mutex_init(&nt->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&nt->cond, &ca);
	pthread_condattr_destroy(&ca);
	fs->nt = nt;
	nt->running = true;
	rc = pthread_create(&nt->thread, NULL, notify_main, fs);
	if (rc) {
		nt->running = false;
		return -rc;
	}
	return 0;
}

void kvfs_fs_stop(struct kvfs_fs *fs)
{
	struct notify *nt = fs->nt;
	bool join;

	if (!nt)
		return;
	pthread_mutex_lock(&nt->lock);
	join = nt->running && !nt->stop;
	nt->stop = true;
	pthread_cond_signal(&nt->cond);
	pthread_mutex_unlock(&nt->lock);
	if (join) {
		pthread_join(nt->thread, NULL);
		if (nt->dropped)
			kvfs_debug("notify: %llu invalidations dropped",
				   (unsigned long long)nt->dropped);
	}
}

void kvfs_fs_block_arrived(struct kvfs_fs *fs, const char *ns,
			   const uint8_t *hash)
{
	uint32_t id;

	if (kv_store_ns_find(fs->st, ns, &id, NULL) == 0)
		fs_notify_block(fs, id, hash);
}

void fs_notify_free(struct kvfs_fs *fs)
{
	struct notify *nt = fs->nt;

	if (!nt)
		return;
	pthread_cond_destroy(&nt->cond);
	pthread_mutex_destroy(&nt->lock);
	free(nt->q);
	free(nt);
	fs->nt = NULL;
}
