/*
 * xfer_tcp.c - connection I/O on io_uring, and the tcp data path.
 *
 * Receive: the reader thread reads each frame's header and meta into a
 * small buffer, decides where the data goes, and then receives the data
 * straight into a fresh pool slot (kv_store_create + kv_store_wptr): a
 * block crosses the node with no bounce buffer.  Data nobody wants (a
 * late reply, a block we already have) is drained into scratch space.
 *
 * Send: the block goes out straight from the slot a kv_store_get
 * reference pins, with IORING_OP_SEND_ZC where the kernel has it (the
 * pages are not copied into the socket buffer).  A zero-copy send posts
 * two completions, the result and later a notification that the kernel
 * has let go of the pages; the reference is held until the second, since
 * dropping it earlier would let eviction reuse a slot still being sent.
 * Where SEND_ZC is missing or refused (EOPNOTSUPP), plain SEND is used
 * from then on; to a peer on this host (loopback) always, since the kernel
 * copies loopback pages anyway and the notifications only cost (kvbench
 * xfer: 0.49x of a socket copy with SEND_ZC on loopback, 1.2x without).
 *
 * Receive: straight into the fresh slot, the CRC-32C computed chunk by
 * chunk as each recv completes, while the bytes are in the cache; the
 * store then seals with that crc (kv_store_seal_crc) instead of reading
 * the block a second time.
 *
 * Tags (wire.h): a frame is sent with its tags, computed before each
 * part goes out; a received frame's meta is acted on only once its tag
 * checks, and its data is sealed only once the data's tag does, the tag
 * computed chunk by chunk as the data lands, like the CRC.
 *
 * Overlap: each side's passes over one chunk run while an io_uring
 * worker copies the next (receive) or this one (send) through the socket
 * (IOSQE_ASYNC, only where there is a pass to overlap).  On 16 cores
 * this took kvbench xfer at 2 MiB from 0.43-0.73x of a socket copy to
 * 0.74-1.02x; on 2 cores, where both engines share the cores, it
 * neither gains nor loses (docs/BENCHMARKS.md).
 *
 * Timeouts: a frame, once started, must make progress every timeout_ms;
 * an idle connection waits forever (in ticks, watching stop).  A stalled
 * operation is ended by shutting the socket down, which completes every
 * operation pending on it, so no ring is ever torn down with an operation
 * writing into a slot.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "src/common/crc32c.h"
#include "src/common/log.h"
#include "kvstore/xfer_int.h"

#define SRING_DEPTH 8
#define RRING_DEPTH 4
#define SCRATCH 65536
#define SEND_CHUNK (256u << 10) /* data tagged and sent this much at once */
#define RECV_CHUNK (256u << 10) /* and received, checked and tagged */

int xio_init(struct xconn *c)
{
	int rc;

	rc = io_uring_queue_init(SRING_DEPTH, &c->sring, 0);
	if (rc < 0) {
		kvfs_err("xfer: io_uring_queue_init: %s", strerror(-rc));
		return rc;
	}
	rc = io_uring_queue_init(RRING_DEPTH, &c->rring, 0);
	if (rc < 0) {
		kvfs_err("xfer: io_uring_queue_init: %s", strerror(-rc));
		io_uring_queue_exit(&c->sring);
		return rc;
	}
	c->rings = true;
	return 0;
}

void xio_fini(struct xconn *c)
{
	if (!c->rings)
		return;
	io_uring_queue_exit(&c->sring);
	io_uring_queue_exit(&c->rring);
	c->rings = false;
}

static void ms_ts(struct __kernel_timespec *ts, uint64_t ms)
{
	ts->tv_sec = (long long)(ms / 1000);
	ts->tv_nsec = (long long)(ms % 1000) * 1000000;
}

/*
 * Wait for one completion on ring.  Past deadline (0: none) or on stop,
 * the socket is shut down so the operation completes, and *late says
 * why; the completion is still reaped, so the ring is left clean.
 */
