/*
 * kvfsd_cluster_ev.c - the block-event stream to the conductor
 * (--conductor HOST:PORT), in the wire format of sched/event.h.
 *
 * The store's event hook (under the store lock) only appends to a ring;
 * one thread connects, sends RESET and an INSERT of every local block (a
 * resync), then drains the ring in frames of one namespace each.  A ring
 * that overflows, or a connection that breaks, costs a reconnect and a
 * resync: events are hints, and the resync makes the conductor right
 * again.  The conductor's node number is the --node-id, which must then
 * be a number below 65536.  A stream quiet for EV_KEEPALIVE_MS gets an
 * empty frame: the conductor closes a stream that sends no frame for its
 * idle timeout (120 s by default, kvconductor(8)).
 *
 * With --secret-file, each connection starts with the transfer engine's
 * handshake (auth.h) as node --node-id toward the conductor, and every
 * frame then goes out as a sealed record (event.h, "Authentication").
 *
 * In a cluster the stream also carries the conductor's FETCH frames the
 * other way (event.h, "FETCH"): the RESET goes out in "-fetch" to say we
 * take them, and kvfsd_handoff.c reads them on each connection.
 */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "kvstore/auth.h"
#include "sched/event.h"
#include "fuse/kvfsd_cluster_int.h"
#include "src/common/le.h"
#include "src/common/log.h"
#include "src/common/net.h"

#define EV_RING 65536u /* events queued between sends */
#define EV_BATCH 1024u /* records per frame */
#define EV_RETRY_MS 1000
#define EV_IO_TIMEOUT_MS 5000
#define EV_KEEPALIVE_MS 30000

struct ev_item {
	uint8_t op;
	uint32_t ns;
	uint8_t hash[KVFS_HASH_LEN];
};

struct cl_ev {
	struct kvfsd_cluster *c;
	char host[256], port[16];
	uint16_t node;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stop;
	bool overflow; /* events were lost: resync */
	struct ev_item *ring;
	uint32_t head, len;
	uint64_t seq;
	uint64_t sent_ms; /* the last frame went out (kvfs_net_now_ms) */
	int fd;
	uint8_t *secret; /* NULL: a plain stream */
	size_t secret_len;
	struct kv_tagger tag; /* this connection's, once authenticated */
	bool tagged;
	/* --conductor etcd:...: host and port follow the election's leader
	 * (kvfsd_cluster_lead.c, cl_ev_target), "" while none is known;
	 * moved: they changed, leave the stream we have.  Under lock. */
	bool moved;
	uint8_t kr[KV_AUTH_KEY_LEN]; /* its receiving key: FETCH frames */
};

static void hook(void *arg, enum kv_store_event e, uint32_t ns,
		 const uint8_t hash[KVFS_HASH_LEN])
{
	struct cl_ev *ev = arg;
	struct ev_item *it;

	pthread_mutex_lock(&ev->lock);
	if (ev->len == EV_RING) {
		ev->overflow = true;
	} else {
		it = &ev->ring[(ev->head + ev->len) % EV_RING];
		it->op =
			e == KV_STORE_SEALED ? SCHED_EV_INSERT : SCHED_EV_EVICT;
		it->ns = ns;
		memcpy(it->hash, hash, KVFS_HASH_LEN);
		ev->len++;
		pthread_cond_signal(&ev->wake);
	}
	pthread_mutex_unlock(&ev->lock);
}

static bool ev_stopping(void *arg)
{
	struct cl_ev *ev = arg;
	bool stop;

	pthread_mutex_lock(&ev->lock);
	stop = ev->stop;
	pthread_mutex_unlock(&ev->lock);
	return stop;
}

static int ev_handshake(struct cl_ev *ev);
static void ev_disconnect(struct cl_ev *ev);

/* bounded, and cut short by cl_ev_stop: a conductor whose host drops
 * our SYNs must not hold the daemon's stop for the kernel's minutes */
static int ev_connect(struct cl_ev *ev)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	struct timeval tv = { .tv_sec = EV_IO_TIMEOUT_MS / 1000 };
	struct addrinfo *ai;
	char host[sizeof(ev->host)], port[sizeof(ev->port)];
	int fd, rc;

	pthread_mutex_lock(&ev->lock);
	memcpy(host, ev->host, sizeof(host));
	memcpy(port, ev->port, sizeof(port));
	ev->moved = false;
	pthread_mutex_unlock(&ev->lock);
	if (!host[0])
		return -ENOTCONN; /* no leader yet: the follower says when */
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc != 0)
		return -EHOSTUNREACH;
	fd = kvfs_tcp_connect(ai, kvfs_net_now_ms() + EV_IO_TIMEOUT_MS,
			      ev_stopping, ev);
	freeaddrinfo(ai);
	if (fd < 0)
		return fd;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ev->fd = fd;
	ev->seq = 0;
	rc = ev->secret ? ev_handshake(ev) : 0;
	/* FETCH frames come once our RESET is in: read them from now on */
	if (rc == 0)
		rc = cl_ho_attach(ev->c, fd, ev->node,
				  ev->secret ? ev->kr : NULL);
	if (rc < 0)
		ev_disconnect(ev);
	return rc;
}

