/*
 * pubcheck - when a file written through a kvfs mount is published
 * (kvfs(7)): by the last close of the open file description its create
 * made, after every dup and every copy a child inherited is closed, or by
 * a rename onto its final name; never by a child's close or exit while
 * the writer still holds it, and never after a write error.  Publication
 * must not hang a writer that forks, execs or spawns with the file open.
 *
 * One case per run; it prints "ok CASE" or "FAIL CASE: why" and exits 0
 * or 1.  Each case runs in a child of its own process group that this
 * process watches with a deadline: a case that hangs (a kvfsd thread
 * stuck, a child stuck in exec) is killed and reported as a FAIL naming
 * the step it was stuck in, and this process exits, whatever the stuck
 * processes do.  Another process checks visibility: a checker forked
 * before any block is opened, so it holds no descriptor of one (a forked
 * checker would close an inherited copy, which is what is under test).
 *
 * Block bytes follow fuse_pattern.h (derived from the file name), so
 * tests/helpers/fuse_errno can check them too.  PATH is a block's path on
 * the mount (NAMESPACE/64 hex digits), and must not exist yet.
 *
 *   fork SIZE PATH             create, write half, fork; the child
 *                              _exit(0)s; not visible; write the rest,
 *                              close: visible, every byte
 *   fork-close SIZE PATH       the child close()s it first
 *   fork-closerange SIZE PATH  the child close_range(3, ~0U, 0)s first
 *   exec SIZE PATH             fork + execve(/bin/true), the descriptor
 *                              inherited
 *   exec-cloexec SIZE PATH     the same, opened O_CLOEXEC
 *   system SIZE PATH           system("true")
 *   system-cloexec SIZE PATH
 *   spawn SIZE PATH            posix_spawn(/bin/true)
 *   spawn-cloexec SIZE PATH
 *   many SIZE PATH...          one writer process per PATH at once, each
 *                              doing system("true") halfway (20 s for all);
 *                              then every block checked and the namespace
 *                              stat()ed
 *   many-cloexec SIZE PATH...
 *   dup SIZE PATH              write half, dup2 to fd 20, close the
 *                              original, write the rest through the dup:
 *                              not visible until the dup's close
 *   close-open SIZE PATH...    for each: write, close, and at once open
 *                              from the checker: visible, every byte
 *   ftruncate CAP PATH         write 4 KiB, ftruncate to CAP + 1 (CAP: the
 *                              pool's capacity): EFBIG; close (0 or
 *                              EFBIG): never visible
 *   efbig-write CAP PATH       write 4 KiB, then 8 KiB across CAP: EFBIG,
 *                              or (the write-back cache took it) EFBIG
 *                              from close; never visible
 *   align INO DIR              make the next create in DIR get inode INO
 *                              (see c_align): a helper, not a check
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/helpers/fuse_pattern.h"

#define CHUNK (64u << 10)
#define DEADLINE_MS 10000
#define MANY_DEADLINE_MS 20000
#define MANY_MAX 64
#define DUP_FD 20
#define TRUE_PATH "/bin/true"
#define WHY_LEN 512
#define STAGE_LEN 256

extern char **environ;

/* what the case is doing, and why each of many's writers failed: shared
 * with the watchdog, which names the step a hung case was stuck in */
struct shared {
	char stage[STAGE_LEN];
	char why[MANY_MAX][WHY_LEN];
};

static struct shared *sh;
static const char *case_name;

/* the checker: another process, with no descriptor of any block */
static int chk_req = -1, chk_rep = -1;
static pid_t chk_pid = -1;

static void stage(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(sh->stage, sizeof(sh->stage), fmt, ap);
	va_end(ap);
}

/* append "; what" to why */
static void note(char *why, const char *fmt, ...)
{
	size_t n = strlen(why);
	va_list ap;

	if (n && n + 2 < WHY_LEN) {
		strcpy(why + n, "; ");
		n += 2;
	}
	va_start(ap, fmt);
	vsnprintf(why + n, WHY_LEN - n, fmt, ap);
	va_end(ap);
}

static const char *ename(int err)
{
	const char *s = strerrorname_np(err);

	return s ? s : "EUNKNOWN";
}

