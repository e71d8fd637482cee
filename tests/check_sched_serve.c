/*
 * check_sched_serve.c - sched/serve.c, the daemon's state without HTTP:
 * listen addresses, instances set once, and the event listener applying
 * frames made by event.h's own encoder over a loopback stream, closing a
 * stream on a bad frame, on a first frame that is not a RESET, and on
 * silence; idle sockets evicted for a real stream when all slots are
 * taken; requests expired.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tests/check_sched.h"
#include "kvstore/auth.h"
#include "src/common/clock.h"
#include "src/common/le.h"
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
	srv->ev_hello = SRV_DEF_EV_HELLO;
	srv->ev_idle = SRV_DEF_EV_IDLE;
	srv->request_ttl = SRV_DEF_REQUEST_TTL;
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

static void events_up(struct srv *srv)
{
	ck_assert_int_eq(srv_set_instances(srv, 2, NULL, 1, NULL), 0);
	ck_assert_int_eq(srv_listen("127.0.0.1:0", &srv->ev_fd), 0);
	ck_assert_int_eq(srv_events_start(srv), 0);
}

static void events_down(struct srv *srv)
{
	srv_events_stop(srv);
	close(srv->ev_fd);
	srv_teardown(srv);
}

/* 1: the conductor closed fd (EOF or reset) within 3 s */
static int closed_by_peer(int fd)
{
	struct timeval tv = { .tv_sec = 3 };
	char c;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return read(fd, &c, 1) == 0 || errno == ECONNRESET;
}

START_TEST(test_reset_first)
{
	struct srv srv;
	int fd;

	srv_setup(&srv);
	events_up(&srv);
	/* a node claiming blocks without its RESET: closed, nothing kept */
	fd = connect_to(srv.ev_fd);
	send_frame(fd, 1, 0, SCHED_EV_INSERT, 7, false);
	ck_assert(closed_by_peer(fd));
	close(fd);
	ck_assert_uint_eq(blocks_when(&srv, 0), 0);
	events_down(&srv);
	ck_assert_uint_eq(srv.c.ev_no_reset, 1);
	ck_assert_uint_eq(srv.c.ev_frames, 0);
}
END_TEST

static const uint8_t SECRET[] = "conductor-secret-0123456789";

static void wire_send(int fd, const struct kv_wire_msg *m)
{
	uint8_t buf[KV_WIRE_HDR_LEN + KV_WIRE_META_MAX];
	long n = kv_wire_encode(m, buf, sizeof(buf));

	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(write(fd, buf, (size_t)n), n);
}

static int wire_recv(int fd, struct kv_wire_msg *m)
{
	uint8_t hbuf[KV_WIRE_HDR_LEN], meta[KV_WIRE_META_MAX];
	struct kv_wire_hdr h;

	if (recv(fd, hbuf, sizeof(hbuf), MSG_WAITALL) != sizeof(hbuf) ||
	    kv_wire_hdr_decode(hbuf, sizeof(hbuf), &h) < 0 ||
	    recv(fd, meta, h.meta_len, MSG_WAITALL) != h.meta_len)
		return -1;
	return kv_wire_decode(&h, meta, h.meta_len, m);
}

/* a stream authenticated as node id, its sending tagger in t */
static int auth_stream(struct srv *srv, const char *id, struct kv_tagger *t)
{
	uint8_t ks[KV_AUTH_KEY_LEN], kr[KV_AUTH_KEY_LEN];
	struct kv_wire_msg out, in;
	struct kv_auth a;
	int fd = connect_to(srv->ev_fd);

	kv_auth_init(&a, KV_AUTH_CLIENT, SECRET, sizeof(SECRET) - 1, id);
	ck_assert_int_eq(kv_auth_client_hello(&a, SCHED_EV_AUTH_ID, &out), 0);
	wire_send(fd, &out);
	ck_assert_int_eq(wire_recv(fd, &in), 0);
	ck_assert_int_eq(kv_auth_client_answer(&a, &in, &out), 0);
	wire_send(fd, &out);
	ck_assert_int_eq(wire_recv(fd, &in), 0);
	ck_assert_int_eq(kv_auth_client_finish(&a, &in), 0);
	ck_assert_int_eq(kv_auth_keys(&a, ks, kr), 0);
	ck_assert_int_eq(kv_tagger_init(t, ks), 0);
	return fd;
}