static int reap(struct xconn *c, struct io_uring *ring, uint64_t deadline,
		int *late, struct io_uring_cqe *out)
{
	struct __kernel_timespec ts;
	struct io_uring_cqe *cqe;
	unsigned waited = 0;
	int rc;

	for (;;) {
		uint64_t now = xfer_now_ms(), step = XFER_TICK_MS;

		if (!*late && deadline && now >= deadline)
			*late = -ETIMEDOUT;
		if (!*late && atomic_load(&c->stop))
			*late = -ECANCELED;
		if (*late) {
			shutdown(c->fd, SHUT_RDWR);
			/* a shut socket completes at once; a zero-copy
			 * notification may wait for the stack to free its
			 * buffers, so this is bounded all the same */
			if (++waited > 50)
				return -ETIMEDOUT;
		} else if (deadline && deadline - now < step) {
			step = deadline - now;
		}
		ms_ts(&ts, step ? step : 1);
		rc = io_uring_wait_cqe_timeout(ring, &cqe, &ts);
		if (rc == 0) {
			*out = *cqe;
			io_uring_cqe_seen(ring, cqe);
			return 0;
		}
		if (rc != -ETIME && rc != -EINTR && rc != -EAGAIN)
			return rc;
	}
}

/* ---- send ---------------------------------------------------------- */

/*
 * One send of len bytes at p, submitted; send_reap collects it.  async:
 * on an io_uring worker, so that the caller can tag the next chunk while
 * this one is copied out (IOSQE_ASYNC).
 */
static int send_submit(struct xconn *c, const uint8_t *p, size_t len, bool zc,
		       bool async)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&c->sring);
	int rc;

	if (!sqe)
		return -EBUSY; /* cannot happen: one op at a time */
	if (zc)
		io_uring_prep_send_zc(sqe, c->fd, p, len, MSG_NOSIGNAL, 0);
	else
		io_uring_prep_send(sqe, c->fd, p, len, MSG_NOSIGNAL);
	if (async)
		io_uring_sqe_set_flags(sqe, IOSQE_ASYNC);
	rc = io_uring_submit(&c->sring);
	return rc < 0 ? rc : 0;
}

/*
 * The end of what send_submit started, notification included: the bytes
 * it took in *sent (0 after a result worth retrying; a refused SEND_ZC
 * clears *zc for good), or an error.  Always reaps: no send is left
 * reading a slot its caller may let go of.
 */
static int send_reap(struct xconn *c, bool *zc, uint64_t deadline, int *late,
		     size_t *sent)
{
	struct io_uring_cqe cqe;
	bool more;
	int res, rc;

	*sent = 0;
	rc = reap(c, &c->sring, deadline, late, &cqe);
	if (rc < 0)
		return rc;
	res = cqe.res;
	more = *zc && (cqe.flags & IORING_CQE_F_MORE);
	while (more) {
		/* the notification: the pages are ours again */
		rc = reap(c, &c->sring, deadline, late, &cqe);
		if (rc < 0)
			return rc;
		if (cqe.flags & IORING_CQE_F_NOTIF)
			more = false;
	}
	if (*late)
		return *late;
	if (res == -EOPNOTSUPP && *zc) {
		atomic_store(&c->x->zc, false);
		kvfs_info("xfer: SEND_ZC refused, plain send from now");
		*zc = false;
		return 0;
	}
	if (res == -EINTR || res == -EAGAIN)
		return 0;
	if (res < 0)
		return res;
	if (res == 0)
		return -EPIPE;
	*sent = (size_t)res;
	return 0;
}

static int send_seg(struct xconn *c, const uint8_t *p, size_t len, bool zc,
		    uint64_t deadline, int *late)
{
	size_t off = 0, sent;
	int rc = 0;

	while (rc == 0 && off < len) {
		rc = send_submit(c, p + off, len - off, zc, false);
		if (rc == 0)
			rc = send_reap(c, &zc, deadline, late, &sent);
		off += sent;
	}
	return rc;
}

static size_t chunk_at(size_t len, size_t off, size_t chunk)
{
	return len - off < chunk ? len - off : chunk;
}

/*
 * A block's data, tagged a chunk at a time: each chunk's tag pass reads
 * it just before it goes, from the cache, and the tag pass over the next
 * chunk runs while an io_uring worker copies this one out, so that on a
 * machine with cores to spare the tag costs the sender little time.
 */
static int send_data(struct xconn *c, const uint8_t *data, size_t dlen,
		     bool tag, uint64_t deadline, int *late)
{
	int rc = 0;

	if (tag && dlen)
		rc = kv_tagger_update(&c->stag, data,
				      chunk_at(dlen, 0, SEND_CHUNK));
	for (size_t off = 0; rc == 0 && off < dlen;) {
		size_t n = chunk_at(dlen, off, SEND_CHUNK), next = off + n;
		bool zc = !c->local && atomic_load(&c->x->zc);
		bool ahead = tag && next < dlen;
		size_t sent = 0;
		int trc = 0;

		rc = send_submit(c, data + off, n, zc, ahead);
		if (rc < 0)
			break;
		if (ahead)
			trc = kv_tagger_update(
				&c->stag, data + next,
				chunk_at(dlen, next, SEND_CHUNK));
		rc = send_reap(c, &zc, deadline, late, &sent);
		if (rc == 0 && sent < n) /* the rest, in line */
			rc = send_seg(c, data + off + sent, n - sent, zc,
				      deadline, late);
		if (rc == 0)
			rc = trc;
		off = next;
	}
	return rc;
}

