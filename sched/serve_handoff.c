/*
 * serve_handoff.c - the prefill-to-decode handoff of `kvconductor serve`
 * (serve_int.h, "handoff"; kvconductor(8) HANDOFF).
 *
 * The books: every key of a request scheduled with its prefill on node
 * src and its decode on another node dst, in a chained hash table by key
 * (so an INSERT finds who waits for it in O(chain)), each entry also on
 * its request (so /v1/complete and expiry drop a request's entries
 * without a scan).  An INSERT from src takes the entry off: a block is
 * handed off once per request, however often it is sealed again.  A
 * request whose every block went, or that completed, or that is older
 * than the handoff's TTL, is freed.  Caps on requests and keys bound the
 * memory: past them a request is not remembered (and counted).
 *
 * The FETCH frames: what an INSERT frame makes due is staged per
 * (source, namespace), then encoded into each destination stream's
 * output buffer (bounded; a full one drops and counts), which the event
 * listener drains without blocking when its socket can take it.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "kvstore/auth.h"
#include "sched/serve_int.h"
#include "src/common/le.h"

#define KEY_BUCKETS (1u << 18)
#define REQ_BUCKETS (1u << 12)

struct ho_req;

struct ho_key {
	uint64_t key;
	struct ho_req *req;
	struct ho_key *next, **pprev; /* the key's chain; pprev NULL: gone */
};

struct ho_req {
	uint64_t id;
	uint16_t src, dst;
	double t;		    /* when it was scheduled */
	uint32_t n, left;	    /* keys; of those still waited for */
	struct ho_req *hnext;	    /* the id's chain */
	struct ho_req *prev, *next; /* by age, oldest first */
	struct ho_key keys[];
};

struct srv_ho {
	struct ho_key **kb;
	struct ho_req **rb;
	struct ho_req *oldest, *youngest;
	size_t nreq, nkeys;
	size_t max_req, max_keys;
};

static size_t key_slot(uint64_t key)
{
	/* a block key is a hash prefix, but block_keys may be small
	 * numbers: mix them */
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 46) &
	       (KEY_BUCKETS - 1);
}

static size_t req_slot(uint64_t id)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 52) & (REQ_BUCKETS - 1);
}

int srv_ho_create(size_t max_req, size_t max_keys, struct srv_ho **out)
{
	struct srv_ho *h = calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	h->kb = calloc(KEY_BUCKETS, sizeof(*h->kb));
	h->rb = calloc(REQ_BUCKETS, sizeof(*h->rb));
	if (!h->kb || !h->rb) {
		srv_ho_destroy(h);
		return -ENOMEM;
	}
	h->max_req = max_req;
	h->max_keys = max_keys;
	*out = h;
	return 0;
}

static void key_unlink(struct srv_ho *h, struct ho_key *k)
{
	if (!k->pprev)
		return;
	*k->pprev = k->next;
	if (k->next)
		k->next->pprev = k->pprev;
	k->pprev = NULL;
	k->req->left--;
	h->nkeys--;
}

static void req_free(struct srv_ho *h, struct ho_req *r)
{
	struct ho_req **pp = &h->rb[req_slot(r->id)];

	for (uint32_t i = 0; i < r->n; i++)
		key_unlink(h, &r->keys[i]);
	while (*pp != r)
		pp = &(*pp)->hnext;
	*pp = r->hnext;
	if (r->prev)
		r->prev->next = r->next;
	else
		h->oldest = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		h->youngest = r->prev;
	h->nreq--;
	free(r);
}

void srv_ho_destroy(struct srv_ho *h)
{
	if (!h)
		return;
	while (h->oldest)
		req_free(h, h->oldest);
	free(h->kb);
	free(h->rb);
	free(h);
}

