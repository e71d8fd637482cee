/*
 * ctl_flood - misbehaving control clients, for tests/security/ctl_limits.sh.
 *
 *   ctl_flood SOCKET idle N HOLD_MS READY
 *       open N connections that never send a byte, create the file READY,
 *       hold them HOLD_MS, then print what became of them:
 *       "refused=R closed=C open=O" (refused: told -EMFILE at once;
 *       closed: hung up on later, with no answer; open: still there)
 *   ctl_flood SOCKET repeat N WORD...
 *       send the request "WORD ..." N times on one connection, one after
 *       the other, and print "ok=K" then "NAME=COUNT" for each error name
 *       the daemon answered with (e.g. "ok=256 EAGAIN=1744"); the last
 *       error message goes to stderr
 *
 * Exit status 0, or 1 when the socket could not be used at all.  Every
 * wait is bounded: a socket that answers nothing for 5 s is a failure.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define IDLE_MAX 4096
#define LINE_MAX_ 4096
#define WAIT_MS 5000

static int sock_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -1;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * One line into buf (no "\n"): its length, -1 at EOF or on a timeout.
 * The daemon answers one line per request and nothing unasked, so what
 * one recv returns never runs past the line: it is read whole, not a
 * byte at a time (a flood of 66000 requests must not take a minute).
 */
static int read_line(int fd, char *buf, size_t cap, int wait_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	size_t n = 0;
	ssize_t got;

	for (;;) {
		if (poll(&pfd, 1, wait_ms) != 1)
			return -1;
		got = recv(fd, buf + n, cap - 1 - n, 0);
		if (got <= 0)
			return -1;
		n += (size_t)got;
		if (memchr(buf, '\n', n))
			break;
		if (n + 1 >= cap)
			return -1; /* longer than any answer here */
	}
	*(char *)memchr(buf, '\n', n) = '\0';
	return (int)strlen(buf);
}

static void msleep(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* what became of fd: 'r' refused (an error line, then EOF), 'c' closed
 * without a word, 'o' still open */
static char fate(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char line[LINE_MAX_];

	if (poll(&pfd, 1, 0) != 1)
		return 'o';
	if (read_line(fd, line, sizeof(line), 0) < 0)
		return 'c';
	return strstr(line, "\"EMFILE\"") ? 'r' : 'o';
}

static int run_idle(const char *path, long n, long hold_ms, const char *ready)
{
	static int fds[IDLE_MAX];
	long refused = 0, closed = 0, open_ = 0;
	FILE *f;

	if (n < 1 || n > IDLE_MAX || hold_ms < 0 || hold_ms > 600000)
		return 1;
	for (long i = 0; i < n; i++) {
		fds[i] = sock_connect(path);
		if (fds[i] < 0) {
			perror("ctl_flood: connect");
			return 1;
		}
	}
	f = fopen(ready, "w");
	if (!f || fclose(f) != 0) {
		perror("ctl_flood: ready file");
		return 1;
	}
	msleep((unsigned)hold_ms);
	for (long i = 0; i < n; i++) {
		switch (fate(fds[i])) {
		case 'r':
			refused++;
			break;
		case 'c':
			closed++;
			break;
		default:
			open_++;
		}
		close(fds[i]);
	}
	printf("refused=%ld closed=%ld open=%ld\n", refused, closed, open_);
	return 0;
}

/* the error names seen, and how often */
struct tally {
	char name[24];
	long count;
};

static void count_error(struct tally *t, size_t *nt, size_t cap,
			const char *line)
{
	const char *p = strstr(line, "\"error\":\"");
	char name[24] = "?";
	size_t len;

	if (p) {
		p += 9;
		len = strcspn(p, "\"");
		if (len >= sizeof(name))
			len = sizeof(name) - 1;
		memcpy(name, p, len);
		name[len] = '\0';
	}
	for (size_t i = 0; i < *nt; i++)
		if (!strcmp(t[i].name, name)) {
			t[i].count++;
			return;
		}
	if (*nt < cap) {
		snprintf(t[*nt].name, sizeof(t[*nt].name), "%s", name);
		t[(*nt)++].count = 1;
	}
}

static int run_repeat(const char *path, long n, int argc, char **argv)
{
	char req[LINE_MAX_], line[LINE_MAX_], last[LINE_MAX_] = "";
	struct tally t[16];
	size_t nt = 0, len = 0;
	long ok = 0;
	int fd;

	if (n < 0 || n > 10000000)
		return 1;
	for (int i = 0; i < argc; i++) {
		int w = snprintf(req + len, sizeof(req) - len, "%s%s",
				 i ? " " : "", argv[i]);

		if (w < 0 || (size_t)w >= sizeof(req) - len - 1)
			return 1;
		len += (size_t)w;
	}
	req[len++] = '\n';
	fd = sock_connect(path);
	if (fd < 0) {
		perror("ctl_flood: connect");
		return 1;
	}
	for (long i = 0; i < n; i++) {
		if (send(fd, req, len, MSG_NOSIGNAL) != (ssize_t)len ||
		    read_line(fd, line, sizeof(line), WAIT_MS) < 0) {
			fprintf(stderr, "ctl_flood: no answer to request %ld\n",
				i);
			close(fd);
			return 1;
		}
		if (!strncmp(line, "{\"ok\":true", 10)) {
			ok++;
		} else {
			count_error(t, &nt, sizeof(t) / sizeof(t[0]), line);
			snprintf(last, sizeof(last), "%s", line);
		}
	}
	close(fd);
	printf("ok=%ld", ok);
	for (size_t i = 0; i < nt; i++)
		printf(" %s=%ld", t[i].name, t[i].count);
	putchar('\n');
	if (last[0])
		fprintf(stderr, "ctl_flood: last error: %s\n", last);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 6 && !strcmp(argv[2], "idle"))
		return run_idle(argv[1], atol(argv[3]), atol(argv[4]), argv[5]);
	if (argc >= 5 && !strcmp(argv[2], "repeat"))
		return run_repeat(argv[1], atol(argv[3]), argc - 4, argv + 4);
	fputs("usage: ctl_flood SOCKET idle N HOLD_MS READY\n"
	      "       ctl_flood SOCKET repeat N WORD...\n",
	      stderr);
	return 2;
}
