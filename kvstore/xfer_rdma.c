/*
 * xfer_rdma.c - the rdma data path: RC queue pairs, the pool one MR.
 *
 * The engine opens the first device, allocates a protection domain and
 * registers the whole pool (every slot, contiguous in one mapping) as one
 * memory region, so any slot is addressable by a peer with one rkey and
 * nothing is registered per transfer.  Each client connection gets one RC
 * QP; its endpoint (lid, gid, qpn, psn, rkey, pool range) is swapped with
 * the server's in RDMA_EP frames over the authenticated TCP connection,
 * which also carries every request:
 *
 *   fetch  LOCATE -> the server pins the block (a kv_store_get reference)
 *          and answers its address; the client RDMA READs it into a
 *          fresh local slot, checks the crc, seals, sends RELEASE
 *   push   ALLOC -> the server reserves a slot (kv_store_create) and
 *          answers its address; the client RDMA WRITEs from its pinned
 *          slot, then COMMIT -> the server checks the crc and seals
 *
 * A peer that authenticated may read and write any slot of our pool
 * through the rkey: the cluster secret is the trust boundary, as it is
 * for what a peer may PUT over tcp.
 *
 * Completions: callers post with wr_id pointing at a wait record on their
 * stack and poll the CQ under poll_lock, handing each completion to its
 * owner.  A wait past its deadline moves the QP to ERR, which flushes
 * every outstanding work request, and reaps its own flush before
 * returning, so no completion ever names a dead stack frame.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>
#include <openssl/rand.h>

#include "src/common/crc32c.h"
#include "src/common/log.h"
#include "src/common/probe.h"
#include "kvstore/pool.h" /* the pool behind the store: base and length */
#include "kvstore/xfer_int.h"

#define CQ_DEPTH 128
#define MAX_WR 64
#define MAX_PINS 1024

struct rdma_eng {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	uint8_t port;
	struct ibv_port_attr pattr;
	union ibv_gid gid;
	uint8_t *base;
	uint64_t len;
};

/* server side: a slot held for a peer between LOCATE/ALLOC and
 * RELEASE/COMMIT */
struct pin {
	uint64_t token; /* 0: free entry */
	bool write;
	struct kv_ref ref; /* LOCATE */
	uint32_t wh;	   /* ALLOC */
	uint64_t size;
	uint32_t crc;
	char ns[KV_WIRE_NS_MAX + 1];
	uint8_t hash[KVFS_HASH_LEN];
};

struct rdma_conn {
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct kv_wire_ep remote;
	pthread_mutex_t poll_lock;
	struct pin *pins; /* server: MAX_PINS; reader thread only */
	uint64_t next_token;
};

struct rdma_wait {
	volatile int done;
	enum ibv_wc_status status;
};

int xfer_rdma_probe(char *why, size_t len)
{
	return kvfs_rdma_probe(why, len);
}

static struct rdma_eng *eng(const struct kv_xfer *x)
{
	return x->tp;
}

static int rdma_init(struct kv_xfer *x, char *why, size_t len)
{
	const struct kv_pool *pool = kv_store_pool(x->store);
	struct ibv_device **list;
	struct rdma_eng *e;
	int n = 0, rc = -ENODEV;

	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	list = ibv_get_device_list(&n);
	if (!list || n == 0) {
		snprintf(why, len, "no RDMA device");
		goto out_free;
	}
	e->ctx = ibv_open_device(list[0]);
	if (!e->ctx) {
		snprintf(why, len, "cannot open %s: errno %d",
			 ibv_get_device_name(list[0]), errno);
		goto out_list;
	}
	e->port = 1;
	if (ibv_query_port(e->ctx, e->port, &e->pattr) != 0 ||
	    e->pattr.state != IBV_PORT_ACTIVE) {
		snprintf(why, len, "%s port 1 is not active",
			 ibv_get_device_name(list[0]));
		goto out_close;
	}
	if (ibv_query_gid(e->ctx, e->port, 0, &e->gid) != 0)
		memset(&e->gid, 0, sizeof(e->gid));
	e->pd = ibv_alloc_pd(e->ctx);
	if (!e->pd) {
		snprintf(why, len, "ibv_alloc_pd failed");
		goto out_close;
	}
	e->base = kv_pool_slot(pool, 0);
	e->len = kv_pool_data_len(pool);
	e->mr = ibv_reg_mr(e->pd, e->base, e->len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_WRITE);
	if (!e->mr) {
		snprintf(why, len,
			 "cannot register the pool (%llu bytes) "
			 "as one MR: errno %d",
			 (unsigned long long)e->len, errno);
		rc = -ENOMEM;
		goto out_pd;
	}
	snprintf(why, len, "%s, pool registered as one MR",
		 ibv_get_device_name(list[0]));
	ibv_free_device_list(list);
	x->tp = e;
	return 0;

out_pd:
	ibv_dealloc_pd(e->pd);
out_close:
	ibv_close_device(e->ctx);
out_list:
	if (list)
		ibv_free_device_list(list);
out_free:
	free(e);
	return rc;
}