int srv_ho_add(struct srv_ho *h, uint64_t id, uint16_t src, uint16_t dst,
	       const uint64_t *keys, uint32_t n, double now)
{
	struct ho_req *r, **rp;
	struct ho_key **pp;

	if (src == dst || n == 0)
		return 0;
	for (r = h->rb[req_slot(id)]; r; r = r->hnext)
		if (r->id == id)
			return -EEXIST;
	if (h->nreq >= h->max_req || n > h->max_keys - h->nkeys)
		return -ENOSPC;
	r = malloc(sizeof(*r) + (size_t)n * sizeof(r->keys[0]));
	if (!r)
		return -ENOMEM;
	r->id = id;
	r->src = src;
	r->dst = dst;
	r->t = now;
	r->n = r->left = n;
	for (uint32_t i = 0; i < n; i++) {
		struct ho_key *k = &r->keys[i];

		pp = &h->kb[key_slot(keys[i])];
		k->key = keys[i];
		k->req = r;
		k->next = *pp;
		k->pprev = pp;
		if (*pp)
			(*pp)->pprev = &k->next;
		*pp = k;
	}
	h->nkeys += n;
	rp = &h->rb[req_slot(id)];
	r->hnext = *rp;
	*rp = r;
	r->next = NULL;
	r->prev = h->youngest;
	if (h->youngest)
		h->youngest->next = r;
	else
		h->oldest = r;
	h->youngest = r;
	h->nreq++;
	return 0;
}

uint32_t srv_ho_sealed(struct srv_ho *h, uint16_t node, uint64_t key,
		       uint16_t *dst, uint32_t max)
{
	struct ho_key *k = h->kb[key_slot(key)], *next;
	uint32_t n = 0;

	for (; k; k = next) {
		struct ho_req *r = k->req;
		uint32_t i;

		next = k->next;
		if (k->key != key || r->src != node)
			continue;
		for (i = 0; i < n && dst[i] != r->dst; i++)
			;
		if (i == n && n < max)
			dst[n++] = r->dst;
		key_unlink(h, k);
		/* next may be r's too (a key twice in one prompt): it is
		 * still linked, so r lives until that one is taken */
		if (r->left == 0)
			req_free(h, r);
	}
	return n;
}

bool srv_ho_forget(struct srv_ho *h, uint64_t id)
{
	struct ho_req *r;

	for (r = h->rb[req_slot(id)]; r; r = r->hnext)
		if (r->id == id) {
			req_free(h, r);
			return true;
		}
	return false;
}

uint64_t srv_ho_expire(struct srv_ho *h, double now, double ttl)
{
	uint64_t n = 0;

	while (h->oldest && now - h->oldest->t >= ttl) {
		req_free(h, h->oldest);
		n++;
	}
	return n;
}

void srv_ho_size(const struct srv_ho *h, size_t *reqs, size_t *keys)
{
	*reqs = h->nreq;
	*keys = h->nkeys;
}

void srv_handoff_add(struct srv *srv, const struct sched_decision *d,
		     const uint64_t *keys, uint32_t n)
{
	uint32_t src = srv->pf_node[d->prefill], dst = srv->dc_node[d->decode];
	int rc;

	if (src == dst || !n)
		return;
	rc = srv_ho_add(srv->ho, d->id, (uint16_t)src, (uint16_t)dst, keys, n,
			srv_now(srv));
	if (rc == 0)
		srv->c.ho_requests++;
	else
		srv->c.ho_refused++;
}

/* ---- FETCH frames out ---------------------------------------------------- */

void srv_fe_release(struct srv_fe_out *o)
{
	free(o->buf);
	memset(o, 0, sizeof(*o));
}