int cl_recv_all(int fd, void *buf, size_t len, atomic_bool *cancel)
{
	char *p = buf;

	while (len) {
		ssize_t n = recv(fd, p, len, 0);

		if (cancel && atomic_load(cancel))
			return -ECANCELED;
		/* SO_RCVTIMEO (the event thread's): quiet, not gone, for a
		 * reader that waits until it is cancelled */
		if (n < 0 &&
		    (errno == EINTR ||
		     (cancel && (errno == EAGAIN || errno == EWOULDBLOCK))))
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ECONNRESET;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int send_all(int fd, const void *buf, size_t len);

/* one handshake frame of type want (or AUTH_FAIL: -EACCES) */
static int hs_recv(int fd, uint8_t want, struct kv_wire_msg *m)
{
	uint8_t hbuf[KV_WIRE_HDR_LEN], meta[KV_WIRE_META_MAX];
	struct kv_wire_hdr h;
	int rc = cl_recv_all(fd, hbuf, sizeof(hbuf), NULL);

	if (rc == 0)
		rc = kv_wire_hdr_decode(hbuf, sizeof(hbuf), &h);
	if (rc == 0 && h.payload_len != h.meta_len)
		rc = -EBADMSG;
	if (rc == 0)
		rc = cl_recv_all(fd, meta, h.meta_len, NULL);
	if (rc == 0)
		rc = kv_wire_decode(&h, meta, h.meta_len, m);
	if (rc == 0 && m->type == KV_WIRE_AUTH_FAIL)
		return -EACCES;
	return rc == 0 && m->type != want ? -EBADMSG : rc;
}

static int hs_send(int fd, const struct kv_wire_msg *m)
{
	uint8_t buf[KV_WIRE_HDR_LEN + KV_WIRE_META_MAX];
	long n = kv_wire_encode(m, buf, sizeof(buf));

	return n < 0 ? (int)n : send_all(fd, buf, (size_t)n);
}

/* the transfer engine's handshake, as our node toward the conductor */
static int ev_handshake(struct cl_ev *ev)
{
	uint8_t ks[KV_AUTH_KEY_LEN], kr[KV_AUTH_KEY_LEN];
	struct kv_wire_msg out, in;
	struct kv_auth a;
	int rc;

	kv_auth_init(&a, KV_AUTH_CLIENT, ev->secret, ev->secret_len,
		     ev->c->node_id);
	rc = kv_auth_client_hello(&a, SCHED_EV_AUTH_ID, &out);
	if (rc == 0)
		rc = hs_send(ev->fd, &out);
	if (rc == 0)
		rc = hs_recv(ev->fd, KV_WIRE_CHALLENGE, &in);
	if (rc == 0)
		rc = kv_auth_client_answer(&a, &in, &out);
	if (rc == 0)
		rc = hs_send(ev->fd, &out);
	if (rc == 0)
		rc = hs_recv(ev->fd, KV_WIRE_AUTH_OK, &in);
	if (rc == 0)
		rc = kv_auth_client_finish(&a, &in);
	if (rc == 0)
		rc = kv_auth_keys(&a, ks, kr);
	if (rc == 0)
		rc = kv_tagger_init(&ev->tag, ks);
	if (rc == 0)
		memcpy(ev->kr, kr, sizeof(kr));
	explicit_bzero(ks, sizeof(ks));
	explicit_bzero(kr, sizeof(kr));
	ev->tagged = rc == 0;
	return rc == -ECONNRESET ? -EACCES : rc;
}

static void ev_disconnect(struct cl_ev *ev)
{
	/* its reader first: it must not read a closed (or reused) fd */
	cl_ho_detach(ev->c);
	explicit_bzero(ev->kr, sizeof(ev->kr));
	if (ev->fd >= 0)
		close(ev->fd);
	ev->fd = -1;
	if (ev->tagged)
		kv_tagger_fini(&ev->tag);
	ev->tagged = false;
}

static int send_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int send_frame(struct cl_ev *ev, const char *ns,
		      const struct sched_ev_rec *recs, uint32_t n)
{
	size_t cap = sched_ev_frame_size(strlen(ns), n);
	/* room for a sealed record's length and tag around the frame */
	uint8_t *buf = malloc(4 + cap + KV_WIRE_TAG_LEN);
	size_t head = ev->tagged ? 4 : 0;
	long len;
	int rc;

	if (!buf)
		return -ENOMEM;
	len = sched_ev_encode(buf + head, cap, ev->node, ev->seq, ns, recs, n);
	rc = len < 0 ? (int)len : 0;
	if (rc == 0 && ev->tagged) {
		kv_put_le32(buf, (uint32_t)len);
		rc = kv_tagger_begin(&ev->tag);
		if (rc == 0)
			rc = kv_tagger_update(&ev->tag, buf, 4 + (size_t)len);
		if (rc == 0)
			rc = kv_tagger_finish(&ev->tag, buf + 4 + len);
		len += 4 + KV_WIRE_TAG_LEN;
	}
	if (rc == 0)
		rc = send_all(ev->fd, buf, (size_t)len);
	free(buf);
	if (rc == 0) {
		ev->seq++;
		ev->sent_ms = kvfs_net_now_ms();
	}
	return rc;
}

/* an empty frame (event.h) after EV_KEEPALIVE_MS without one */
static int keepalive(struct cl_ev *ev)
{
	if (kvfs_net_now_ms() - ev->sent_ms < EV_KEEPALIVE_MS)
		return 0;
	return send_frame(ev, "-", NULL, 0);
}

/* RESET, then every local block */
static int resync(struct cl_ev *ev)
{
	struct kvfsd_cluster *c = ev->c;
	struct sched_ev_rec *recs = calloc(EV_BATCH, sizeof(*recs));
	struct ns_list_view v;
	uint64_t total = 0;
	int rc;

	if (!recs)
		return -ENOMEM;
	memset(&v, 0, sizeof(v));
	/* the events queued so far are in the walk below */
	pthread_mutex_lock(&ev->lock);
	ev->len = 0;
	ev->overflow = false;
	pthread_mutex_unlock(&ev->lock);
	recs[0].op = SCHED_EV_RESET;
	rc = send_frame(ev, c->ho ? SCHED_EV_NS_FETCH : "-", recs, 1);
	if (rc == 0)
		rc = cl_ns_list(c, &v);
	for (size_t i = 0; rc == 0 && i < v.n; i++) {
		uint64_t cursor = 0;
		struct kv_block_info bi;
		uint32_t n = 0;

		while (rc == 0 && kv_store_ns_next(c->st, v.id[i], &cursor,
						   recs[n].hash, &bi) == 1) {
			recs[n++].op = SCHED_EV_INSERT;
			if (n == EV_BATCH) {
				rc = send_frame(ev, v.name[i], recs, n);
				total += n;
				n = 0;
			}
		}
		if (rc == 0 && n)
			rc = send_frame(ev, v.name[i], recs, n);
		total += n;
	}
	cl_ns_list_free(&v);
	free(recs);
	if (rc == 0)
		kvfs_info("conductor %s:%s: resync of %llu blocks sent",
			  ev->host, ev->port, (unsigned long long)total);
	return rc;
}

static int ns_name(struct kvfsd_cluster *c, uint32_t id, char *name)
{
	return kv_store_ns_find_id(c->st, id, name);
}

/* send what the ring holds, grouped by namespace in order */
static int drain(struct cl_ev *ev, struct sched_ev_rec *recs)
{
	char name[KVFS_NS_MAX + 1];

	for (;;) {
		uint32_t n = 0, ns;

		pthread_mutex_lock(&ev->lock);
		if (ev->overflow) {
			pthread_mutex_unlock(&ev->lock);
			return -ENOBUFS;
		}
		if (!ev->len) {
			pthread_mutex_unlock(&ev->lock);
			return 0;
		}
		ns = ev->ring[ev->head].ns;
		while (ev->len && n < EV_BATCH && ev->ring[ev->head].ns == ns) {
			recs[n].op = ev->ring[ev->head].op;
			memcpy(recs[n].hash, ev->ring[ev->head].hash,
			       KVFS_HASH_LEN);
			n++;
			ev->head = (ev->head + 1) % EV_RING;
			ev->len--;
		}
		pthread_mutex_unlock(&ev->lock);
		/* a namespace removed meanwhile: its blocks went with it */
		if (ns_name(ev->c, ns, name) < 0)
			continue;
		if (send_frame(ev, name, recs, n) < 0)
			return -EPIPE;
	}
}

static void *ev_main(void *arg)
{
	struct cl_ev *ev = arg;
	struct sched_ev_rec *recs = calloc(EV_BATCH, sizeof(*recs));
	bool warned = false;

	if (!recs)
		return NULL;
	pthread_mutex_lock(&ev->lock);
	while (!ev->stop) {
		struct timespec ts;
		int rc = 0;

		/* a new leader: RESET and resync it from scratch */
		if (ev->moved && ev->fd >= 0) {
			pthread_mutex_unlock(&ev->lock);
			ev_disconnect(ev);
		} else {
			pthread_mutex_unlock(&ev->lock);
		}
		if (ev->fd < 0) {
			rc = ev_connect(ev);
			if (rc == 0)
				rc = resync(ev);
			if (rc < 0 && rc != -ENOTCONN && !warned)
				kvfs_warn("conductor %s:%s: %s (retrying)",
					  ev->host, ev->port, strerror(-rc));
			warned = rc < 0;
		}
		if (rc == 0)
			rc = drain(ev, recs);
		if (rc == 0)
			rc = keepalive(ev);
		if (rc == 0 && cl_ho_broken(ev->c))
			rc = -ECONNRESET;
		if (rc < 0 && ev->fd >= 0)
			ev_disconnect(ev);
		pthread_mutex_lock(&ev->lock);
		if (ev->stop)
			break;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += rc < 0 ? EV_RETRY_MS / 1000 : 1;
		if (rc < 0 || !ev->len)
			pthread_cond_timedwait(&ev->wake, &ev->lock, &ts);
	}
	pthread_mutex_unlock(&ev->lock);
	free(recs);
	return NULL;
}

int cl_ev_start(struct kvfsd_cluster *c, const char *addr,
		const char *secret_file)
{
	struct cl_ev *ev = calloc(1, sizeof(*ev));
	char *end;
	unsigned long node = strtoul(c->node_id, &end, 10);
	int rc;

	if (!ev)
		return -ENOMEM;
	if (*end || end == c->node_id || node > 65535) {
		kvfs_err("--conductor needs a numeric --node-id (0..65535), "
			 "not \"%s\": it is the conductor's node number",
			 c->node_id);
		free(ev);
		return -EINVAL;
	}
	if (!cl_lead_wanted(addr) &&
	    kvfs_split_hostport(addr, ev->host, sizeof(ev->host), ev->port,
				sizeof(ev->port))) {
		kvfs_err("--conductor %s: expected HOST:PORT or [V6]:PORT",
			 addr);
		free(ev);
		return -EINVAL;
	}
	if (secret_file) {
		rc = cl_read_secret(secret_file, &ev->secret, &ev->secret_len);
		if (rc < 0) {
			free(ev);
			return rc;
		}
	}
	ev->ring = calloc(EV_RING, sizeof(*ev->ring));
	if (!ev->ring) {
		free(ev->secret);
		free(ev);
		return -ENOMEM;
	}
	ev->c = c;
	ev->node = (uint16_t)node;
	ev->fd = -1;
	pthread_mutex_init(&ev->lock, NULL);
	pthread_cond_init(&ev->wake, NULL);
	kv_store_set_event_hook(c->st, hook, ev);
	rc = -pthread_create(&ev->thread, NULL, ev_main, ev);
	if (rc < 0) {
		kv_store_set_event_hook(c->st, NULL, NULL);
		free(ev->ring);
		free(ev->secret);
		free(ev);
		return rc;
	}
	c->ev = ev;
	return 0;
}

void cl_ev_target(struct kvfsd_cluster *c, const char *addr)
{
	struct cl_ev *ev = c->ev;
	char host[sizeof(ev->host)] = "", port[sizeof(ev->port)] = "";

	if (addr &&
	    kvfs_split_hostport(addr, host, sizeof(host), port, sizeof(port))) {
		kvfs_warn("the conductor leader's events address '%s' is not "
			  "HOST:PORT",
			  addr);
		host[0] = port[0] = '\0';
	}
	pthread_mutex_lock(&ev->lock);
	if (strcmp(host, ev->host) || strcmp(port, ev->port)) {
		memcpy(ev->host, host, sizeof(host));
		memcpy(ev->port, port, sizeof(port));
		ev->moved = true;
		pthread_cond_signal(&ev->wake);
		if (host[0])
			kvfs_info("conductor leader: events to %s:%s", host,
				  port);
		else
			kvfs_info("conductor leader: none at present");
	}
	pthread_mutex_unlock(&ev->lock);
}

void cl_ev_stop(struct kvfsd_cluster *c)
{
	struct cl_ev *ev = c->ev;

	cl_lead_stop(c); /* it calls cl_ev_target */
	if (!ev)
		return;
	kv_store_set_event_hook(c->st, NULL, NULL);
	pthread_mutex_lock(&ev->lock);
	ev->stop = true;
	pthread_cond_signal(&ev->wake);
	pthread_mutex_unlock(&ev->lock);
	pthread_join(ev->thread, NULL);
	ev_disconnect(ev);
	if (ev->secret)
		explicit_bzero(ev->secret, ev->secret_len);
	free(ev->secret);
	pthread_mutex_destroy(&ev->lock);
	pthread_cond_destroy(&ev->wake);
	free(ev->ring);
	free(ev);
	c->ev = NULL;
}
