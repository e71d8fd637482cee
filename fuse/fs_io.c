/*
 * fs_io.c - /dev/fuse through libfuse's custom io, for the one INIT flag
 * libfuse 3.14 cannot ask for: FUSE_HANDLE_KILLPRIV_V2.
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
#include <unistd.h>

#include "fuse/fs_int.h"
#include "src/common/log.h"

#ifndef FUSE_CAP_HANDLE_KILLPRIV_V2

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
	io->init_seen = true;
	return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct fs_io *io = io_of(userdata);
	const struct fuse_out_header *oh = iov[0].iov_base;
	struct fuse_init_out *out;
	bool take;

	if (atomic_load_explicit(&io->replied, memory_order_relaxed) ||
	    !io->init_seen || count < 2 || iov[0].iov_len != sizeof(*oh) ||
	    oh->unique != io->init_unique)
		return writev(fd, iov, count);
	out = iov[1].iov_base;
	take = oh->error == 0 && io->offered &&
	       iov[1].iov_len >= 4 * sizeof(uint32_t);
	if (take)
		out->flags |= FUSE_HANDLE_KILLPRIV_V2;
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

	(void)fs;
	/* the fd stays the one fuse_session_mount opened (and unmounts) */
	return fuse_session_custom_io(se, &io, fuse_session_fd(se)) == 0 ? 0
									 : -EIO;
}

#else /* libfuse asks for it itself: fs_init */

int kvfs_fs_attach_io(struct kvfs_fs *fs, struct fuse_session *se)
{
	(void)fs;
	(void)se;
	return 0;
}

#endif
