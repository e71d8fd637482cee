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

#include "kvstore/auth.h"
#include "src/common/clock.h"
#include "src/common/le.h"
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

static int parse_net(const char *s, size_t len, struct srv_net *net)
{
	char buf[INET_ADDRSTRLEN + 3], *slash, *end;
	struct in_addr in;
	unsigned long bits = 32;

	if (len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	slash = strchr(buf, '/');
	if (slash) {
		*slash = '\0';
		errno = 0;
		bits = strtoul(slash + 1, &end, 10);
		if (!slash[1] || *end || errno || bits > 32)
			return -EINVAL;
	}
	if (inet_pton(AF_INET, buf, &in) != 1)
		return -EINVAL;
	net->mask = bits ? ~0u << (32 - bits) : 0;
	net->addr = ntohl(in.s_addr) & net->mask;
	return 0;
}

int srv_parse_nets(const char *s, struct srv_net *out, unsigned *n)
{
	*n = 0;
	if (!strcmp(s, "none"))
		return 0;
	for (;;) {
		const char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);

		if (*n == SRV_NETS_MAX || parse_net(s, len, &out[*n]) < 0)
			return -EINVAL;
		(*n)++;
		if (!comma)
			return 0;
		s = comma + 1;
	}
}

bool srv_endpoint_in(const char *ep, size_t len, const struct srv_net *nets,
		     unsigned n)
{
	char host[INET_ADDRSTRLEN];
	const char *colon;
	struct in_addr in;
	uint32_t a;

	if (len <= 6 || strncmp(ep, "tcp://", 6))
		return false;
	ep += 6;
	len -= 6;
	colon = memchr(ep, ':', len);
	if (!colon || (size_t)(colon - ep) >= sizeof(host))
		return false;
	memcpy(host, ep, (size_t)(colon - ep));
	host[colon - ep] = '\0';
	if (inet_pton(AF_INET, host, &in) != 1)
		return false;
	a = ntohl(in.s_addr);
	for (unsigned i = 0; i < n; i++)
		if ((a & nets[i].mask) == nets[i].addr)
			return true;
	return false;
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

/* ---- expiry ------------------------------------------------------------ */

void srv_expire(struct srv *srv)
{
	pthread_mutex_lock(&srv->lock);
	if (srv->s && srv->request_ttl > 0)
		srv->c.expired +=
			sched_expire(srv->s, srv_now(srv), srv->request_ttl);
	if (srv->ho)
		srv->c.ho_expired +=
			srv_ho_expire(srv->ho, srv_now(srv), SRV_HO_TTL);
	pthread_mutex_unlock(&srv->lock);
}

/* ---- block events ------------------------------------------------------ */

/*
 * Nobody may hold the listener's slots without sending: a stream owes its
 * first frame (a RESET, event.h) within ev_hello seconds and then a whole
 * frame at least every ev_idle seconds (kvfsd's keepalive), and a stream
 * one too many evicts, first, the oldest that has sent no frame yet, then
 * one quiet for half ev_idle (ev_victim).  A whole frame, not a byte,
 * resets the clock, so a sender dribbling a frame cannot hold its slot
 * either.
 */
struct ev_conn {
	int fd;
	uint64_t since_ns; /* accepted */
	uint64_t last_ns;  /* its last whole frame; since_ns before one */
	char peer[INET_ADDRSTRLEN + 8];
	struct sched_ev_decoder dec;
	struct ev_auth *au; /* with --secret-file: the handshake and records */
	struct srv_fe_out fe; /* FETCH frames to it (serve_handoff.c) */
};

/*
 * An authenticated stream (event.h, "Authentication"): the handshake's
 * frames, then sealed records, gathered in buf until whole; a record is
 * fed to the decoder only once its tag checks, and its events only when
 * they name the node the handshake authenticated.
 */
enum ev_auth_state { EVA_HELLO, EVA_AUTH, EVA_RECORDS };

struct ev_auth {
	enum ev_auth_state state;
	struct kv_auth a;
	struct kv_tagger tag;
	struct kv_tagger stag; /* our FETCH frames' (event.h, "FETCH") */
	uint16_t node;
	uint8_t *buf;
	size_t len, cap;
};

static void ev_auth_free(struct ev_auth *au)
{
	if (!au)
		return;
	if (au->state == EVA_RECORDS) {
		kv_tagger_fini(&au->tag);
		kv_tagger_fini(&au->stag);
	}
	free(au->buf);
	free(au);
}

#define EV_LOG_EVERY_NS (10 * 1000000000ull) /* refusals logged at most */

struct ev_loop {
	struct srv *srv;
	struct ev_conn conn[SRV_MAX_EV_CONNS];
	uint32_t n;
	uint64_t log_ns;     /* last refusal logged */
	uint64_t log_missed; /* refusals not logged since */
	uint8_t buf[EV_READ_BUF];
	struct srv_fe_stage stage; /* the handoff's fetches of a feed */
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
	srv_kvev_node_reset(srv, d->node); /* the engines' blocks stay */
	pthread_mutex_unlock(&srv->lock);
}

static void conn_close(struct ev_loop *l, uint32_t i)
{
	stream_over(l, i);
	close(l->conn[i].fd);
	sched_ev_decoder_release(&l->conn[i].dec);
	ev_auth_free(l->conn[i].au);
	srv_fe_release(&l->conn[i].fe);
	l->conn[i] = l->conn[--l->n];
}

/* a stream refused or cut, on stderr: at most one line per
 * EV_LOG_EVERY_NS, whoever floods the port */
static void ev_log(struct ev_loop *l, const struct ev_conn *c, const char *why)
{
	uint64_t now = kvfs_mono_ns();

	if (l->log_ns && now - l->log_ns < EV_LOG_EVERY_NS) {
		l->log_missed++;
		return;
	}
	fprintf(stderr, "kvconductor serve: event stream from %s closed: %s",
		c->peer, why);
	if (l->log_missed)
		fprintf(stderr, " (and %llu more closed, not logged)",
			(unsigned long long)l->log_missed);
	fputc('\n', stderr);
	l->log_ns = now;
	l->log_missed = 0;
}

static void count(struct srv *srv, uint64_t *counter)
{
	pthread_mutex_lock(&srv->lock);
	++*counter;
	pthread_mutex_unlock(&srv->lock);
}

/*
 * The stream to make room with: the oldest without a frame, else the one
 * quiet longest if that is half the idle timeout or more; else none
 * (UINT32_MAX), and the newcomer is refused.  A live kvfsd sends a frame
 * at least every 30 s (its keepalive), so with the default 120 s no
 * stranger can push a live node out, however often it connects.
 */
static uint32_t ev_victim(const struct ev_loop *l, uint64_t now)
{
	uint64_t quiet = (uint64_t)(l->srv->ev_idle / 2 * 1e9);
	uint32_t v = 0;

	for (uint32_t i = 1; i < l->n; i++) {
		const struct ev_conn *a = &l->conn[i], *b = &l->conn[v];

		if (a->dec.started != b->dec.started) {
			if (!a->dec.started)
				v = i;
		} else if (a->last_ns < b->last_ns) {
			v = i;
		}
	}
	if (l->conn[v].dec.started && l->srv->ev_idle > 0 &&
	    now - l->conn[v].last_ns < quiet)
		return UINT32_MAX;
	return v;
}

static void peer_name(int fd, char *out, size_t len)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	char host[INET_ADDRSTRLEN] = "?";

	if (getpeername(fd, (struct sockaddr *)&sa, &sl) == 0 &&
	    sa.sin_family == AF_INET)
		inet_ntop(AF_INET, &sa.sin_addr, host, sizeof(host));
	snprintf(out, len, "%s:%u", host, ntohs(sa.sin_port));
}

