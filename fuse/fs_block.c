/*
 * fs_block.c - a block's life through the mount.
 *
 *   create   O_CREAT, write-only: a store slot owned by this descriptor;
 *            the name stays invisible to everyone else (lookup: ENOENT)
 *   write    straight into the slot (write_buf: no bounce buffer), as
 *            the kernel writes back the pages its write-back cache
 *            gathered (fs_init), at the latest before the flush
 *   flush    every close(2) of a descriptor: reports the first write
 *            error, and notes a writer being killed; publishes nothing
 *   release  the last descriptor is gone, in every process: the block
 *            is sealed (published), or aborted after a write error or a
 *            killed writer; nothing half-written ever becomes visible
 *   open     read-only, with a store reference held until release
 *   read     replied from the slot's memory, no copy on our side
 *   unlink   kv_store_remove: the name goes now, the bytes when the last
 *            reader (or mapping) releases
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "src/common/clock.h"
#include "fuse/fs_int.h"
#include "fuse/kvfsd_cluster.h"
#include "src/common/log.h"

#define PF_EXITING 0x00000004u /* include/linux/sched.h */

/* ---- lookup and attributes ----------------------------------------- */

/* the kernel may hold an inode for a name the store no longer has (it
 * was evicted): the next lookup must not hand that inode out again */
static void forget_name(struct kvfs_fs *fs, uint32_t ns,
			const uint8_t hash[KVFS_HASH_LEN])
{
	uint64_t ino = inode_find(fs->it, INODE_BLOCK, ns, hash);
	struct inode_info in;

	if (ino && inode_get(fs->it, ino, &in) == 0 && !in.writing)
		inode_unhash(fs->it, ino);
}

/* not here: fetch it from the node that has it (kvfsd_cluster.h) */
int fs_remote_read(struct kvfs_fs *fs, uint32_t ns,
		   const uint8_t hash[KVFS_HASH_LEN])
{
	char name[KVFS_NS_MAX + 1];
	int rc = fs_ns_info(fs, ns, name, NULL);

	if (rc == 0)
		rc = kvfsd_cluster_fetch(fs->cl, name, hash);
	return rc;
}

void fs_lookup_block(fuse_req_t req, fuse_ino_t parent, uint32_t ns,
		     const char *name)
{
	struct kvfs_fs *fs = fs_of(req);
	uint8_t hash[KVFS_HASH_LEN];
	struct kv_block_info bi;
	struct stat st;
	uint64_t ino;
	int rc;

	rc = kvfs_hash_from_hex(name, hash);
	/* before the store: see seal_locked */
	if (rc == 0)
		inode_note_miss(fs->it, ns, hash);
	if (rc == 0)
		rc = kv_store_stat(fs->st, ns, hash, &bi);
	if (rc == -ENOENT) {
		/* its writer closed it: the publication is on its way */
		ino = inode_find(fs->it, INODE_BLOCK, ns, hash);
		if (ino && fs_wait_closing(fs, ino))
			rc = kv_store_stat(fs->st, ns, hash, &bi);
	}
	if (rc == -ENOENT && fs->cl && fs_remote_read(fs, ns, hash) == 0)
		rc = kv_store_stat(fs->st, ns, hash, &bi);
	if (rc == -ENOENT) {
		struct inode_info in;
		bool writing;

		/* absent or still being written: a miss either way, counted
		 * by kv_store_lookup (a hit is counted at open, by get) */
		kv_store_lookup(fs->st, ns, hash);
		forget_name(fs, ns, hash);
		/* being written: not cached, so that the open after its
		 * writer's close asks again (and waits for the seal) */
		ino = inode_find(fs->it, INODE_BLOCK, ns, hash);
		writing = ino && inode_get(fs->it, ino, &in) == 0 && in.writing;
		fs_reply_negative(req, writing ? 0 : TMO_NEGATIVE);
		return;
	}
	if (rc == 0)
		rc = inode_lookup(fs->it, INODE_BLOCK, ns, hash, &ino);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	inode_set_attr(fs->it, ino, bi.size, bi.seal_ns);
	fs_stat_block(fs, ino, bi.size, bi.seal_ns, false, &st);
	fs_reply_entry(req, fs, &st, TMO_SEALED, TMO_SEALED);
}

bool fs_ino_current(struct kvfs_fs *fs, fuse_ino_t ino,
		    const struct inode_info *was)
{
	struct inode_info now;

	return inode_get(fs->it, ino, &now) == 0 && now.hashed &&
	       !now.writing && memcmp(now.hash, was->hash, KVFS_HASH_LEN) == 0;
}

