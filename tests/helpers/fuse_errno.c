/*
 * fuse_errno - one file operation on a kvfs mount, its outcome on stdout
 * as one word: OK, or the errno's name (EINVAL, EEXIST, ...), or BADSIZE /
 * BADDATA when bytes read back are wrong.  The FUSE shell tests compare
 * that word, which makes exact errno checks robust.
 *
 * Block bytes follow fuse_pattern.h (derived from the file name).
 *
 *   create PATH              open(O_CREAT|O_EXCL|O_WRONLY), close
 *   put PATH SIZE            create, write SIZE pattern bytes, close
 *   reput PATH SIZE          open PATH, unlink it and, holding it open,
 *                            put it again (the close must still seal)
 *   gen PATH SIZE            the pattern of PATH on stdout (no word)
 *   check PATH SIZE          read back: size and every byte
 *   pread PATH OFF LEN       pread LEN bytes at OFF and check them
 *   mmap PATH SIZE           map and check every byte
 *   open PATH ro|wo|rw|trunc open with those flags, close
 *   truncate PATH LEN        truncate(2)
 *   ftruncate PATH LEN       create, ftruncate(LEN), close
 *   mkdir|rmdir|unlink PATH
 *   rename PATH NEWPATH
 *   getx PATH NAME           the xattr's value (or the errno name)
 *   setx PATH NAME VALUE     setxattr(2)
 *   listx PATH               xattr names, comma-separated
 *   hold READY GO SIZE PATH...
 *                            open each PATH for reading, create READY,
 *                            wait (30 s at most) for GO, then check each
 *   mhold READY GO SIZE PATH map PATH and close it, create READY, wait
 *                            for GO, then check the mapping
 *   wopen READY GO SIZE PATH create PATH, write SIZE, create READY, wait
 *                            for GO, close: the close's outcome
 *   crash PATH SIZE          create, write SIZE/2, die of SIGKILL
 *   exit PATH SIZE CODE      create, write SIZE, exit(CODE) unclosed
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "tests/helpers/fuse_pattern.h"

#define CHUNK (256u << 10)
#define WAIT_MAX_MS 30000

static int say(int err)
{
	if (err == 0)
		puts("OK");
	else if (err < 0)
		puts(err == -1 ? "BADSIZE" : "BADDATA");
	else
		puts(strerrorname_np(err) ? strerrorname_np(err) : "EUNKNOWN");
	return 0;
}

static uint64_t num(const char *s)
{
	return strtoull(s, NULL, 0);
}

/* write size pattern bytes of path to fd: 0 or an errno */
static int write_pattern(int fd, const char *path, uint64_t size)
{
	static uint8_t buf[CHUNK];
	uint64_t seed = pat_seed(path), off = 0;

	while (off < size) {
		size_t n = size - off < CHUNK ? size - off : CHUNK;
		ssize_t w;

		pat_fill(seed, off, buf, n);
		w = write(fd, buf, n);
		if (w < 0)
			return errno;
		off += (uint64_t)w;
	}
	return 0;
}

static int create(const char *path)
{
	return open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0444);
}

static int cmd_put(const char *path, uint64_t size)
{
	int fd = create(path), err;

	if (fd < 0)
		return errno;
	err = write_pattern(fd, path, size);
	if (close(fd) < 0 && !err)
		err = errno;
	return err;
}

static int cmd_reput(const char *path, uint64_t size)
{
	int old = open(path, O_RDONLY | O_CLOEXEC), err;

	if (old < 0)
		return errno;
	err = unlink(path) < 0 ? errno : cmd_put(path, size);
	close(old);
	return err;
}

static int cmd_gen(const char *path, uint64_t size)
{
	return write_pattern(STDOUT_FILENO, path, size);
}

/* read fd to the end and check it: 0, -1 (size), -2 (data), an errno */
static int check_fd(int fd, const char *path, uint64_t size)
{
	static uint8_t buf[CHUNK];
	uint64_t seed = pat_seed(path), off = 0;
	struct stat st;
	ssize_t n;

	if (fstat(fd, &st) < 0)
		return errno;
	if ((uint64_t)st.st_size != size)
		return -1;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		if (pat_check(seed, off, buf, (size_t)n) >= 0)
			return -2;
		off += (uint64_t)n;
	}
	if (n < 0)
		return errno;
	return off == size ? 0 : -1;
}