static void accept_one(struct ev_loop *l)
{
	int fd = accept4(l->srv->ev_fd, NULL, NULL, SOCK_CLOEXEC);
	struct ev_conn *c;

	if (fd < 0)
		return;
	/* bounded, and never by idle sockets: a real node gets in */
	if (l->n == SRV_MAX_EV_CONNS) {
		uint32_t v = ev_victim(l, kvfs_mono_ns());

		if (v == UINT32_MAX) {
			/* every slot is a live stream: the newcomer waits */
			close(fd);
			return;
		}
		ev_log(l, &l->conn[v], "evicted for a new stream");
		count(l->srv, &l->srv->c.ev_evicted);
		conn_close(l, v);
	}
	c = &l->conn[l->n];
	c->au = NULL;
	if (l->srv->secret) {
		c->au = calloc(1, sizeof(*c->au));
		if (!c->au ||
		    kv_auth_init(&c->au->a, KV_AUTH_SERVER, l->srv->secret,
				 l->srv->secret_len, SCHED_EV_AUTH_ID) < 0) {
			free(c->au);
			close(fd);
			return;
		}
	}
	l->n++;
	c->fd = fd;
	c->since_ns = c->last_ns = kvfs_mono_ns();
	peer_name(fd, c->peer, sizeof(c->peer));
	memset(&c->fe, 0, sizeof(c->fe));
	sched_ev_decoder_init(&c->dec);
	c->dec.reset_first = true;
	count(l->srv, &l->srv->c.ev_conns);
}

