/* privfile.c - a small file of secrets, read whole (privfile.h) */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "src/common/privfile.h"

ssize_t kvfs_privfile_read(const char *path, size_t max, char **out,
			   mode_t *perm, const char **why)
{
	struct stat sb;
	char *buf;
	ssize_t n;
	int fd, err;

	*out = NULL;
	*perm = 0;
	/* O_NONBLOCK: a FIFO must not hang the start before fstat sees it */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		err = errno;
		*why = strerror(err);
		return -err;
	}
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		close(fd);
		*why = "not a regular file";
		return -EINVAL;
	}
	*perm = sb.st_mode & 07777;
	buf = malloc(max + 1);
	if (!buf) {
		close(fd);
		*why = strerror(ENOMEM);
		return -ENOMEM;
	}
	n = read(fd, buf, max + 1);
	err = errno;
	close(fd);
	if (n < 0 || (size_t)n > max) {
		OPENSSL_cleanse(buf, max + 1);
		free(buf);
		*why = n < 0 ? strerror(err) : "too long";
		return n < 0 ? -err : -EFBIG;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	buf[n] = '\0';
	*out = buf;
	return n;
}

void kvfs_privfile_free(char *buf, size_t len)
{
	if (!buf)
		return;
	OPENSSL_cleanse(buf, len);
	free(buf);
}
