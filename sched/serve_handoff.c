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
 * Binding: a request held by the conductor (the queue policy) has no
 * src until its dispatch, so it is remembered at its schedule with its
 * keys off the table (and its block names), and bound at the dispatch.
 * At the binding, the prefix src holds already seals no INSERT: its
 * blocks dst lacks are due at once, on a queue of their own (bounded)
 * that the event thread, woken through the listener's pipe, stages like
 * an INSERT frame's, since only it writes the streams' outputs.
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
#include <unistd.h>

#include "kvstore/auth.h"
#include "sched/serve_int.h"
#include "src/common/le.h"

#define KEY_BUCKETS (1u << 18)
#define REQ_BUCKETS (1u << 12)

struct ho_req;

struct ho_key {
	uint64_t key;
	struct ho_req *req;
	struct ho_key *next, **pprev; /* the key's chain; pprev NULL: off it */
};

/* a held request's block names, until its dispatch */
struct ho_names {
	uint8_t ns_len;
	char ns[KVFS_NS_MAX];
	uint8_t hash[][KVFS_HASH_LEN];
};

struct ho_req {
	uint64_t id;
	uint16_t dst;
	uint8_t nsrc;		       /* 0: held, not bound yet */
	uint16_t src[SCHED_CPP_LIMIT]; /* whose INSERT hands off; lead first */
	double t;		       /* when it was scheduled, or bound */
	uint32_t n, left;	       /* keys; of those still waited for */
	struct ho_names *names;	       /* held with names; else NULL */
	struct ho_req *hnext;	       /* the id's chain */
	struct ho_req *prev, *next;    /* by age, oldest first */
	struct ho_key keys[];
};

/* blocks of one binding's cached prefix, due on dst */
struct ho_due {
	struct ho_due *next;
	uint16_t src, dst;
	uint8_t ns_len;
	char ns[KVFS_NS_MAX];
	uint32_t n;
	uint8_t hash[][KVFS_HASH_LEN];
};

struct srv_ho {
	struct ho_key **kb;
	struct ho_req **rb;
	struct ho_req *oldest, *youngest;
	size_t nreq, nkeys; /* nkeys: the sum of every request's left */
	size_t max_req, max_keys;
	struct ho_due *due, **due_tail;
	size_t ndue;	/* blocks in due */
	bool due_woken; /* the event thread was woken for them */
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
	h->due_tail = &h->due;
	*out = h;
	return 0;
}

static void key_link(struct srv_ho *h, struct ho_key *k)
{
	struct ho_key **pp = &h->kb[key_slot(k->key)];

	k->next = *pp;
	k->pprev = pp;
	if (*pp)
		(*pp)->pprev = &k->next;
	*pp = k;
}

/* k is no longer waited for */
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

static void age_unlink(struct srv_ho *h, struct ho_req *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		h->oldest = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		h->youngest = r->prev;
}

static void age_append(struct srv_ho *h, struct ho_req *r)
{
	r->next = NULL;
	r->prev = h->youngest;
	if (h->youngest)
		h->youngest->next = r;
	else
		h->oldest = r;
	h->youngest = r;
}

static void req_free(struct srv_ho *h, struct ho_req *r)
{
	struct ho_req **pp = &h->rb[req_slot(r->id)];

	for (uint32_t i = 0; i < r->n; i++)
		key_unlink(h, &r->keys[i]);
	/* a held request's keys were never on the table */
	h->nkeys -= r->left;
	while (*pp != r)
		pp = &(*pp)->hnext;
	*pp = r->hnext;
	age_unlink(h, r);
	h->nreq--;
	free(r->names);
	free(r);
}

void srv_ho_destroy(struct srv_ho *h)
{
	if (!h)
		return;
	while (h->oldest)
		req_free(h, h->oldest);
	srv_ho_due_take(h, NULL, NULL);
	free(h->kb);
	free(h->rb);
	free(h);
}

static struct ho_req *req_find(const struct srv_ho *h, uint64_t id)
{
	struct ho_req *r;

	for (r = h->rb[req_slot(id)]; r; r = r->hnext)
		if (r->id == id)
			return r;
	return NULL;
}