/* write bytes [off, off + len) of path's pattern at fd's offset: 0 or an
 * errno */
static int put(int fd, const char *path, uint64_t off, uint64_t len)
{
	static uint8_t buf[CHUNK];
	uint64_t seed = pat_seed(path), end = off + len;

	while (off < end) {
		size_t n = end - off < CHUNK ? end - off : CHUNK;
		ssize_t w;

		pat_fill(seed, off, buf, n);
		w = write(fd, buf, n);
		if (w < 0)
			return errno;
		if (w == 0)
			return EIO;
		off += (uint64_t)w;
	}
	return 0;
}

static int create(const char *path, int flags)
{
	return open(path, O_WRONLY | O_CREAT | O_EXCL | flags, 0644);
}

/* ---- the checker --------------------------------------------------- */

/* readdir of path's directory lists path's name */
static bool listed(const char *path)
{
	char dir[PATH_MAX];
	const char *base = strrchr(path, '/');
	struct dirent *e;
	bool found = false;
	DIR *d;

	if (!base)
		return false;
	snprintf(dir, sizeof(dir), "%.*s", (int)(base - path), path);
	d = opendir(dir);
	if (!d)
		return false;
	while (!found && (e = readdir(d)))
		found = strcmp(e->d_name, base + 1) == 0;
	closedir(d);
	return found;
}

/*
 * path must not be there, as kvfs(7) says of a file not yet published:
 * open ENOENT, and readdir does not list it.  (stat is not checked: in an
 * open namespace the kernel may answer it from the writer's own entry.)
 */
static void see_absent(const char *path, char *why)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (fstat(fd, &st) == 0)
			snprintf(why, WHY_LEN, "visible, %lld bytes",
				 (long long)st.st_size);
		else
			snprintf(why, WHY_LEN, "visible (fstat: %s)",
				 ename(errno));
		close(fd);
	} else if (errno != ENOENT) {
		snprintf(why, WHY_LEN, "open: %s, not ENOENT", ename(errno));
	} else if (listed(path)) {
		snprintf(why, WHY_LEN, "open ENOENT, but readdir lists it");
	}
}

/* path must be there, size bytes, every one right */
static void see_whole(const char *path, uint64_t size, char *why)
{
	static uint8_t buf[CHUNK];
	uint64_t seed = pat_seed(path), off = 0;
	struct stat st;
	long long bad;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		int err = errno, ms = 0;

		/* a failure still; whether the file comes later tells a
		 * stale cached miss from a file that was never published */
		while (fd < 0 && err == ENOENT && ms < 1500) {
			usleep(50 * 1000);
			ms += 50;
			fd = open(path, O_RDONLY | O_CLOEXEC);
		}
		if (fd < 0)
			snprintf(why, WHY_LEN,
				 "not visible: open: %s, still after 1.5 s",
				 ename(err));
		else
			snprintf(why, WHY_LEN,
				 "not visible: open: %s, visible %d ms later",
				 ename(err), ms);
		if (fd >= 0)
			close(fd);
		return;
	}
	if (fstat(fd, &st) < 0) {
		snprintf(why, WHY_LEN, "fstat: %s", ename(errno));
	} else if ((uint64_t)st.st_size != size) {
		snprintf(why, WHY_LEN, "visible with %lld bytes, not %llu",
			 (long long)st.st_size, (unsigned long long)size);
	} else {
		while ((n = read(fd, buf, sizeof(buf))) > 0) {
			bad = pat_check(seed, off, buf, (size_t)n);
			if (bad >= 0) {
				snprintf(why, WHY_LEN, "byte %lld differs",
					 bad);
				break;
			}
			off += (uint64_t)n;
		}
		if (n < 0)
			snprintf(why, WHY_LEN, "read: %s", ename(errno));
		else if (n == 0 && off != size)
			snprintf(why, WHY_LEN, "read %llu bytes, not %llu",
				 (unsigned long long)off,
				 (unsigned long long)size);
	}
	close(fd);
}

/* requests: "a PATH" (absent) or "w SIZE PATH" (whole); a reply is one
 * line, empty when the check passed */
