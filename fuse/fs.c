/*
 * fs.c - the low-level ops table, connection setup, and the operations
 * that dispatch on what an ino is: lookup, getattr, setattr, open, read,
 * release, statfs.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "src/common/clock.h"
#include "fuse/fs_int.h"
#include "src/common/log.h"

/* ---- attributes ---------------------------------------------------- */

static void set_time(struct timespec *ts, uint64_t ns)
{
	ts->tv_sec = (time_t)(ns / 1000000000ull);
	ts->tv_nsec = (long)(ns % 1000000000ull);
}

/*
 * Everything is owned by the daemon's user, whoever made it: the store
 * keeps no owners.  With allow_other, kvfsd.c adds default_permissions and
 * the kernel enforces these modes: the root and namespaces are 0755, so
 * only that user (and root) may make or remove namespaces and blocks;
 * everyone else may list and read.
 */
void fs_stat_dir(const struct kvfs_fs *fs, fuse_ino_t ino, nlink_t nlink,
		 mode_t perm, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = S_IFDIR | perm;
	st->st_nlink = nlink;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_blksize = 4096;
	set_time(&st->st_mtim, fs->start_ns);
	st->st_ctim = st->st_atim = st->st_mtim;
}

/*
 * A sealed block is 0444 whoever asks: immutable.  While its creator
 * writes it, 0200: only the creator's descriptor may touch it, and no one
 * else can even look it up.  Times are the seal time (now, while being
 * written: nothing caches a writing block's attributes).
 */
void fs_stat_block(const struct kvfs_fs *fs, fuse_ino_t ino, uint64_t size,
		   uint64_t seal_ns, bool writing, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = S_IFREG | (writing ? 0200 : 0444);
	st->st_nlink = 1;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_size = (off_t)size;
	st->st_blocks = (blkcnt_t)((size + 511) / 512);
	/* published: the page, what O_DIRECT users align to (kvfs(7)), and
	 * a read of any size is one request up to FS_MAX_WRITE anyway; being
	 * written: what buffered writers should gather (FS_WRITE_BLKSIZE) */
	st->st_blksize = writing ? FS_WRITE_BLKSIZE : 4096;
	set_time(&st->st_mtim, writing ? kvfs_wall_ns() : seal_ns);
	st->st_ctim = st->st_atim = st->st_mtim;
}

/* the caller counted one inode_lookup for st->st_ino; undone on failure */
int fs_reply_entry(fuse_req_t req, struct kvfs_fs *fs, const struct stat *st,
		   double entry_tmo, double attr_tmo)
{
	struct fuse_entry_param e;

	memset(&e, 0, sizeof(e));
	e.ino = st->st_ino;
	e.attr = *st;
	e.entry_timeout = entry_tmo;
	e.attr_timeout = attr_tmo;
	/* inos are never reused within a mount: generation 0 is enough */
	if (fuse_reply_entry(req, &e) != 0) {
		inode_unlookup(fs->it, st->st_ino);
		return -ENOENT;
	}
	return 0;
}

void fs_reply_negative(fuse_req_t req, double tmo)
{
	struct fuse_entry_param e;

	/* ino 0 with a timeout: the kernel caches the miss */
	memset(&e, 0, sizeof(e));
	e.entry_timeout = tmo;
	fuse_reply_entry(req, &e);
}

int fs_ns_of(struct kvfs_fs *fs, fuse_ino_t ino, uint32_t *ns)
{
	struct inode_info in;

	if (ino < INODE_FIRST)
		return -ENOTDIR;
	if (inode_get(fs->it, ino, &in) < 0)
		return -ENOENT;
	if (in.kind != INODE_NS)
		return -ENOTDIR;
	*ns = in.ns;
	return 0;
}

struct ns_find {
	uint32_t id;
	char *name;
	uint32_t block_tokens;
	bool found;
};