/* a request of n keys, held (none on the table yet) */
static int req_new(struct srv_ho *h, uint64_t id, const uint64_t *keys,
		   uint32_t n, double now, struct ho_req **out)
{
	struct ho_req *r, **rp;

	if (req_find(h, id))
		return -EEXIST;
	if (h->nreq >= h->max_req || n > h->max_keys - h->nkeys)
		return -ENOSPC;
	r = malloc(sizeof(*r) + (size_t)n * sizeof(r->keys[0]));
	if (!r)
		return -ENOMEM;
	r->id = id;
	r->dst = 0;
	r->nsrc = 0;
	r->t = now;
	r->n = r->left = n;
	r->names = NULL;
	for (uint32_t i = 0; i < n; i++) {
		r->keys[i].key = keys[i];
		r->keys[i].req = r;
		r->keys[i].next = NULL;
		r->keys[i].pprev = NULL;
	}
	h->nkeys += n;
	rp = &h->rb[req_slot(id)];
	r->hnext = *rp;
	*rp = r;
	age_append(h, r);
	h->nreq++;
	*out = r;
	return 0;
}

static bool names_given(const struct srv_ho_names *nm)
{
	return nm && nm->hash && nm->ns && nm->ns[0];
}

/* the cached prefix's blocks dst lacks, onto the due queue as far as
 * it has room; the rest counted in *over */
static uint32_t due_add(struct srv_ho *h, const struct ho_req *r, uint32_t plen,
			const struct srv_ho_names *nm, srv_ho_holds_fn holds,
			void *arg, uint32_t *over)
{
	uint32_t want = 0, room, m = 0;
	size_t ns_len = strlen(nm->ns);
	struct ho_due *g;

	for (uint32_t i = 0; i < plen; i++)
		want += !holds(arg, r->dst, r->keys[i].key);
	room = h->ndue < SRV_HO_MAX_DUE ? SRV_HO_MAX_DUE - (uint32_t)h->ndue
					: 0;
	room = want < room ? want : room;
	*over += want - room;
	if (!room || ns_len > KVFS_NS_MAX)
		return 0;
	g = malloc(sizeof(*g) + (size_t)room * KVFS_HASH_LEN);
	if (!g) {
		*over += room;
		return 0;
	}
	for (uint32_t i = 0; i < plen && m < room; i++)
		if (!holds(arg, r->dst, r->keys[i].key))
			memcpy(g->hash[m++], nm->hash[i], KVFS_HASH_LEN);
	g->next = NULL;
	g->src = r->src[0];
	g->dst = r->dst;
	g->ns_len = (uint8_t)ns_len;
	memcpy(g->ns, nm->ns, ns_len);
	g->n = m;
	*h->due_tail = g;
	h->due_tail = &g->next;
	h->ndue += m;
	return m;
}

/*
 * Bind r (held) to src[0..nsrc) and dst: its prefix that src[0] holds
 * (by holds; none without) is due at once where dst lacks it, and not
 * waited for; its other keys go on the table.  r is freed when nothing
 * is left.  1 remembered or due, 0 nothing to hand off.
 */
static int req_bind(struct srv_ho *h, struct ho_req *r, const uint16_t *src,
		    uint32_t nsrc, uint16_t dst, const struct srv_ho_names *nm,
		    srv_ho_holds_fn holds, void *arg, double now, uint32_t *due,
		    uint32_t *over)
{
	uint32_t plen = 0;

	*due = *over = 0;
	if (nsrc == 0 || src[0] == dst || r->n == 0) {
		req_free(h, r);
		return 0;
	}
	r->dst = dst;
	for (uint32_t i = 0; i < nsrc && i < SCHED_CPP_LIMIT; i++) {
		uint32_t j;

		/* the decode node's own INSERT hands nothing off */
		for (j = 0; j < r->nsrc && r->src[j] != src[i]; j++)
			;
		if (j == r->nsrc && src[i] != dst)
			r->src[r->nsrc++] = src[i];
	}
	while (holds && plen < r->n && holds(arg, r->src[0], r->keys[plen].key))
		plen++;
	if (plen && names_given(nm))
		*due = due_add(h, r, plen, nm, holds, arg, over);
	/* the prefix seals no INSERT on src: nothing to wait for there */
	r->left -= plen;
	h->nkeys -= plen;
	for (uint32_t i = plen; i < r->n; i++)
		key_link(h, &r->keys[i]);
	free(r->names);
	r->names = NULL;
	/* the TTL counts from the binding: a held request's hand-off
	 * starts at its dispatch */
	r->t = now;
	age_unlink(h, r);
	age_append(h, r);
	if (r->left == 0) {
		req_free(h, r);
		return *due > 0;
	}
	return 1;
}