/* the tag of len bytes at p (send_lock held) */
static int tag_of(struct xconn *c, const void *p, size_t len,
		  uint8_t tag[KV_WIRE_TAG_LEN])
{
	int rc = kv_tagger_begin(&c->stag);

	if (rc == 0)
		rc = kv_tagger_update(&c->stag, p, len);
	if (rc == 0)
		rc = kv_tagger_finish(&c->stag, tag);
	return rc;
}

int xio_send(struct xconn *c, const void *hdr, size_t hlen, const void *data,
	     size_t dlen, uint64_t deadline)
{
	uint8_t buf[KV_WIRE_HDR_LEN + KV_WIRE_META_MAX + KV_WIRE_TAG_LEN];
	uint8_t dtag[KV_WIRE_TAG_LEN];
	bool has_data = hlen > 5 && kv_wire_type_has_data(((uint8_t *)hdr)[5]);
	bool tag;
	int late = 0, rc;

	if (hlen > KV_WIRE_HDR_LEN + KV_WIRE_META_MAX)
		return -EINVAL;
	pthread_mutex_lock(&c->send_lock);
	pthread_mutex_lock(&c->lock);
	rc = c->dead;
	pthread_mutex_unlock(&c->lock);
	memcpy(buf, hdr, hlen);
	if (rc == 0 && c->tagged) {
		/* header and meta, then their tag, in one send */
		kv_wire_set_tagged(buf);
		rc = tag_of(c, buf, hlen, buf + hlen);
		hlen += KV_WIRE_TAG_LEN;
	}
	if (rc == 0)
		rc = send_seg(c, buf, hlen, false, deadline, &late);
	tag = c->tagged && has_data;
	if (rc == 0 && tag)
		rc = kv_tagger_begin(&c->stag);
	if (rc == 0)
		rc = send_data(c, data, dlen, tag, deadline, &late);
	if (rc == 0 && tag)
		rc = kv_tagger_finish(&c->stag, dtag);
	if (rc == 0 && tag)
		rc = send_seg(c, dtag, sizeof(dtag), false, deadline, &late);
	if (rc < 0)
		xconn_kill(c, rc);
	pthread_mutex_unlock(&c->send_lock);
	return rc;
}

int xio_send_msg(struct xconn *c, const struct kv_wire_msg *m,
		 uint64_t deadline)
{
	uint8_t buf[KV_WIRE_HDR_LEN + KV_WIRE_META_MAX];
	long n = kv_wire_encode(m, buf, sizeof(buf));

	if (n < 0)
		return (int)n;
	return xio_send(c, buf, (size_t)n, NULL, 0, deadline);
}

/* ---- receive ------------------------------------------------------- */

/* the CRC and tag passes over bytes that have landed */
static int rx_check(struct xconn *c, const uint8_t *p, size_t len,
		    uint32_t *crc)
{
	if (crc)
		*crc = kvfs_crc32c(*crc, p, len);
	if (c->rtag_on && kv_tagger_update(&c->rtag, p, len) < 0)
		return -EIO;
	return 0;
}

/*
 * Exactly len bytes; idle: no deadline until the first byte.  With crc,
 * the CRC-32C of what arrives is computed as it lands, while it is still
 * in the cache, and so is the tag.  A chunk at a time, and while the
 * passes run over one chunk the next one's recv is already out, on an
 * io_uring worker (IOSQE_ASYNC): with cores to spare, the copy and the
 * checks overlap.
 */