/* runs under the store lock: only copies */
static int ns_match(const char *name, uint32_t id, uint32_t block_tokens,
		    const struct kv_stats *s, void *arg)
{
	struct ns_find *nf = arg;

	if (id != nf->id)
		return 0;
	if (nf->name)
		snprintf(nf->name, KVFS_NS_MAX + 1, "%s", name);
	nf->block_tokens = block_tokens;
	nf->found = true;
	return 1;
}

/* the store finds namespaces by name; this walk finds one by id */
int fs_ns_info(struct kvfs_fs *fs, uint32_t ns, char *name,
	       uint32_t *block_tokens)
{
	struct ns_find nf = { .id = ns, .name = name };
	int rc = kv_store_ns_foreach(fs->st, ns_match, &nf);

	if (rc < 0)
		return rc;
	if (!nf.found)
		return -ENOENT;
	if (block_tokens)
		*block_tokens = nf.block_tokens;
	return 0;
}

/* ---- connection ---------------------------------------------------- */

void kvfs_fs_set_writeback(struct kvfs_fs *fs, bool on)
{
	fs->writeback = on;
}

static void want(struct fuse_conn_info *conn, unsigned cap, bool on)
{
	if (on && (conn->capable & cap))
		conn->want |= cap;
	else if (!on)
		conn->want &= ~cap;
}

static void fs_init(void *userdata, struct fuse_conn_info *conn)
{
	struct kvfs_fs *fs = userdata;

	/*
	 * 1020 KiB per request (FS_MAX_WRITE: what lets libfuse splice),
	 * so a 2 MiB block is three writes and three reads.  libfuse 3.14
	 * derives the kernel's max_pages from max_write, so reads grow to
	 * match.
	 * max_readahead stays at the kernel's offer (its bdi read-ahead,
	 * raised through /sys/class/bdi/.../read_ahead_kb); more would be
	 * clamped.
	 */
	conn->max_write = FS_MAX_WRITE;
	/* background requests are read-ahead and async reads: let 16
	 * readers keep a few each in flight */
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	conn->time_gran = 1;

	/* reads of one file in parallel (read-ahead, mmap faults) */
	want(conn, FUSE_CAP_ASYNC_READ, true);
	/* lookups in one namespace need not serialize on its lock */
	want(conn, FUSE_CAP_PARALLEL_DIROPS, true);
	/* with write_buf, a write's payload is spliced from /dev/fuse into
	 * a pipe and copied once, pipe to slot, instead of twice */
	want(conn, FUSE_CAP_SPLICE_READ, true);
	/* replies come from the pool's memory: writev copies once from
	 * there already; vmsplice+splice would add syscalls, copy as much,
	 * and shared pool pages cannot be moved */
	want(conn, FUSE_CAP_SPLICE_WRITE, false);
	want(conn, FUSE_CAP_SPLICE_MOVE, false);
	/* O_TRUNC reaches open, where a sealed block refuses it */
	want(conn, FUSE_CAP_ATOMIC_O_TRUNC, true);
	/* contents never change: no page dropping on mtime changes */
	want(conn, FUSE_CAP_AUTO_INVAL_DATA, false);
	/* readdirplus would look up, and make us keep an inode for, every
	 * block listed; ls needs names only */
	want(conn, FUSE_CAP_READDIRPLUS, false);
	want(conn, FUSE_CAP_READDIRPLUS_AUTO, false);
	/* writes gather in the page cache and reach the slot in requests
	 * of up to max_write, at the latest when close(2) flushes them
	 * (fs_block.c, "Publication"): one request for 128 of llama.cpp's
	 * 8 KiB stdio flushes.  The kernel then keeps a regular file's
	 * size and times itself, which kvfs allows because an inode stands
	 * for one version's bytes for life (fs_open.c) */
	want(conn, FUSE_CAP_WRITEBACK_CACHE, fs->writeback);
	fs->writeback = (conn->want & FUSE_CAP_WRITEBACK_CACHE) != 0;
#ifdef FUSE_CAP_HANDLE_KILLPRIV_V2
	/* no GETXATTR before every write: there is never a set-user-ID
	 * bit or a capability to drop (fs_io.c) */
	want(conn, FUSE_CAP_HANDLE_KILLPRIV_V2, true);
#endif
	kvfs_debug("fuse: proto %u.%u, max_write %u, max_readahead %u, "
		   "write-back cache %s",
		   conn->proto_major, conn->proto_minor, conn->max_write,
		   conn->max_readahead, fs->writeback ? "on" : "off");
}