static int cmd_check(const char *path, uint64_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;

	if (fd < 0)
		return errno;
	err = check_fd(fd, path, size);
	close(fd);
	return err;
}

static int cmd_pread(const char *path, uint64_t off, uint64_t len)
{
	uint8_t *buf = malloc(len ? len : 1);
	int fd = open(path, O_RDONLY | O_CLOEXEC), err = 0;
	ssize_t n;

	if (fd < 0 || !buf) {
		free(buf);
		return fd < 0 ? errno : ENOMEM;
	}
	n = pread(fd, buf, len, (off_t)off);
	if (n < 0)
		err = errno;
	else if ((uint64_t)n != len)
		err = -1;
	else if (pat_check(pat_seed(path), off, buf, len) >= 0)
		err = -2;
	close(fd);
	free(buf);
	return err;
}

static int cmd_mmap(const char *path, uint64_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err = 0;
	struct stat st;
	void *p;

	if (fd < 0)
		return errno;
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != size) {
		close(fd);
		return -1;
	}
	p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	/* the mapping holds the file, and so the block, after the close */
	close(fd);
	if (p == MAP_FAILED)
		return errno;
	if (pat_check(pat_seed(path), 0, p, size) >= 0)
		err = -2;
	munmap(p, size);
	return err;
}

static int cmd_open(const char *path, const char *how)
{
	int flags = O_RDONLY, fd;

	if (strcmp(how, "wo") == 0)
		flags = O_WRONLY;
	else if (strcmp(how, "rw") == 0)
		flags = O_RDWR;
	else if (strcmp(how, "trunc") == 0)
		flags = O_WRONLY | O_TRUNC;
	fd = open(path, flags | O_CLOEXEC);
	if (fd < 0)
		return errno;
	return close(fd) < 0 ? errno : 0;
}

static int cmd_ftruncate(const char *path, uint64_t len)
{
	int fd = create(path), err = 0;

	if (fd < 0)
		return errno;
	if (ftruncate(fd, (off_t)len) < 0)
		err = errno;
	if (close(fd) < 0 && !err)
		err = errno;
	return err;
}

static int cmd_getx(const char *path, const char *name)
{
	char buf[4096];
	ssize_t n = getxattr(path, name, buf, sizeof(buf) - 1);

	if (n < 0)
		return errno;
	buf[n] = '\0';
	puts(buf);
	return -100; /* printed */
}

static int cmd_listx(const char *path)
{
	char buf[4096];
	ssize_t n = listxattr(path, buf, sizeof(buf));

	if (n < 0)
		return errno;
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = i + 1 < n ? ',' : '\0';
	buf[n > 0 ? n - 1 : 0] = '\0';
	puts(n > 0 ? buf : "-");
	return -100;
}

static void wait_for(const char *path)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };

	for (int i = 0; i < WAIT_MAX_MS / 10 && access(path, F_OK) < 0; i++)
		nanosleep(&ts, NULL);
}

static int touch(const char *path)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);

	return fd < 0 ? errno : close(fd);
}

static int cmd_hold(const char *ready, const char *go, uint64_t size, int n,
		    char **paths)
{
	int *fds = calloc((size_t)n, sizeof(*fds)), err = 0;

	if (!fds)
		return ENOMEM;
	for (int i = 0; i < n; i++) {
		fds[i] = open(paths[i], O_RDONLY | O_CLOEXEC);
		if (fds[i] < 0) {
			err = errno;
			n = i;
			break;
		}
	}
	if (!err)
		err = touch(ready);
	if (!err)
		wait_for(go);
	for (int i = 0; i < n; i++) {
		if (!err)
			err = check_fd(fds[i], paths[i], size);
		close(fds[i]);
	}
	free(fds);
	return err;
}

static int cmd_mhold(const char *ready, const char *go, uint64_t size,
		     const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;
	void *p;

	if (fd < 0)
		return errno;
	p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd); /* only the mapping holds the block now */
	if (p == MAP_FAILED)
		return errno;
	err = touch(ready);
	if (!err)
		wait_for(go);
	if (!err && pat_check(pat_seed(path), 0, p, size) >= 0)
		err = -2;
	munmap(p, size);
	return err;
}

