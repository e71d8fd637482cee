/*
 * xfer.c - the transfer engine: open/close, transport choice, connection
 * cache, handshake, accept loop, request dispatch, the public calls.
 *
 * The handshake runs on plain blocking sockets with poll() deadlines
 * (four small frames); io_uring takes over once the peer is proven.
 * Nothing a peer sends before it has proven the secret is acted upon
 * beyond the HELLO, and nothing is sent to it but the CHALLENGE.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "kvstore/auth.h"
#include "src/common/log.h"
#include "src/common/net.h"
#include "kvstore/xfer_int.h"

uint64_t xfer_now_ms(void)
{
	return kvfs_net_now_ms();
}

int kv_transport_parse(const char *s, enum kv_transport *t)
{
	if (!s || !t)
		return -EINVAL;
	if (strcmp(s, "auto") == 0)
		*t = KV_TRANSPORT_AUTO;
	else if (strcmp(s, "tcp") == 0)
		*t = KV_TRANSPORT_TCP;
	else if (strcmp(s, "rdma") == 0)
		*t = KV_TRANSPORT_RDMA;
	else
		return -EINVAL;
	return 0;
}

/* ---- addresses ----------------------------------------------------- */

static int resolve(const char *s, bool passive, struct addrinfo **res)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = passive ? AI_PASSIVE : 0,
	};
	char host[256], port[16];
	int rc;

	rc = kvfs_split_hostport(s, host, sizeof(host), port, sizeof(port));
	if (rc < 0) {
		kvfs_err("xfer: bad address '%s' (want HOST:PORT)", s);
		return rc;
	}
	rc = getaddrinfo(host, port, &hints, res);
	if (rc != 0) {
		kvfs_err("xfer: %s: %s", s, gai_strerror(rc));
		return rc == EAI_SYSTEM ? -errno : -EINVAL;
	}
	return 0;
}

static int listen_open(struct kv_xfer *x, const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct addrinfo *res, *ai;
	int fd = -1, rc, one = 1;

	rc = resolve(addr, true, &res);
	if (rc < 0)
		return rc;
	rc = -EADDRNOTAVAIL;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    listen(fd, 128) == 0)
			break;
		rc = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		kvfs_err("xfer: cannot listen on %s: %s", addr, strerror(-rc));
		return rc;
	}
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		x->port =
			ntohs(ss.ss_family == AF_INET6
				      ? ((struct sockaddr_in6 *)&ss)->sin6_port
				      : ((struct sockaddr_in *)&ss)->sin_port);
	x->lfd = fd;
	return 0;
}

static bool stopping(void *arg)
{
	struct kv_xfer *x = arg;
	bool stop;

	pthread_mutex_lock(&x->lock);
	stop = x->stopping;
	pthread_mutex_unlock(&x->lock);
	return stop;
}

/* poll fd for ev until deadline, watching x->stopping */
static int wait_fd(struct kv_xfer *x, int fd, short ev, uint64_t deadline)
{
	return kvfs_poll_until(fd, ev, deadline, stopping, x);
}