static void rdma_fini(struct kv_xfer *x)
{
	struct rdma_eng *e = eng(x);

	if (!e)
		return;
	ibv_dereg_mr(e->mr);
	ibv_dealloc_pd(e->pd);
	ibv_close_device(e->ctx);
	free(e);
	x->tp = NULL;
}

/* ---- queue pairs --------------------------------------------------- */

static struct rdma_conn *rconn_new(struct kv_xfer *x, bool server)
{
	struct rdma_eng *e = eng(x);
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = MAX_WR,
			 .max_recv_wr = 1,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = e->port,
		.qp_access_flags =
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE,
	};
	struct rdma_conn *rc = calloc(1, sizeof(*rc));

	if (!rc)
		return NULL;
	pthread_mutex_init(&rc->poll_lock, NULL);
	rc->next_token = 1;
	if (server) {
		rc->pins = calloc(MAX_PINS, sizeof(*rc->pins));
		if (!rc->pins)
			goto out_free;
	}
	rc->cq = ibv_create_cq(e->ctx, CQ_DEPTH, NULL, NULL, 0);
	if (!rc->cq)
		goto out_free;
	qa.send_cq = qa.recv_cq = rc->cq;
	rc->qp = ibv_create_qp(e->pd, &qa);
	if (!rc->qp)
		goto out_cq;
	if (ibv_modify_qp(rc->qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS) != 0)
		goto out_qp;
	return rc;
out_qp:
	ibv_destroy_qp(rc->qp);
out_cq:
	ibv_destroy_cq(rc->cq);
out_free:
	free(rc->pins);
	free(rc);
	return NULL;
}

static void local_ep(struct kv_xfer *x, struct rdma_conn *rc, uint32_t psn,
		     struct kv_wire_ep *ep)
{
	struct rdma_eng *e = eng(x);

	memset(ep, 0, sizeof(*ep));
	ep->lid = e->pattr.lid;
	ep->port = e->port;
	ep->mtu = (uint8_t)e->pattr.active_mtu;
	ep->qpn = rc->qp->qp_num;
	ep->psn = psn & 0xffffff;
	ep->rkey = e->mr->rkey;
	ep->addr = (uint64_t)(uintptr_t)e->base;
	ep->len = e->len;
	memcpy(ep->gid, e->gid.raw, sizeof(ep->gid));
}