/* one frame as a sealed record (event.h), its tag broken on request */
static void send_sealed(int fd, struct kv_tagger *t, uint16_t node,
			uint64_t seq, uint8_t op, uint8_t fill, bool bad)
{
	struct sched_ev_rec r = { .op = op };
	uint8_t buf[4 + 128 + KV_WIRE_TAG_LEN];
	long n;

	memset(r.hash, fill, sizeof(r.hash));
	n = sched_ev_encode(buf + 4, 128, node, seq, "m", &r, 1);
	ck_assert_int_gt(n, 0);
	kv_put_le32(buf, (uint32_t)n);
	kv_tagger_begin(t);
	kv_tagger_update(t, buf, 4 + (size_t)n);
	kv_tagger_finish(t, buf + 4 + n);
	if (bad)
		buf[4 + n] ^= 1;
	n += 4 + KV_WIRE_TAG_LEN;
	ck_assert_int_eq(write(fd, buf, (size_t)n), n);
}

/* --secret-file: plain streams, other secrets, forged records and
 * claims of another node get nothing */
START_TEST(test_auth_streams)
{
	struct kv_tagger t1, t2;
	struct kv_wire_msg out;
	struct kv_auth a;
	struct srv srv;
	int fd, f2;

	srv_setup(&srv);
	srv.secret = (uint8_t *)SECRET;
	srv.secret_len = sizeof(SECRET) - 1;
	events_up(&srv);
	/* a plain stream, however well formed */
	fd = connect_to(srv.ev_fd);
	send_frame(fd, 1, 0, SCHED_EV_RESET, 0, false);
	ck_assert(closed_by_peer(fd));
	close(fd);
	/* a HELLO under another secret: the client sees the server's proof
	 * fail and hangs up */
	fd = connect_to(srv.ev_fd);
	kv_auth_init(&a, KV_AUTH_CLIENT,
		     (const uint8_t *)"another-secret-abcdefgh", 23, "1");
	kv_auth_client_hello(&a, SCHED_EV_AUTH_ID, &out);
	wire_send(fd, &out);
	close(fd);
	/* node 1, authenticated: its events are applied */
	fd = auth_stream(&srv, "1", &t1);
	send_sealed(fd, &t1, 1, 0, SCHED_EV_RESET, 0, false);
	send_sealed(fd, &t1, 1, 1, SCHED_EV_INSERT, 7, false);
	ck_assert_uint_eq(blocks_when(&srv, 1), 1);
	/* node 2, authenticated, claiming node 1: closed, nothing applied */
	f2 = auth_stream(&srv, "2", &t2);
	send_sealed(f2, &t2, 1, 0, SCHED_EV_RESET, 0, false);
	ck_assert(closed_by_peer(f2));
	close(f2);
	kv_tagger_fini(&t2);
	ck_assert_uint_eq(blocks_when(&srv, 1), 1);
	/* a record whose tag fails ends node 1's stream */
	send_sealed(fd, &t1, 1, 2, SCHED_EV_INSERT, 8, true);
	ck_assert(closed_by_peer(fd));
	close(fd);
	kv_tagger_fini(&t1);
	ck_assert_uint_eq(blocks_when(&srv, 0), 0);
	srv.secret = NULL;
	events_down(&srv);
	ck_assert_uint_ge(srv.c.ev_auth_failures, 3);
}
END_TEST

START_TEST(test_deadlines)
{
	struct srv srv;
	int quiet, idle;

	srv_setup(&srv);
	srv.ev_hello = 0.2;
	srv.ev_idle = 0.4;
	events_up(&srv);
	quiet = connect_to(srv.ev_fd); /* never sends */
	idle = connect_to(srv.ev_fd);  /* sends its RESET, then nothing */
	send_frame(idle, 1, 0, SCHED_EV_RESET, 0, false);
	ck_assert(closed_by_peer(quiet));
	ck_assert(closed_by_peer(idle));
	close(quiet);
	close(idle);
	events_down(&srv);
	ck_assert_uint_eq(srv.c.ev_timeouts, 2);
}
END_TEST

