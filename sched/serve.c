/*
 * serve.c - `kvconductor serve`'s state, listening sockets and block-event
 * listener (serve_int.h).
 *
 * The event listener is one thread polling the listening socket, a wake
 * pipe and up to SRV_MAX_EV_CONNS streams: kvfsd nodes are few and each
 * sends small batched frames, so one thread is enough, and bytes are fed
 * to each stream's decoder (event.h) with the scheduler's lock held only
 * for the feed itself.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "src/common/clock.h"
#include "sched/serve_int.h"

#define EV_READ_BUF 65536

double srv_now(const struct srv *srv)
{
	return (double)(kvfs_mono_ns() - srv->start_ns) / 1e9;
}

/* ---- instances --------------------------------------------------------- */

static uint32_t *nodes_copy(uint32_t n, const uint32_t *v, uint32_t base)
{
	uint32_t *c = malloc(n * sizeof(*c));

	if (!c)
		return NULL;
	for (uint32_t i = 0; i < n; i++)
		c[i] = v ? v[i] : base + i;
	return c;
}

static int create_locked(struct srv *srv, uint32_t np, const uint32_t *pnode,
			 uint32_t nd, const uint32_t *dnode)
{
	struct sched_setup su = { .nprefill = np,
				  .ndecode = nd,
				  .seed = srv->seed };
	uint32_t *pf, *dc;
	int rc = -ENOMEM;

	pf = nodes_copy(np, pnode, 0);
	if (!pf)
		return -ENOMEM;
	dc = nodes_copy(nd, dnode, np);
	if (!dc)
		goto out_free_pf;
	su.prefill_node = pf;
	su.decode_node = dc;
	rc = sched_create(&srv->cfg, &su, srv->pol, &srv->s);
	if (rc < 0)
		goto out_free_dc;
	srv->nprefill = np;
	srv->ndecode = nd;
	srv->pf_node = pf;
	srv->dc_node = dc;
	return 0;

out_free_dc:
	free(dc);
out_free_pf:
	free(pf);
	return rc;
}

int srv_set_instances(struct srv *srv, uint32_t np, const uint32_t *pnode,
		      uint32_t nd, const uint32_t *dnode)
{
	int rc;

	if (!np || !nd || np > SCHED_MAX_INSTANCES || nd > SCHED_MAX_INSTANCES)
		return -EINVAL;
	pthread_mutex_lock(&srv->lock);
	rc = srv->s ? -EEXIST : create_locked(srv, np, pnode, nd, dnode);
	pthread_mutex_unlock(&srv->lock);
	return rc;
}

/* ---- sockets ----------------------------------------------------------- */

static int parse_addr(const char *spec, struct sockaddr_in *sa)
{
	const char *colon = strrchr(spec, ':');
	char host[INET_ADDRSTRLEN];
	unsigned long port;
	char *end;

	if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof(host))
		return -EINVAL;
	memcpy(host, spec, colon - spec);
	host[colon - spec] = 0;
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (!colon[1] || *end || errno || port > 65535)
		return -EINVAL;
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		return -EINVAL;
	return 0;
}

int srv_listen(const char *spec, int *out)
{
	struct sockaddr_in sa;
	int fd, one = 1, rc;

	rc = parse_addr(spec, &sa);
	if (rc < 0)
		return rc;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* a restarted daemon must get its port back at once */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(fd, 64) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	*out = fd;
	return 0;
}

unsigned srv_port(int fd)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);

	if (getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
		return 0;
	return ntohs(sa.sin_port);
}

/* ---- block events ------------------------------------------------------ */

struct ev_conn {
	int fd;
	struct sched_ev_decoder dec;
};

struct ev_loop {
	struct srv *srv;
	struct ev_conn conn[SRV_MAX_EV_CONNS];
	uint32_t n;
	uint8_t buf[EV_READ_BUF];
};

/*
 * A stream is over, however it ended (the node closed it, it broke a
 * rule, or the daemon stops).  The blocks it announced are no longer
 * kept up to date: an evict would never reach us, and a node whose kvfsd
 * died holds nothing.  So they are forgotten, as a RESET would, until
 * the node's next stream resyncs them (event.h's STREAM rules) -- unless
 * that next stream is already here: a node that reconnected before its
 * old stream was seen to close has sent its RESET and inserts on the
 * new one, which must not be wiped.
 */
