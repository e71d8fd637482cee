/*
 * fs_io.c - /dev/fuse through libfuse's custom io, for what libfuse 3.14
 * cannot ask the kernel for: FUSE_HANDLE_KILLPRIV_V2, and FUSE
 * passthrough (below).
 *
 * Without that flag the kernel asks the daemon for "security.capability"
 * (a GETXATTR round trip) before every write(2) of a file, to learn
 * whether the write must drop file capabilities, and FUSE keeps no
 * answer: only a file system that takes the dropping over gets SB_NOSEC,
 * which lets the kernel remember "nothing here".  A llama.cpp slot save
 * is 8 KiB stdio flushes: two round trips a flush instead of one.
 *
 * Taking it over costs kvfs nothing, because there is never anything to
 * drop: file modes are fixed (no set-user-ID or set-group-ID bit can be
 * set, fs.c, fs_open.c) and the only extended attributes are read-only
 * user.kvfs.* (fs_xattr.c), so no file has capabilities.
 *
 * A libfuse that knows the flag (FUSE_CAP_HANDLE_KILLPRIV_V2) is asked in
 * fs_init like every other, and nothing here runs.  With libfuse 3.14 the
 * session reads and writes /dev/fuse through io_read and io_writev:
 * io_read notes the INIT request (the first one, read before any other
 * and never spliced) and whether the kernel offers the flag; io_writev
 * adds it to libfuse's reply to that request.  Every later call is a
 * plain read(2), splice(2) or writev(2) after one relaxed load.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "fuse/fs_int.h"
#include "src/common/log.h"

#ifndef FUSE_CAP_HANDLE_KILLPRIV_V2

/*
 * FUSE passthrough (protocol 7.40, Linux >= 6.9), for files bigger than
 * a slot: each is a file of its own (pool.h, spill files), so the kernel
 * can serve read, splice and mmap of it straight from that file, with no
 * request to kvfsd and no page cache of the FUSE inode beside the file's
 * own pages.  The INIT reply asks for it (FUSE_INIT_EXT, flags2 bit 5,
 * max_stack_depth 1) when kvfsd runs with -o passthrough and the kernel
 * offers it; the kernel refuses it under the write-back cache, which
 * -o passthrough therefore turns off.  A reader's open then registers the
 * file (FUSE_DEV_IOC_BACKING_OPEN, CAP_SYS_ADMIN) and its reply carries
 * FOPEN_PASSTHROUGH and the backing id, which io_writev writes into
 * libfuse's reply (found by the fh it carries).  The kernel takes one
 * backing file per inode, shared by every open of it, and fails an open
 * that mixes passthrough and not: the id is kept per inode (inode.h)
 * from its first passthrough open to its last release.  Without the
 * rights the first registration fails with EPERM: logged once, and the
 * copy path serves every file from then on.  The definitions, from
 * Linux's uapi, are here for a system whose <linux/fuse.h> is older.
 */
#define KV_FUSE_PASSTHROUGH2 (1u << 5) /* FUSE_PASSTHROUGH, in flags2 */
#define KV_FOPEN_PASSTHROUGH (1u << 7)
struct kv_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};
#define KV_IOC_BACKING_OPEN _IOW(229, 1, struct kv_backing_map)
#define KV_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)

bool fs_pt_on(struct kvfs_fs *fs)
{
	return atomic_load_explicit(&fs->io.pt_on, memory_order_relaxed);
}

/* pt_lock held */
static struct fs_pt_pending *pt_pending(struct fs_io *io, uint64_t fh)
{
	for (size_t i = 0; i < sizeof(io->pt_pending) / sizeof(*io->pt_pending);
	     i++)
		if (io->pt_pending[i].fh == fh)
			return &io->pt_pending[i];
	return NULL;
}

int fs_pt_open(struct kvfs_fs *fs, fuse_ino_t ino, struct kvfs_file *f,
	       struct fuse_file_info *fi)
{
	struct fs_io *io = &fs->io;
	struct kv_backing_map m = { .fd = f->ref.fd };
	struct fs_pt_pending *p;
	int32_t id;
	int err;

