/*
 * fs_block.c - a block's life through the mount.
 *
 *   create   O_CREAT, write-only: a store slot owned by this descriptor;
 *            the name stays invisible to everyone else (lookup: ENOENT)
 *   write    straight into the slot (write_buf: no bounce buffer)
 *   flush    the close(2) of the writer's last descriptor seals it, so
 *            close returns after the seal and its error, if any, is
 *            close's (see fs_flush for dups and dying writers)
 *   release  a block never sealed is aborted: nothing becomes visible
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/common/clock.h"
#include "fuse/fs_int.h"
#include "fuse/kvfsd_cluster.h"
#include "src/common/log.h"

#define PF_EXITING 0x00000004u /* include/linux/sched.h */
#define DELETED " (deleted)"
#define DELETED_LEN ((ssize_t)sizeof(DELETED) - 1)

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
static int remote_read(struct kvfs_fs *fs, uint32_t ns,
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
	if (rc == 0)
		rc = kv_store_stat(fs->st, ns, hash, &bi);
	if (rc == -ENOENT && fs->cl && remote_read(fs, ns, hash) == 0)
		rc = kv_store_stat(fs->st, ns, hash, &bi);
	if (rc == -ENOENT) {
		/* absent or still being written: a miss either way, counted
		 * by kv_store_lookup (a hit is counted at open, by get) */
		kv_store_lookup(fs->st, ns, hash);
		forget_name(fs, ns, hash);
		fs_reply_negative(req, TMO_NEGATIVE);
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

int fs_getattr_block(struct kvfs_fs *fs, fuse_ino_t ino,
		     const struct inode_info *in, struct stat *st, double *tmo)
{
	struct kv_block_info bi;
	int rc;

	if (in->writing) {
		fs_stat_block(fs, ino, in->size, 0, true, st);
		*tmo = TMO_WRITING;
		return 0;
	}
	rc = in->hashed ? kv_store_stat(fs->st, in->ns, in->hash, &bi)
			: -ENOENT;
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
		fs_notify_block(fs, in->ns, in->hash);
	}
	return -ENOENT;
}

/* ---- writing ------------------------------------------------------- */

/* grow or shrink the block being written; with zero, the bytes it grows
 * by read as zeros, not as whatever the slot held before (a hole, an
 * ftruncate up); without, they were just written.  f->lock held. */
static int resize_locked(struct kvfs_fs *fs, struct kvfs_file *f, uint64_t size,
			 bool zero)
{
	uint8_t *p;
	int rc;

	if (size > kv_store_slot_size(fs->st))
		return -EFBIG;
	p = kv_store_wptr(fs->st, f->wh);
	if (!p)
		return -EIO;
	if (zero && size > f->size)
		memset(p + f->size, 0, size - f->size);
	rc = kv_store_set_size(fs->st, f->wh, size);
	if (rc < 0)
		return rc;
	f->size = size;
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

	if (rc == 0 && (in.kind != INODE_BLOCK || !in.writing))
		rc = -EPERM;
	if (rc == 0 && (to_set & FUSE_SET_ATTR_SIZE)) {
		if (!f || f->kind != FILE_WRITE) {
			rc = -EBUSY;
		} else {
			pthread_mutex_lock(&f->lock);
			rc = f->done ? -EPERM
				     : resize_locked(fs, f,
						     (uint64_t)attr->st_size,
						     true);
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
	fuse_reply_attr(req, &st, TMO_WRITING);
}

/* "/<namespace>/<name>", the end of the block's path in /proc */
static char *path_tail(struct kvfs_fs *fs, uint32_t ns,
		       const uint8_t hash[KVFS_HASH_LEN])
{
	char name[KVFS_NS_MAX + 1], hex[KVFS_HASH_HEX_LEN + 1], *t;

	if (fs_ns_info(fs, ns, name, NULL) < 0)
		return NULL;
	kvfs_hash_to_hex(hash, hex);
	t = malloc(strlen(name) + sizeof(hex) + 2);
	if (t)
		sprintf(t, "/%s/%s", name, hex);
	return t;
}

static int new_writer(struct kvfs_fs *fs, uint32_t ns,
		      const uint8_t hash[KVFS_HASH_LEN], struct kvfs_file **out)
{
	struct kvfs_file *f = calloc(1, sizeof(*f));
	int rc;

	if (!f)
		return -ENOMEM;
	f->tail = path_tail(fs, ns, hash);
	rc = f->tail ? 0 : -ENOENT;
	if (rc == 0 && pthread_mutex_init(&f->lock, NULL))
		rc = -ENOMEM;
	if (rc < 0) {
		free(f->tail);
		free(f);
		return rc;
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
	pthread_mutex_destroy(&f->lock);
	free(f->tail);
	free(f);
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
	rc = parent < INODE_FIRST ? -EPERM : fs_ns_of(fs, parent, &ns);
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
	memset(&e, 0, sizeof(e));
	e.ino = f->ino;
	fs_stat_block(fs, f->ino, 0, 0, true, &e.attr);
	e.entry_timeout = TMO_WRITING;
	e.attr_timeout = TMO_WRITING;
	fi->fh = (uintptr_t)f;
	/* the kernel may still hold pages of an earlier block of this name
	 * (evicted, not yet forgotten): drop them */
	fi->keep_cache = 0;
	if (fuse_reply_create(req, &e, fi) != 0) {
		/* interrupted: the kernel has neither the entry nor the file */
		fs_release_block(fs, f);
		inode_unlookup(fs->it, e.ino);
	}
}

void fs_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in,
		  off_t off, struct fuse_file_info *fi)
{
	struct kvfs_fs *fs = fs_of(req);
	struct kvfs_file *f = file_of(fi);
	uint64_t slot = kv_store_slot_size(fs->st);
	size_t len = fuse_buf_size(in);
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(len);
	ssize_t n = 0;
	int rc = 0;

	if (f->kind != FILE_WRITE) {
		fuse_reply_err(req, EBADF);
		return;
	}
	pthread_mutex_lock(&f->lock);
	if (f->done)
		rc = -EPERM; /* sealed: this descriptor outlived the seal */
	else if (f->err)
		rc = f->err;
	else if (off < 0 || (uint64_t)off > slot || len > slot - (uint64_t)off)
		rc = f->err = -EFBIG; /* and the block is never sealed */
	else if ((uint64_t)off > f->size)
		rc = resize_locked(fs, f, (uint64_t)off, true);
	if (rc == 0) {
		out.buf[0].mem = (uint8_t *)kv_store_wptr(fs->st, f->wh) + off;
		n = fuse_buf_copy(&out, in, 0);
		if (n < 0)
			rc = f->err = (int)n;
		else if ((uint64_t)off + (uint64_t)n > f->size)
			rc = resize_locked(fs, f, (uint64_t)off + (uint64_t)n,
					   false);
	}
	pthread_mutex_unlock(&f->lock);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_write(req, (size_t)n);
}

/*
 * Which close seals.  FLUSH comes with every close(2) of a descriptor of
 * the file, dups included, and RELEASE only after the last one, too late
 * for close to report the seal.  So a flush seals unless one of these
 * says the writer is not done:
 *
 *  - the writer still holds another descriptor of it.  close(2) takes the
 *    descriptor out of the table before it flushes, so any entry of
 *    /proc/PID/fd that still leads to the block is a dup: `cmd > block`
 *    opens, dup2()s onto stdout and closes the original; the seal waits
 *    for stdout's close (or cmd's exit).
 *  - the writer is dying with a non-zero status.  A dying task's files are
 *    closed from do_exit, after PF_EXITING is set and exit_code recorded
 *    (/proc/PID/stat fields 9 and 52): a writer killed halfway would seal
 *    half a block under a name that promises all of it, so it aborts.  A
 *    process that writes and exits 0 without closing still seals.
 *
 * When /proc cannot tell (another pid namespace, a process we may not
 * inspect), the close seals.  Descriptors inherited by other processes
 * are not looked for: the creating process's last close seals.
 */
static bool writer_failed(pid_t pid)
{
	char path[64], buf[1024], *p, *save = NULL;
	unsigned long long flags = 0, code = 0;
	FILE *fp;
	size_t n;
	int field = 2; /* the first field after the comm is field 3 */

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fp = fopen(path, "re");
	if (!fp)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	fclose(fp);
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

/* the inode number of /proc/PID/fd/FD from its fdinfo; 0 when not shown
 * (kernels before 5.14) */
static uint64_t fd_ino(const char *dir, const char *fd)
{
	char path[64 + NAME_MAX], line[128];
	unsigned long long ino = 0;
	FILE *fp;

	snprintf(path, sizeof(path), "%.32sinfo/%s", dir, fd);
	fp = fopen(path, "re");
	if (!fp)
		return 0;
	while (fgets(line, sizeof(line), fp))
		if (sscanf(line, "ino: %llu", &ino) == 1)
			break;
	fclose(fp);
	return ino;
}

/*
 * pid still has a descriptor of the block (see above): its path ends in
 * tail and, where fdinfo shows it, its inode is ino (an unlinked block of
 * the same name has another).  A readlink per descriptor, and no request
 * to ourselves, which a single-threaded daemon could not answer.
 */
static bool writer_holds_dup(pid_t pid, const char *tail, uint64_t ino)
{
	char dir[32], link[32 + NAME_MAX + 1], target[PATH_MAX];
	size_t tl = strlen(tail);
	struct dirent *e;
	bool found = false;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	d = opendir(dir);
	if (!d)
		return false;
	while (!found && (e = readdir(d))) {
		uint64_t fino;
		ssize_t n;

		if (e->d_name[0] == '.')
			continue;
		snprintf(link, sizeof(link), "%s/%s", dir, e->d_name);
		n = readlink(link, target, sizeof(target) - 1);
		/* a lookup by someone else (ENOENT: unsealed) unhashes the
		 * writer's dentry, which /proc then calls "(deleted)" */
		if (n > DELETED_LEN &&
		    memcmp(target + n - DELETED_LEN, DELETED, DELETED_LEN) == 0)
			n -= DELETED_LEN;
		if (n < (ssize_t)tl ||
		    memcmp(target + n - (ssize_t)tl, tail, tl) != 0)
			continue;
		fino = fd_ino(dir, e->d_name);
		found = fino == 0 || fino == ino;
	}
	closedir(d);
	return found;
}

/* f->lock held */
static void abort_locked(struct kvfs_fs *fs, struct kvfs_file *f)
{
	/* not writing first: a getattr racing us must not report the slot
	 * of a block that is about to be someone else's */
	inode_set_writing(fs->it, f->ino, false);
	inode_unhash(fs->it, f->ino);
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
	/* other openers may have cached "no such block": drop that */
	fs_notify_block(fs, f->ns, f->hash);
	if (fs->cl) {
		char name[KVFS_NS_MAX + 1];

		if (fs_ns_info(fs, f->ns, name, NULL) == 0)
			kvfsd_cluster_sealed(fs->cl, name, f->hash);
	}
	return 0;
}

void fs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct kvfs_fs *fs = fs_of(req);
	struct kvfs_file *f = file_of(fi);
	pid_t pid = fuse_req_ctx(req)->pid;
	int rc = 0;

	if (f->kind != FILE_WRITE) {
		fuse_reply_err(req, 0);
		return;
	}
	pthread_mutex_lock(&f->lock);
	if (f->done) {
		rc = f->err; /* a later close reports what the first did */
	} else if (f->err) {
		rc = f->err;
		abort_locked(fs, f);
	} else if (pid > 0 && writer_failed(pid)) {
		kvfs_debug("flush from a dying writer (pid %d): block aborted",
			   (int)pid);
		abort_locked(fs, f);
	} else if (pid > 0 && writer_holds_dup(pid, f->tail, f->ino)) {
		/* not the last descriptor: its own close seals */
	} else {
		rc = seal_locked(fs, f);
	}
	pthread_mutex_unlock(&f->lock);
	fuse_reply_err(req, -rc);
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
		if (f->done)
			rc = f->err;
		else if (f->err)
			rc = f->err;
		else
			rc = seal_locked(fs, f);
		pthread_mutex_unlock(&f->lock);
	}
	if (rc == 0 && fs->cl) {
		rc = fs_ns_info(fs, f->ns, name, NULL);
		if (rc == 0)
			rc = kvfsd_cluster_sync(fs->cl, name, f->hash);
	}
	fuse_reply_err(req, -rc);
}

/* ---- reading ------------------------------------------------------- */

int fs_open_block(struct kvfs_fs *fs, fuse_ino_t ino, struct fuse_file_info *fi,
		  struct kvfs_file **out)
{
	struct kv_block_info bi;
	struct inode_info in;
	struct kvfs_file *f;
	int rc = inode_get(fs->it, ino, &in);

	if (rc < 0)
		return rc;
	if (in.kind != INODE_BLOCK)
		return -EISDIR;
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		/* only its creator's descriptor writes a block; a sealed one
		 * is immutable (EPERM, as an immutable file) */
		if (in.writing)
			return -EBUSY;
		rc = kv_store_stat(fs->st, in.ns, in.hash, &bi);
		return rc == 0 ? -EPERM : rc;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->kind = FILE_READ;
	f->ino = ino;
	f->ns = in.ns;
	memcpy(f->hash, in.hash, KVFS_HASH_LEN);
	rc = kv_store_get(fs->st, in.ns, in.hash, &f->ref);
	if (rc < 0) {
		free(f);
		if (rc == -ENOENT && in.hashed && !in.writing) {
			inode_unhash(fs->it, ino);
			fs_notify_block(fs, in.ns, in.hash);
		}
		return rc;
	}
	inode_open(fs->it, ino, 1);
	/* the same ino always means the same bytes: keep the pages the
	 * kernel already has, across opens and across re-creation */
	fi->keep_cache = 1;
	/* nothing to do at close: spare the FLUSH round trip */
	fi->noflush = 1;
	*out = f;
	return 0;
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

void fs_release_block(struct kvfs_fs *fs, struct kvfs_file *f)
{
	if (f->kind == FILE_READ) {
		kv_store_put(fs->st, &f->ref);
	} else {
		pthread_mutex_lock(&f->lock);
		/* never flushed (a descriptor dropped unclosed, an
		 * interrupted create): nothing becomes visible */
		if (!f->done)
			abort_locked(fs, f);
		pthread_mutex_unlock(&f->lock);
		pthread_mutex_destroy(&f->lock);
		free(f->tail);
	}
	inode_open(fs->it, f->ino, -1);
	free(f);
}

/* ---- unlink -------------------------------------------------------- */

void fs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct kvfs_fs *fs = fs_of(req);
	uint8_t hash[KVFS_HASH_LEN];
	uint64_t ino;
	uint32_t ns;
	int rc;

	rc = parent < INODE_FIRST ? -EPERM : fs_ns_of(fs, parent, &ns);
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