/* ---- lookup and forget --------------------------------------------- */

static void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	uint32_t ns;
	int rc;

	if (parent == INO_ROOT) {
		fs_lookup_root(req, name);
		return;
	}
	if (parent == INO_META_DIR) {
		fs_lookup_meta(req, name);
		return;
	}
	rc = fs_layout_of(fs_of(req), parent, &ns);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else if (rc == KV_LAYOUT_OPEN)
		fs_open_lookup(req, parent, ns, name);
	else
		fs_lookup_block(req, parent, ns, name);
}

static void fs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	inode_forget(fs_of(req)->it, ino, nlookup);
	fuse_reply_none(req);
}

static void fs_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	struct kvfs_fs *fs = fs_of(req);

	for (size_t i = 0; i < count; i++)
		inode_forget(fs->it, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

/* ---- attributes ---------------------------------------------------- */

static int getattr_any(struct kvfs_fs *fs, fuse_ino_t ino, struct stat *st,
		       double *tmo)
{
	struct inode_info in;
	int rc;

	*tmo = TMO_DIR;
	if (ino == INO_ROOT)
		return fs_getattr_root(fs, st);
	if (fs_is_meta(ino)) {
		*tmo = TMO_META;
		return fs_getattr_meta(fs, ino, st);
	}
	if (inode_get(fs->it, ino, &in) < 0)
		return -ENOENT;
	if (in.kind == INODE_NS)
		return fs_getattr_ns(fs, ino, in.ns, st);
	if (in.kind == INODE_DIR)
		return fs_getattr_odir(fs, ino, &in, st);
	rc = fs_getattr_block(fs, ino, &in, st, tmo);
	if (rc == 0 && kv_store_ns_layout(fs->st, in.ns) == KV_LAYOUT_OPEN)
		fs_open_mode(st);
	return rc;
}

static void fs_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct stat st;
	double tmo;
	int rc = getattr_any(fs_of(req), ino, &st, &tmo);

	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, tmo);
}

/*
 * The root, .kvfs and a chain namespace's blocks are not the user's to
 * change.  In an open namespace, times and modes (touch, cp -p, tar) are
 * accepted and ignored, as the seal fixes them; sizes are for writers.
 */
static void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct kvfs_fs *fs = fs_of(req);
	struct inode_info in;
	struct stat st;
	double tmo;
	int rc;

	if (ino < INODE_FIRST) {
		fuse_reply_err(req, EPERM);
		return;
	}
	/* modes and owners are the daemon's (fs_stat_*): a change to them
	 * cannot be kept, so on a shared mount it is refused (fs_mode_ok) */
	if (fs->allow_other &&
	    (to_set &
	     (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))) {
		rc = getattr_any(fs, ino, &st, &tmo);
		if (rc == 0 &&
		    (((to_set & FUSE_SET_ATTR_MODE) &&
		      (attr->st_mode & 07777) != (st.st_mode & 07777)) ||
		     ((to_set & FUSE_SET_ATTR_UID) &&
		      attr->st_uid != st.st_uid) ||
		     ((to_set & FUSE_SET_ATTR_GID) &&
		      attr->st_gid != st.st_gid)))
			rc = -EPERM;
		if (rc < 0) {
			fuse_reply_err(req, -rc);
			return;
		}
	}
	if (inode_get(fs->it, ino, &in) == 0 && !in.writing &&
	    !(to_set & FUSE_SET_ATTR_SIZE) &&
	    (in.kind == INODE_DIR ||
	     kv_store_ns_layout(fs->st, in.ns) == KV_LAYOUT_OPEN)) {
		rc = getattr_any(fs, ino, &st, &tmo);
		if (rc < 0)
			fuse_reply_err(req, -rc);
		else
			fuse_reply_attr(req, &st, tmo);
		return;
	}
	fs_setattr_block(req, ino, attr, to_set, fi);
}