int srv_fe_put(struct srv_fe_out *o, struct kv_tagger *tag, uint16_t node,
	       uint16_t src, const char *ns, const uint8_t *hashes, uint32_t n)
{
	size_t size = sched_fe_frame_size(strlen(ns), n);
	size_t need = size + (tag ? 4 + KV_WIRE_TAG_LEN : 0);
	size_t head = tag ? 4 : 0;
	uint8_t *p;
	long len;
	int rc = 0;

	/* what was sent goes first, so the cap counts what waits */
	if (o->off) {
		memmove(o->buf, o->buf + o->off, o->len - o->off);
		o->len -= o->off;
		o->off = 0;
	}
	if (o->len + need > SRV_FE_OUT_MAX)
		return -ENOBUFS;
	if (o->len + need > o->cap) {
		size_t cap = o->cap ? o->cap : 16384;

		while (cap < o->len + need)
			cap *= 2;
		p = realloc(o->buf, cap);
		if (!p)
			return -ENOMEM;
		o->buf = p;
		o->cap = cap;
	}
	p = o->buf + o->len;
	len = sched_fe_encode(p + head, size, node, o->seq, src, ns, hashes, n);
	if (len < 0)
		return (int)len;
	if (tag) {
		kv_put_le32(p, (uint32_t)len);
		rc = kv_tagger_begin(tag);
		if (rc == 0)
			rc = kv_tagger_update(tag, p, 4 + (size_t)len);
		if (rc == 0)
			rc = kv_tagger_finish(tag, p + 4 + len);
		if (rc < 0)
			return rc;
	}
	o->len += need;
	o->seq++;
	return 0;
}

int srv_fe_send(struct srv_fe_out *o, int fd)
{
	while (o->off < o->len) {
		ssize_t n = send(fd, o->buf + o->off, o->len - o->off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 1;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		o->off += (size_t)n;
	}
	o->off = o->len = 0;
	return 0;
}

/* ---- staging an INSERT frame's fetches ----------------------------------- */

void srv_fe_stage_flush(struct srv_fe_stage *st, srv_fe_find_fn find, void *arg,
			struct srv_counters *c)
{
	uint8_t(*hs)[KVFS_HASH_LEN] = st->scratch;
	char ns[KVFS_NS_MAX + 1];

	memcpy(ns, st->ns, st->ns_len);
	ns[st->ns_len] = 0;
	/* one destination at a time, its blocks in the order they sealed */
	for (uint32_t i = 0; i < st->n; i++) {
		uint16_t dst = st->item[i].dst;
		struct kv_tagger *tag = NULL;
		struct srv_fe_out *o;
		uint32_t m = 0;
		bool seen = false;

		for (uint32_t j = 0; j < i && !seen; j++)
			seen = st->item[j].dst == dst;
		if (seen)
			continue;
		o = find(arg, dst, &tag);
		for (uint32_t j = i; j <= st->n; j++) {
			if (j < st->n && st->item[j].dst == dst)
				memcpy(hs[m++], st->item[j].hash,
				       KVFS_HASH_LEN);
			if (!m || (m < SCHED_FE_MAX_RECORDS && j < st->n))
				continue;
			if (o && srv_fe_put(o, tag, dst, st->src, ns, hs[0],
					    m) == 0) {
				c->ho_fetch_frames++;
				c->ho_fetch_blocks += m;
			} else {
				c->ho_dropped += m;
			}
			m = 0;
		}
	}
	st->n = 0;
}

void srv_fe_stage_add(struct srv_fe_stage *st, srv_fe_find_fn find, void *arg,
		      struct srv_counters *c, uint16_t src, const char *ns,
		      uint8_t ns_len, const uint16_t *dst, uint32_t ndst,
		      const uint8_t *hash)
{
	if (st->n && (st->src != src || st->ns_len != ns_len ||
		      memcmp(st->ns, ns, ns_len)))
		srv_fe_stage_flush(st, find, arg, c);
	st->src = src;
	st->ns_len = ns_len;
	memcpy(st->ns, ns, ns_len);
	for (uint32_t i = 0; i < ndst; i++) {
		if (st->n == SRV_FE_STAGE)
			srv_fe_stage_flush(st, find, arg, c);
		st->item[st->n].dst = dst[i];
		memcpy(st->item[st->n].hash, hash, KVFS_HASH_LEN);
		st->n++;
	}
}