/* when stream c is due to be closed for silence, CLOCK_MONOTONIC ns;
 * UINT64_MAX: never */
static uint64_t ev_due(const struct srv *srv, const struct ev_conn *c)
{
	double limit = c->dec.started ? srv->ev_idle : srv->ev_hello;

	if (limit <= 0)
		return UINT64_MAX;
	return (c->dec.started ? c->last_ns : c->since_ns) +
	       (uint64_t)(limit * 1e9);
}

/* close the streams past their deadline; the poll timeout, in ms, until
 * the next one (-1: none) */
static int ev_sweep(struct ev_loop *l)
{
	uint64_t now = kvfs_mono_ns(), next = UINT64_MAX;

	for (uint32_t i = l->n; i-- > 0;) {
		uint64_t due = ev_due(l->srv, &l->conn[i]);

		if (due <= now) {
			ev_log(l, &l->conn[i],
			       l->conn[i].dec.started
				       ? "idle (no frame within the idle "
					 "timeout)"
				       : "no RESET within the hello timeout");
			count(l->srv, &l->srv->c.ev_timeouts);
			conn_close(l, i);
		} else if (due < next) {
			next = due;
		}
	}
	if (next == UINT64_MAX)
		return -1;
	/* rounded up, so the next sweep finds it due */
	return (int)((next - now + 999999) / 1000000);
}

/* the newest stream of node that takes FETCH frames, for the handoff */
static struct srv_fe_out *fe_find(void *arg, uint16_t node,
				  struct kv_tagger **tag)
{
	struct ev_loop *l = arg;
	struct ev_conn *best = NULL;

	for (uint32_t i = 0; i < l->n; i++) {
		struct ev_conn *c = &l->conn[i];

		if (c->dec.started && !c->dec.err && c->dec.node == node &&
		    c->fe.ok && (!best || c->since_ns > best->since_ns))
			best = c;
	}
	if (best)
		*tag = best->au ? &best->au->stag : NULL;
	return best ? &best->fe : NULL;
}

/* a byte on the wake pipe: false to stop; else the handoff's blocks due
 * at once, staged into their streams' outputs for the sends below */
static bool ev_woken(struct ev_loop *l)
{
	char b[16];
	ssize_t n = read(l->srv->wake[0], b, sizeof(b));

	if (n < 0 && errno == EINTR)
		return true;
	if (n <= 0 || memchr(b, SRV_WAKE_STOP, (size_t)n))
		return false;
	pthread_mutex_lock(&l->srv->lock);
	srv_handoff_due(l->srv, &l->stage, fe_find, l);
	pthread_mutex_unlock(&l->srv->lock);
	return true;
}

struct feed {
	struct ev_loop *l;
	struct ev_conn *c;
};

/* each record of a stream, under the lock: an authenticated stream's
 * only for its own node; then the index, and the handoff's fetches */
static int feed_one(void *arg, const struct sched_ev *ev)
{
	const struct feed *f = arg;
	struct srv *srv = f->l->srv;
	const size_t flen = strlen(SCHED_EV_NS_FETCH);
	uint16_t dst[SCHED_MAX_INSTANCES]; /* every decode node, at most */
	uint32_t n;
	int rc;

	if (f->c->au && ev->node != f->c->au->node)
		return -EPERM;
	rc = sched_ev_apply(srv->s, ev);
	if (rc < 0)
		return rc;
	if (ev->op == SCHED_EV_RESET) {
		srv_kvev_node_reset(srv, ev->node); /* the engines' stay */
		f->c->fe.ok = ev->ns_len == flen &&
			      !memcmp(ev->ns, SCHED_EV_NS_FETCH, flen);
	} else if (ev->op == SCHED_EV_INSERT && srv->ho) {
		n = srv_ho_sealed(srv->ho, ev->node,
				  sched_key_from_hash(ev->hash), dst,
				  SCHED_MAX_INSTANCES);
		if (n)
			srv_fe_stage_add(&f->l->stage, fe_find, f->l, &srv->c,
					 ev->node, ev->ns, ev->ns_len, dst, n,
					 ev->hash);
	}
	return 0;
}