/*
 * The pool as a file system: 4 KiB blocks, the capacity in bytes
 * (store.h: a block in a slot counts a slot, a spilled one its size), one
 * "inode" per slot.  bfree is what no block holds; bavail what a writer
 * can get, since allocation evicts: all but what is referenced or being
 * written (counted a slot each).
 */
static void fs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct kv_store_stats s;
	struct statvfs v;
	uint64_t per, busy;
	int rc = kv_store_stats(fs_of(req)->st, &s);

	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	per = s.slot_size / 4096;
	busy = (s.pinned + s.total.writing) * per;
	memset(&v, 0, sizeof(v));
	v.f_bsize = 4096;
	v.f_frsize = 4096;
	v.f_blocks = s.capacity / 4096;
	v.f_bfree = (s.capacity - (s.used < s.capacity ? s.used : s.capacity)) /
		    4096;
	v.f_bavail = busy < v.f_blocks ? v.f_blocks - busy : 0;
	v.f_files = s.slots_total;
	v.f_ffree = s.slots_free;
	v.f_favail = s.slots_free;
	v.f_namemax = 255;
	fuse_reply_statfs(req, &v);
}

/* ---- open files ---------------------------------------------------- */

static void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct kvfs_fs *fs = fs_of(req);
	struct kvfs_file *f = NULL;
	int rc;

	if (fs_is_meta(ino))
		rc = fs_open_meta(fs, ino, fi, &f);
	else if (ino < INODE_FIRST)
		rc = -EISDIR;
	else
		rc = fs_open_block(fs, ino, fuse_req_ctx(req)->pid, fi, &f);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uintptr_t)f;
	/* an interrupted open gets no release: undo it here */
	if (fuse_reply_open(req, fi) != 0) {
		if (f->kind == FILE_TEXT) {
			fs_text_free(fs, f);
		} else {
			if (f->kind == FILE_WRITE)
				f->err = -EINTR; /* nothing is published */
			fs_release_block(fs, f);
		}
	}
}

/*
 * From a copy: once the kernel has the reply, the reader may close and the
 * release free f->text while this thread is still on its way out of
 * writev (harmless, but AddressSanitizer checks the iovec after the call).
 * The texts are a few KiB.
 */
static void fs_read_text(fuse_req_t req, struct kvfs_file *f, size_t size,
			 off_t off)
{
	size_t n = off < 0 || (size_t)off >= f->len ? 0 : f->len - (size_t)off;
	char *copy;

	if (n > size)
		n = size;
	copy = malloc(n ? n : 1);
	if (!copy) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (n)
		memcpy(copy, f->text + off, n);
	fuse_reply_buf(req, copy, n);
	free(copy);
}

static void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct kvfs_file *f = file_of(fi);

	switch (f->kind) {
	case FILE_READ:
		fs_read_block(req, f, size, off);
		break;
	case FILE_TEXT:
		fs_read_text(req, f, size, off);
		break;
	case FILE_WRITE:
		/* O_RDWR in an open namespace, or the kernel filling a
		 * cached page that a write covers in part */
		fs_open_read_staging(req, fs_of(req), f, size, off);
		break;
	default:
		fuse_reply_err(req, EBADF);
		break;
	}
}

static void fs_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct kvfs_file *f = file_of(fi);

	if (f->kind == FILE_TEXT)
		fs_text_free(fs_of(req), f);
	else
		fs_release_block(fs_of(req), f);
	fuse_reply_err(req, 0);
}

/* ---- everything else is refused ------------------------------------ */

/* renames: within an open namespace only (fs_open.c); links, symlinks
 * and device nodes: never */