int fs_getattr_block(struct kvfs_fs *fs, fuse_ino_t ino,
		     const struct inode_info *in, struct stat *st, double *tmo)
{
	struct kv_block_info bi;
	int rc;

	if (in->writing) {
		fs_stat_block(fs, ino, in->size, 0, true, st);
		*tmo = fs_writing_attr_tmo(fs);
		return 0;
	}
	rc = in->hashed ? kv_store_stat(fs->st, in->ns, in->hash, &bi)
			: -ENOENT;
	/* replaced since the snapshot: those are another inode's bytes
	 * (fs_open_block says why) */
	if (rc == 0 && !fs_ino_current(fs, ino, in))
		rc = -ENOENT;
	if (rc == 0) {
		inode_set_attr(fs->it, ino, bi.size, bi.seal_ns);
		fs_stat_block(fs, ino, bi.size, bi.seal_ns, false, st);
		*tmo = TMO_SEALED;
		return 0;
	}
	if (rc != -ENOENT)
		return rc;
	/* unlinked (or removed by kvctl) while open: its readers still hold
	 * the bytes, so fstat answers with what we last knew, nlink 0 */
	if (in->nopen && in->have_attr) {
		fs_stat_block(fs, ino, in->size, in->seal_ns, false, st);
		st->st_nlink = 0;
		*tmo = TMO_SEALED;
		return 0;
	}
	if (in->hashed) {
		inode_unhash(fs->it, ino);
		fs_notify_ino(fs, ino, in->ns, in->hash);
	}
	return -ENOENT;
}

/* ---- writing ------------------------------------------------------- */

bool fs_wait_closing(struct kvfs_fs *fs, fuse_ino_t ino)
{
	uint64_t now = kvfs_mono_ns(), end;
	struct inode_info in;

	if (inode_get(fs->it, ino, &in) < 0 || !in.closing_ns)
		return false;
	/* never past PUBLISH_WAIT_MS after the close: a writer that keeps a
	 * dup open costs later lookups nothing */
	end = in.closing_ns + PUBLISH_WAIT_MS * 1000000ull;
	if (now >= end)
		return false;
	return inode_wait_written(fs->it, ino,
				  (unsigned)((end - now) / 1000000ull) + 1) ==
	       0;
}

/* grow or shrink the block being written; with zero, the bytes it grows
 * by read as zeros, not as whatever the slot held before (a hole, an
 * ftruncate up); without, they were just written.  f->lock held. */
int fs_resize_locked(struct kvfs_fs *fs, struct kvfs_file *f, uint64_t size,
		     bool zero)
{
	uint8_t *p;
	int rc, fd;

	/* past the slot it spills, and a spill file grows with zeros */
	rc = kv_store_set_size(fs->st, f->wh, size);
	if (rc == 0)
		rc = kv_store_wtarget(fs->st, f->wh, (void **)&p, &fd);
	if (rc < 0)
		return rc;
	if (p && zero && size > f->size)
		memset(p + f->size, 0, size - f->size);
	f->size = size;
	/* a new version of a published file shares its inode with the old
	 * one's readers: the attributes stay theirs until publication */
	if (!f->shared)
		inode_set_attr(fs->it, f->ino, size, 0);
	return 0;
}

/*
 * A sealed block is immutable: any change is EPERM, as for an immutable
 * file.  A block being written takes a size change through its writer's
 * descriptor (ftruncate); other changes (times, mode: touch, cp -p) are
 * accepted and ignored, since the seal fixes them.
 */
void fs_setattr_block(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		      int to_set, struct fuse_file_info *fi)
{
	struct kvfs_fs *fs = fs_of(req);
	struct kvfs_file *f = fi ? file_of(fi) : NULL;
	struct inode_info in;
	struct stat st;
	int rc = inode_get(fs->it, ino, &in);

	/* a new version's writer may write through the old version's
	 * inode (fs_open_write), which is not "writing" */
	if (rc == 0 && (in.kind != INODE_BLOCK ||
			(!in.writing && !(f && f->kind == FILE_WRITE))))
		rc = -EPERM;
	if (rc == 0 && (to_set & FUSE_SET_ATTR_SIZE)) {
		if (!f || f->kind != FILE_WRITE) {
			rc = -EBUSY;
		} else {
			pthread_mutex_lock(&f->lock);
			rc = f->done ? -EPERM
			     : f->err
				     ? f->err
				     : fs_resize_locked(fs, f,
							(uint64_t)attr->st_size,
							true);
			/* a size the slot cannot hold: never published, and
			 * close reports it too */
			if (rc == -EFBIG)
				f->err = rc;
			pthread_mutex_unlock(&f->lock);
		}
	}
	if (rc == 0)
		rc = inode_get(fs->it, ino, &in);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	fs_stat_block(fs, ino, in.size, 0, true, &st);
	if (f && f->kind == FILE_WRITE && f->shared) {
		/* its own size; the inode's stays the old version's */
		st.st_size = (off_t)f->size;
		fs_open_mode(&st);
	}
	fuse_reply_attr(req, &st, fs_writing_attr_tmo(fs));
}