/* INIT -> RTR -> RTS toward the remote endpoint */
static int qp_connect(struct kv_xfer *x, struct rdma_conn *rc, uint32_t my_psn,
		      const struct kv_wire_ep *r)
{
	struct rdma_eng *e = eng(x);
	enum ibv_mtu mtu = r->mtu < e->pattr.active_mtu ? (enum ibv_mtu)r->mtu
							: e->pattr.active_mtu;
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = mtu ? mtu : IBV_MTU_1024,
		.dest_qp_num = r->qpn,
		.rq_psn = r->psn,
		.max_dest_rd_atomic = 16,
		.min_rnr_timer = 12,
		.ah_attr = { .dlid = r->lid, .port_num = e->port },
	};
	static const uint8_t zero[16];

	if (memcmp(r->gid, zero, sizeof(zero)) != 0) {
		/* RoCE (and routed IB) need the global route header */
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, r->gid, 16);
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.grh.sgid_index = 0;
	}
	if (ibv_modify_qp(rc->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER) != 0)
		return -EIO;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = my_psn & 0xffffff;
	a.max_rd_atomic = 16;
	if (ibv_modify_qp(rc->qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				  IBV_QP_MAX_QP_RD_ATOMIC) != 0)
		return -EIO;
	rc->remote = *r;
	return 0;
}

static void rconn_free(struct rdma_conn *rc)
{
	ibv_destroy_qp(rc->qp);
	ibv_destroy_cq(rc->cq);
	pthread_mutex_destroy(&rc->poll_lock);
	free(rc->pins);
	free(rc);
}

static uint32_t rand_psn(void)
{
	uint32_t v = 0;

	RAND_bytes((unsigned char *)&v, sizeof(v));
	return v & 0xffffff;
}

static int rdma_conn_init(struct kv_xfer *x, struct xconn *c, uint64_t deadline)
{
	struct kv_wire_msg m = { .type = KV_WIRE_RDMA_EP }, reply;
	struct rdma_conn *rc = rconn_new(x, false);
	uint32_t psn = rand_psn();
	int err;

	if (!rc) {
		kvfs_warn("xfer: %s: cannot make a QP (errno %d), tcp instead",
			  c->peer, errno);
		return -ENOMEM;
	}
	local_ep(x, rc, psn, &m.ep);
	err = xconn_call(c, &m, KV_WIRE_RDMA_EP, &reply, deadline);
	if (err == 0)
		err = qp_connect(x, rc, psn, &reply.ep);
	if (err < 0) {
		kvfs_warn("xfer: %s: rdma setup failed (%s), tcp instead",
			  c->peer, strerror(-err));
		rconn_free(rc);
		return err;
	}
	c->tp = rc;
	return 0;
}

static void rdma_conn_fini(struct xconn *c)
{
	struct rdma_conn *rc = c->tp;

	if (!rc)
		return;
	if (rc->pins) {
		for (unsigned i = 0; i < MAX_PINS; i++) {
			struct pin *p = &rc->pins[i];

			if (!p->token)
				continue;
			if (p->write)
				kv_store_abort(c->x->store, p->wh);
			else
				kv_store_put(c->x->store, &p->ref);
		}
	}
	rconn_free(rc);
	c->tp = NULL;
}

/* ---- one-sided operations ------------------------------------------ */

static int rdma_wait_wc(struct xconn *c, struct rdma_wait *w, uint64_t deadline)
{
	struct rdma_conn *rc = c->tp;
	bool flushed = false;

	while (!w->done) {
		struct ibv_wc wc[16];
		int n;

		pthread_mutex_lock(&rc->poll_lock);
		n = ibv_poll_cq(rc->cq, 16, wc);
		for (int i = 0; i < n; i++) {
			struct rdma_wait *o =
				(struct rdma_wait *)(uintptr_t)wc[i].wr_id;

			o->status = wc[i].status;
			o->done = 1;
		}
		pthread_mutex_unlock(&rc->poll_lock);
		if (n < 0)
			return -EIO;
		if (w->done)
			break;
		if (!flushed && xfer_now_ms() >= deadline) {
			struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

			/* flush everything posted; ours completes too */
			ibv_modify_qp(rc->qp, &a, IBV_QP_STATE);
			flushed = true;
			xconn_kill(c, -ETIMEDOUT);
		}
		if (n == 0) {
			struct timespec ts = { 0, 20000 };

			nanosleep(&ts, NULL);
		}
	}
	if (flushed)
		return -ETIMEDOUT;
	if (w->status != IBV_WC_SUCCESS) {
		kvfs_warn("xfer: %s: rdma: %s", c->peer,
			  ibv_wc_status_str(w->status));
		xconn_kill(c, -EIO);
		return -EIO;
	}
	return 0;
}