static void checker_serve(FILE *in, int out)
{
	char line[PATH_MAX + 64], why[WHY_LEN], *path;
	unsigned long long size;

	while (fgets(line, sizeof(line), in)) {
		line[strcspn(line, "\n")] = '\0';
		why[0] = '\0';
		if (line[0] == 'a') {
			see_absent(line + 2, why);
		} else {
			size = strtoull(line + 2, &path, 10);
			see_whole(path + 1, size, why);
		}
		dprintf(out, "%s\n", why);
	}
	_exit(0);
}

static int checker_start(void)
{
	int req[2], rep[2];
	FILE *in;

	if (pipe2(req, O_CLOEXEC) < 0)
		return -1;
	if (pipe2(rep, O_CLOEXEC) < 0)
		return -1;
	chk_pid = fork();
	if (chk_pid < 0)
		return -1;
	if (chk_pid == 0) {
		close(req[1]);
		close(rep[0]);
		in = fdopen(req[0], "r");
		if (!in)
			_exit(1);
		checker_serve(in, rep[1]);
	}
	close(req[0]);
	close(rep[1]);
	chk_req = req[1];
	chk_rep = rep[0];
	return 0;
}

/* ask the checker; its reply lands in why (empty: passed) */
static void ask(char *why, const char *fmt, ...)
{
	char line[PATH_MAX + 64];
	size_t n = 0;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	why[0] = '\0';
	if (dprintf(chk_req, "%s\n", line) < 0) {
		snprintf(why, WHY_LEN, "checker: %s", ename(errno));
		return;
	}
	while (n + 1 < WHY_LEN && read(chk_rep, why + n, 1) == 1 &&
	       why[n] != '\n')
		n++;
	why[n] = '\0';
}

/* another process sees nothing of path; else a note "when: ..." */
static bool absent(const char *path, char *why, const char *when)
{
	char got[WHY_LEN];

	stage("check from another process that it is not visible %s", when);
	ask(got, "a %s", path);
	if (got[0])
		note(why, "%s: %s", when, got);
	return !got[0];
}

static bool whole(const char *path, uint64_t size, char *why, const char *when)
{
	char got[WHY_LEN];

	stage("check from another process that it is whole %s", when);
	ask(got, "w %llu %s", (unsigned long long)size, path);
	if (got[0])
		note(why, "%s: %s", when, got);
	return !got[0];
}

/* ---- a child while the block is open ------------------------------- */

enum act {
	ACT_FORK_EXIT,
	ACT_FORK_CLOSE,
	ACT_FORK_CLOSERANGE,
	ACT_EXEC,
	ACT_SYSTEM,
	ACT_SPAWN,
};

static const char *const act_name[] = {
	[ACT_FORK_EXIT] = "a forked child's _exit(0)",
	[ACT_FORK_CLOSE] = "a forked child's close and _exit(0)",
	[ACT_FORK_CLOSERANGE] = "a forked child's close_range and _exit(0)",
	[ACT_EXEC] = "fork + execve(" TRUE_PATH ")",
	[ACT_SYSTEM] = "system(\"true\")",
	[ACT_SPAWN] = "posix_spawn(" TRUE_PATH ")",
};

/* run the child of act with fd open: 0, or -1 with a note */
static int act(enum act a, int fd, char *why)
{
	static char *const argv[] = { "true", NULL };
	pid_t pid = -1;
	int st = 0, rc;

	stage("%s with the block open", act_name[a]);
	switch (a) {
	case ACT_FORK_EXIT:
	case ACT_FORK_CLOSE:
	case ACT_FORK_CLOSERANGE:
	case ACT_EXEC:
		pid = fork();
		if (pid != 0)
			break;
		if (a == ACT_FORK_CLOSE)
			close(fd);
		else if (a == ACT_FORK_CLOSERANGE)
			close_range(3, ~0U, 0);
		if (a == ACT_EXEC) {
			execve(TRUE_PATH, argv, environ);
			_exit(127);
		}
		_exit(0);
	case ACT_SPAWN:
		rc = posix_spawn(&pid, TRUE_PATH, NULL, NULL, argv, environ);
		if (rc) {
			note(why, "posix_spawn: %s", ename(rc));
			return -1;
		}
		break;
	case ACT_SYSTEM:
		st = system("true");
		break;
	}
	if (a != ACT_SYSTEM) {
		if (pid < 0) {
			note(why, "fork: %s", ename(errno));
			return -1;
		}
		if (waitpid(pid, &st, 0) < 0) {
			note(why, "waitpid: %s", ename(errno));
			return -1;
		}
	}
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		note(why, "%s: status %#x", act_name[a], st);
		return -1;
	}
	return 0;
}