static int new_writer(struct kvfs_fs *fs, uint32_t ns,
		      const uint8_t hash[KVFS_HASH_LEN], struct kvfs_file **out)
{
	struct kvfs_file *f = calloc(1, sizeof(*f));
	int rc;

	if (!f)
		return -ENOMEM;
	if (pthread_mutex_init(&f->lock, NULL)) {
		free(f);
		return -ENOMEM;
	}
	if (pthread_cond_init(&f->checked, NULL)) {
		pthread_mutex_destroy(&f->lock);
		free(f);
		return -ENOMEM;
	}
	f->kind = FILE_WRITE;
	f->ns = ns;
	memcpy(f->hash, hash, KVFS_HASH_LEN);
	/* -EEXIST when sealed or being written, -ENOSPC when every slot is
	 * referenced or being written: no sealed block is lost either way */
	rc = kv_store_create(fs->st, ns, hash, NULL, &f->wh);
	if (rc < 0)
		goto out_free;
	rc = inode_lookup(fs->it, INODE_BLOCK, ns, hash, &f->ino);
	if (rc < 0)
		goto out_abort;
	inode_set_writing(fs->it, f->ino, true);
	inode_set_attr(fs->it, f->ino, 0, 0);
	inode_open(fs->it, f->ino, 1);
	*out = f;
	return 0;

out_abort:
	kv_store_abort(fs->st, f->wh);
out_free:
	fs_file_free(f);
	return rc;
}

void fs_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
	       struct fuse_file_info *fi)
{
	struct kvfs_fs *fs = fs_of(req);
	uint8_t hash[KVFS_HASH_LEN];
	struct fuse_entry_param e;
	struct kvfs_file *f = NULL;
	uint32_t ns;
	int rc;

	/* only namespaces live in the root; .kvfs is the daemon's */
	rc = parent < INODE_FIRST ? -EPERM : fs_layout_of(fs, parent, &ns);
	/* published, it is 0644 (open) or 0444 (chain) whatever mode asks */
	if (rc >= 0 && fs_mode_ok(fs, mode, 0644) < 0)
		rc = -EPERM;
	if (rc == KV_LAYOUT_OPEN) {
		fs_open_create(req, parent, ns, name, fi);
		return;
	}
	if (rc == 0)
		rc = kvfs_hash_from_hex(name, hash);
	/* a block is written once, by one write-only descriptor */
	if (rc == 0 && (fi->flags & O_ACCMODE) != O_WRONLY)
		rc = -EINVAL;
	if (rc == 0)
		rc = new_writer(fs, ns, hash, &f);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	f->opener = fuse_req_ctx(req)->pid;
	memset(&e, 0, sizeof(e));
	e.ino = f->ino;
	fs_stat_block(fs, f->ino, 0, 0, true, &e.attr);
	e.entry_timeout = TMO_WRITING;
	e.attr_timeout = fs_writing_attr_tmo(fs);
	fi->fh = (uintptr_t)f;
	/* the kernel may still hold pages of an earlier block of this name
	 * (evicted, not yet forgotten): drop them */
	fi->keep_cache = 0;
	if (fuse_reply_create(req, &e, fi) != 0) {
		/* interrupted: the kernel has neither the entry nor the file */
		f->err = -EINTR;
		fs_release_block(fs, f);
		inode_unlookup(fs->it, e.ino);
	}
}