static int rdma_rw(struct xconn *c, enum ibv_wr_opcode op, void *local,
		   uint64_t len, uint64_t raddr, uint32_t rkey,
		   uint64_t deadline)
{
	struct rdma_conn *rc = c->tp;
	struct rdma_eng *e = eng(c->x);
	struct rdma_wait w = { 0 };
	struct ibv_sge sge = {
		.addr = (uint64_t)(uintptr_t)local,
		.length = (uint32_t)len,
		.lkey = e->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = (uint64_t)(uintptr_t)&w,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = raddr, .rkey = rkey },
	}, *bad;
	int err;

	if (len == 0)
		return 0;
	/* the remote range must lie inside the pool the peer announced */
	if (raddr < rc->remote.addr || len > rc->remote.len ||
	    raddr - rc->remote.addr > rc->remote.len - len)
		return -EBADMSG;
	err = ibv_post_send(rc->qp, &wr, &bad);
	if (err)
		return -err; /* ibverbs returns a positive errno */
	return rdma_wait_wc(c, &w, deadline);
}

/* ---- client side --------------------------------------------------- */

static int rdma_fetch_start(struct xconn *c, struct xreq *r, const char *ns,
			    const uint8_t *hash)
{
	return xfer_block_req(c, r, KV_WIRE_LOCATE, ns, hash);
}

static void release(struct xconn *c, uint64_t token, uint64_t deadline)
{
	struct kv_wire_msg m = { .type = KV_WIRE_RELEASE, .token = token };

	xconn_call(c, &m, KV_WIRE_RELEASE_OK, NULL, deadline);
}

static int rdma_fetch_finish(struct xconn *c, struct xreq *r, uint64_t deadline)
{
	struct kv_store *st = c->x->store;
	const struct kv_wire_msg *m = &r->reply;
	uint32_t id, wh;
	void *p;
	int rc;

	rc = xconn_wait(c, r, deadline);
	if (rc < 0)
		return rc;
	if (m->size > kv_store_slot_size(st)) {
		rc = -EFBIG;
		goto out_release;
	}
	rc = xfer_ns_ensure(c->x, r->ns, m->block_tokens, m->ns_open, &id);
	if (rc < 0)
		goto out_release;
	rc = kv_store_create(st, id, r->hash, m->has_parent ? m->parent : NULL,
			     &wh);
	if (rc == -EEXIST) {
		rc = 0;
		goto out_release;
	}
	if (rc < 0)
		goto out_release;
	p = kv_store_wptr(st, wh);
	rc = p ? rdma_rw(c, IBV_WR_RDMA_READ, p, m->size, m->addr, m->rkey,
			 deadline)
	       : -EIO;
	if (rc == 0 && kvfs_crc32c(0, p, m->size) != m->crc)
		rc = -EBADMSG;
	if (rc == 0)
		rc = kv_store_set_size(st, wh, m->size);
	/* the crc was just checked over the slot: the store need not */
	if (rc == 0)
		rc = kv_store_seal_crc(st, wh, m->crc);
	else
		kv_store_abort(st, wh);
out_release:
	release(c, m->token, deadline);
	return rc;
}

static int rdma_push(struct xconn *c, const char *ns, const uint8_t *hash,
		     uint64_t deadline)
{
	struct kv_store *st = c->x->store;
	struct kv_wire_msg m = { .type = KV_WIRE_ALLOC }, reply;
	struct kv_ref ref;
	int rc;

	rc = xfer_pin_block(c->x, ns, hash, &ref, &m);
	if (rc < 0)
		return rc;
	rc = xconn_call(c, &m, KV_WIRE_ALLOC_OK, &reply, deadline);
	if (rc == -EEXIST) { /* the peer has it already */
		rc = 0;
		goto out_put;
	}
	if (rc < 0)
		goto out_put;
	rc = rdma_rw(c, IBV_WR_RDMA_WRITE, (void *)ref.data, ref.size,
		     reply.addr, reply.rkey, deadline);
	memset(&m, 0, sizeof(m));
	m.type = KV_WIRE_COMMIT;
	m.token = reply.token;
	if (rc == 0)
		rc = xconn_call(c, &m, KV_WIRE_PUT_OK, NULL, deadline);
	else /* COMMIT of an unwritten slot fails its crc: aborted */
		xconn_call(c, &m, KV_WIRE_PUT_OK, NULL, deadline);
out_put:
	kv_store_put(st, &ref);
	return rc;
}

