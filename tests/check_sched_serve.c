/*
 * check_sched_serve.c - sched/serve.c, the daemon's state without HTTP:
 * listen addresses, instances set once, and the event listener applying
 * frames made by event.h's own encoder over a loopback stream, closing a
 * stream on a bad frame.
 */
#include "config.h"

#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tests/check_sched.h"
#include "src/common/clock.h"
#include "sched/serve_int.h"

static void srv_setup(struct srv *srv)
{
	memset(srv, 0, sizeof(*srv));
	pthread_mutex_init(&srv->lock, NULL);
	sched_config_default(&srv->cfg);
	srv->pol = sched_policy_find("lookahead");
	srv->seed = 1;
	srv->ev_fd = -1;
	srv->start_ns = kvfs_mono_ns();
}

static void srv_teardown(struct srv *srv)
{
	sched_destroy(srv->s);
	free(srv->pf_node);
	free(srv->dc_node);
	pthread_mutex_destroy(&srv->lock);
}

START_TEST(test_listen)
{
	static const char *const bad[] = {
		"",
		"127.0.0.1",
		":80",
		"127.0.0.1:",
		"127.0.0.1:65536",
		"localhost:80",
		"127.0.0.1:8x",
		"::1:80",
	};
	int fd;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(srv_listen(bad[i], &fd) == -EINVAL, "%s", bad[i]);
	ck_assert_int_eq(srv_listen("127.0.0.1:0", &fd), 0);
	ck_assert_uint_gt(srv_port(fd), 0);
	close(fd);
}
END_TEST

START_TEST(test_instances_once)
{
	uint32_t pf[2] = { 4, 5 }, dc[1] = { 9 };
	struct srv srv;

	srv_setup(&srv);
	ck_assert_int_eq(srv_set_instances(&srv, 0, NULL, 1, NULL), -EINVAL);
	ck_assert_int_eq(
		srv_set_instances(&srv, 1, NULL, SCHED_MAX_INSTANCES + 1, NULL),
		-EINVAL);
	ck_assert_ptr_null(srv.s);
	ck_assert_int_eq(srv_set_instances(&srv, 2, pf, 1, dc), 0);
	ck_assert_uint_eq(srv.pf_node[1], 5);
	ck_assert_uint_eq(srv.dc_node[0], 9);
	ck_assert_int_eq(srv_set_instances(&srv, 1, NULL, 1, NULL), -EEXIST);
	ck_assert_uint_eq(srv.nprefill, 2);
	srv_teardown(&srv);
}
END_TEST

static int connect_to(int lfd)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	sa.sin_port = htons((uint16_t)srv_port(lfd));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void send_frame(int fd, uint16_t node, uint64_t seq, uint8_t op,
		       uint8_t fill, bool corrupt)
{
	struct sched_ev_rec r = { .op = op };
	uint8_t buf[128];
	long n;

	memset(r.hash, fill, sizeof(r.hash));
	n = sched_ev_encode(buf, sizeof(buf), node, seq, "m", &r, 1);
	ck_assert_int_gt(n, 0);
	if (corrupt)
		buf[n - 1] ^= 0xff;
	ck_assert_int_eq(write(fd, buf, (size_t)n), n);
}

/* the index's block count once it reaches want, polled for 2 s at most */
static size_t blocks_when(struct srv *srv, size_t want)
{
	struct timespec ms = { 0, 1000000 };
	size_t n = 0;

	for (int i = 0; i < 2000; i++) {
		pthread_mutex_lock(&srv->lock);
		n = sched_blocks(srv->s);
		pthread_mutex_unlock(&srv->lock);
		if (n == want)
			break;
		nanosleep(&ms, NULL);
	}
	return n;
}

START_TEST(test_events)
{
	struct srv srv;
	char c;
	int fd;

	srv_setup(&srv);
	ck_assert_int_eq(srv_set_instances(&srv, 2, NULL, 1, NULL), 0);
	ck_assert_int_eq(srv_listen("127.0.0.1:0", &srv.ev_fd), 0);
	ck_assert_int_eq(srv_events_start(&srv), 0);

	fd = connect_to(srv.ev_fd);
	send_frame(fd, 1, 0, SCHED_EV_RESET, 0, false);
	send_frame(fd, 1, 1, SCHED_EV_INSERT, 7, false);
	send_frame(fd, 1, 2, SCHED_EV_INSERT, 8, false);
	ck_assert_uint_eq(blocks_when(&srv, 2), 2);
	ck_assert_uint_eq(sched_node_blocks(srv.s, 1), 2);

	/* a broken CRC ends the stream and drops the node's blocks */
	send_frame(fd, 1, 3, SCHED_EV_INSERT, 9, true);
	ck_assert_int_eq(read(fd, &c, 1), 0);
	ck_assert_uint_eq(blocks_when(&srv, 0), 0);
	close(fd);

	srv_events_stop(&srv);
	ck_assert_uint_eq(srv.c.ev_conns, 1);
	ck_assert_uint_eq(srv.c.ev_frames, 3);
	ck_assert_uint_eq(srv.c.ev_errors, 1);
	close(srv.ev_fd);
	srv_teardown(&srv);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("sched_serve");
	TCase *tc = tcase_create("serve");

	tcase_add_test(tc, test_listen);
	tcase_add_test(tc, test_instances_once);
	tcase_add_test(tc, test_events);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return cs_run(suite());
}