void fs_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in,
		  off_t off, struct fuse_file_info *fi)
{
	struct kvfs_fs *fs = fs_of(req);
	struct kvfs_file *f = file_of(fi);
	size_t len = fuse_buf_size(in);
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(len);
	ssize_t n = 0;
	void *mem = NULL;
	int rc = 0, fd = -1;

	if (f->kind != FILE_WRITE) {
		fuse_reply_err(req, EBADF);
		return;
	}
	pthread_mutex_lock(&f->lock);
	if (f->flushed && !f->done) {
		/* a dup was closed, not the last descriptor: nobody should
		 * wait for a publication that is not coming yet */
		inode_set_closing(fs->it, f->ino, false);
		kv_store_closing(fs->st, f->wh, false);
		f->flushed = false;
	}
	if (f->recorded) {
		kv_store_reopened(fs->st, f->wh);
		f->recorded = false;
	}
	if (f->done)
		rc = -EPERM; /* sealed: this descriptor outlived the seal */
	else if (f->err)
		rc = f->err;
	else if (off < 0)
		rc = -EINVAL;
	/* room for it, before the hole below: past the slot the file
	 * spills into a file of its own (store.h), which the pool's
	 * capacity is charged for.  An error here (ENOSPC, EFBIG past the
	 * capacity) is this write's, and the file is never published */
	if (rc == 0)
		rc = kv_store_wreserve(fs->st, f->wh, (uint64_t)off + len);
	if (rc == 0 && (uint64_t)off > f->size)
		rc = fs_resize_locked(fs, f, (uint64_t)off, true);
	if (rc == 0)
		rc = kv_store_wtarget(fs->st, f->wh, &mem, &fd);
	if (rc < 0 && rc != -EINVAL && !f->err)
		f->err = rc;
	if (rc == 0) {
		if (mem) {
			out.buf[0].mem = (uint8_t *)mem + off;
		} else {
			/* spliced from /dev/fuse where libfuse can */
			out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
			out.buf[0].fd = fd;
			out.buf[0].pos = off;
		}
		n = fuse_buf_copy(&out, in, 0);
		if (n < 0)
			rc = f->err = (int)n;
		else if ((uint64_t)off + (uint64_t)n > f->size)
			rc = fs_resize_locked(
				fs, f, (uint64_t)off + (uint64_t)n, false);
	}
	/*
	 * Pages the kernel cached, written back (through any writable
	 * descriptor of the inode, and under the write-back cache an inode
	 * has one writer: no new version shares one, fs_open_write): nobody
	 * waits for this answer but the page cache, which would turn an
	 * error into EIO at the next close.  The file is never published either
	 * way (f->err), and the flush of close(2), or fsync(2), reports the
	 * error itself: ENOSPC, or EFBIG for a file bigger than the pool.
	 */
	if (rc < 0 && fi->writepage && !f->done) {
		if (!f->err)
			f->err = rc;
		rc = 0;
		n = (ssize_t)len;
	}
	pthread_mutex_unlock(&f->lock);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_write(req, (size_t)n);
}

/*
 * Publication (kvfs(7), "Publication").  FLUSH comes with every close(2)
 * of a descriptor of the file, dups and copies inherited by children
 * included; RELEASE once, after the last of them is gone.  So RELEASE
 * publishes: no close of a child, no exec, no close_range in a child can
 * publish a parent's half-written file, and nothing needs guessing who
 * still holds a descriptor.  RELEASE is asynchronous (close(2) returns
 * before it is even sent), so FLUSH marks the inode closing, and a lookup
 * or open of the name waits up to PUBLISH_WAIT_MS for the publication.
 *
 * A file is never published when a write failed (EFBIG, a failed copy):
 * close reports the error.  Nor when a descriptor was closed by a task
 * being killed: a writer killed halfway would otherwise publish half a
 * file under a name that promises all of it.  The dying task is told by
 * /proc/PID/stat (PF_EXITING, fields 9 and 52), read by a thread of its
 * own (dying_check below): FLUSH waits for the answer up to
 * CHECK_WAIT_MS, so that a killed writer is told before it is gone, and
 * then answers anyway.  A task in exec closes its O_CLOEXEC descriptors
 * holding a lock that reading its /proc/PID/stat waits for, so that read
 * can only end after FLUSH is answered and the exec goes on: it then
 * counts when it ends (f->checks), and RELEASE waits for it (a bounded
 * wait on our own thread, never on a request).  When /proc cannot tell
 * (another pid namespace, a task we may not inspect, one already gone),
 * the close counts as clean.
 */
static bool task_dying(pid_t pid)
{
	char path[64], buf[1024], *p, *save = NULL;
	unsigned long long flags = 0, code = 0;
	int fd, field = 2; /* the first field after the comm is field 3 */
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the comm may hold spaces and parens */
	if (!p)
		return false;
	for (p = strtok_r(p + 1, " ", &save); p;
	     p = strtok_r(NULL, " ", &save)) {
		field++;
		if (field == 9)
			flags = strtoull(p, NULL, 10);
		else if (field == 52)
			code = strtoull(p, NULL, 10);
	}
	return (flags & PF_EXITING) && code != 0;
}