/* ---- server side --------------------------------------------------- */

static struct pin *pin_new(struct rdma_conn *rc)
{
	for (unsigned i = 0; i < MAX_PINS; i++)
		if (!rc->pins[i].token) {
			rc->pins[i].token = rc->next_token++;
			return &rc->pins[i];
		}
	return NULL;
}

static struct pin *pin_find(struct rdma_conn *rc, uint64_t token, bool write)
{
	if (!token)
		return NULL;
	for (unsigned i = 0; i < MAX_PINS; i++)
		if (rc->pins[i].token == token && rc->pins[i].write == write)
			return &rc->pins[i];
	return NULL;
}

static int serve_ep(struct xconn *c, const struct kv_wire_msg *m)
{
	struct kv_wire_msg out = { .type = KV_WIRE_RDMA_EP, .id = m->id };
	uint32_t psn = rand_psn();
	struct rdma_conn *rc;

	if (c->tp) /* one QP per connection */
		return -EBADMSG;
	rc = rconn_new(c->x, true);
	if (!rc)
		return xconn_send_err(c, m->id, ENOMEM);
	if (qp_connect(c->x, rc, psn, &m->ep) < 0) {
		rconn_free(rc);
		return xconn_send_err(c, m->id, EIO);
	}
	c->tp = rc;
	local_ep(c->x, rc, psn, &out.ep);
	return xio_send_msg(c, &out, xfer_now_ms() + c->x->timeout_ms);
}

static int serve_locate(struct xconn *c, const struct kv_wire_msg *m)
{
	struct kv_wire_msg out = { .type = KV_WIRE_LOCATE_OK, .id = m->id };
	struct kv_store *st = c->x->store;
	struct rdma_conn *rc = c->tp;
	struct kv_block_info bi;
	uint32_t id, bt;
	struct pin *p;
	int err;

	err = kv_store_ns_find(st, m->ns, &id, &bt);
	p = pin_new(rc);
	if (!p)
		return xconn_send_err(c, m->id, EAGAIN);
	if (err == 0)
		err = kv_store_get(st, id, m->hash, &p->ref);
	/* a spilled block is outside the registered pool (store.h) */
	if (err == 0 &&
	    (err = p->ref.spilled ? -EFBIG
				  : kv_store_stat(st, id, m->hash, &bi)) < 0)
		kv_store_put(st, &p->ref);
	if (err < 0) {
		p->token = 0;
		return xconn_send_err(c, m->id, -err);
	}
	p->write = false;
	out.size = p->ref.size;
	out.crc = bi.checksum;
	out.block_tokens = bt;
	out.has_parent = bi.has_parent;
	memcpy(out.parent, bi.parent, KVFS_HASH_LEN);
	out.addr = (uint64_t)(uintptr_t)p->ref.data;
	out.rkey = eng(c->x)->mr->rkey;
	out.token = p->token;
	atomic_fetch_add(&c->x->st.served, 1);
	atomic_fetch_add(&c->x->st.served_bytes, p->ref.size);
	return xio_send_msg(c, &out, xfer_now_ms() + c->x->timeout_ms);
}