static void sock_tune(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* "ID@HOST:PORT": the address part, and ID into id ("" when none) */
static const char *peer_split(const char *peer, char id[KV_WIRE_ID_LEN])
{
	const char *at = strchr(peer, '@');
	size_t n = at ? (size_t)(at - peer) : 0;

	id[0] = '\0';
	if (!at)
		return peer;
	if (n == 0 || n >= KV_WIRE_ID_LEN)
		return NULL;
	memcpy(id, peer, n);
	id[n] = '\0';
	return at + 1;
}

static int dial(struct kv_xfer *x, const char *addr, uint64_t deadline)
{
	struct addrinfo *res;
	int fd;

	fd = resolve(addr, false, &res);
	if (fd < 0)
		return fd;
	fd = kvfs_tcp_connect(res, deadline, stopping, x);
	freeaddrinfo(res);
	if (fd >= 0)
		sock_tune(fd);
	return fd;
}

/* ---- handshake I/O (blocking socket, poll deadlines) ---------------- */

static int hs_send(struct kv_xfer *x, int fd, const struct kv_wire_msg *m,
		   uint64_t deadline)
{
	uint8_t buf[KV_WIRE_HDR_LEN + KV_WIRE_META_MAX];
	long n = kv_wire_encode(m, buf, sizeof(buf));
	size_t off = 0;
	int rc;

	if (n < 0)
		return (int)n;
	while (off < (size_t)n) {
		ssize_t w;

		rc = wait_fd(x, fd, POLLOUT, deadline);
		if (rc < 0)
			return rc;
		w = send(fd, buf + off, (size_t)n - off,
			 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EPIPE;
		off += (size_t)w;
	}
	return 0;
}

static int hs_read(struct kv_xfer *x, int fd, void *buf, size_t len,
		   uint64_t deadline)
{
	size_t got = 0;
	int rc;

	while (got < len) {
		ssize_t r;

		rc = wait_fd(x, fd, POLLIN, deadline);
		if (rc < 0)
			return rc;
		r = recv(fd, (uint8_t *)buf + got, len - got, MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r == 0)
			return -ECONNRESET;
		if (r < 0)
			return -errno;
		got += (size_t)r;
	}
	return 0;
}

/* one handshake frame; only the type wanted (or fail) is accepted */
static int hs_recv(struct kv_xfer *x, int fd, struct kv_wire_msg *m,
		   uint8_t want, uint8_t alt, uint64_t deadline)
{
	uint8_t hbuf[KV_WIRE_HDR_LEN], meta[KV_WIRE_META_MAX];
	struct kv_wire_hdr h;
	int rc;

	rc = hs_read(x, fd, hbuf, sizeof(hbuf), deadline);
	if (rc < 0)
		return rc;
	rc = kv_wire_hdr_decode(hbuf, sizeof(hbuf), &h);
	if (rc == 0 && h.type != want && h.type != alt)
		rc = -EBADMSG;
	if (rc < 0)
		goto bad;
	rc = hs_read(x, fd, meta, h.meta_len, deadline);
	if (rc < 0)
		return rc;
	rc = kv_wire_decode(&h, meta, h.meta_len, m);
	if (rc < 0)
		goto bad;
	return 0;
bad:
	atomic_fetch_add(&x->st.bad_frames, 1);
	return -EBADMSG;
}

static uint32_t my_transports(const struct kv_xfer *x)
{
	return KV_WIRE_TP_TCP |
	       (x->ops == &xfer_rdma_ops ? KV_WIRE_TP_RDMA : 0u);
}

static int client_handshake(struct kv_xfer *x, int fd, const char *peer,
			    const char *target, uint64_t deadline,
			    uint32_t *peer_tp, struct kv_auth *a)
{
	struct kv_wire_msg out, in;
	int rc;

	kv_auth_init(a, KV_AUTH_CLIENT, x->secret, x->secret_len, x->node);
	rc = kv_auth_client_hello(a, target, &out);
	if (rc < 0)
		return rc;
	out.transports = my_transports(x);
	rc = hs_send(x, fd, &out, deadline);
	if (rc == 0)
		rc = hs_recv(x, fd, &in, KV_WIRE_CHALLENGE, KV_WIRE_AUTH_FAIL,
			     deadline);
	if (rc == 0 && in.type == KV_WIRE_AUTH_FAIL) {
		kvfs_warn("xfer: %s is not node '%s'", peer, target);
		return -EACCES;
	}
	if (rc == 0)
		rc = kv_auth_client_answer(a, &in, &out);
	if (rc == -EACCES) {
		kvfs_warn("xfer: %s does not know the cluster secret, or is "
			  "not node '%s'",
			  peer, target);
		return rc;
	}
	if (rc == 0)
		rc = hs_send(x, fd, &out, deadline);
	if (rc == 0)
		rc = hs_recv(x, fd, &in, KV_WIRE_AUTH_OK, KV_WIRE_AUTH_FAIL,
			     deadline);
	if (rc == 0)
		rc = kv_auth_client_finish(a, &in);
	if (rc == -EACCES)
		kvfs_warn("xfer: %s refused our secret", peer);
	else if (rc == -ECONNRESET)
		rc = -EACCES; /* a server hangs up on a bad proof, or on a
			       * HELLO for another node */
	*peer_tp = in.transports;
	return rc;
}

static int server_handshake(struct xconn *c, uint64_t deadline)
{
	struct kv_xfer *x = c->x;
	struct kv_wire_msg in, out;
	struct kv_auth a;
	int rc;

	kv_auth_init(&a, KV_AUTH_SERVER, x->secret, x->secret_len, x->node);
	rc = hs_recv(x, c->fd, &in, KV_WIRE_HELLO, 0, deadline);
	if (rc < 0)
		return rc;
	c->peer_transports = in.transports;
	rc = kv_auth_server_challenge(&a, &in, &out);
	if (rc == 0)
		rc = hs_send(x, c->fd, &out, deadline);
	if (rc == 0)
		rc = hs_recv(x, c->fd, &in, KV_WIRE_AUTH, 0, deadline);
	if (rc == 0)
		rc = kv_auth_server_verify(&a, &in);
	if (rc == -EACCES) {
		memset(&out, 0, sizeof(out));
		out.type = KV_WIRE_AUTH_FAIL;
		hs_send(x, c->fd, &out, deadline);
		return rc;
	}
	if (rc == 0)
		rc = xconn_tags(c, &a);
	if (rc < 0)
		return rc;
	memset(&out, 0, sizeof(out));
	out.type = KV_WIRE_AUTH_OK;
	out.transports = my_transports(x);
	return hs_send(x, c->fd, &out, deadline);
}

int xconn_tags(struct xconn *c, const struct kv_auth *a)
{
	uint8_t ks[KV_AUTH_KEY_LEN], kr[KV_AUTH_KEY_LEN];
	int rc = kv_auth_keys(a, ks, kr);

	if (rc == 0)
		rc = kv_tagger_init(&c->stag, ks);
	if (rc == 0) {
		rc = kv_tagger_init(&c->rtag, kr);
		if (rc < 0)
			kv_tagger_fini(&c->stag);
	}
	OPENSSL_cleanse(ks, sizeof(ks));
	OPENSSL_cleanse(kr, sizeof(kr));
	if (rc < 0)
		return rc;
	snprintf(c->peer_id, sizeof(c->peer_id), "%s", kv_auth_peer(a));
	c->tagged = true;
	return 0;
}

/* ---- blocks -------------------------------------------------------- */

int xfer_pin_block(struct kv_xfer *x, const char *ns, const uint8_t *hash,
		   struct kv_ref *ref, struct kv_wire_msg *m)
{
	struct kv_store *st = x->store;
	struct kv_block_info bi;
	uint32_t id, bt;
	int rc;

	rc = kv_store_ns_find(st, ns, &id, &bt);
	if (rc < 0)
		return rc;
	rc = kv_store_get(st, id, hash, ref);
	if (rc < 0)
		return rc;
	/* bigger than a slot: no peer's slot takes it (store.h, spilled) */
	rc = ref->spilled ? -EFBIG : kv_store_stat(st, id, hash, &bi);
	if (rc < 0) {
		kv_store_put(st, ref);
		return rc;
	}
	snprintf(m->ns, sizeof(m->ns), "%s", ns);
	memcpy(m->hash, hash, KVFS_HASH_LEN);
	m->size = ref->size;
	m->crc = bi.checksum;
	m->block_tokens = bt;
	m->ns_open = kv_store_ns_layout(st, id) == KV_LAYOUT_OPEN;
	m->has_parent = bi.has_parent;
	memcpy(m->parent, bi.parent, KVFS_HASH_LEN);
	return 0;
}

int xfer_block_req(struct xconn *c, struct xreq *r, uint8_t type,
		   const char *ns, const uint8_t *hash)
{
	struct kv_wire_msg m = { .type = type };
	int rc;

	snprintf(m.ns, sizeof(m.ns), "%s", ns);
	memcpy(m.hash, hash, KVFS_HASH_LEN);
	r->ns = ns;
	r->hash = hash;
	rc = xconn_track(c, r, type);
	if (rc < 0)
		return rc;
	m.id = r->id;
	xio_send_msg(c, &m, xfer_now_ms() + c->x->timeout_ms);
	return 0;
}

/* ---- connections --------------------------------------------------- */

static bool peer_is_local(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
		return false;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;

		return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
	}
	if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;

		return IN6_IS_ADDR_LOOPBACK(&a->sin6_addr) ||
		       (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) &&
			a->sin6_addr.s6_addr[12] == 127);
	}
	return false;
}