#define CHECK_WAIT_MS 20

/* one dying check: the flushing handler and the checker share it, and
 * whichever of them is done with it last frees it */
struct dying_check {
	struct dying_check *next;
	struct kvfs_file *f;
	pid_t pid;
	bool done;	/* the checker has answered and counted it in f */
	bool abandoned; /* the handler stopped waiting */
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t work, answered;
	struct dying_check *head, *tail;
	pthread_once_t once;
	bool running;
} dc = { PTHREAD_MUTEX_INITIALIZER,
	 PTHREAD_COND_INITIALIZER,
	 PTHREAD_COND_INITIALIZER,
	 NULL,
	 NULL,
	 PTHREAD_ONCE_INIT,
	 false };

/* the checker: one thread for the process, the checks one at a time */
static void *dying_checker(void *arg)
{
	struct dying_check *c;
	struct kvfs_file *f;
	bool dying, last;

	(void)arg;
	for (;;) {
		pthread_mutex_lock(&dc.lock);
		while (!dc.head)
			pthread_cond_wait(&dc.work, &dc.lock);
		c = dc.head;
		dc.head = c->next;
		if (!dc.head)
			dc.tail = NULL;
		pthread_mutex_unlock(&dc.lock);

		dying = task_dying(c->pid);
		f = c->f;
		pthread_mutex_lock(&f->lock);
		if (dying) {
			kvfs_debug("close by a dying task (pid %d): %s",
				   (int)c->pid,
				   "the file will not be published");
			f->dying = true;
		}
		/* a file released while we read: its release left it to us */
		last = --f->checks == 0 && f->released;
		pthread_cond_broadcast(&f->checked);
		pthread_mutex_unlock(&f->lock);
		if (last)
			fs_file_free(f);

		pthread_mutex_lock(&dc.lock);
		c->done = true;
		pthread_cond_broadcast(&dc.answered);
		if (c->abandoned)
			free(c);
		pthread_mutex_unlock(&dc.lock);
	}
	return NULL;
}

static void dying_checker_start(void)
{
	pthread_t t;
	sigset_t all, old;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	dc.running = pthread_create(&t, NULL, dying_checker, NULL) == 0;
	if (dc.running)
		pthread_detach(t);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ask whether pid is dying, for f (its f->checks counted by the caller);
 * returns after the answer or CHECK_WAIT_MS, whichever comes first */
static void dying_check(struct kvfs_file *f, pid_t pid)
{
	struct dying_check *c = calloc(1, sizeof(*c));
	struct timespec dl;
	bool last;

	pthread_once(&dc.once, dying_checker_start);
	if (!c || !dc.running) {
		free(c);
		pthread_mutex_lock(&f->lock);
		last = --f->checks == 0 && f->released;
		pthread_cond_broadcast(&f->checked);
		pthread_mutex_unlock(&f->lock);
		if (last)
			fs_file_free(f);
		return;
	}
	c->f = f;
	c->pid = pid;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_nsec += CHECK_WAIT_MS * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&dc.lock);
	if (dc.tail)
		dc.tail->next = c;
	else
		dc.head = c;
	dc.tail = c;
	pthread_cond_signal(&dc.work);
	while (!c->done &&
	       pthread_cond_timedwait(&dc.answered, &dc.lock, &dl) == 0)
		;
	if (c->done)
		free(c);
	else
		c->abandoned = true;
	pthread_mutex_unlock(&dc.lock);
}

/* f->lock held */
void fs_abort_locked(struct kvfs_fs *fs, struct kvfs_file *f)
{
	/* not writing first: a getattr racing us must not report the slot
	 * of a block that is about to be someone else's.  A new version of
	 * a published file on its inode (fs_open_write) leaves it be. */
	if (!f->shared) {
		inode_set_writing(fs->it, f->ino, false);
		inode_unhash(fs->it, f->ino);
	} else {
		inode_set_closing(fs->it, f->ino, false);
	}
	kv_store_abort(fs->st, f->wh);
	f->done = true;
}