/*
 * create path, write half, act, write the rest, close: 0, or -1 with a
 * note.  With look, between act and the rest, another process must not
 * see the name.
 */
static int write_around(const char *path, uint64_t size, int flags, enum act a,
			bool look, char *why)
{
	uint64_t half = size / 2;
	int fd, err;

	stage("create");
	fd = create(path, flags);
	if (fd < 0) {
		note(why, "create: %s", ename(errno));
		return -1;
	}
	stage("write the first half");
	err = put(fd, path, 0, half);
	if (err) {
		note(why, "writing the first half: %s", ename(err));
		close(fd);
		return -1;
	}
	if (act(a, fd, why) < 0) {
		close(fd);
		return -1;
	}
	if (look)
		absent(path, why, "after the child, the writer still open");
	stage("write the rest, after %s", act_name[a]);
	err = put(fd, path, half, size - half);
	if (err)
		note(why, "writing the rest after %s: %s", act_name[a],
		     ename(err));
	stage("close");
	if (close(fd) < 0)
		note(why, "close: %s", ename(errno));
	return why[0] ? -1 : 0;
}

static int child_case(int argc, char **argv, enum act a, int flags, char *why)
{
	uint64_t size = strtoull(argv[0], NULL, 0);
	const char *path = argv[1];

	(void)argc;
	write_around(path, size, flags, a, true, why);
	/* what another process sees in the end, even after a failure */
	whole(path, size, why, "after the writer's close");
	return why[0] ? 1 : 0;
}

static int c_fork(int c, char **v, char *w)
{
	return child_case(c, v, ACT_FORK_EXIT, 0, w);
}

static int c_fork_close(int c, char **v, char *w)
{
	return child_case(c, v, ACT_FORK_CLOSE, 0, w);
}

static int c_fork_closerange(int c, char **v, char *w)
{
	return child_case(c, v, ACT_FORK_CLOSERANGE, 0, w);
}

static int c_exec(int c, char **v, char *w)
{
	return child_case(c, v, ACT_EXEC, 0, w);
}

static int c_exec_cloexec(int c, char **v, char *w)
{
	return child_case(c, v, ACT_EXEC, O_CLOEXEC, w);
}

static int c_system(int c, char **v, char *w)
{
	return child_case(c, v, ACT_SYSTEM, 0, w);
}

static int c_system_cloexec(int c, char **v, char *w)
{
	return child_case(c, v, ACT_SYSTEM, O_CLOEXEC, w);
}

static int c_spawn(int c, char **v, char *w)
{
	return child_case(c, v, ACT_SPAWN, 0, w);
}

static int c_spawn_cloexec(int c, char **v, char *w)
{
	return child_case(c, v, ACT_SPAWN, O_CLOEXEC, w);
}

/* ---- many writers at once ------------------------------------------ */