static int rx_crc(struct xconn *c, void *buf, size_t len, bool idle,
		  uint32_t *crc)
{
	uint64_t t = c->x->timeout_ms;
	uint64_t deadline = idle ? 0 : xfer_now_ms() + t;
	bool passes = crc || c->rtag_on, busy = false;
	uint8_t *b = buf;
	struct io_uring_cqe cqe;
	size_t got = 0, done = 0; /* landed; and checked */
	int late = 0, rc = 0;

	while (rc == 0 && done < len) {
		if (!busy && got < len) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&c->rring);

			if (!sqe) {
				rc = -EBUSY;
				break;
			}
			io_uring_prep_recv(sqe, c->fd, b + got,
					   chunk_at(len, got, RECV_CHUNK), 0);
			if (passes && done < got)
				io_uring_sqe_set_flags(sqe, IOSQE_ASYNC);
			rc = io_uring_submit(&c->rring);
			if (rc < 0)
				break;
			rc = 0;
			busy = true;
		}
		if (done < got) {
			rc = rx_check(c, b + done, got - done, crc);
			done = got;
			continue;
		}
		rc = reap(c, &c->rring, deadline, &late, &cqe);
		busy = false;
		if (rc == 0 && late)
			rc = late;
		if (rc < 0)
			break;
		if (cqe.res == -EINTR || cqe.res == -EAGAIN)
			continue;
		if (cqe.res < 0)
			rc = cqe.res;
		else if (cqe.res == 0)
			rc = -ECONNRESET;
		else
			got += (size_t)cqe.res;
		deadline = xfer_now_ms() + t; /* progress: a new window */
	}
	if (busy) {
		/* failed with a recv still out: the socket is shut so that
		 * it ends now, before the caller lets its slot go */
		late = rc;
		reap(c, &c->rring, deadline, &late, &cqe);
	}
	return rc;
}

static int rx(struct xconn *c, void *buf, size_t len, bool idle)
{
	return rx_crc(c, buf, len, idle, NULL);
}

/* what follows is covered by the next tag received */
static int rtag_begin(struct xconn *c)
{
	if (!c->tagged)
		return 0;
	c->rtag_on = true;
	return kv_tagger_begin(&c->rtag);
}

/* receive the tag of what came since rtag_begin and check it: 0, or
 * -EBADMSG (the frame is not the peer's: the connection dies) */
static int rtag_check(struct xconn *c)
{
	uint8_t tag[KV_WIRE_TAG_LEN];
	int rc;

	if (!c->tagged)
		return 0;
	c->rtag_on = false;
	rc = rx(c, tag, sizeof(tag), false);
	if (rc < 0)
		return rc;
	return kv_tagger_check(&c->rtag, tag);
}

/* a block's data nobody wants, and its tag */
static int drain(struct xconn *c, uint8_t *scratch, uint64_t len)
{
	int rc = rtag_begin(c);

	while (rc == 0 && len) {
		size_t n = len < SCRATCH ? (size_t)len : SCRATCH;

		rc = rx(c, scratch, n, false);
		len -= n;
	}
	return rc < 0 ? rc : rtag_check(c);
}

/*
 * Receive a block's data (m->size bytes follow on the stream) into a
 * fresh slot for (ns, hash) and seal it.  Returns 1 when sealed, 0 when
 * the block was here already, or the block's -errno; *fatal gets a
 * stream error, after which the connection is dead.
 */
static int rx_block(struct xconn *c, const char *ns, const uint8_t *hash,
		    const struct kv_wire_msg *m, uint8_t *scratch, int *fatal)
{
	struct kv_store *st = c->x->store;
	uint32_t id, wh, crc = 0;
	int rc;
	void *p;

	*fatal = 0;
	if (m->size > kv_store_slot_size(st)) {
		rc = -EFBIG;
		goto out_drain;
	}
	rc = xfer_ns_ensure(c->x, ns, m->block_tokens, m->ns_open, &id);
	if (rc < 0)
		goto out_drain;
	rc = kv_store_create(st, id, hash, m->has_parent ? m->parent : NULL,
			     &wh);
	if (rc == -EEXIST) {
		rc = 0; /* already have it (or it is being written) */
		goto out_drain;
	}
	if (rc < 0)
		goto out_drain;
	p = kv_store_wptr(st, wh);
	if (!p) {
		kv_store_abort(st, wh);
		rc = -EIO;
		goto out_drain;
	}
	*fatal = rtag_begin(c);
	if (*fatal == 0)
		*fatal = rx_crc(c, p, m->size, false, &crc);
	if (*fatal == 0)
		*fatal = rtag_check(c); /* before anything is sealed */
	if (*fatal < 0) {
		kv_store_abort(st, wh);
		return *fatal;
	}
	if (crc != m->crc) {
		kvfs_warn("xfer: %s: block crc mismatch, dropped", c->peer);
		kv_store_abort(st, wh);
		return -EBADMSG;
	}
	rc = kv_store_set_size(st, wh, m->size);
	if (rc < 0) {
		kv_store_abort(st, wh);
		return rc;
	}
	rc = kv_store_seal_crc(st, wh, crc);
	return rc < 0 ? rc : 1;

out_drain:
	*fatal = drain(c, scratch, m->size);
	return *fatal < 0 ? *fatal : rc;
}