/* feed n bytes at p to c's decoder; false: close the stream */
static bool conn_feed(struct ev_loop *l, struct ev_conn *c, const void *p,
		      size_t n)
{
	struct srv *srv = l->srv;
	uint64_t frames, records;
	struct feed f = { .l = l, .c = c };
	int rc;

	pthread_mutex_lock(&srv->lock);
	if (!srv->s) {
		/* no instances yet, so no index: the node retries later */
		pthread_mutex_unlock(&srv->lock);
		return false;
	}
	frames = c->dec.frames;
	records = c->dec.records;
	rc = sched_ev_feed(&c->dec, p, n, feed_one, &f);
	if (l->stage.n)
		srv_fe_stage_flush(&l->stage, fe_find, l, &srv->c);
	srv->c.ev_frames += c->dec.frames - frames;
	srv->c.ev_records += c->dec.records - records;
	/* the stream is closed, and its node's blocks forgotten, by
	 * conn_close() */
	if (rc < 0)
		srv->c.ev_errors++;
	if (rc == -ENOMSG)
		srv->c.ev_no_reset++;
	pthread_mutex_unlock(&srv->lock);
	if (c->dec.frames != frames)
		c->last_ns = kvfs_mono_ns();
	if (rc == -ENOMSG)
		ev_log(l, c, "its first frame is not a RESET");
	if (rc == -EPERM)
		ev_log(l, c, "an event for a node it did not authenticate as");
	return rc == 0;
}

static bool hs_reply(struct ev_conn *c, const struct kv_wire_msg *m)
{
	uint8_t buf[KV_WIRE_HDR_LEN + KV_WIRE_META_MAX];
	long n = kv_wire_encode(m, buf, sizeof(buf));

	/* a few bytes on a fresh socket: the send buffer takes them */
	return n > 0 && send(c->fd, buf, (size_t)n, MSG_NOSIGNAL) == n;
}

/* one handshake frame out of au->buf: its length (0: not whole yet), or
 * -EBADMSG */
static long hs_frame(struct ev_auth *au, struct kv_wire_msg *m)
{
	struct kv_wire_hdr h;
	int rc = kv_wire_hdr_decode(au->buf, au->len, &h);

	if (rc == -EAGAIN)
		return 0;
	if (rc < 0 || h.payload_len != h.meta_len)
		return -EBADMSG;
	if (au->len < KV_WIRE_HDR_LEN + h.meta_len)
		return 0;
	rc = kv_wire_decode(&h, au->buf + KV_WIRE_HDR_LEN, h.meta_len, m);
	return rc < 0 ? rc : (long)(KV_WIRE_HDR_LEN + h.meta_len);
}

/* the node number of an authenticated peer id (kvfsd's --node-id) */
static int node_number(const char *id, uint16_t *node)
{
	char *end;
	unsigned long v = strtoul(id, &end, 10);

	if (!*id || *end || v > 65535)
		return -EINVAL;
	*node = (uint16_t)v;
	return 0;
}

/* one step of an authenticated stream: the bytes used (0: more are
 * needed), or < 0 to close it, *why saying why */
static long auth_step(struct ev_loop *l, struct ev_conn *c, const char **why)
{
	struct ev_auth *au = c->au;
	struct kv_wire_msg m, out;
	uint8_t keys[2][KV_AUTH_KEY_LEN];
	uint32_t len;
	long used;
	int rc;

	if (au->state != EVA_RECORDS) {
		used = hs_frame(au, &m);
		if (used < 0) {
			/* a plain stream, to a conductor that wants it
			 * authenticated, ends here too */
			count(l->srv, &l->srv->c.ev_auth_failures);
			*why = "not a handshake frame";
		}
		if (used <= 0)
			return used;
		if (au->state == EVA_HELLO) {
			rc = m.type == KV_WIRE_HELLO ? kv_auth_server_challenge(
							       &au->a, &m, &out)
						     : -EPROTO;
			if (rc == 0 && node_number(m.node, &au->node) < 0)
				rc = -EACCES;
			au->state = EVA_AUTH;
		} else {
			rc = m.type == KV_WIRE_AUTH
				     ? kv_auth_server_verify(&au->a, &m)
				     : -EPROTO;
			if (rc == 0)
				rc = kv_auth_keys(&au->a, keys[0], keys[1]);
			if (rc == 0)
				rc = kv_tagger_init(&au->tag, keys[1]);
			if (rc == 0) {
				rc = kv_tagger_init(&au->stag, keys[0]);
				if (rc < 0)
					kv_tagger_fini(&au->tag);
			}
			explicit_bzero(keys, sizeof(keys));
			memset(&out, 0, sizeof(out));
			out.type = KV_WIRE_AUTH_OK;
			if (rc == 0)
				au->state = EVA_RECORDS;
		}
		if (rc < 0) {
			memset(&out, 0, sizeof(out));
			out.type = KV_WIRE_AUTH_FAIL;
			hs_reply(c, &out);
			count(l->srv, &l->srv->c.ev_auth_failures);
			*why = "authentication failed (no cluster secret, or a "
			       "node id that is not a number)";
			return -EACCES;
		}
		return hs_reply(c, &out) ? used : -EPIPE;
	}
	if (au->len < 4)
		return 0;
	len = kv_get_le32(au->buf);
	if (len == 0 || len > SCHED_EV_SEALED_MAX) {
		*why = "a sealed record of a bad length";
		return -EBADMSG;
	}
	if (au->len < 4 + (size_t)len + KV_WIRE_TAG_LEN)
		return 0;
	rc = kv_tagger_begin(&au->tag);
	if (rc == 0)
		rc = kv_tagger_update(&au->tag, au->buf, 4 + (size_t)len);
	if (rc == 0)
		rc = kv_tagger_check(&au->tag, au->buf + 4 + len);
	if (rc < 0) {
		count(l->srv, &l->srv->c.ev_auth_failures);
		*why = "a sealed record whose tag fails";
		return -EBADMSG;
	}
	if (!conn_feed(l, c, au->buf + 4, len)) {
		*why = NULL; /* conn_feed said why, if it was a rule */
		return -EBADMSG;
	}
	return 4 + (long)len + KV_WIRE_TAG_LEN;
}