static int many(int argc, char **argv, int flags, char *why)
{
	uint64_t size = strtoull(argv[0], NULL, 0);
	int n = argc - 1, bad = 0, first = 0, i, st;
	pid_t pid[MANY_MAX];
	char *slash, dir[PATH_MAX], seen[WHY_LEN];
	struct stat sb;

	if (n > MANY_MAX) {
		note(why, "at most %d paths", MANY_MAX);
		return 1;
	}
	for (i = 0; i < n; i++) {
		pid[i] = fork();
		if (pid[i] < 0) {
			note(why, "fork: %s", ename(errno));
			n = i;
			break;
		}
		if (pid[i] == 0) {
			char w[WHY_LEN] = "";
			int rc = write_around(argv[1 + i], size, flags,
					      ACT_SYSTEM, false, w);

			snprintf(sh->why[i], WHY_LEN, "%s", w);
			_exit(rc ? 1 : 0);
		}
	}
	/* one line: how many failed, and the first one's reason */
	for (i = 0; i < n; i++) {
		stage("waiting for writer %d of %d", i, n);
		if (waitpid(pid[i], &st, 0) == pid[i] && WIFEXITED(st) &&
		    WEXITSTATUS(st) == 0)
			continue;
		if (bad++ == 0)
			first = i;
	}
	if (bad)
		note(why, "%d of %d writers failed, the first (%d): %s", bad, n,
		     first, sh->why[first][0] ? sh->why[first] : "died");
	for (i = 0, bad = 0; i < n; i++) {
		char got[WHY_LEN] = "";

		if (whole(argv[1 + i], size, got, "after all the writers"))
			continue;
		if (bad++ == 0) {
			first = i;
			snprintf(seen, sizeof(seen), "%s", got);
		}
	}
	if (bad)
		note(why, "%d of %d blocks not whole, the first (%d): %s", bad,
		     n, first, seen);
	snprintf(dir, sizeof(dir), "%s", argv[1]);
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	stage("stat the namespace after the writers");
	if (stat(dir, &sb) < 0)
		note(why, "stat of the namespace: %s", ename(errno));
	return why[0] ? 1 : 0;
}

static int c_many(int c, char **v, char *w)
{
	return many(c, v, 0, w);
}

static int c_many_cloexec(int c, char **v, char *w)
{
	return many(c, v, O_CLOEXEC, w);
}

/* ---- dup, close then open ------------------------------------------ */

static int c_dup(int argc, char **argv, char *why)
{
	uint64_t size = strtoull(argv[0], NULL, 0);
	const char *path = argv[1];
	uint64_t half = size / 2;
	int fd, d, err;

	(void)argc;
	stage("create");
	fd = create(path, 0);
	if (fd < 0) {
		note(why, "create: %s", ename(errno));
		return 1;
	}
	stage("write the first half");
	err = put(fd, path, 0, half);
	if (err) {
		note(why, "writing the first half: %s", ename(err));
		close(fd);
		return 1;
	}
	stage("dup2, close the original");
	d = dup2(fd, DUP_FD);
	if (d < 0) {
		note(why, "dup2: %s", ename(errno));
		close(fd);
		return 1;
	}
	if (close(fd) < 0)
		note(why, "close of the original: %s", ename(errno));
	absent(path, why, "after the original's close, the dup open");
	stage("write the rest through the dup");
	err = put(d, path, half, size - half);
	if (err)
		note(why, "writing the rest through the dup: %s", ename(err));
	absent(path, why, "before the dup's close");
	stage("close the dup");
	if (close(d) < 0)
		note(why, "close of the dup: %s", ename(errno));
	if (!err)
		whole(path, size, why, "after the dup's close");
	return why[0] ? 1 : 0;
}

static int c_close_open(int argc, char **argv, char *why)
{
	uint64_t size = strtoull(argv[0], NULL, 0);
	int i, fd, err;

	for (i = 1; i < argc && !why[0]; i++) {
		stage("create %s", argv[i]);
		fd = create(argv[i], 0);
		if (fd < 0) {
			note(why, "create: %s", ename(errno));
			break;
		}
		stage("write %s", argv[i]);
		err = put(fd, argv[i], 0, size);
		if (err)
			note(why, "write: %s", ename(err));
		stage("close %s", argv[i]);
		if (close(fd) < 0)
			note(why, "close: %s", ename(errno));
		if (!why[0])
			whole(argv[i], size, why, "right after the close");
	}
	return why[0] ? 1 : 0;
}

/* ---- write errors -------------------------------------------------- */

/* after a write error, close may report it, and must when the write
 * itself succeeded (must_fail); the file is never published */
static void closed_after_error(int fd, const char *path, bool must_fail,
			       char *why)
{
	stage("close after EFBIG");
	if (close(fd) == 0) {
		if (must_fail)
			note(why, "close: 0 after a write past the slot");
	} else if (errno != EFBIG) {
		note(why, "close: %s, not %sEFBIG", ename(errno),
		     must_fail ? "" : "0 or ");
	}
	absent(path, why, "after EFBIG and the close");
}