int srv_ho_add(struct srv_ho *h, uint64_t id, uint16_t src, uint16_t dst,
	       const uint64_t *keys, uint32_t n, double now)
{
	uint32_t due, over;
	int rc;

	rc = srv_ho_start(h, id, &src, 1, dst, keys, NULL, n, NULL, NULL, now,
			  &due, &over);
	return rc < 0 ? rc : 0;
}

int srv_ho_start(struct srv_ho *h, uint64_t id, const uint16_t *src,
		 uint32_t nsrc, uint16_t dst, const uint64_t *keys,
		 const struct srv_ho_names *nm, uint32_t n,
		 srv_ho_holds_fn holds, void *arg, double now, uint32_t *due,
		 uint32_t *over)
{
	struct ho_req *r;
	int rc;

	*due = *over = 0;
	if (nsrc == 0 || src[0] == dst || n == 0)
		return 0;
	rc = req_new(h, id, keys, n, now, &r);
	if (rc < 0)
		return rc;
	return req_bind(h, r, src, nsrc, dst, nm, holds, arg, now, due, over);
}

int srv_ho_hold(struct srv_ho *h, uint64_t id, const uint64_t *keys,
		const struct srv_ho_names *nm, uint32_t n, double now)
{
	struct ho_req *r;
	size_t ns_len;
	int rc;

	if (n == 0)
		return 0;
	rc = req_new(h, id, keys, n, now, &r);
	if (rc < 0 || !names_given(nm))
		return rc;
	ns_len = strlen(nm->ns);
	if (ns_len > KVFS_NS_MAX)
		return 0;
	r->names = malloc(sizeof(*r->names) + (size_t)n * KVFS_HASH_LEN);
	if (!r->names) {
		req_free(h, r);
		return -ENOMEM;
	}
	r->names->ns_len = (uint8_t)ns_len;
	memcpy(r->names->ns, nm->ns, ns_len);
	memcpy(r->names->hash, nm->hash, (size_t)n * KVFS_HASH_LEN);
	return 0;
}