	if (!f->ref.spilled || f->ref.fd < 0 || !fs_pt_on(fs))
		return 0;
	pthread_mutex_lock(&io->pt_lock);
	p = pt_pending(io, 0); /* a free entry */
	id = p ? inode_backing_get(fs->it, ino) : 0;
	if (p && !id) {
		id = ioctl(io->dev_fd, KV_IOC_BACKING_OPEN, &m);
		if (id <= 0) {
			err = id < 0 ? errno : EIO;
			pthread_mutex_unlock(&io->pt_lock);
			if (err == EPERM && atomic_exchange(&io->pt_on, false))
				kvfs_warn("fuse: passthrough refused (%s: "
					  "kvfsd needs CAP_SYS_ADMIN): the "
					  "copy path serves every file",
					  strerror(err));
			else if (err != EPERM)
				kvfs_warn("fuse: passthrough of a file: %s; "
					  "this open takes the copy path",
					  strerror(err));
			return 0;
		}
		inode_backing_set(fs->it, ino, id);
	}
	if (!p) {
		/* as many opens under way as FUSE threads: not reached */
		pthread_mutex_unlock(&io->pt_lock);
		return -EAGAIN;
	}
	p->fh = (uint64_t)(uintptr_t)f; /* what fs_open puts in fi->fh */
	p->id = id;
	io->pt_opens++;
	pthread_mutex_unlock(&io->pt_lock);
	f->passthrough = true;
	/* the kernel refuses keep_cache with passthrough, and direct_io
	 * would send the reads back here */
	fi->keep_cache = 0;
	fi->direct_io = 0;
	return 0;
}

void fs_pt_release(struct kvfs_fs *fs, struct kvfs_file *f)
{
	struct fs_io *io = &fs->io;
	struct fs_pt_pending *p;
	int32_t id;

	if (!f->passthrough)
		return;
	pthread_mutex_lock(&io->pt_lock);
	/* an open whose reply never went (interrupted) */
	p = pt_pending(io, (uint64_t)(uintptr_t)f);
	if (p)
		p->fh = 0;
	id = inode_backing_put(fs->it, f->ino);
	if (id > 0) {
		uint32_t u = (uint32_t)id;

		ioctl(io->dev_fd, KV_IOC_BACKING_CLOSE, &u);
	}
	pthread_mutex_unlock(&io->pt_lock);
}

/* an OPEN reply of a passed-through file: mark it (pt_lock taken) */
static void pt_mark(struct fs_io *io, struct fuse_open_out *o)
{
	struct fs_pt_pending *p;

	pthread_mutex_lock(&io->pt_lock);
	p = o->fh ? pt_pending(io, o->fh) : NULL;
	if (p) {
		o->open_flags |= KV_FOPEN_PASSTHROUGH;
		o->padding = (uint32_t)p->id; /* backing_id, in 7.40 */
		p->fh = 0;
	}
	pthread_mutex_unlock(&io->pt_lock);
}

/* the INIT reply: ask for passthrough when it can be had */
static void pt_init(struct fs_io *io, struct iovec *arg)
{
	struct fuse_init_out *out = arg->iov_base;
	const char *why = NULL;

	if (!io->pt_want)
		return;
	if (!io->pt_offered)
		why = "the kernel does not offer it (Linux >= 6.9 with "
		      "CONFIG_FUSE_PASSTHROUGH)";
	else if (out->flags & FUSE_WRITEBACK_CACHE)
		why = "the write-back cache is on";
	else if (arg->iov_len < sizeof(*out))
		why = "libfuse's INIT reply is too short";
	if (why) {
		kvfs_warn("fuse: no passthrough: %s; the copy path serves "
			  "every file",
			  why);
		return;
	}
	out->flags |= FUSE_INIT_EXT;
	out->flags2 |= KV_FUSE_PASSTHROUGH2;
	out->unused[0] = 1; /* max_stack_depth, in 7.40: tmpfs below us */
	atomic_store(&io->pt_on, true);
	kvfs_info("fuse: passthrough on for files bigger than a slot");
}