/* f->lock held */
static int seal_locked(struct kvfs_fs *fs, struct kvfs_file *f)
{
	struct kv_block_info bi;
	int rc = kv_store_seal(fs->st, f->wh);

	f->done = true;
	if (rc < 0) {
		/* the store aborted it: the name stays free */
		f->err = rc;
		inode_set_writing(fs->it, f->ino, false);
		inode_unhash(fs->it, f->ino);
		return rc;
	}
	/* sealed first, then not writing: a getattr in between still
	 * answers from our size, which is the sealed size */
	if (kv_store_stat(fs->st, f->ns, f->hash, &bi) < 0)
		bi.seal_ns = kvfs_wall_ns();
	inode_set_attr(fs->it, f->ino, f->size, bi.seal_ns);
	inode_set_writing(fs->it, f->ino, false);
	/*
	 * Another opener that looked the name up while it was being written
	 * was told "no such block", which the kernel caches: drop that.  Only
	 * then, since invalidating the name drops the writer's own dentry too,
	 * and with it (FUSE deletes an inode at its last dput) the pages the
	 * write just left in the page cache: the first reader, typically the
	 * very next step of the engine, would fetch the whole block again
	 * through FUSE, into freshly allocated pages, instead of reading the
	 * cached copy.  The writer's dentry needs nothing: its entry timeout
	 * is 0, so the next lookup revalidates it and gets the same ino (and
	 * the sealed block's long timeouts), keeping the inode and its pages.
	 */
	if (inode_take_missed(fs->it, f->ino))
		fs_notify_block(fs, f->ns, f->hash);
	if (fs->cl) {
		char name[KVFS_NS_MAX + 1];

		if (fs_ns_info(fs, f->ns, name, NULL) == 0)
			kvfsd_cluster_sealed(fs->cl, name, f->hash);
	}
	return 0;
}

/*
 * Close-to-open durability.  close(2) returns once FLUSH is answered, and
 * the publication comes with RELEASE after it: a kvfsd killed in between
 * would lose a file whose close returned 0.  So FLUSH (and fsync) leaves
 * a close record of the file as it is then (kv_store_closed: size, CRC,
 * the path it goes to), which recovery publishes; any later write takes
 * it back, so a file written after its last close is never published
 * half-written.  The kernel writes back the file's dirty pages before it
 * sends FLUSH, so every byte written is in the slot by then.  A record
 * that cannot be written is the close's error, and the file is then
 * never published.  f->lock held.
 *
 * Only the closes of the thread that opened the file leave one (pid: the
 * closing task; 0 for an fsync, which anyone may ask for).  Under the
 * write-back cache the writer's later writes sit in the page cache, out
 * of kvfsd's sight, until its own close: a record left by a child's
 * close or exit (fork, system, exec) would then let a crash publish the
 * half the parent had written by then.  A task that exits or execs
 * closes for nobody anyway: no close(2) of its returned 0 to anyone.
 */
int fs_closed_locked(struct kvfs_fs *fs, struct kvfs_file *f, pid_t pid)
{
	int rc;

	if (f->done || f->err || f->dying)
		return f->err;
	if (pid && pid != f->opener)
		return 0;
	if (!f->open) {
		rc = kv_store_closed(fs->st, f->wh, NULL, 0);
	} else {
		/* the path is stage_lock's (a rename moves it) */
		pthread_mutex_lock(&fs->stage_lock);
		rc = f->unlinked ? 0
				 : kv_store_closed(fs->st, f->wh, f->path,
						   strlen(f->path));
		pthread_mutex_unlock(&fs->stage_lock);
	}
	if (rc < 0)
		f->err = rc;
	else
		f->recorded = true; /* the next write takes it back */
	return rc;
}

void fs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct kvfs_fs *fs = fs_of(req);
	struct kvfs_file *f = file_of(fi);
	pid_t pid = fuse_req_ctx(req)->pid;
	bool check;
	int rc = 0;

	if (f->kind != FILE_WRITE) {
		fuse_reply_err(req, 0);
		return;
	}
	pthread_mutex_lock(&f->lock);
	check = !f->done && !f->dying && pid > 0;
	if (check)
		f->checks++;
	if (!f->done) {
		inode_set_closing(fs->it, f->ino, true);
		kv_store_closing(fs->st, f->wh, true);
		f->flushed = true;
	}
	pthread_mutex_unlock(&f->lock);
	/* is the closing task being killed? (see above) */
	if (check)
		dying_check(f, pid);
	pthread_mutex_lock(&f->lock);
	rc = fs_closed_locked(fs, f, pid);
	pthread_mutex_unlock(&f->lock);
	fuse_reply_err(req, -rc);
}

