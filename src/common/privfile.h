/*
 * privfile.h - reading a small file of secrets (the cluster secret, an
 * etcd password, a bearer token) the same way everywhere.
 *
 * The file is opened without blocking on a FIFO, must be a regular file,
 * is read whole (at most max bytes), and loses its trailing newlines and
 * carriage returns (the editor's, not the secret's).  Whether group or
 * others may read or write it is reported, for the caller to warn about
 * or refuse.
 */
#ifndef KVFS_PRIVFILE_H
#define KVFS_PRIVFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * The bytes of path into *out (malloc'd, NUL-terminated after them; free
 * with kvfs_privfile_free) and their count, or -errno with *why a short
 * reason for the caller's message: -EINVAL not a regular file, -EFBIG
 * longer than max bytes, or open's and read's errors (why: their
 * strerror).  *perm gets the file's permission bits: the caller warns
 * about or refuses (perm & 077), group or others let at it.
 */
ssize_t kvfs_privfile_read(const char *path, size_t max, char **out,
			   mode_t *perm, const char **why);
/* wipe and free what kvfs_privfile_read gave; NULL is a no-op */
void kvfs_privfile_free(char *buf, size_t len);

#endif /* KVFS_PRIVFILE_H */