static bool reply_matches(uint8_t req, uint8_t rep)
{
	if (rep == KV_WIRE_ERR)
		return true;
	switch (req) {
	case KV_WIRE_GET:
		return rep == KV_WIRE_GET_OK;
	case KV_WIRE_PUT:
		return rep == KV_WIRE_PUT_OK;
	case KV_WIRE_HAS:
		return rep == KV_WIRE_HAS_OK;
	case KV_WIRE_PING:
		return rep == KV_WIRE_PONG;
	case KV_WIRE_RDMA_EP:
		return rep == KV_WIRE_RDMA_EP;
	case KV_WIRE_LOCATE:
		return rep == KV_WIRE_LOCATE_OK;
	case KV_WIRE_RELEASE:
		return rep == KV_WIRE_RELEASE_OK;
	case KV_WIRE_ALLOC:
		return rep == KV_WIRE_ALLOC_OK;
	case KV_WIRE_COMMIT:
		return rep == KV_WIRE_PUT_OK;
	default:
		return false;
	}
}

/* under c->lock */
static struct xreq *find_req(struct xconn *c, uint64_t id)
{
	for (struct xreq *r = c->pending; r; r = r->next)
		if (r->id == id)
			return r;
	return NULL;
}

/* under c->lock: r answered; unlink and wake its caller */
static void finish_req(struct xconn *c, struct xreq *r, int result,
		       const struct kv_wire_msg *m)
{
	struct xreq **pp;

	for (pp = &c->pending; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	r->result = result;
	r->reply = *m;
	r->done = true;
	pthread_cond_broadcast(&c->cond);
}

static int client_get_ok(struct xconn *c, const struct kv_wire_msg *m,
			 uint8_t *scratch)
{
	char ns[KV_WIRE_NS_MAX + 1];
	uint8_t hash[KVFS_HASH_LEN];
	struct xreq *r;
	int res, fatal;

	pthread_mutex_lock(&c->lock);
	r = find_req(c, m->id);
	if (r && (r->type != KV_WIRE_GET || r->claimed)) {
		pthread_mutex_unlock(&c->lock);
		return -EBADMSG;
	}
	if (r) {
		r->claimed = true;
		snprintf(ns, sizeof(ns), "%s", r->ns);
		memcpy(hash, r->hash, sizeof(hash));
	}
	pthread_mutex_unlock(&c->lock);
	if (!r) /* its caller gave up: nobody wants the bytes */
		return drain(c, scratch, m->size);

	res = rx_block(c, ns, hash, m, scratch, &fatal);
	if (fatal < 0)
		return fatal;
	pthread_mutex_lock(&c->lock);
	r = find_req(c, m->id); /* still there unless it timed out */
	if (r)
		finish_req(c, r, res < 0 ? res : 0, m);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

static int client_frame(struct xconn *c, const struct kv_wire_msg *m,
			uint8_t *scratch)
{
	struct xreq *r;
	int rc = 0;

	if (m->type == KV_WIRE_GET_OK)
		return client_get_ok(c, m, scratch);
	switch (m->type) {
	case KV_WIRE_PUT_OK:
	case KV_WIRE_HAS_OK:
	case KV_WIRE_PONG:
	case KV_WIRE_ERR:
	case KV_WIRE_RDMA_EP:
	case KV_WIRE_LOCATE_OK:
	case KV_WIRE_RELEASE_OK:
	case KV_WIRE_ALLOC_OK:
		break;
	default:
		return -EBADMSG; /* a request, or the handshake again */
	}
	pthread_mutex_lock(&c->lock);
	r = find_req(c, m->id);
	if (r && !reply_matches(r->type, m->type))
		rc = -EBADMSG;
	else if (r)
		finish_req(c, r, m->type == KV_WIRE_ERR ? -(int)m->err : 0, m);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

static int serve_put(struct xconn *c, const struct kv_wire_msg *m,
		     uint8_t *scratch)
{
	struct kv_wire_msg ok = { .type = KV_WIRE_PUT_OK, .id = m->id };
	uint64_t deadline = xfer_now_ms() + c->x->timeout_ms;
	int res, fatal;

	res = rx_block(c, m->ns, m->hash, m, scratch, &fatal);
	if (fatal < 0)
		return fatal;
	atomic_fetch_add(&c->x->st.served, 1);
	if (res < 0)
		return xconn_send_err(c, m->id, -res);
	atomic_fetch_add(&c->x->st.served_bytes, m->size);
	if (res == 1)
		xfer_inserted(c->x, m->ns, m->hash);
	return xio_send_msg(c, &ok, deadline);
}

void xio_reader(struct xconn *c)
{
	uint8_t hbuf[KV_WIRE_HDR_LEN], meta[KV_WIRE_META_MAX];
	struct kv_wire_hdr h;
	struct kv_wire_msg m;
	uint8_t *scratch;
	int rc;

	scratch = malloc(SCRATCH);
	if (!scratch) {
		xconn_kill(c, -ENOMEM);
		return;
	}
	for (;;) {
		/* the header is covered by the meta's tag */
		rc = rtag_begin(c);
		if (rc == 0)
			rc = rx(c, hbuf, sizeof(hbuf), true);
		if (rc < 0)
			break;
		rc = kv_wire_hdr_decode(hbuf, sizeof(hbuf), &h);
		/* after the handshake every frame is tagged */
		if (rc == 0 && c->tagged != !!(h.flags & KV_WIRE_F_TAGGED))
			rc = -EBADMSG;
		if (rc == 0)
			rc = rx(c, meta, h.meta_len, false);
		else
			goto bad;
		if (rc == 0)
			rc = rtag_check(c);
		if (rc == -EBADMSG)
			goto bad;
		if (rc < 0)
			break;
		rc = kv_wire_decode(&h, meta, h.meta_len, &m);
		if (rc < 0)
			goto bad;
		if (c->server && m.type == KV_WIRE_PUT)
			rc = serve_put(c, &m, scratch);
		else if (c->server)
			rc = xfer_serve(c, &m);
		else
			rc = client_frame(c, &m, scratch);
		if (rc == -EBADMSG)
			goto bad;
		if (rc < 0)
			break;
		continue;
	bad:
		atomic_fetch_add(&c->x->st.bad_frames, 1);
		kvfs_warn("xfer: %s: bad frame (%s), closing", c->peer,
			  kv_wire_type_name(h.type));
		rc = -EBADMSG;
		break;
	}
	xconn_kill(c, rc);
	free(scratch);
}

/* ---- the tcp data path --------------------------------------------- */

static int tcp_init(struct kv_xfer *x, char *why, size_t len)
{
	return 0;
}

static void tcp_fini(struct kv_xfer *x)
{
}

static int tcp_fetch_start(struct xconn *c, struct xreq *r, const char *ns,
			   const uint8_t *hash)
{
	return xfer_block_req(c, r, KV_WIRE_GET, ns, hash);
}

static int tcp_fetch_finish(struct xconn *c, struct xreq *r, uint64_t deadline)
{
	return xconn_wait(c, r, deadline);
}

static int tcp_push(struct xconn *c, const char *ns, const uint8_t *hash,
		    uint64_t deadline)
{
	uint8_t buf[KV_WIRE_HDR_LEN + KV_WIRE_META_MAX];
	struct kv_store *st = c->x->store;
	struct kv_wire_msg m = { .type = KV_WIRE_PUT };
	struct xreq r;
	struct kv_ref ref;
	long n;
	int rc;

	rc = xfer_pin_block(c->x, ns, hash, &ref, &m);
	if (rc < 0)
		return rc;
	rc = xconn_track(c, &r, KV_WIRE_PUT);
	if (rc < 0)
		goto out_put;
	m.id = r.id;
	n = kv_wire_encode(&m, buf, sizeof(buf));
	if (n < 0) {
		xconn_kill(c, (int)n);
		xconn_wait(c, &r, deadline);
		rc = (int)n;
		goto out_put;
	}
	/* returns once the kernel is done with the slot's pages */
	xio_send(c, buf, (size_t)n, ref.data, ref.size, deadline);
	rc = xconn_wait(c, &r, deadline);
out_put:
	kv_store_put(st, &ref);
	return rc;
}

const struct xfer_ops xfer_tcp_ops = {
	.name = "tcp",
	.init = tcp_init,
	.fini = tcp_fini,
	.fetch_start = tcp_fetch_start,
	.fetch_finish = tcp_fetch_finish,
	.push = tcp_push,
};