/* the last descriptor is gone: publish, or throw away (f->lock held) */
static void release_writer_locked(struct kvfs_fs *fs, struct kvfs_file *f)
{
	struct timespec dl;

	/* the dying checks of the closes before (fs_flush), a second at
	 * most: a check that never returns counts as a clean close */
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 1;
	while (f->checks &&
	       pthread_cond_timedwait(&f->checked, &f->lock, &dl) == 0)
		;
	if (f->open)
		fs_open_release_locked(fs, f);
	else if (f->done)
		return;
	else if (f->err || f->dying)
		fs_abort_locked(fs, f);
	else
		seal_locked(fs, f);
}

/*
 * fsync: in a cluster, returns once R home nodes hold the block
 * (kvfs(7), DURABILITY).  The writer's own descriptor seals it first: a
 * block is replicated only once it can no longer change.  A single node
 * has nothing more to do: a sealed block is as durable as it gets.
 */
void fs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
	      struct fuse_file_info *fi)
{
	struct kvfs_fs *fs = fs_of(req);
	struct kvfs_file *f = file_of(fi);
	char name[KVFS_NS_MAX + 1];
	int rc = 0;

	if (f->kind == FILE_TEXT) {
		fuse_reply_err(req, 0);
		return;
	}
	if (f->kind == FILE_WRITE) {
		pthread_mutex_lock(&f->lock);
		if (f->open) {
			/* survives a crash as a close does */
			rc = fs_closed_locked(fs, f, 0);
		} else if (f->done || f->err) {
			rc = f->err;
		} else {
			rc = seal_locked(fs, f);
			/* its descriptor still writes, into the page cache
			 * under the write-back cache: the sealed block's
			 * readers get an inode of their own */
			if (rc == 0 && fs->writeback)
				inode_unhash(fs->it, f->ino);
		}
		pthread_mutex_unlock(&f->lock);
		/* an open namespace's file is published at its last close,
		 * not before: an fsync of its writer only reports errors */
		if (f->open) {
			fuse_reply_err(req, -rc);
			return;
		}
	}
	if (rc == 0 && fs->cl) {
		rc = fs_ns_info(fs, f->ns, name, NULL);
		if (rc == 0)
			rc = kvfsd_cluster_sync(fs->cl, name, f->hash);
	}
	fuse_reply_err(req, -rc);
}

/* ---- reading ------------------------------------------------------- */

/* a reader of the bytes *ref holds, which it takes unless it fails */
static int new_reader(struct kvfs_fs *fs, fuse_ino_t ino,
		      const struct inode_info *in, const struct kv_ref *ref,
		      struct fuse_file_info *fi, struct kvfs_file **out)
{
	struct kvfs_file *f = calloc(1, sizeof(*f));
	int rc;

	if (!f)
		return -ENOMEM;
	f->kind = FILE_READ;
	f->ino = ino;
	f->ns = in->ns;
	memcpy(f->hash, in->hash, KVFS_HASH_LEN);
	f->ref = *ref;
	/* the same ino always means the same bytes: keep the pages the
	 * kernel already has, across opens and across re-creation */
	fi->keep_cache = 1;
	/* nothing to do at close: spare the FLUSH round trip */
	fi->noflush = 1;
	/* a file bigger than a slot: straight from its own file, where
	 * the mount passes files through (fs_io.c) */
	rc = fs_pt_open(fs, ino, f, fi);
	if (rc < 0) {
		free(f);
		return rc;
	}
	inode_open(fs->it, ino, 1);
	*out = f;
	return 0;
}

int fs_open_block(struct kvfs_fs *fs, fuse_ino_t ino, pid_t tid,
		  struct fuse_file_info *fi, struct kvfs_file **out)
{
	struct kv_block_info bi;
	struct inode_info in;
	bool open, redirected = false, have_ref = false;
	struct kv_ref ref;
	int rc = inode_get(fs->it, ino, &in);