static int cmd_wopen(const char *ready, const char *go, uint64_t size,
		     const char *path)
{
	int fd = create(path), err;

	if (fd < 0)
		return errno;
	err = write_pattern(fd, path, size);
	if (!err)
		err = touch(ready);
	if (!err)
		wait_for(go);
	if (close(fd) < 0 && !err)
		err = errno;
	return err;
}

static int cmd_die(const char *path, uint64_t size, int code, bool kill9)
{
	int fd = create(path), err;

	if (fd < 0)
		return errno;
	err = write_pattern(fd, path, kill9 ? size / 2 : size);
	if (err)
		return err;
	fflush(stdout);
	if (kill9)
		raise(SIGKILL);
	_exit(code); /* the kernel closes fd: that is the point */
}

static int usage(void)
{
	fputs("usage: fuse_errno COMMAND ARGS (see the source)\n", stderr);
	return 2;
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";
	int err;

	if (argc < 3)
		return usage();
	if (!strcmp(c, "create"))
		err = create(argv[2]) < 0 ? errno : 0;
	else if (!strcmp(c, "put") && argc == 4)
		err = cmd_put(argv[2], num(argv[3]));
	else if (!strcmp(c, "reput") && argc == 4)
		err = cmd_reput(argv[2], num(argv[3]));
	else if (!strcmp(c, "gen") && argc == 4)
		return cmd_gen(argv[2], num(argv[3])) ? 1 : 0;
	else if (!strcmp(c, "check") && argc == 4)
		err = cmd_check(argv[2], num(argv[3]));
	else if (!strcmp(c, "pread") && argc == 5)
		err = cmd_pread(argv[2], num(argv[3]), num(argv[4]));
	else if (!strcmp(c, "mmap") && argc == 4)
		err = cmd_mmap(argv[2], num(argv[3]));
	else if (!strcmp(c, "open") && argc == 4)
		err = cmd_open(argv[2], argv[3]);
	else if (!strcmp(c, "truncate") && argc == 4)
		err = truncate(argv[2], (off_t)num(argv[3])) < 0 ? errno : 0;
	else if (!strcmp(c, "ftruncate") && argc == 4)
		err = cmd_ftruncate(argv[2], num(argv[3]));
	else if (!strcmp(c, "mkdir"))
		err = mkdir(argv[2], 0755) < 0 ? errno : 0;
	else if (!strcmp(c, "rmdir"))
		err = rmdir(argv[2]) < 0 ? errno : 0;
	else if (!strcmp(c, "rename") && argc == 4)
		err = rename(argv[2], argv[3]) < 0 ? errno : 0;
	else if (!strcmp(c, "unlink"))
		err = unlink(argv[2]) < 0 ? errno : 0;
	else if (!strcmp(c, "getx") && argc == 4)
		err = cmd_getx(argv[2], argv[3]);
	else if (!strcmp(c, "setx") && argc == 5)
		err = setxattr(argv[2], argv[3], argv[4], strlen(argv[4]), 0) <
				      0
			      ? errno
			      : 0;
	else if (!strcmp(c, "listx"))
		err = cmd_listx(argv[2]);
	else if (!strcmp(c, "hold") && argc >= 6)
		err = cmd_hold(argv[2], argv[3], num(argv[4]), argc - 5,
			       argv + 5);
	else if (!strcmp(c, "mhold") && argc == 6)
		err = cmd_mhold(argv[2], argv[3], num(argv[4]), argv[5]);
	else if (!strcmp(c, "wopen") && argc == 6)
		err = cmd_wopen(argv[2], argv[3], num(argv[4]), argv[5]);
	else if (!strcmp(c, "crash") && argc == 4)
		err = cmd_die(argv[2], num(argv[3]), 0, true);
	else if (!strcmp(c, "exit") && argc == 5)
		err = cmd_die(argv[2], num(argv[3]), (int)num(argv[4]), false);
	else
		return usage();
	if (err != -100)
		say(err);
	return 0;
}
