/*
 * check_net.c - src/net.h: HOST:PORT parsing and the bounded, cancellable
 * TCP connect, on loopback only.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/testutil.h"

#include "src/common/net.h"

START_TEST(test_split)
{
	static const struct {
		const char *in, *host, *port;
	} good[] = {
		{ "127.0.0.1:80", "127.0.0.1", "80" },
		{ "[::1]:8080", "::1", "8080" },
		{ "node-2.example:7000", "node-2.example", "7000" },
		{ "a:b:1", "a:b", "1" }, /* the last colon splits */
	};
	static const char *bad[] = {
		"",	"nocolon", ":80",
		"h:",	"h:8x",	   "[::1]80",
		"[::1", "[]:1",	   "h:123456789012345678",
	};
	char host[16], port[8];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ck_assert_int_eq(kvfs_split_hostport(good[i].in, host,
						     sizeof(host), port,
						     sizeof(port)),
				 0);
		ck_assert_str_eq(host, good[i].host);
		ck_assert_str_eq(port, good[i].port);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(kvfs_split_hostport(bad[i], host, sizeof(host),
						  port,
						  sizeof(port)) == -EINVAL,
			      "\"%s\" was taken", bad[i]);
	ck_assert_int_eq(kvfs_split_hostport("a-host-too-long-for-it:1", host,
					     sizeof(host), port, sizeof(port)),
			 -EINVAL);
	ck_assert_int_eq(kvfs_split_hostport(NULL, host, sizeof(host), port,
					     sizeof(port)),
			 -EINVAL);
}
END_TEST

/* a listener on 127.0.0.1, port in *port; backlog as given */
static int listener(int backlog, char port[8])
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(fd, backlog), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	snprintf(port, 8, "%u", (unsigned)ntohs(sa.sin_port));
	return fd;
}

static struct addrinfo *lookup(const char *port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;

	ck_assert_int_eq(getaddrinfo("127.0.0.1", port, &hints, &ai), 0);
	return ai;
}

static bool never(void *arg)
{
	(void)arg;
	return false;
}

static bool after_two(void *arg)
{
	int *calls = arg;

	return ++*calls > 2;
}

START_TEST(test_connect)
{
	char port[8];
	int l = listener(8, port), fd, a;
	struct addrinfo *ai = lookup(port);

	fd = kvfs_tcp_connect(ai, kvfs_net_now_ms() + 2000, never, NULL);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
	ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
	a = accept(l, NULL, NULL);
	ck_assert_int_ge(a, 0);
	ck_assert_int_eq(send(fd, "x", 1, 0), 1);
	close(a);
	close(fd);
	freeaddrinfo(ai);
	/* nobody listens there any more */
	close(l);
	ai = lookup(port);
	ck_assert_int_eq(
		kvfs_tcp_connect(ai, kvfs_net_now_ms() + 2000, NULL, NULL),
		-ECONNREFUSED);
	freeaddrinfo(ai);
	ck_assert_int_eq(
		kvfs_tcp_connect(NULL, kvfs_net_now_ms() + 10, NULL, NULL),
		-EHOSTUNREACH);
}
END_TEST

/*
 * A listener that never accepts, with the smallest backlog: once its
 * queue is full the kernel drops further SYNs, so a connect hangs, and
 * only the deadline or the cancel ends it.
 */
START_TEST(test_deadline_and_cancel)
{
	enum { TRIES = 16 };
	int l, fds[TRIES], n = 0, rc = 0, calls = 0;
	struct addrinfo *ai;
	uint64_t t0;
	char port[8];

	l = listener(0, port);
	ai = lookup(port);
	while (n < TRIES) {
		rc = kvfs_tcp_connect(ai, kvfs_net_now_ms() + 300, NULL, NULL);
		if (rc < 0)
			break;
		fds[n++] = rc;
	}
	ck_assert_int_eq(rc, -ETIMEDOUT);
	t0 = kvfs_net_now_ms();
	rc = kvfs_tcp_connect(ai, t0 + 10000, after_two, &calls);
	ck_assert_int_eq(rc, -ECANCELED);
	ck_assert_int_eq(calls, 3);
	ck_assert_uint_lt(kvfs_net_now_ms() - t0, 5000);
	while (n)
		close(fds[--n]);
	freeaddrinfo(ai);
	close(l);
}
END_TEST

START_TEST(test_poll_until)
{
	int p[2], calls = 0;

	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(kvfs_poll_until(p[0], POLLIN, kvfs_net_now_ms() + 60,
					 never, NULL),
			 -ETIMEDOUT);
	ck_assert_int_eq(kvfs_poll_until(p[0], POLLIN,
					 kvfs_net_now_ms() + 10000, after_two,
					 &calls),
			 -ECANCELED);
	ck_assert_int_eq(write(p[1], "x", 1), 1);
	ck_assert_int_eq(kvfs_poll_until(p[0], POLLIN,
					 kvfs_net_now_ms() + 10000, NULL, NULL),
			 0);
	close(p[0]);
	close(p[1]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("net");
	TCase *tc = tcase_create("net");

	tu_init("net");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_split);
	tcase_add_test(tc, test_connect);
	tcase_add_test(tc, test_deadline_and_cancel);
	tcase_add_test(tc, test_poll_until);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