static int c_ftruncate(int argc, char **argv, char *why)
{
	uint64_t slot = strtoull(argv[0], NULL, 0);
	const char *path = argv[1];
	int fd, err;

	(void)argc;
	stage("create");
	fd = create(path, 0);
	if (fd < 0) {
		note(why, "create: %s", ename(errno));
		return 1;
	}
	stage("write 4 KiB");
	err = put(fd, path, 0, 4096);
	if (err)
		note(why, "writing 4 KiB: %s", ename(err));
	stage("ftruncate past the slot");
	if (ftruncate(fd, (off_t)slot + 1) == 0)
		note(why, "ftruncate to %llu succeeded, not EFBIG",
		     (unsigned long long)slot + 1);
	else if (errno != EFBIG)
		note(why, "ftruncate: %s, not EFBIG", ename(errno));
	closed_after_error(fd, path, false, why);
	return why[0] ? 1 : 0;
}

static int c_efbig_write(int argc, char **argv, char *why)
{
	uint64_t slot = strtoull(argv[0], NULL, 0);
	const char *path = argv[1];
	static uint8_t buf[8192];
	ssize_t w;
	int fd, err;

	(void)argc;
	stage("create");
	fd = create(path, 0);
	if (fd < 0) {
		note(why, "create: %s", ename(errno));
		return 1;
	}
	stage("write 4 KiB");
	err = put(fd, path, 0, 4096);
	if (err)
		note(why, "writing 4 KiB: %s", ename(err));
	stage("write across the slot's end");
	pat_fill(pat_seed(path), slot - 4096, buf, sizeof(buf));
	w = pwrite(fd, buf, sizeof(buf), (off_t)slot - 4096);
	/* into the page cache (kvfsd's write-back cache): close tells */
	if (w >= 0 && w != (ssize_t)sizeof(buf))
		note(why, "a write across the slot's end wrote %zd", w);
	else if (w < 0 && errno != EFBIG)
		note(why, "a write across the slot's end: %s, not EFBIG",
		     ename(errno));
	closed_after_error(fd, path, w >= 0, why);
	return why[0] ? 1 : 0;
}

/* ---- inode numbers ------------------------------------------------- */

/*
 * Make the next create in DIR get inode number INO, as a kvfsd that hands
 * out inode numbers in sequence does: create files there and abort each
 * (a write far past any slot: EFBIG from the write or, through the
 * write-back cache, from the close, so nothing is ever published) until
 * one gets INO - 1.  A copy made next into that mount then carries the
 * same inode number as its source on another mount.  Fails when the
 * numbers are already past INO, or do not come in sequence.
 */
static int c_align(int argc, char **argv, char *why)
{
	uint64_t want = strtoull(argv[0], NULL, 0);
	char path[PATH_MAX];
	struct stat st;
	int i, fd;

	(void)argc;
	for (i = 0; i < 4096; i++) {
		snprintf(path, sizeof(path), "%s/%032llx%032llx", argv[1],
			 (unsigned long long)getpid(), (unsigned long long)i);
		stage("create %s", path);
		fd = create(path, 0);
		if (fd < 0) {
			note(why, "create: %s", ename(errno));
			return 1;
		}
		if (fstat(fd, &st) < 0)
			note(why, "fstat: %s", ename(errno));
		if (!why[0] && pwrite(fd, "x", 1, (off_t)1 << 40) >= 0) {
			/* the write-back cache took it: close must fail */
			if (close(fd) == 0)
				note(why, "a write at 1 TiB and its close "
					  "succeeded");
		} else {
			close(fd);
		}
		if (why[0])
			return 1;
		if ((uint64_t)st.st_ino + 1 == want)
			return 0;
		if ((uint64_t)st.st_ino + 1 > want) {
			note(why, "inode numbers are past %llu already (%llu)",
			     (unsigned long long)want,
			     (unsigned long long)st.st_ino + 1);
			return 1;
		}
	}
	note(why, "inode %llu not reached", (unsigned long long)want);
	return 1;
}

/* ---- running a case ------------------------------------------------ */

struct pcase {
	const char *name;
	int (*run)(int argc, char **argv, char *why);
	int min_args; /* after the case name */
	int deadline_ms;
};

