/*
 * net.c - TCP addresses and bounded connects (net.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "src/common/net.h"

uint64_t kvfs_net_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int kvfs_split_hostport(const char *s, char *host, size_t hlen, char *port,
			size_t plen)
{
	const char *colon, *h = s;
	size_t n;

	if (!s || !*s)
		return -EINVAL;
	if (*s == '[') {
		const char *end = strchr(s, ']');

		if (!end || end[1] != ':')
			return -EINVAL;
		h = s + 1;
		n = (size_t)(end - h);
		colon = end + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return -EINVAL;
		n = (size_t)(colon - s);
	}
	if (n == 0 || n >= hlen || !colon[1] || strlen(colon + 1) >= plen)
		return -EINVAL;
	memcpy(host, h, n);
	host[n] = '\0';
	snprintf(port, plen, "%s", colon + 1);
	for (const char *p = port; *p; p++)
		if (*p < '0' || *p > '9')
			return -EINVAL;
	return 0;
}

int kvfs_poll_until(int fd, short events, uint64_t deadline_ms,
		    bool (*cancel)(void *arg), void *arg)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		uint64_t now = kvfs_net_now_ms();
		int step = KVFS_NET_TICK_MS, rc;

		if (now >= deadline_ms)
			return -ETIMEDOUT;
		if (deadline_ms - now < (uint64_t)step)
			step = (int)(deadline_ms - now);
		rc = poll(&p, 1, step);
		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -errno;
		if (cancel && cancel(arg))
			return -ECANCELED;
	}
}

/* one address: 0 with *fd connected (still non-blocking), or -errno */
static int connect_one(const struct addrinfo *ai, uint64_t deadline_ms,
		       bool (*cancel)(void *arg), void *arg, int *out)
{
	socklen_t sl = sizeof(int);
	int fd, err = 0, rc;

	fd = socket(ai->ai_family,
		    ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
		*out = fd;
		return 0;
	}
	rc = errno == EINPROGRESS ? 0 : -errno;
	if (!rc)
		rc = kvfs_poll_until(fd, POLLOUT, deadline_ms, cancel, arg);
	if (!rc && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) < 0)
		err = errno;
	if (!rc)
		rc = -err;
	if (rc) {
		close(fd);
		return rc;
	}
	*out = fd;
	return 0;
}

int kvfs_tcp_connect(const struct addrinfo *res, uint64_t deadline_ms,
		     bool (*cancel)(void *arg), void *arg)
{
	int fd = -1, rc = -EHOSTUNREACH;

	for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		rc = connect_one(ai, deadline_ms, cancel, arg, &fd);
		if (rc == 0 || rc == -ETIMEDOUT || rc == -ECANCELED)
			break;
	}
	if (rc)
		return rc;
	/* blocking from here: callers poll or use io_uring as they like */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}