	if (rc < 0)
		return rc;
	if (in.kind != INODE_BLOCK)
		return -EISDIR;
	open = kv_store_ns_layout(fs->st, in.ns) == KV_LAYOUT_OPEN;
	if (open)
		redirected = fs_open_redirected(fs, ino, &ref, &have_ref);
	if (open &&
	    ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC))) {
		if (have_ref)
			kv_store_put(fs->st, &ref);
		/* a new version of the name (fs_open.c) */
		return fs_open_write(fs, ino, &in, redirected, tid, fi, out);
	}
	if (have_ref) { /* a private inode, for the bytes its lookup saw */
		rc = new_reader(fs, ino, &in, &ref, fi, out);
		if (rc < 0)
			kv_store_put(fs->st, &ref);
		return rc;
	}
	/* a reader right after the writer's close: wait for the seal */
	if (in.closing_ns && fs_wait_closing(fs, ino)) {
		rc = inode_get(fs->it, ino, &in);
		if (rc < 0)
			return rc;
	}
	if (open && in.writing)
		return -ENOENT; /* a staging file: nothing published yet */
	/* the name now holds other bytes than this inode stood for: the
	 * kernel looks it up again */
	if (open && !in.hashed && !redirected &&
	    kv_store_stat(fs->st, in.ns, in.hash, &bi) == 0)
		return fs_open_stale(fs, in.ns, in.hash, tid);
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		/* only its creator's descriptor writes a block; a sealed one
		 * is immutable (EPERM, as an immutable file) */
		if (in.writing)
			return -EBUSY;
		rc = kv_store_stat(fs->st, in.ns, in.hash, &bi);
		return rc == 0 ? -EPERM : rc;
	}
	rc = kv_store_get(fs->st, in.ns, in.hash, &ref);
	if (rc < 0) {
		if (rc == -ENOENT && in.hashed && !in.writing) {
			inode_unhash(fs->it, ino);
			fs_notify_ino(fs, ino, in.ns, in.hash);
		}
		return rc;
	}
	/*
	 * The snapshot above may be older than the bytes: a publication
	 * between it and the get gave the key new bytes, while the kernel
	 * keeps this inode's size and pages (keep_cache), and a reader would
	 * get a short file or two versions mixed.  Every publisher unhashes
	 * the old inode before the store moves (fs_open.c), so an inode
	 * still hashed to the same key now stands for the bytes just taken.
	 */
	if (open && in.hashed && !fs_ino_current(fs, ino, &in)) {
		kv_store_put(fs->st, &ref);
		if (kv_store_stat(fs->st, in.ns, in.hash, &bi) == 0)
			return fs_open_stale(fs, in.ns, in.hash, tid);
		return -ENOENT;
	}
	rc = new_reader(fs, ino, &in, &ref, fi, out);
	if (rc < 0)
		kv_store_put(fs->st, &ref);
	return rc;
}

void fs_read_block(fuse_req_t req, struct kvfs_file *f, size_t size, off_t off)
{
	struct fuse_bufvec bv;
	size_t n;

	if (off < 0 || (uint64_t)off >= f->ref.size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	n = f->ref.size - (uint64_t)off;
	if (n > size)
		n = size;
	/* a memory buffer: libfuse writev()s it to /dev/fuse straight from
	 * the pool, the one copy there is; our reference keeps it valid */
	bv = (struct fuse_bufvec)FUSE_BUFVEC_INIT(n);
	bv.buf[0].mem = (void *)((const uint8_t *)f->ref.data + off);
	fuse_reply_data(req, &bv, 0);
}

void fs_file_free(struct kvfs_file *f)
{
	pthread_cond_destroy(&f->checked);
	pthread_mutex_destroy(&f->lock);
	free(f->path);
	free(f);
}

void fs_release_block(struct kvfs_fs *fs, struct kvfs_file *f)
{
	bool last;

	inode_open(fs->it, f->ino, -1);
	if (f->kind == FILE_READ) {
		fs_pt_release(fs, f);
		kv_store_put(fs->st, &f->ref);
		free(f);
		return;
	}
	pthread_mutex_lock(&f->lock);
	release_writer_locked(fs, f);
	/* a check still running (a task stuck in exec) frees f at its end */
	f->released = true;
	last = f->checks == 0;
	pthread_mutex_unlock(&f->lock);
	if (last)
		fs_file_free(f);
}

/* ---- unlink -------------------------------------------------------- */

void fs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct kvfs_fs *fs = fs_of(req);
	uint8_t hash[KVFS_HASH_LEN];
	uint64_t ino;
	uint32_t ns;
	int rc;

	rc = parent < INODE_FIRST ? -EPERM : fs_layout_of(fs, parent, &ns);
	if (rc == KV_LAYOUT_OPEN) {
		fs_open_unlink(req, parent, ns, name);
		return;
	}
	if (rc == 0)
		rc = kvfs_hash_from_hex(name, hash);
	/* the name goes now; the slot when the last reference does */
	if (rc == 0)
		rc = kv_store_remove(fs->st, ns, hash);
	if (rc == 0) {
		ino = inode_find(fs->it, INODE_BLOCK, ns, hash);
		if (ino)
			inode_unhash(fs->it, ino);
	}
	fuse_reply_err(req, -rc);
}
