/*
 * serve_kvev.c - vLLM's KV events: the subscriber thread, the sequence
 * and replay rules, and the engines' blocks in the index
 * (serve_kvev_int.h).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "sched/kvev.h"
#include "sched/serve_kvev_int.h"
#include "src/common/clock.h"

/* ---- the index ----------------------------------------------------------- */

/* srv->lock: another engine of e's node holds key */
static bool other_holds(const struct srv_kvev *kv, const struct kvev_engine *e,
			uint64_t key)
{
	bool held = false;

	pthread_mutex_lock((pthread_mutex_t *)&kv->lock);
	for (uint32_t i = 0; !held && i < kv->n; i++) {
		const struct kvev_engine *o = kv->e[i];

		held = o != e && o->node == e->node &&
		       sched_tab_find(&o->keys, key);
	}
	pthread_mutex_unlock((pthread_mutex_t *)&kv->lock);
	return held;
}

/* srv->lock: every key of e into s */
static void push_all(struct kvev_engine *e, struct sched *s)
{
	for (size_t i = 0; i < e->keys.cap; i++) {
		const uint64_t *slot = e->keys.slot + i * e->keys.stride;

		if (slot[0] && sched_block_insert(s, e->node, slot[1]) < 0) {
			e->c.refused++;
			break;
		}
	}
}

/* srv->lock: e's keys are in the scheduler, if there is one yet */
static void sync_locked(struct kvev_engine *e, struct sched *s)
{
	if (s && e->synced != s) {
		push_all(e, s);
		e->synced = s;
	}
}

/* srv->lock: e holds nothing any more */
static void forget_locked(struct srv_kvev *kv, struct kvev_engine *e)
{
	struct sched *s = kv->srv->s;

	for (size_t i = 0; s && i < e->keys.cap; i++) {
		const uint64_t *slot = e->keys.slot + i * e->keys.stride;

		if (slot[0] && !other_holds(kv, e, slot[1]))
			sched_block_evict(s, e->node, slot[1]);
	}
	/* emptied in place (a 0 key word is an empty slot, tab.h): no
	 * allocation that could fail */
	memset(e->keys.slot, 0,
	       e->keys.cap * e->keys.stride * sizeof(*e->keys.slot));
	e->keys.n = 0;
}

void srv_kvev_node_reset(struct srv *srv, uint32_t node)
{
	struct srv_kvev *kv = srv->kvev;

	if (!kv || !srv->s)
		return;
	pthread_mutex_lock(&kv->lock);
	for (uint32_t i = 0; i < kv->n; i++)
		if (kv->e[i]->node == node && kv->e[i]->synced == srv->s)
			push_all(kv->e[i], srv->s);
	pthread_mutex_unlock(&kv->lock);
}

struct apply_ctx {
	struct srv_kvev *kv;
	struct kvev_engine *e;
};

static int apply_event(void *arg, const struct kvev_event *ev)
{
	struct apply_ctx *a = arg;
	struct kvev_engine *e = a->e;
	struct sched *s = a->kv->srv->s;
	bool refused = false;

	e->c.events++;
	if (ev->type == KVEV_CLEARED) {
		e->c.cleared++;
		forget_locked(a->kv, e);
		return 0;
	}
	if (ev->type == KVEV_STORED && e->block_size >= 0 &&
	    ev->block_size >= 0 && ev->block_size != e->block_size) {
		e->c.mismatched++;
		return 0;
	}
	for (uint32_t i = 0; i < ev->nkeys; i++) {
		uint64_t key = ev->keys[i], *v;

		if (ev->type == KVEV_STORED) {
			if (sched_tab_get(&e->keys, key, &v) < 0)
				return -ENOMEM;
			*v = key;
			e->c.stored++;
			if (s && sched_block_insert(s, e->node, key) < 0)
				refused = true;
		} else if (sched_tab_del(&e->keys, key) == 0) {
			e->c.removed++;
			if (s && !other_holds(a->kv, e, key))
				sched_block_evict(s, e->node, key);
		}
	}
	e->c.refused += refused;
	return 0;
}

/*
 * A batch decoded outside the lock (serve_int.h: nothing but
 * book-keeping under it): its events, their keys in one array.
 */
struct kvev_ops {
	struct kvev_event *ev; /* keys: offsets into keys until applied */
	uint32_t n, cap;
	uint64_t *keys;
	size_t nkeys, capkeys;
};