static struct fs_io *io_of(void *userdata)
{
	return &((struct kvfs_fs *)userdata)->io;
}

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	struct fs_io *io = io_of(userdata);
	ssize_t n = read(fd, buf, len);
	const struct fuse_in_header *h = buf;
	const struct fuse_init_in *in = (const void *)(h + 1);

	/* fuse_init_in's first four words are in every protocol version */
	if (n < (ssize_t)(sizeof(*h) + 4 * sizeof(uint32_t)) ||
	    atomic_load_explicit(&io->replied, memory_order_relaxed) ||
	    h->opcode != FUSE_INIT)
		return n;
	io->init_unique = h->unique;
	io->offered = (in->flags & FUSE_HANDLE_KILLPRIV_V2) != 0;
	io->pt_offered = (in->flags & FUSE_INIT_EXT) &&
			 n >= (ssize_t)(sizeof(*h) + 5 * sizeof(uint32_t)) &&
			 (in->flags2 & KV_FUSE_PASSTHROUGH2);
	io->init_seen = true;
	return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct fs_io *io = io_of(userdata);
	const struct fuse_out_header *oh = iov[0].iov_base;
	struct fuse_init_out *out;
	bool take;

	if (atomic_load_explicit(&io->replied, memory_order_relaxed)) {
		/* an open reply: fuse_out_header, then fuse_open_out */
		if (count == 2 &&
		    iov[1].iov_len == sizeof(struct fuse_open_out) &&
		    oh->error == 0 &&
		    atomic_load_explicit(&io->pt_on, memory_order_relaxed))
			pt_mark(io, iov[1].iov_base);
		return writev(fd, iov, count);
	}
	if (!io->init_seen || count < 2 || iov[0].iov_len != sizeof(*oh) ||
	    oh->unique != io->init_unique)
		return writev(fd, iov, count);
	out = iov[1].iov_base;
	take = oh->error == 0 && io->offered &&
	       iov[1].iov_len >= 4 * sizeof(uint32_t);
	if (take)
		out->flags |= FUSE_HANDLE_KILLPRIV_V2;
	if (oh->error == 0)
		pt_init(io, &iov[1]);
	atomic_store_explicit(&io->replied, true, memory_order_relaxed);
	kvfs_debug("fuse: handle_killpriv_v2 %s", take ? "on" : "not offered");
	return writev(fd, iov, count);
}

static ssize_t io_splice_receive(int fdin, off_t *offin, int fdout,
				 off_t *offout, size_t len, unsigned int flags,
				 void *userdata)
{
	(void)userdata;
	return splice(fdin, offin, fdout, offout, len, flags);
}

int kvfs_fs_attach_io(struct kvfs_fs *fs, struct fuse_session *se)
{
	/* no splice_send: replies are written, never spliced (fs_init) */
	static const struct fuse_custom_io io = {
		.read = io_read,
		.writev = io_writev,
		.splice_receive = io_splice_receive,
	};

	fs->io.dev_fd = fuse_session_fd(se);
	/* the fd stays the one fuse_session_mount opened (and unmounts) */
	return fuse_session_custom_io(se, &io, fuse_session_fd(se)) == 0 ? 0
									 : -EIO;
}

#else /* libfuse asks for it itself: fs_init */

int kvfs_fs_attach_io(struct kvfs_fs *fs, struct fuse_session *se)
{
	(void)se;
	/* passthrough through libfuse's own calls (3.17) is still to be
	 * written: the copy path serves every file */
	if (fs->io.pt_want)
		kvfs_warn("fuse: no passthrough with this libfuse yet; the "
			  "copy path serves every file");
	return 0;
}

bool fs_pt_on(struct kvfs_fs *fs)
{
	(void)fs;
	return false;
}

int fs_pt_open(struct kvfs_fs *fs, fuse_ino_t ino, struct kvfs_file *f,
	       struct fuse_file_info *fi)
{
	(void)fs;
	(void)ino;
	(void)f;
	(void)fi;
	return 0;
}

void fs_pt_release(struct kvfs_fs *fs, struct kvfs_file *f)
{
	(void)fs;
	(void)f;
}

#endif