static struct xconn *xconn_new(struct kv_xfer *x, int fd, const char *peer,
			       bool server)
{
	struct xconn *c = calloc(1, sizeof(*c));
	pthread_condattr_t ca;

	if (!c)
		return NULL;
	c->x = x;
	c->fd = fd;
	c->local = peer_is_local(fd);
	c->server = server;
	c->ops = &xfer_tcp_ops;
	c->next_id = 1;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->send_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &ca);
	pthread_condattr_destroy(&ca);
	atomic_init(&c->finished, false);
	atomic_init(&c->stop, false);
	return c;
}

/* joins the thread and frees; nobody else may hold c */
static void xconn_free(struct xconn *c)
{
	atomic_store(&c->stop, true);
	xconn_kill(c, -ECANCELED);
	if (c->thread_started)
		pthread_join(c->thread, NULL);
	/* the transport state of either side (a client conn that uses
	 * rdma, or a served conn a peer set up rdma on) */
	if (c->tp && c->x->ops->conn_fini)
		c->x->ops->conn_fini(c);
	xio_fini(c);
	if (c->tagged) {
		kv_tagger_fini(&c->stag);
		kv_tagger_fini(&c->rtag);
	}
	if (c->fd >= 0)
		close(c->fd);
	if (c->counted)
		atomic_fetch_sub(&c->x->st.conns, 1);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->send_lock);
	free(c);
}

void xconn_kill(struct xconn *c, int why)
{
	pthread_mutex_lock(&c->lock);
	if (!c->dead) {
		c->dead = why < 0 ? why : -ECONNRESET;
		for (struct xreq *r = c->pending; r; r = r->next) {
			r->result = c->dead;
			r->done = true;
		}
		c->pending = NULL;
		pthread_cond_broadcast(&c->cond);
	}
	pthread_mutex_unlock(&c->lock);
	if (c->fd >= 0)
		shutdown(c->fd, SHUT_RDWR);
}