static void fs_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	if (parent < INODE_FIRST || newparent < INODE_FIRST) {
		fuse_reply_err(req, EPERM);
		return;
	}
	fs_open_rename(req, parent, name, newparent, newname, flags);
}

static void fs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	fuse_reply_err(req, EPERM);
}

static void fs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	fuse_reply_err(req, EPERM);
}

static void fs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	fuse_reply_err(req, EPERM);
}

static const struct fuse_lowlevel_ops fs_ops = {
	.init = fs_init,
	.lookup = fs_lookup,
	.forget = fs_forget,
	.forget_multi = fs_forget_multi,
	.getattr = fs_getattr,
	.setattr = fs_setattr,
	.statfs = fs_statfs,
	.mkdir = fs_mkdir,
	.rmdir = fs_rmdir,
	.readdir = fs_readdir,
	.create = fs_create,
	.open = fs_open,
	.read = fs_read,
	.write_buf = fs_write_buf,
	.flush = fs_flush,
	.fsync = fs_fsync,
	.release = fs_release,
	.unlink = fs_unlink,
	.getxattr = fs_getxattr,
	.listxattr = fs_listxattr,
	.setxattr = fs_setxattr,
	.removexattr = fs_removexattr,
	.rename = fs_rename,
	.link = fs_link,
	.symlink = fs_symlink,
	.mknod = fs_mknod,
};

const struct fuse_lowlevel_ops *kvfs_fs_ops(void)
{
	return &fs_ops;
}

/* ---- life ---------------------------------------------------------- */

int kvfs_fs_new(const struct kvfs_fs_config *cfg, struct kvfs_fs **out)
{
	struct kvfs_fs *fs;
	int rc;

	if (!cfg->store || !cfg->mountpoint || !cfg->socket || !cfg->node)
		return -EINVAL;
	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	fs->st = cfg->store;
	fs->cl = cfg->cluster;
	fs->block_tokens = cfg->block_tokens;
	fs->uid = cfg->uid;
	fs->gid = cfg->gid;
	fs->layout = cfg->layout;
	fs->writeback = cfg->writeback;
	fs->allow_other = cfg->allow_other;
	fs->io.pt_want = cfg->passthrough;
	fs->io.dev_fd = -1;
	if (pthread_mutex_init(&fs->stage_lock, NULL)) {
		free(fs);
		return -ENOMEM;
	}
	if (pthread_mutex_init(&fs->io.pt_lock, NULL)) {
		pthread_mutex_destroy(&fs->stage_lock);
		free(fs);
		return -ENOMEM;
	}
	if (pthread_mutex_init(&fs->text_lock, NULL)) {
		pthread_mutex_destroy(&fs->io.pt_lock);
		pthread_mutex_destroy(&fs->stage_lock);
		free(fs);
		return -ENOMEM;
	}
	fs->start_ns = kvfs_wall_ns();
	fs->mountpoint = strdup(cfg->mountpoint);
	fs->socket = strdup(cfg->socket);
	fs->node = strdup(cfg->node);
	rc = -ENOMEM;
	if (!fs->mountpoint || !fs->socket || !fs->node)
		goto out_free;
	rc = inode_table_new(&fs->it);
	if (rc < 0)
		goto out_free;
	*out = fs;
	return 0;

out_free:
	kvfs_fs_free(fs);
	return rc;
}

void kvfs_fs_free(struct kvfs_fs *fs)
{
	if (!fs)
		return;
	kvfs_fs_stop(fs);
	fs_notify_free(fs);
	fs_open_free(fs);
	inode_table_free(fs->it);
	while (fs->texts)
		fs_text_free(fs, fs->texts);
	pthread_mutex_destroy(&fs->stage_lock);
	pthread_mutex_destroy(&fs->io.pt_lock);
	pthread_mutex_destroy(&fs->text_lock);
	free(fs->mountpoint);
	free(fs->socket);
	free(fs->node);
	free(fs);
}