static int collect_op(void *arg, const struct kvev_event *ev)
{
	struct kvev_ops *o = arg;

	if (o->n == o->cap) {
		uint32_t cap = o->cap ? 2 * o->cap : 16;
		struct kvev_event *p = realloc(o->ev, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		o->ev = p;
		o->cap = cap;
	}
	if (ev->nkeys > o->capkeys - o->nkeys) {
		size_t cap = o->capkeys ? o->capkeys : 256;
		uint64_t *p;

		while (cap - o->nkeys < ev->nkeys)
			cap *= 2;
		p = realloc(o->keys, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		o->keys = p;
		o->capkeys = cap;
	}
	if (ev->nkeys)
		memcpy(o->keys + o->nkeys, ev->keys,
		       ev->nkeys * sizeof(*ev->keys));
	o->ev[o->n] = *ev;
	o->ev[o->n].keys = (const uint64_t *)(uintptr_t)o->nkeys;
	o->nkeys += ev->nkeys;
	o->n++;
	return 0;
}

/* ---- sequence and replay ------------------------------------------------- */

/* apply one batch and take its seq.  A batch that cannot be read is
 * skipped and counted, not replayed: a replay would bring the same
 * bytes. */
static void apply(struct srv_kvev *kv, struct kvev_engine *e, uint64_t seq,
		  const void *buf, size_t len)
{
	struct kvev_ops o = { 0 };
	struct apply_ctx a = { kv, e };
	struct kvev_batch b;
	int rc = kvev_decode(buf, len, collect_op, &o, &b);

	pthread_mutex_lock(&kv->srv->lock);
	sync_locked(e, kv->srv->s);
	e->c.batches++;
	e->c.unknown += b.unknown;
	if (rc < 0)
		e->c.decode_errors++;
	for (uint32_t i = 0; rc == 0 && i < o.n; i++) {
		o.ev[i].keys = o.keys + (uintptr_t)o.ev[i].keys;
		if (apply_event(&a, &o.ev[i]) < 0) {
			e->c.refused++; /* out of memory for its key set */
			break;
		}
	}
	e->have = true;
	e->last = seq;
	pthread_mutex_unlock(&kv->srv->lock);
	free(o.ev);
	free(o.keys);
}

/* batches were lost for good: forget e's blocks, as a kvfsd stream's gap
 * does; what comes next rebuilds them */
static void lost(struct srv_kvev *kv, struct kvev_engine *e)
{
	pthread_mutex_lock(&kv->srv->lock);
	e->c.lost++;
	forget_locked(kv, e);
	pthread_mutex_unlock(&kv->srv->lock);
}

static void count(struct srv_kvev *kv, uint64_t *c)
{
	pthread_mutex_lock(&kv->srv->lock);
	++*c;
	pthread_mutex_unlock(&kv->srv->lock);
}

static bool replay_start(struct srv_kvev *kv, struct kvev_engine *e,
			 uint64_t from, bool initial)
{
	uint8_t be[KVEV_SEQ_LEN];

	if (!e->rep)
		return false;
	for (int i = 0; i < KVEV_SEQ_LEN; i++)
		be[i] = (uint8_t)(from >> (56 - 8 * i));
	if (zmq_send(e->rep, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
	    zmq_send(e->rep, be, sizeof(be), ZMQ_DONTWAIT) < 0) {
		count(kv, &e->c.replay_failures);
		return false;
	}
	count(kv, &e->c.replays);
	e->replaying = true;
	e->initial = initial;
	e->replay_due = kvfs_mono_ns() + KVEV_REPLAY_TIMEOUT_NS;
	return true;
}

static bool pend(struct kvev_engine *e, uint64_t seq, const void *buf,
		 size_t len);
static void replay_fail(struct srv_kvev *kv, struct kvev_engine *e);

/* start a replay from `from` and hold the batch that showed it is
 * needed until it ends; false: no replay (the caller goes on without) */
static bool replay_for(struct srv_kvev *kv, struct kvev_engine *e,
		       uint64_t from, bool initial, uint64_t seq,
		       const void *buf, size_t len)
{
	if (!replay_start(kv, e, from, initial))
		return false;
	if (pend(e, seq, buf, len))
		return true;
	replay_fail(kv, e);
	return false;
}

/* a live batch, or one of those that waited for a replay */
static void live(struct srv_kvev *kv, struct kvev_engine *e, uint64_t seq,
		 const void *buf, size_t len, bool waited)
{
	switch (kvev_seq_check(e->have, e->last, seq)) {
	case KVEV_NEXT:
		/* the first batch heard: what came before it is in the
		 * publisher's replay buffer */
		if (!e->have && seq > 0 && !waited &&
		    replay_for(kv, e, 0, true, seq, buf, len))
			return;
		break;
	case KVEV_GAP:
		if (waited) {
			/* the replay did not fill it */
			lost(kv, e);
			break;
		}
		count(kv, &e->c.gaps);
		if (replay_for(kv, e, e->last + 1, false, seq, buf, len))
			return;
		lost(kv, e);
		break;
	case KVEV_RESTART:
		if (waited)
			return; /* replayed already */
		pthread_mutex_lock(&kv->srv->lock);
		e->c.restarts++;
		forget_locked(kv, e);
		e->have = false;
		pthread_mutex_unlock(&kv->srv->lock);
		if (seq > 0 && replay_for(kv, e, 0, true, seq, buf, len))
			return;
		break;
	}
	apply(kv, e, seq, buf, len);
}

static void replay_end(struct srv_kvev *kv, struct kvev_engine *e)
{
	e->replaying = false;
	for (uint32_t i = 0; i < e->npend; i++) {
		live(kv, e, e->pend[i].seq, e->pend[i].buf, e->pend[i].len,
		     true);
		free(e->pend[i].buf);
	}
	e->npend = 0;
	e->pend_bytes = 0;
}

/* the replay is not answered, or cannot be waited for: the socket is
 * made anew (a late answer must not pass for the next replay's) */
static void replay_fail(struct srv_kvev *kv, struct kvev_engine *e)
{
	count(kv, &e->c.replay_failures);
	zmq_close(e->rep);
	e->rep = srv_kvev_replay_sock(kv->ctx, e->replay_ep);
	replay_end(kv, e);
}

/* hold a live batch until the replay ends; false: no room */
static bool pend(struct kvev_engine *e, uint64_t seq, const void *buf,
		 size_t len)
{
	struct kvev_pend *p;

	if (e->npend == KVEV_MAX_PENDING ||
	    len > KVEV_PENDING_BYTES - e->pend_bytes)
		return false;
	if (!e->pend) {
		e->pend = calloc(KVEV_MAX_PENDING, sizeof(*e->pend));
		if (!e->pend)
			return false;
	}
	p = &e->pend[e->npend];
	p->buf = malloc(len ? len : 1);
	if (!p->buf)
		return false;
	memcpy(p->buf, buf, len);
	p->len = len;
	p->seq = seq;
	e->npend++;
	e->pend_bytes += len;
	return true;
}

/* one replayed batch */
static void replayed(struct srv_kvev *kv, struct kvev_engine *e, uint64_t seq,
		     const void *buf, size_t len)
{
	if (e->initial && !e->have) {
		/* an initial sync takes the oldest batch kept as its start */
		apply(kv, e, seq, buf, len);
		return;
	}
	if (seq <= e->last)
		return;
	if (seq != e->last + 1)
		lost(kv, e); /* no longer in the publisher's buffer */
	apply(kv, e, seq, buf, len);
}

/* ---- the thread ---------------------------------------------------------- */

#define KVEV_MAX_PARTS 4

/* one multipart message: its parts in m, *n of them; false with errno
 * EAGAIN (none waiting), EBADMSG (more than KVEV_MAX_PARTS: read whole
 * and dropped) or another */
static bool recv_msg(void *s, zmq_msg_t *m, int *n)
{
	zmq_msg_t extra;
	int got = 0, more = 1, err = 0;

	while (more) {
		zmq_msg_t *part = got < KVEV_MAX_PARTS ? &m[got] : &extra;

		zmq_msg_init(part);
		if (zmq_msg_recv(part, s, got ? 0 : ZMQ_DONTWAIT) < 0) {
			err = errno;
			zmq_msg_close(part);
			break;
		}
		more = zmq_msg_more(part);
		if (got >= KVEV_MAX_PARTS) {
			zmq_msg_close(part);
			err = EBADMSG;
		}
		got++;
	}
	if (err) {
		for (int i = 0; i < got && i < KVEV_MAX_PARTS; i++)
			zmq_msg_close(&m[i]);
		*n = 0;
		errno = err;
		return false;
	}
	*n = got;
	return true;
}

static void close_msg(zmq_msg_t *m, int n)
{
	for (int i = 0; i < n; i++)
		zmq_msg_close(&m[i]);
}

/* live messages: [topic, seq, payload] */
static void read_sub(struct srv_kvev *kv, struct kvev_engine *e)
{
	for (int k = 0; k < KVEV_BURST; k++) {
		zmq_msg_t m[KVEV_MAX_PARTS];
		uint64_t seq;
		int n;

		if (!recv_msg(e->sub, m, &n)) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			count(kv, &e->c.decode_errors); /* more than 3 parts */
			continue;
		}
		if (n != 3 || kvev_seq(zmq_msg_data(&m[1]), zmq_msg_size(&m[1]),
				       &seq) < 0) {
			count(kv, &e->c.decode_errors);
		} else if (e->replaying) {
			if (!pend(e, seq, zmq_msg_data(&m[2]),
				  zmq_msg_size(&m[2]))) {
				replay_fail(kv, e);
				live(kv, e, seq, zmq_msg_data(&m[2]),
				     zmq_msg_size(&m[2]), true);
			}
		} else {
			live(kv, e, seq, zmq_msg_data(&m[2]),
			     zmq_msg_size(&m[2]), false);
		}
		close_msg(m, n);
	}
}

/* replayed messages: ["", seq, payload] or ["", topic, seq, payload];
 * the end: seq all ones */
static void read_rep(struct srv_kvev *kv, struct kvev_engine *e)
{
	for (int k = 0; e->replaying && k < KVEV_BURST; k++) {
		zmq_msg_t m[KVEV_MAX_PARTS];
		uint64_t seq;
		int n;

		if (!recv_msg(e->rep, m, &n)) {
			if (errno == EAGAIN)
				return;
			replay_fail(kv, e);
			return;
		}
		if (n < 3 || zmq_msg_size(&m[0]) ||
		    kvev_seq(zmq_msg_data(&m[n - 2]), zmq_msg_size(&m[n - 2]),
			     &seq) < 0) {
			close_msg(m, n);
			count(kv, &e->c.decode_errors);
			replay_fail(kv, e);
			return;
		}
		e->replay_due = kvfs_mono_ns() + KVEV_REPLAY_TIMEOUT_NS;
		if (seq == KVEV_SEQ_END)
			replay_end(kv, e);
		else
			replayed(kv, e, seq, zmq_msg_data(&m[n - 1]),
				 zmq_msg_size(&m[n - 1]));
		close_msg(m, n);
	}
}

void *srv_kvev_thread(void *arg)
{
	struct srv_kvev *kv = arg;
	zmq_pollitem_t items[1 + 2 * KVEV_MAX_ENGINES];
	struct kvev_engine *who[1 + 2 * KVEV_MAX_ENGINES];

	for (;;) {
		struct kvev_engine *e[KVEV_MAX_ENGINES];
		uint32_t n, ni = 1;
		long timeout = KVEV_TICK_MS;
		uint64_t now = kvfs_mono_ns();
		char drain[64];

		pthread_mutex_lock(&kv->lock);
		if (kv->stop) {
			pthread_mutex_unlock(&kv->lock);
			break;
		}
		n = kv->n;
		memcpy(e, kv->e, n * sizeof(e[0]));
		pthread_mutex_unlock(&kv->lock);

		/* instances set since: the engines' blocks go in */
		pthread_mutex_lock(&kv->srv->lock);
		for (uint32_t i = 0; i < n; i++)
			sync_locked(e[i], kv->srv->s);
		pthread_mutex_unlock(&kv->srv->lock);

		items[0] = (zmq_pollitem_t){ .fd = kv->wake[0],
					     .events = ZMQ_POLLIN };
		for (uint32_t i = 0; i < n; i++) {
			who[ni] = e[i];
			items[ni++] = (zmq_pollitem_t){ .socket = e[i]->sub,
							.events = ZMQ_POLLIN };
			if (!e[i]->replaying)
				continue;
			if (e[i]->replay_due <= now) {
				replay_fail(kv, e[i]);
				continue;
			}
			if ((long)((e[i]->replay_due - now) / 1000000) <
			    timeout)
				timeout = (long)((e[i]->replay_due - now) /
						 1000000) +
					  1;
			who[ni] = e[i];
			items[ni++] = (zmq_pollitem_t){ .socket = e[i]->rep,
							.events = ZMQ_POLLIN };
		}
		if (zmq_poll(items, (int)ni, timeout) < 0 && errno != EINTR)
			break;
		if (items[0].revents)
			while (read(kv->wake[0], drain, sizeof(drain)) > 0)
				;
		for (uint32_t i = 1; i < ni; i++) {
			if (!(items[i].revents & ZMQ_POLLIN))
				continue;
			if (items[i].socket == who[i]->sub)
				read_sub(kv, who[i]);
			else if (items[i].socket == who[i]->rep)
				read_rep(kv, who[i]);
		}
	}
	return NULL;
}

void srv_kvev_stop(struct srv *srv)
{
	struct srv_kvev *kv = srv->kvev;

	if (!kv)
		return;
	pthread_mutex_lock(&kv->lock);
	kv->stop = true;
	pthread_mutex_unlock(&kv->lock);
	if (kv->running) {
		srv_kvev_wake(kv);
		pthread_join(kv->thread, NULL);
		close(kv->wake[0]);
		close(kv->wake[1]);
	}
	for (uint32_t i = 0; i < kv->n; i++)
		srv_kvev_engine_free(kv->e[i]);
	zmq_ctx_term(kv->ctx);
	pthread_mutex_destroy(&kv->lock);
	free(kv);
	srv->kvev = NULL;
}