int xconn_track(struct xconn *c, struct xreq *r, uint8_t type)
{
	int rc;

	r->type = type;
	r->done = false;
	r->claimed = false;
	r->result = 0;
	pthread_mutex_lock(&c->lock);
	rc = c->dead;
	if (!rc) {
		r->id = c->next_id++;
		r->next = c->pending;
		c->pending = r;
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int xconn_wait(struct xconn *c, struct xreq *r, uint64_t deadline)
{
	struct timespec ts;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	{
		uint64_t now = xfer_now_ms(), left;

		left = deadline > now ? deadline - now : 0;
		ts.tv_sec += (time_t)(left / 1000);
		ts.tv_nsec += (long)(left % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
	}
	pthread_mutex_lock(&c->lock);
	while (!r->done)
		if (pthread_cond_timedwait(&c->cond, &c->lock, &ts) ==
		    ETIMEDOUT)
			break;
	if (!r->done) {
		struct xreq **pp;

		for (pp = &c->pending; *pp; pp = &(*pp)->next)
			if (*pp == r) {
				*pp = r->next;
				break;
			}
		pthread_mutex_unlock(&c->lock);
		/* a peer that stops answering is not asked again on this
		 * connection: the next call dials anew */
		kvfs_warn("xfer: %s: no answer in %u ms", c->peer,
			  c->x->timeout_ms);
		xconn_kill(c, -ETIMEDOUT);
		return -ETIMEDOUT;
	}
	rc = r->result;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int xconn_call(struct xconn *c, struct kv_wire_msg *m, uint8_t reply_type,
	       struct kv_wire_msg *reply, uint64_t deadline)
{
	struct xreq r;
	int rc;

	rc = xconn_track(c, &r, m->type);
	if (rc < 0)
		return rc;
	m->id = r.id;
	xio_send_msg(c, m, deadline); /* a failure fails r */
	rc = xconn_wait(c, &r, deadline);
	if (rc == 0 && r.reply.type != reply_type)
		rc = -EBADMSG;
	if (rc == 0 && reply)
		*reply = r.reply;
	return rc;
}

int xconn_send_err(struct xconn *c, uint64_t id, int e)
{
	struct kv_wire_msg m = { .type = KV_WIRE_ERR, .id = id };

	m.err = (e > 0 && e < 4096) ? (uint32_t)e : EIO;
	return xio_send_msg(c, &m, xfer_now_ms() + c->x->timeout_ms);
}

int xfer_ns_ensure(struct kv_xfer *x, const char *ns, uint32_t block_tokens,
		   bool open, uint32_t *id)
{
	uint32_t bt;
	int rc;

	rc = kv_store_ns_find(x->store, ns, id, &bt);
	if (rc == -ENOENT) {
		/* the sender's layout: an open namespace's keys are paths */
		rc = kv_store_ns_create_layout(
			x->store, ns, block_tokens,
			open ? KV_LAYOUT_OPEN : KV_LAYOUT_CHAIN, id);
		if (rc == -EEXIST) /* made meanwhile by another thread */
			rc = kv_store_ns_find(x->store, ns, id, &bt);
		else
			bt = block_tokens;
	}
	/* a namespace of another block size is another namespace: its
	 * blocks cover other tokens, and must not be mixed into ours */
	if (rc == 0 && block_tokens && bt != block_tokens) {
		static _Atomic uint64_t warned_ms; /* one line in 10 s */
		uint64_t now = xfer_now_ms(), last = atomic_load(&warned_ms);

		if (now - last >= 10000 &&
		    atomic_compare_exchange_strong(&warned_ms, &last, now))
			kvfs_warn("xfer: refused a block of namespace %s with "
				  "%u tokens a block: ours has %u",
				  ns, block_tokens, bt);
		rc = -EMEDIUMTYPE;
	}
	return rc;
}

void xfer_inserted(struct kv_xfer *x, const char *ns, const uint8_t *hash)
{
	if (x->on_insert)
		x->on_insert(x->cb_arg, ns, hash);
}

/* ---- serving ------------------------------------------------------- */

static int serve_get(struct xconn *c, const struct kv_wire_msg *m)
{
	uint8_t buf[KV_WIRE_HDR_LEN + KV_WIRE_META_MAX];
	struct kv_store *st = c->x->store;
	struct kv_wire_msg out = { .type = KV_WIRE_GET_OK, .id = m->id };
	struct kv_block_info bi;
	struct kv_ref ref;
	uint32_t id, bt;
	long n;
	int rc;

	rc = kv_store_ns_find(st, m->ns, &id, &bt);
	if (rc == 0)
		rc = kv_store_get(st, id, m->hash, &ref);
	if (rc < 0)
		return xconn_send_err(c, m->id, -rc);
	/* bigger than a slot: no peer's slot takes it (store.h, spilled) */
	rc = ref.spilled ? -EFBIG : kv_store_stat(st, id, m->hash, &bi);
	if (rc < 0) {
		kv_store_put(st, &ref);
		return xconn_send_err(c, m->id, -rc);
	}
	out.size = ref.size;
	out.crc = bi.checksum;
	out.block_tokens = bt;
	out.ns_open = kv_store_ns_layout(st, id) == KV_LAYOUT_OPEN;
	out.has_parent = bi.has_parent;
	memcpy(out.parent, bi.parent, KVFS_HASH_LEN);
	n = kv_wire_encode(&out, buf, sizeof(buf));
	/* counted before the send: the peer may be done before it returns */
	atomic_fetch_add(&c->x->st.served_bytes, ref.size);
	if (n < 0)
		rc = (int)n;
	else
		rc = xio_send(c, buf, (size_t)n, ref.data, ref.size,
			      xfer_now_ms() + c->x->timeout_ms);
	if (rc < 0)
		atomic_fetch_sub(&c->x->st.served_bytes, ref.size);
	kv_store_put(st, &ref);
	return rc;
}

static int serve_has(struct xconn *c, const struct kv_wire_msg *m)
{
	struct kv_wire_msg out = { .type = KV_WIRE_HAS_OK, .id = m->id };
	struct kv_block_info bi;
	uint32_t id, bt;

	if (kv_store_ns_find(c->x->store, m->ns, &id, &bt) == 0 &&
	    kv_store_stat(c->x->store, id, m->hash, &bi) == 0)
		out.present = 1;
	return xio_send_msg(c, &out, xfer_now_ms() + c->x->timeout_ms);
}

int xfer_serve(struct xconn *c, const struct kv_wire_msg *m)
{
	struct kv_wire_msg out = { .type = KV_WIRE_PONG, .id = m->id };

	atomic_fetch_add(&c->x->st.served, 1);
	switch (m->type) {
	case KV_WIRE_GET:
		return serve_get(c, m);
	case KV_WIRE_HAS:
		return serve_has(c, m);
	case KV_WIRE_PING:
		return xio_send_msg(c, &out, xfer_now_ms() + c->x->timeout_ms);
	default:
		atomic_fetch_sub(&c->x->st.served, 1);
		if (c->x->ops->serve)
			return c->x->ops->serve(c, m);
		return -EBADMSG;
	}
}

/* " (N more held back)" after a rate-limited line, or "" */
static const char *held_back(uint64_t missed, char *buf, size_t len)
{
	buf[0] = '\0';
	if (missed)
		snprintf(buf, len, " (%" PRIu64 " more held back)", missed);
	return buf;
}

static const char *hs_why(int rc)
{
	if (rc == -EACCES)
		return "wrong secret";
	if (rc == -ETIMEDOUT)
		return "no handshake in time";
	return strerror(-rc);
}

static void *server_thread(void *arg)
{
	struct xconn *c = arg;
	struct kv_xfer *x = c->x;
	char more[48];
	uint64_t missed;
	bool evicted;
	int rc;

	rc = server_handshake(c, c->since_ms + x->hs_ms);
	pthread_mutex_lock(&x->lock);
	c->in_hs = false;
	evicted = c->evicted;
	pthread_mutex_unlock(&x->lock);
	/* closed to make room just as it got through: it is gone all the
	 * same (the accept path counted and said it) */
	if (rc == 0 && evicted)
		rc = -ECONNABORTED;
	if (rc < 0) {
		if (rc == -ECANCELED || evicted)
			goto out;
		atomic_fetch_add(&x->st.auth_failures, 1);
		if (kvfs_ratelimit(&x->warn_auth, KV_XFER_WARN_MS, &missed))
			kvfs_warn("xfer: peer %s refused: %s%s", c->peer,
				  hs_why(rc),
				  held_back(missed, more, sizeof(more)));
		goto out;
	}
	if (xio_init(c) < 0)
		goto out;
	c->counted = true;
	atomic_fetch_add(&x->st.conns, 1);
	xio_reader(c);
out:
	xconn_kill(c, rc < 0 ? rc : -ECONNRESET);
	atomic_store(&c->finished, true);
	return NULL;
}

static void peer_name(const struct sockaddr_storage *ss, char *out, size_t len)
{
	char host[128] = "?", port[16] = "?";

	getnameinfo((const struct sockaddr *)ss, sizeof(*ss), host,
		    sizeof(host), port, sizeof(port),
		    NI_NUMERICHOST | NI_NUMERICSERV);
	snprintf(out, len, "%s:%s", host, port);
}

/* under x->lock: unlink served conns whose thread ended (all: every
 * one) and return them; the caller frees them without the lock, since a
 * thread still running may want it */
static struct xconn *reap_served(struct kv_xfer *x, bool all)
{
	struct xconn **pp = &x->served, *gone = NULL;

	while (*pp) {
		struct xconn *c = *pp;

		if (all || atomic_load(&c->finished)) {
			*pp = c->next;
			c->next = gone;
			gone = c;
		} else {
			pp = &c->next;
		}
	}
	return gone;
}

static void free_list(struct xconn *c)
{
	while (c) {
		struct xconn *next = c->next;

		xconn_free(c);
		c = next;
	}
}

/*
 * Under x->lock: may one more accepted connection start its handshake?
 * Every served connection costs a thread, so the caps count the served
 * list itself.  At KV_XFER_UNAUTH_MAX waiting, the oldest is shut so the
 * new one gets in: a peer that holds connections open saying nothing
 * only ever holds the newest, and a real peer gets through it in a
 * round trip.  Those being shut still hold their thread until it sees
 * the shutdown, so they count too (twice the cap), as do the
 * authenticated (KV_XFER_CONN_MAX); past either the new one is refused.
 */
static bool admit(struct kv_xfer *x, const char *name)
{
	unsigned all = 0, in_hs = 0, waiting = 0;
	struct xconn *c, *oldest = NULL;
	char more[48];
	uint64_t missed;

	for (c = x->served; c; c = c->next) {
		all++;
		if (!c->in_hs)
			continue;
		in_hs++;
		if (c->evicted)
			continue;
		waiting++;
		/* newest first: <= ends on the oldest of equal times */
		if (!oldest || c->since_ms <= oldest->since_ms)
			oldest = c;
	}
	if (all >= KV_XFER_CONN_MAX || in_hs >= 2 * KV_XFER_UNAUTH_MAX) {
		atomic_fetch_add(&x->st.refused, 1);
		if (kvfs_ratelimit(&x->warn_cap, KV_XFER_WARN_MS, &missed))
			kvfs_warn("xfer: refused %s: %u peer connections, %u "
				  "unauthenticated%s",
				  name, all, in_hs,
				  held_back(missed, more, sizeof(more)));
		return false;
	}
	if (waiting >= KV_XFER_UNAUTH_MAX) {
		oldest->evicted = true;
		shutdown(oldest->fd, SHUT_RDWR);
		atomic_fetch_add(&x->st.refused, 1);
		if (kvfs_ratelimit(&x->warn_cap, KV_XFER_WARN_MS, &missed))
			kvfs_warn("xfer: %u peers not authenticated: closed "
				  "%s, the oldest%s",
				  waiting, oldest->peer,
				  held_back(missed, more, sizeof(more)));
	}
	return true;
}

static void *accept_thread(void *arg)
{
	struct kv_xfer *x = arg;

	for (;;) {
		struct pollfd p = { .fd = x->lfd, .events = POLLIN };
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		char name[XFER_PEER_MAX];
		struct xconn *c, *gone;
		bool stop;
		int fd;

		pthread_mutex_lock(&x->lock);
		stop = x->stopping;
		gone = reap_served(x, false);
		pthread_mutex_unlock(&x->lock);
		free_list(gone);
		if (stop)
			break;
		if (poll(&p, 1, XFER_TICK_MS) <= 0)
			continue;
		fd = accept4(x->lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		sock_tune(fd);
		peer_name(&ss, name, sizeof(name));
		c = xconn_new(x, fd, name, true);
		if (!c) {
			close(fd);
			continue;
		}
		pthread_mutex_lock(&x->lock);
		c->in_hs = true;
		c->since_ms = xfer_now_ms();
		if (x->stopping || !admit(x, name) ||
		    pthread_create(&c->thread, NULL, server_thread, c) != 0) {
			pthread_mutex_unlock(&x->lock);
			xconn_free(c);
			continue;
		}
		c->thread_started = true;
		c->next = x->served;
		x->served = c;
		pthread_mutex_unlock(&x->lock);
	}
	return NULL;
}

static void *client_thread(void *arg)
{
	xio_reader(arg);
	return NULL;
}

/* drop one reference (x->lock not held) */
static void conn_put(struct kv_xfer *x, struct xconn *c)
{
	bool last;

	pthread_mutex_lock(&x->lock);
	last = --c->refs == 0;
	pthread_mutex_unlock(&x->lock);
	if (last)
		xconn_free(c);
}

/* under x->lock: take c out of the cache, returning the cache's ref */
static bool uncache(struct kv_xfer *x, struct xconn *c)
{
	for (struct xconn **pp = &x->clients; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			return --c->refs == 0;
		}
	return false;
}

static struct xconn *cache_find(struct kv_xfer *x, const char *peer)
{
	struct xconn *c, *dead = NULL;

	pthread_mutex_lock(&x->lock);
	for (c = x->clients; c; c = c->next) {
		int d;

		if (strcmp(c->peer, peer) != 0)
			continue;
		pthread_mutex_lock(&c->lock);
		d = c->dead;
		pthread_mutex_unlock(&c->lock);
		if (!d) {
			c->refs++;
			break;
		}
		dead = c;
	}
	if (!c && dead && !uncache(x, dead))
		dead = NULL;
	pthread_mutex_unlock(&x->lock);
	if (!c && dead)
		xconn_free(dead);
	return c;
}

static int conn_get(struct kv_xfer *x, const char *peer, uint64_t deadline,
		    struct xconn **out)
{
	char target[KV_WIRE_ID_LEN];
	struct xconn *c, *old;
	struct kv_auth a;
	const char *addr;
	uint32_t tp = 0;
	int fd, rc;

	if (!peer || strlen(peer) >= XFER_PEER_MAX)
		return -EINVAL;
	addr = peer_split(peer, target);
	if (!addr)
		return -EINVAL;
	c = cache_find(x, peer);
	if (c) {
		*out = c;
		return 0;
	}
	fd = dial(x, addr, deadline);
	if (fd < 0)
		return fd;
	rc = client_handshake(x, fd, peer, target, deadline, &tp, &a);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	c = xconn_new(x, fd, peer, false);
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->peer_transports = tp;
	rc = xconn_tags(c, &a);
	if (rc == 0)
		rc = xio_init(c);
	if (rc < 0)
		goto out_free;
	c->counted = true;
	atomic_fetch_add(&x->st.conns, 1);
	if (pthread_create(&c->thread, NULL, client_thread, c) != 0) {
		rc = -EAGAIN;
		goto out_free;
	}
	c->thread_started = true;
	if (x->ops != &xfer_tcp_ops && (tp & KV_WIRE_TP_RDMA) &&
	    x->ops->conn_init(x, c, deadline) == 0)
		c->ops = x->ops;
	pthread_mutex_lock(&x->lock);
	if (x->stopping) {
		pthread_mutex_unlock(&x->lock);
		rc = -ECANCELED;
		goto out_free;
	}
	/* another caller may have dialled the same peer meanwhile: both
	 * conns work; the newest is cached, the other lives on until its
	 * callers let go */
	for (old = x->clients; old; old = old->next)
		if (strcmp(old->peer, peer) == 0)
			break;
	if (old && uncache(x, old)) {
		pthread_mutex_unlock(&x->lock);
		xconn_free(old);
		pthread_mutex_lock(&x->lock);
	}
	c->refs = 2; /* the cache's and the caller's */
	c->next = x->clients;
	x->clients = c;
	pthread_mutex_unlock(&x->lock);
	*out = c;
	return 0;
out_free:
	xconn_free(c);
	return rc;
}

/* ---- open / close -------------------------------------------------- */

static int choose_transport(struct kv_xfer *x, enum kv_transport want)
{
	char why[256] = "", why2[256] = "";
	int n, rc;

	if (want == KV_TRANSPORT_TCP) {
		x->ops = &xfer_tcp_ops;
		kvfs_debug("xfer: transport tcp (asked for)");
		return 0;
	}
	n = xfer_rdma_probe(why, sizeof(why));
	if (n > 0) {
		rc = xfer_rdma_ops.init(x, why2, sizeof(why2));
		if (rc == 0) {
			x->ops = &xfer_rdma_ops;
			kvfs_info("xfer: transport rdma (%s%s%s)", why,
				  why2[0] ? ": " : "", why2);
			return 0;
		}
	} else {
		rc = -ENODEV;
	}
	if (want == KV_TRANSPORT_RDMA) {
		kvfs_err("xfer: transport rdma asked for, but %s",
			 why2[0] ? why2 : why);
		return rc == -ENOMEM ? rc : -ENODEV;
	}
	x->ops = &xfer_tcp_ops;
	kvfs_info("xfer: transport tcp (rdma unusable: %s)",
		  why2[0] ? why2 : why);
	return 0;
}

int kv_xfer_open(const struct kv_xfer_config *cfg, struct kv_xfer **out)
{
	struct io_uring_probe *probe;
	struct kv_xfer *x;
	int rc;

	if (!cfg || !out || !cfg->store || !cfg->secret)
		return -EINVAL;
	if (cfg->secret_len < KV_XFER_SECRET_MIN) {
		kvfs_err("xfer: cluster secret too short (%zu bytes, need %d)",
			 cfg->secret_len, KV_XFER_SECRET_MIN);
		return -EINVAL;
	}
	if (cfg->transport != KV_TRANSPORT_AUTO &&
	    cfg->transport != KV_TRANSPORT_TCP &&
	    cfg->transport != KV_TRANSPORT_RDMA)
		return -EINVAL;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->secret = malloc(cfg->secret_len);
	if (!x->secret) {
		free(x);
		return -ENOMEM;
	}
	memcpy(x->secret, cfg->secret, cfg->secret_len);
	x->secret_len = cfg->secret_len;
	if (cfg->node) {
		/* wire.h: printable, no '@' (the peer syntax), < 64 bytes */
		size_t n = strlen(cfg->node);
		bool ok = n > 0 && n < KV_WIRE_ID_LEN;

		for (size_t i = 0; ok && i < n; i++)
			ok = cfg->node[i] > ' ' && cfg->node[i] <= '~' &&
			     cfg->node[i] != '@';
		if (!ok) {
			kvfs_err("xfer: bad node id '%s'", cfg->node);
			free(x->secret);
			free(x);
			return -EINVAL;
		}
		memcpy(x->node, cfg->node, n + 1);
	}
	x->store = cfg->store;
	x->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : KV_XFER_TIMEOUT_MS;
	x->hs_ms = cfg->handshake_ms;
	if (!x->hs_ms)
		x->hs_ms = x->timeout_ms < KV_XFER_HANDSHAKE_MS
				   ? x->timeout_ms
				   : KV_XFER_HANDSHAKE_MS;
	x->on_insert = cfg->on_insert;
	x->cb_arg = cfg->cb_arg;
	x->lfd = -1;
	pthread_mutex_init(&x->lock, NULL);
	pthread_cond_init(&x->idle, NULL);

	probe = io_uring_get_probe();
	if (!probe) {
		kvfs_err("xfer: io_uring unavailable");
		rc = -ENOSYS;
		goto out_free;
	}
	atomic_init(&x->zc,
		    io_uring_opcode_supported(probe, IORING_OP_SEND_ZC));
	io_uring_free_probe(probe);

	rc = choose_transport(x, cfg->transport);
	if (rc < 0)
		goto out_free;
	if (cfg->listen) {
		rc = listen_open(x, cfg->listen);
		if (rc < 0)
			goto out_fini;
		if (pthread_create(&x->acceptor, NULL, accept_thread, x) != 0) {
			rc = -EAGAIN;
			goto out_close;
		}
		x->accepting = true;
	}
	*out = x;
	return 0;

out_close:
	close(x->lfd);
out_fini:
	x->ops->fini(x);
out_free:
	pthread_cond_destroy(&x->idle);
	pthread_mutex_destroy(&x->lock);
	free(x->secret);
	free(x);
	return rc;
}

void kv_xfer_close(struct kv_xfer *x)
{
	struct xconn *c;

	if (!x)
		return;
	pthread_mutex_lock(&x->lock);
	x->stopping = true;
	for (c = x->clients; c; c = c->next)
		xconn_kill(c, -ECANCELED);
	for (c = x->served; c; c = c->next) {
		atomic_store(&c->stop, true);
		shutdown(c->fd, SHUT_RDWR);
	}
	/* calls in flight fail now; wait until each has left */
	while (x->calls)
		pthread_cond_wait(&x->idle, &x->lock);
	pthread_mutex_unlock(&x->lock);
	if (x->accepting)
		pthread_join(x->acceptor, NULL);
	if (x->lfd >= 0)
		close(x->lfd);
	pthread_mutex_lock(&x->lock);
	while ((c = x->clients)) {
		x->clients = c->next;
		c->refs = 0;
		pthread_mutex_unlock(&x->lock);
		xconn_free(c);
		pthread_mutex_lock(&x->lock);
	}
	c = reap_served(x, true);
	pthread_mutex_unlock(&x->lock);
	free_list(c);
	x->ops->fini(x);
	pthread_cond_destroy(&x->idle);
	pthread_mutex_destroy(&x->lock);
	explicit_bzero(x->secret, x->secret_len);
	free(x->secret);
	free(x);
}

const char *kv_xfer_transport(const struct kv_xfer *x)
{
	return x->ops->name;
}

int kv_xfer_port(const struct kv_xfer *x)
{
	return x->port;
}

/* ---- calls --------------------------------------------------------- */

static int enter(struct kv_xfer *x)
{
	int rc = 0;

	pthread_mutex_lock(&x->lock);
	if (x->stopping)
		rc = -ECANCELED;
	else
		x->calls++;
	pthread_mutex_unlock(&x->lock);
	return rc;
}

static void leave(struct kv_xfer *x)
{
	pthread_mutex_lock(&x->lock);
	if (--x->calls == 0)
		pthread_cond_broadcast(&x->idle);
	pthread_mutex_unlock(&x->lock);
}

static bool have_local(struct kv_xfer *x, const char *ns, const uint8_t *hash)
{
	struct kv_block_info bi;
	uint32_t id, bt;

	return kv_store_ns_find(x->store, ns, &id, &bt) == 0 &&
	       kv_store_stat(x->store, id, hash, &bi) == 0;
}

static int check_args(struct kv_xfer *x, const char *peer, const char *ns)
{
	if (!x || !peer)
		return -EINVAL;
	if (ns && (strlen(ns) < 1 || strlen(ns) > KV_WIRE_NS_MAX))
		return -EINVAL;
	return 0;
}

long kv_xfer_fetch_many(struct kv_xfer *x, const char *peer, const char *ns,
			const uint8_t (*hashes)[KVFS_HASH_LEN], size_t n,
			int *res)
{
	uint64_t deadline;
	struct xreq *r;
	struct xconn *c;
	bool *sent;
	long ok = 0;
	int rc;

	rc = check_args(x, peer, ns);
	if (rc < 0 || !ns || (n && (!hashes || !res)))
		return rc < 0 ? rc : -EINVAL;
	if (n == 0)
		return 0;
	rc = enter(x);
	if (rc < 0)
		return rc;
	deadline = xfer_now_ms() + x->timeout_ms;
	r = calloc(n, sizeof(*r));
	sent = calloc(n, sizeof(*sent));
	if (!r || !sent) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		res[i] = have_local(x, ns, hashes[i]) ? 0 : 1;
	rc = conn_get(x, peer, deadline, &c);
	if (rc < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		if (res[i] == 0)
			continue;
		res[i] = c->ops->fetch_start(c, &r[i], ns, hashes[i]);
		sent[i] = res[i] == 0;
	}
	for (size_t i = 0; i < n; i++)
		if (sent[i])
			res[i] = c->ops->fetch_finish(c, &r[i], deadline);
	conn_put(x, c);
	for (size_t i = 0; i < n; i++) {
		if (res[i] == 0) {
			ok++;
			if (sent[i]) {
				atomic_fetch_add(&x->st.fetches, 1);
				atomic_fetch_add(&x->st.fetch_bytes,
						 r[i].reply.size);
			}
		} else {
			atomic_fetch_add(&x->st.fetch_errors, 1);
		}
	}
	rc = 0;
out:
	free(r);
	free(sent);
	leave(x);
	if (rc < 0) {
		atomic_fetch_add(&x->st.fetch_errors, 1);
		return rc;
	}
	return ok;
}

int kv_xfer_fetch(struct kv_xfer *x, const char *peer, const char *ns,
		  const uint8_t hash[KVFS_HASH_LEN])
{
	int res = 0;
	long n;

	if (!hash)
		return -EINVAL;
	n = kv_xfer_fetch_many(x, peer, ns,
			       (const uint8_t(*)[KVFS_HASH_LEN])hash, 1, &res);
	return n < 0 ? (int)n : res;
}

int kv_xfer_push(struct kv_xfer *x, const char *peer, const char *ns,
		 const uint8_t hash[KVFS_HASH_LEN])
{
	struct kv_block_info bi;
	uint64_t deadline;
	struct xconn *c;
	uint32_t id, bt;
	int rc;

	rc = check_args(x, peer, ns);
	if (rc < 0 || !ns || !hash)
		return rc < 0 ? rc : -EINVAL;
	if (kv_store_ns_find(x->store, ns, &id, &bt) < 0 ||
	    kv_store_stat(x->store, id, hash, &bi) < 0)
		return -ENOENT;
	rc = enter(x);
	if (rc < 0)
		return rc;
	deadline = xfer_now_ms() + x->timeout_ms;
	rc = conn_get(x, peer, deadline, &c);
	if (rc == 0) {
		rc = c->ops->push(c, ns, hash, deadline);
		conn_put(x, c);
	}
	if (rc == 0) {
		atomic_fetch_add(&x->st.pushes, 1);
		atomic_fetch_add(&x->st.push_bytes, bi.size);
	} else {
		atomic_fetch_add(&x->st.push_errors, 1);
	}
	leave(x);
	return rc;
}

static int simple_call(struct kv_xfer *x, const char *peer,
		       struct kv_wire_msg *m, uint8_t reply_type,
		       struct kv_wire_msg *reply)
{
	uint64_t deadline;
	struct xconn *c;
	int rc;

	rc = enter(x);
	if (rc < 0)
		return rc;
	deadline = xfer_now_ms() + x->timeout_ms;
	rc = conn_get(x, peer, deadline, &c);
	if (rc == 0) {
		rc = xconn_call(c, m, reply_type, reply, deadline);
		conn_put(x, c);
	}
	leave(x);
	return rc;
}

int kv_xfer_has(struct kv_xfer *x, const char *peer, const char *ns,
		const uint8_t hash[KVFS_HASH_LEN])
{
	struct kv_wire_msg m = { .type = KV_WIRE_HAS }, reply;
	int rc;

	rc = check_args(x, peer, ns);
	if (rc < 0 || !ns || !hash)
		return rc < 0 ? rc : -EINVAL;
	snprintf(m.ns, sizeof(m.ns), "%s", ns);
	memcpy(m.hash, hash, KVFS_HASH_LEN);
	rc = simple_call(x, peer, &m, KV_WIRE_HAS_OK, &reply);
	return rc < 0 ? rc : (int)reply.present;
}

int kv_xfer_ping(struct kv_xfer *x, const char *peer)
{
	struct kv_wire_msg m = { .type = KV_WIRE_PING };
	int rc = check_args(x, peer, NULL);

	return rc < 0 ? rc : simple_call(x, peer, &m, KV_WIRE_PONG, NULL);
}

void kv_xfer_forget(struct kv_xfer *x, const char *peer)
{
	struct xconn **pp, *c, *gone = NULL;

	if (!x || !peer)
		return;
	pthread_mutex_lock(&x->lock);
	pp = &x->clients;
	while ((c = *pp)) {
		if (strcmp(c->peer, peer) != 0) {
			pp = &c->next;
			continue;
		}
		*pp = c->next;
		xconn_kill(c, -ECONNABORTED);
		if (--c->refs == 0) {
			c->next = gone;
			gone = c;
		}
	}
	pthread_mutex_unlock(&x->lock);
	while ((c = gone)) {
		gone = c->next;
		xconn_free(c);
	}
}

void kv_xfer_stats(struct kv_xfer *x, struct kv_xfer_stats *o)
{
	o->fetches = atomic_load(&x->st.fetches);
	o->fetch_bytes = atomic_load(&x->st.fetch_bytes);
	o->fetch_errors = atomic_load(&x->st.fetch_errors);
	o->pushes = atomic_load(&x->st.pushes);
	o->push_bytes = atomic_load(&x->st.push_bytes);
	o->push_errors = atomic_load(&x->st.push_errors);
	o->served = atomic_load(&x->st.served);
	o->served_bytes = atomic_load(&x->st.served_bytes);
	o->auth_failures = atomic_load(&x->st.auth_failures);
	o->refused = atomic_load(&x->st.refused);
	o->bad_frames = atomic_load(&x->st.bad_frames);
	o->conns = atomic_load(&x->st.conns);
}