static const struct pcase cases[] = {
	{ "fork", c_fork, 2, DEADLINE_MS },
	{ "fork-close", c_fork_close, 2, DEADLINE_MS },
	{ "fork-closerange", c_fork_closerange, 2, DEADLINE_MS },
	{ "exec", c_exec, 2, DEADLINE_MS },
	{ "exec-cloexec", c_exec_cloexec, 2, DEADLINE_MS },
	{ "system", c_system, 2, DEADLINE_MS },
	{ "system-cloexec", c_system_cloexec, 2, DEADLINE_MS },
	{ "spawn", c_spawn, 2, DEADLINE_MS },
	{ "spawn-cloexec", c_spawn_cloexec, 2, DEADLINE_MS },
	{ "many", c_many, 2, MANY_DEADLINE_MS },
	{ "many-cloexec", c_many_cloexec, 2, MANY_DEADLINE_MS },
	{ "dup", c_dup, 2, DEADLINE_MS },
	{ "close-open", c_close_open, 2, DEADLINE_MS },
	{ "ftruncate", c_ftruncate, 2, DEADLINE_MS },
	{ "efbig-write", c_efbig_write, 2, DEADLINE_MS },
	{ "align", c_align, 2, DEADLINE_MS },
};

static long long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* in the case's own process group: the checker, then the case */
static void runner(const struct pcase *c, int argc, char **argv)
{
	char why[WHY_LEN] = "";
	int rc;

	setpgid(0, 0);
	stage("start the checker");
	if (checker_start() < 0) {
		dprintf(STDOUT_FILENO, "FAIL %s: checker: %s\n", case_name,
			ename(errno));
		_exit(1);
	}
	rc = c->run(argc, argv, why);
	if (rc == 0)
		dprintf(STDOUT_FILENO, "ok %s\n", case_name);
	else
		dprintf(STDOUT_FILENO, "FAIL %s: %s\n", case_name,
			why[0] ? why : "?");
	close(chk_req);
	kill(chk_pid, SIGKILL);
	waitpid(chk_pid, NULL, 0);
	_exit(rc ? 1 : 0);
}

/*
 * Wait for the case with a deadline.  A hung case is SIGKILLed with its
 * whole group, and not waited for: a process stuck in a FUSE request
 * dies only when the request ends, which may be when kvfsd does.
 */
static int watch(const struct pcase *c, pid_t pid)
{
	long long end = now_ms() + c->deadline_ms;
	struct timespec tick = { 0, 10 * 1000 * 1000 };
	int st;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			break;
		if (r < 0) {
			dprintf(STDOUT_FILENO, "FAIL %s: waitpid: %s\n",
				case_name, ename(errno));
			return 1;
		}
		if (now_ms() >= end) {
			kill(-pid, SIGKILL);
			dprintf(STDOUT_FILENO,
				"FAIL %s: hung: no result within %d s, "
				"stuck in: %s\n",
				case_name, c->deadline_ms / 1000, sh->stage);
			return 1;
		}
		nanosleep(&tick, NULL);
	}
	/* whatever the case left behind: its checker, its children */
	kill(-pid, SIGKILL);
	if (WIFEXITED(st))
		return WEXITSTATUS(st) ? 1 : 0;
	dprintf(STDOUT_FILENO, "FAIL %s: died of signal %d, in: %s\n",
		case_name, WTERMSIG(st), sh->stage);
	return 1;
}

static int usage(void)
{
	size_t i;

	fprintf(stderr, "usage: pubcheck CASE SIZE|SLOT PATH...\ncases:");
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		fprintf(stderr, " %s", cases[i].name);
	fprintf(stderr, "\n");
	return 2;
}

int main(int argc, char **argv)
{
	const struct pcase *c = NULL;
	size_t i;
	pid_t pid;

	if (argc < 2)
		return usage();
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (strcmp(argv[1], cases[i].name) == 0)
			c = &cases[i];
	if (!c || argc - 2 < c->min_args)
		return usage();
	case_name = c->name;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("pubcheck: mmap");
		return 1;
	}
	snprintf(sh->stage, sizeof(sh->stage), "start");
	pid = fork();
	if (pid < 0) {
		perror("pubcheck: fork");
		return 1;
	}
	if (pid == 0)
		runner(c, argc - 2, argv + 2);
	/* both sides set the group: whichever runs first */
	setpgid(pid, pid);
	return watch(c, pid);
}