static int serve_alloc(struct xconn *c, const struct kv_wire_msg *m)
{
	struct kv_wire_msg out = { .type = KV_WIRE_ALLOC_OK, .id = m->id };
	struct kv_store *st = c->x->store;
	struct rdma_conn *rc = c->tp;
	uint32_t id;
	struct pin *p;
	void *ptr;
	int err;

	if (m->size > kv_store_slot_size(st))
		return xconn_send_err(c, m->id, EFBIG);
	err = xfer_ns_ensure(c->x, m->ns, m->block_tokens, m->ns_open, &id);
	if (err < 0)
		return xconn_send_err(c, m->id, -err);
	p = pin_new(rc);
	if (!p)
		return xconn_send_err(c, m->id, EAGAIN);
	err = kv_store_create(st, id, m->hash, m->has_parent ? m->parent : NULL,
			      &p->wh);
	ptr = err == 0 ? kv_store_wptr(st, p->wh) : NULL;
	if (err == 0 && !ptr) {
		kv_store_abort(st, p->wh);
		err = -EIO;
	}
	if (err < 0) {
		p->token = 0;
		return xconn_send_err(c, m->id, -err);
	}
	p->write = true;
	p->size = m->size;
	p->crc = m->crc;
	snprintf(p->ns, sizeof(p->ns), "%s", m->ns);
	memcpy(p->hash, m->hash, KVFS_HASH_LEN);
	out.addr = (uint64_t)(uintptr_t)ptr;
	out.rkey = eng(c->x)->mr->rkey;
	out.token = p->token;
	return xio_send_msg(c, &out, xfer_now_ms() + c->x->timeout_ms);
}

static int serve_commit(struct xconn *c, const struct kv_wire_msg *m)
{
	struct kv_wire_msg out = { .type = KV_WIRE_PUT_OK, .id = m->id };
	struct kv_store *st = c->x->store;
	struct pin *p = pin_find(c->tp, m->token, true);
	void *ptr;
	int err;

	if (!p)
		return xconn_send_err(c, m->id, ENOENT);
	ptr = kv_store_wptr(st, p->wh);
	err = ptr && kvfs_crc32c(0, ptr, p->size) == p->crc ? 0 : -EBADMSG;
	if (err == 0)
		err = kv_store_set_size(st, p->wh, p->size);
	if (err == 0)
		err = kv_store_seal_crc(st, p->wh, p->crc);
	else
		kv_store_abort(st, p->wh);
	p->token = 0;
	atomic_fetch_add(&c->x->st.served, 1);
	if (err < 0)
		return xconn_send_err(c, m->id, -err);
	atomic_fetch_add(&c->x->st.served_bytes, p->size);
	xfer_inserted(c->x, p->ns, p->hash);
	return xio_send_msg(c, &out, xfer_now_ms() + c->x->timeout_ms);
}

static int serve_release(struct xconn *c, const struct kv_wire_msg *m)
{
	struct kv_wire_msg out = { .type = KV_WIRE_RELEASE_OK, .id = m->id };
	struct pin *p = pin_find(c->tp, m->token, false);

	if (!p)
		return xconn_send_err(c, m->id, ENOENT);
	kv_store_put(c->x->store, &p->ref);
	p->token = 0;
	return xio_send_msg(c, &out, xfer_now_ms() + c->x->timeout_ms);
}

static int rdma_serve(struct xconn *c, const struct kv_wire_msg *m)
{
	if (m->type == KV_WIRE_RDMA_EP)
		return serve_ep(c, m);
	if (!c->tp) /* no QP yet: nothing else of ours makes sense */
		return -EBADMSG;
	switch (m->type) {
	case KV_WIRE_LOCATE:
		return serve_locate(c, m);
	case KV_WIRE_RELEASE:
		return serve_release(c, m);
	case KV_WIRE_ALLOC:
		return serve_alloc(c, m);
	case KV_WIRE_COMMIT:
		return serve_commit(c, m);
	default:
		return -EBADMSG;
	}
}

const struct xfer_ops xfer_rdma_ops = {
	.name = "rdma",
	.init = rdma_init,
	.fini = rdma_fini,
	.conn_init = rdma_conn_init,
	.conn_fini = rdma_conn_fini,
	.fetch_start = rdma_fetch_start,
	.fetch_finish = rdma_fetch_finish,
	.push = rdma_push,
	.serve = rdma_serve,
};