/* false: close the stream (end, error, bad frame, no scheduler yet) */
static bool conn_read(struct ev_loop *l, struct ev_conn *c)
{
	struct ev_auth *au = c->au;
	const char *why = NULL;
	ssize_t n;
	long used;

	n = read(c->fd, l->buf, sizeof(l->buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return true;
	/* a client that hangs up in the handshake found us wanting: it
	 * has another secret */
	if (n <= 0 && au && au->state != EVA_RECORDS)
		count(l->srv, &l->srv->c.ev_auth_failures);
	if (n <= 0)
		return false;
	if (!au)
		return conn_feed(l, c, l->buf, (size_t)n);
	if (au->len + (size_t)n > au->cap) {
		size_t cap = au->cap ? au->cap : sizeof(l->buf);
		uint8_t *b;

		while (cap < au->len + (size_t)n)
			cap *= 2;
		b = realloc(au->buf, cap);
		if (!b)
			return false;
		au->buf = b;
		au->cap = cap;
	}
	memcpy(au->buf + au->len, l->buf, (size_t)n);
	au->len += (size_t)n;
	while ((used = auth_step(l, c, &why)) > 0) {
		au->len -= (size_t)used;
		memmove(au->buf, au->buf + used, au->len);
	}
	if (used < 0 && why)
		ev_log(l, c, why);
	return used == 0;
}

static void *ev_main(void *arg)
{
	struct ev_loop *l = arg;
	struct pollfd p[SRV_MAX_EV_CONNS + 2];

	for (;;) {
		int timeout = ev_sweep(l);
		uint32_t n = l->n;

		p[0] = (struct pollfd){ .fd = l->srv->wake[0],
					.events = POLLIN };
		p[1] = (struct pollfd){ .fd = l->srv->ev_fd, .events = POLLIN };
		for (uint32_t i = 0; i < n; i++) {
			const struct srv_fe_out *o = &l->conn[i].fe;

			p[i + 2] = (struct pollfd){
				.fd = l->conn[i].fd,
				.events =
					POLLIN | (o->off < o->len ? POLLOUT : 0)
			};
		}
		if (poll(p, n + 2, timeout) < 0 && errno != EINTR)
			break;
		if (p[0].revents && !ev_woken(l))
			break;
		/* backwards: conn_close moves the last stream into i; and
		 * POLLOUT alone is for the send below (a read would block) */
		for (uint32_t i = n; i-- > 0;)
			if ((p[i + 2].revents & ~POLLOUT) &&
			    !conn_read(l, &l->conn[i]))
				conn_close(l, i);
		if (p[1].revents & POLLIN)
			accept_one(l);
		/* FETCH frames the reads made due, or that waited for
		 * room: as much as each socket takes now */
		for (uint32_t i = l->n; i-- > 0;)
			if (l->conn[i].fe.off < l->conn[i].fe.len &&
			    srv_fe_send(&l->conn[i].fe, l->conn[i].fd) < 0)
				conn_close(l, i);
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
		n = write(srv->wake[1], (char[]){ SRV_WAKE_STOP }, 1);
	while (n < 0 && errno == EINTR);
	pthread_join(srv->ev_thread, NULL);
	close(srv->wake[0]);
	close(srv->wake[1]);
	srv->ev_running = false;
}