static void stream_over(struct ev_loop *l, uint32_t i)
{
	const struct sched_ev_decoder *d = &l->conn[i].dec;
	struct srv *srv = l->srv;

	if (!d->started)
		return;
	for (uint32_t j = 0; j < l->n; j++)
		if (j != i && l->conn[j].dec.started &&
		    l->conn[j].dec.node == d->node)
			return;
	pthread_mutex_lock(&srv->lock);
	if (srv->s)
		sched_node_reset(srv->s, d->node);
	pthread_mutex_unlock(&srv->lock);
}

static void conn_close(struct ev_loop *l, uint32_t i)
{
	stream_over(l, i);
	close(l->conn[i].fd);
	sched_ev_decoder_release(&l->conn[i].dec);
	l->conn[i] = l->conn[--l->n];
}

static void accept_one(struct ev_loop *l)
{
	int fd = accept4(l->srv->ev_fd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0)
		return;
	/* bounded: a stream too many is refused, its node will retry */
	if (l->n == SRV_MAX_EV_CONNS) {
		close(fd);
		return;
	}
	l->conn[l->n].fd = fd;
	sched_ev_decoder_init(&l->conn[l->n].dec);
	l->n++;
	pthread_mutex_lock(&l->srv->lock);
	l->srv->c.ev_conns++;
	pthread_mutex_unlock(&l->srv->lock);
}

/* false: close the stream (end, error, bad frame, no scheduler yet) */
static bool conn_read(struct ev_loop *l, struct ev_conn *c)
{
	struct srv *srv = l->srv;
	uint64_t frames, records;
	ssize_t n;
	int rc;

	n = read(c->fd, l->buf, sizeof(l->buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return true;
	if (n <= 0)
		return false;
	pthread_mutex_lock(&srv->lock);
	if (!srv->s) {
		/* no instances yet, so no index: the node retries later */
		pthread_mutex_unlock(&srv->lock);
		return false;
	}
	frames = c->dec.frames;
	records = c->dec.records;
	rc = sched_ev_feed(&c->dec, l->buf, (size_t)n, sched_ev_apply, srv->s);
	srv->c.ev_frames += c->dec.frames - frames;
	srv->c.ev_records += c->dec.records - records;
	/* the stream is closed, and its node's blocks forgotten, by
	 * conn_close() */
	if (rc < 0)
		srv->c.ev_errors++;
	pthread_mutex_unlock(&srv->lock);
	return rc == 0;
}

static void *ev_main(void *arg)
{
	struct ev_loop *l = arg;
	struct pollfd p[SRV_MAX_EV_CONNS + 2];

	for (;;) {
		p[0] = (struct pollfd){ .fd = l->srv->wake[0],
					.events = POLLIN };
		p[1] = (struct pollfd){ .fd = l->srv->ev_fd, .events = POLLIN };
		for (uint32_t i = 0; i < l->n; i++)
			p[i + 2] = (struct pollfd){ .fd = l->conn[i].fd,
						    .events = POLLIN };
		if (poll(p, l->n + 2, -1) < 0 && errno != EINTR)
			break;
		if (p[0].revents)
			break;
		/* backwards: conn_close moves the last stream into i */
		for (uint32_t i = l->n; i-- > 0;)
			if (p[i + 2].revents && !conn_read(l, &l->conn[i]))
				conn_close(l, i);
		if (p[1].revents & POLLIN)
			accept_one(l);
	}
	while (l->n)
		conn_close(l, l->n - 1);
	free(l);
	return NULL;
}

int srv_events_start(struct srv *srv)
{
	struct ev_loop *l;
	int rc;

	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->srv = srv;
	if (pipe2(srv->wake, O_CLOEXEC) < 0) {
		rc = -errno;
		goto out_free;
	}
	rc = -pthread_create(&srv->ev_thread, NULL, ev_main, l);
	if (rc < 0)
		goto out_close_pipe;
	srv->ev_running = true;
	return 0;

out_close_pipe:
	close(srv->wake[0]);
	close(srv->wake[1]);
out_free:
	free(l);
	return rc;
}

void srv_events_stop(struct srv *srv)
{
	ssize_t n;

	if (!srv->ev_running)
		return;
	do
		n = write(srv->wake[1], "x", 1);
	while (n < 0 && errno == EINTR);
	pthread_join(srv->ev_thread, NULL);
	close(srv->wake[0]);
	close(srv->wake[1]);
	srv->ev_running = false;
}