int srv_ho_dispatch(struct srv_ho *h, uint64_t id, const uint16_t *src,
		    uint32_t nsrc, uint16_t dst, srv_ho_holds_fn holds,
		    void *arg, double now, uint32_t *due, uint32_t *over)
{
	struct ho_req *r = req_find(h, id);
	char ns[KVFS_NS_MAX + 1];
	struct srv_ho_names nm = { 0 };

	*due = *over = 0;
	if (!r)
		return -ENOENT;
	if (r->nsrc)
		return -EALREADY;
	if (r->names) {
		memcpy(ns, r->names->ns, r->names->ns_len);
		ns[r->names->ns_len] = 0;
		nm.ns = ns;
		nm.hash = (const uint8_t(*)[KVFS_HASH_LEN])r->names->hash;
	}
	return req_bind(h, r, src, nsrc, dst, &nm, holds, arg, now, due, over);
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
		if (k->key != key)
			continue;
		for (i = 0; i < r->nsrc && r->src[i] != node; i++)
			;
		if (i == r->nsrc)
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

uint32_t srv_ho_due_take(struct srv_ho *h, srv_ho_due_fn fn, void *arg)
{
	uint32_t n = 0;

	while (h->due) {
		struct ho_due *g = h->due;

		for (uint32_t i = 0; fn && i < g->n; i++)
			fn(arg, g->src, g->dst, g->ns, g->ns_len, g->hash[i]);
		n += g->n;
		h->due = g->next;
		free(g);
	}
	h->due_tail = &h->due;
	h->ndue = 0;
	return n;
}

bool srv_ho_forget(struct srv_ho *h, uint64_t id)
{
	struct ho_req *r = req_find(h, id);

	if (r)
		req_free(h, r);
	return r != NULL;
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

/* ---- the daemon's side: binding, counting, waking ------------------------ */

static bool ho_holds(void *arg, uint16_t node, uint64_t key)
{
	return sched_block_held(arg, node, key);
}

/* count a binding's outcome, and have its due blocks sent */
static void ho_bound(struct srv *srv, int rc, uint32_t due, uint32_t over)
{
	struct srv_ho *h = srv->ho;
	char b = SRV_WAKE_FETCH;
	ssize_t w;

	if (rc == 1)
		srv->c.ho_requests++;
	else if (rc == -ENOSPC || rc == -ENOMEM)
		srv->c.ho_refused++;
	srv->c.ho_dropped += over;
	if (!due)
		return;
	if (!srv->ev_running) {
		/* no event listener, so no stream to send them on */
		srv->c.ho_dropped += srv_ho_due_take(h, NULL, NULL);
		return;
	}
	if (h->due_woken)
		return;
	/* one byte waits at most (the listener clears due_woken under this
	 * lock before it stages), so this write never blocks */
	do
		w = write(srv->wake[1], &b, 1);
	while (w < 0 && errno == EINTR);
	h->due_woken = w == 1;
}

void srv_handoff_add(struct srv *srv, const struct sched_decision *d,
		     const struct sched_body *q)
{
	struct srv_ho_names nm = {
		.hash = (const uint8_t(*)[KVFS_HASH_LEN])q->hash, .ns = q->ns
	};
	uint32_t due = 0, over = 0;
	uint16_t src, dst;
	int rc;

	if (!q->nkeys)
		return;
	if (d->held) {
		/* its prefill instance is known at its dispatch */
		rc = srv_ho_hold(srv->ho, d->id, q->keys, &nm, q->nkeys,
				 srv_now(srv));
		if (rc < 0)
			srv->c.ho_refused++;
		return;
	}
	src = (uint16_t)srv->pf_node[d->prefill];
	dst = (uint16_t)srv->dc_node[d->decode];
	rc = srv_ho_start(srv->ho, d->id, &src, 1, dst, q->keys, &nm, q->nkeys,
			  ho_holds, srv->s, srv_now(srv), &due, &over);
	ho_bound(srv, rc, due, over);
}

void srv_handoff_dispatch(struct srv *srv, const struct sched_dispatch *d)
{
	uint16_t src[SCHED_CPP_LIMIT];
	uint32_t due, over,
		n = d->ninst < SCHED_CPP_LIMIT ? d->ninst : SCHED_CPP_LIMIT;
	int rc;

	for (uint32_t k = 0; k < n; k++)
		src[k] = (uint16_t)srv->pf_node[d->inst[k]];
	rc = srv_ho_dispatch(srv->ho, d->id, src, n,
			     (uint16_t)srv->dc_node[d->decode], ho_holds,
			     srv->s, srv_now(srv), &due, &over);
	ho_bound(srv, rc, due, over);
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

/* ---- the blocks due at once, on the event thread ------------------------- */

struct due_arg {
	struct srv_fe_stage *st;
	srv_fe_find_fn find;
	void *arg;
	struct srv_counters *c;
};

static void due_stage(void *arg, uint16_t src, uint16_t dst, const char *ns,
		      uint8_t ns_len, const uint8_t *hash)
{
	struct due_arg *a = arg;

	srv_fe_stage_add(a->st, a->find, a->arg, a->c, src, ns, ns_len, &dst, 1,
			 hash);
}

void srv_handoff_due(struct srv *srv, struct srv_fe_stage *st,
		     srv_fe_find_fn find, void *arg)
{
	struct due_arg a = { .st = st, .find = find, .arg = arg, .c = &srv->c };

	if (!srv->ho)
		return;
	/* a binding from now on wakes the listener again */
	srv->ho->due_woken = false;
	srv_ho_due_take(srv->ho, due_stage, &a);
	if (st->n)
		srv_fe_stage_flush(st, find, arg, &srv->c);
}