START_TEST(test_evict_idle)
{
	int idle[SRV_MAX_EV_CONNS];
	struct srv srv;
	int fd;

	srv_setup(&srv);
	events_up(&srv);
	for (int i = 0; i < SRV_MAX_EV_CONNS; i++)
		idle[i] = connect_to(srv.ev_fd);
	/* every slot taken by a socket that sent nothing: a real node
	 * still gets in, and the oldest idle socket goes */
	fd = connect_to(srv.ev_fd);
	send_frame(fd, 1, 0, SCHED_EV_RESET, 0, false);
	send_frame(fd, 1, 1, SCHED_EV_INSERT, 7, false);
	ck_assert_uint_eq(blocks_when(&srv, 1), 1);
	ck_assert(closed_by_peer(idle[0]));
	for (int i = 0; i < SRV_MAX_EV_CONNS; i++)
		close(idle[i]);
	close(fd);
	events_down(&srv);
	ck_assert_uint_ge(srv.c.ev_evicted, 1);
}
END_TEST

START_TEST(test_no_evict_live)
{
	int live[SRV_MAX_EV_CONNS];
	struct srv srv;
	uint64_t frames = 0;
	int fd;

	srv_setup(&srv);
	events_up(&srv);
	/* every slot a stream that sent its RESET just now */
	for (int i = 0; i < SRV_MAX_EV_CONNS; i++) {
		live[i] = connect_to(srv.ev_fd);
		send_frame(live[i], 1, 0, SCHED_EV_RESET, 0, false);
	}
	for (int i = 0; i < 2000 && frames < SRV_MAX_EV_CONNS; i++) {
		pthread_mutex_lock(&srv.lock);
		frames = srv.c.ev_frames;
		pthread_mutex_unlock(&srv.lock);
		usleep(1000);
	}
	ck_assert_uint_eq(frames, SRV_MAX_EV_CONNS);
	/* a stranger cannot push a live node out: it is refused */
	fd = connect_to(srv.ev_fd);
	ck_assert(closed_by_peer(fd));
	close(fd);
	for (int i = 0; i < SRV_MAX_EV_CONNS; i++)
		close(live[i]);
	events_down(&srv);
	ck_assert_uint_eq(srv.c.ev_evicted, 0);
}
END_TEST

START_TEST(test_expire)
{
	struct sched_req r = { .input_tokens = 100, .output_tokens = 4 };
	struct sched_decision d;
	struct sched_load l;
	struct srv srv;

	srv_setup(&srv);
	srv.request_ttl = 0.05;
	ck_assert_int_eq(srv_set_instances(&srv, 1, NULL, 1, NULL), 0);
	ck_assert_int_eq(sched_schedule(srv.s, &r, srv_now(&srv), &d), 0);
	ck_assert_int_eq(d.verdict, SCHED_ACCEPT);
	srv_expire(&srv);
	ck_assert_uint_eq(srv.c.expired, 0);
	usleep(100000);
	srv_expire(&srv);
	ck_assert_uint_eq(srv.c.expired, 1);
	sched_get_load(srv.s, &l);
	ck_assert_uint_eq(l.live, 0);
	srv.request_ttl = 0; /* never */
	ck_assert_int_eq(sched_schedule(srv.s, &r, srv_now(&srv), &d), 0);
	usleep(10000);
	srv_expire(&srv);
	ck_assert_uint_eq(srv.c.expired, 1);
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
	tcase_add_test(tc, test_reset_first);
	tcase_add_test(tc, test_auth_streams);
	tcase_add_test(tc, test_deadlines);
	tcase_add_test(tc, test_evict_idle);
	tcase_add_test(tc, test_no_evict_live);
	tcase_add_test(tc, test_expire);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return cs_run(suite());
}
