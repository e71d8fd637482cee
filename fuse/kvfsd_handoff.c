/*
 * kvfsd_handoff.c - the decode node's side of the prefill-to-decode
 * handoff: FETCH frames the conductor sends back down the event stream
 * (sched/event.h, "FETCH"; kvconductor(8) HANDOFF).
 *
 * A reader thread per connection (started by the event thread once the
 * connection is up, stopped before it closes it) checks each frame and
 * puts its blocks on a bounded queue; HO_WORKERS threads take them off
 * and pull each one through the cluster's prefetch path
 * (kvfsd_cluster_prefetch: the namespace imported if need be, then the
 * remote read from the home set or any holder).  Nothing here runs on
 * the event thread or a FUSE thread, and nothing waits for room: a full
 * queue drops the block and counts it (the decode engine's open will
 * fetch it, as without a handoff).  A frame that fails its checks ends
 * the connection: the reader shuts the socket down and says so
 * (cl_ho_broken), and the event thread reconnects and resyncs; so it
 * does when the reader sees the conductor close the stream, which the
 * event thread alone would only learn at its next send.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "fuse/kvfsd_cluster_int.h"
#include "kvstore/auth.h"
#include "sched/event.h"
#include "src/common/le.h"
#include "src/common/log.h"

#define HO_QUEUE 4096u /* blocks waiting to be pulled */
#define HO_WORKERS 2

struct ho_item {
	char ns[KVFS_NS_MAX + 1];
	uint8_t hash[KVFS_HASH_LEN];
	uint16_t src;
};

struct cl_ho {
	struct kvfsd_cluster *c;
	pthread_mutex_t lock;
	pthread_cond_t work;
	bool stop;	    /* [lock] */
	atomic_bool cancel; /* the prefetch in progress stops */
	struct ho_item *q;  /* [lock] ring of HO_QUEUE */
	uint32_t head, len; /* [lock] */
	pthread_t worker[HO_WORKERS];
	int nworkers;

	/* the connection's reader: set by attach, cleared by detach, both
	 * called by the event thread only */
	pthread_t reader;
	bool reading;
	atomic_bool detaching;
	atomic_bool broken; /* the reader saw the stream end or break */
	int fd;
	uint16_t node;
	bool tagged;
	struct kv_tagger rtag; /* the conductor's sending key */
	uint64_t next_seq;     /* reader only */

	atomic_uint_fast64_t fetched, already, failed, dropped, bad_frames;
};

/* ---- the queue and its workers ----------------------------------------- */

static void ho_fetch(struct cl_ho *h, const struct ho_item *it)
{
	struct kvfsd_cluster *c = h->c;
	uint8_t hash[1][KVFS_HASH_LEN];
	uint32_t id;
	int res = 0;

	if (kv_store_ns_find(c->st, it->ns, &id, NULL) == 0 &&
	    kv_store_lookup(c->st, id, it->hash) == 1) {
		atomic_fetch_add(&h->already, 1);
		return;
	}
	memcpy(hash[0], it->hash, KVFS_HASH_LEN);
	if (kvfsd_cluster_prefetch(c, NULL, it->ns,
				   (const uint8_t(*)[KVFS_HASH_LEN])hash, 1,
				   &res, &h->cancel) == 1) {
		atomic_fetch_add(&h->fetched, 1);
		return;
	}
	atomic_fetch_add(&h->failed, 1);
	if (res != -ECANCELED)
		kvfs_debug("handoff: %s block from node %u: %s", it->ns,
			   it->src, strerror(-res));
}

static void *ho_main(void *arg)
{
	struct cl_ho *h = arg;
	struct ho_item it;

	pthread_mutex_lock(&h->lock);
	for (;;) {
		while (!h->stop && !h->len)
			pthread_cond_wait(&h->work, &h->lock);
		if (h->stop)
			break;
		it = h->q[h->head];
		h->head = (h->head + 1) % HO_QUEUE;
		h->len--;
		pthread_mutex_unlock(&h->lock);
		ho_fetch(h, &it);
		pthread_mutex_lock(&h->lock);
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

/* a checked frame's blocks onto the queue; what does not fit is dropped */
static void ho_queue(struct cl_ho *h, const struct sched_fe *fe)
{
	uint32_t taken = 0;

	pthread_mutex_lock(&h->lock);
	for (; taken < fe->count && h->len < HO_QUEUE; taken++) {
		struct ho_item *it = &h->q[(h->head + h->len) % HO_QUEUE];

		memcpy(it->ns, fe->ns, fe->ns_len);
		it->ns[fe->ns_len] = 0;
		memcpy(it->hash, fe->hashes + (size_t)taken * KVFS_HASH_LEN,
		       KVFS_HASH_LEN);
		it->src = fe->src;
		h->len++;
	}
	if (taken)
		pthread_cond_broadcast(&h->work);
	pthread_mutex_unlock(&h->lock);
	if (taken < fe->count)
		atomic_fetch_add(&h->dropped, fe->count - taken);
}

/* ---- the reader ---------------------------------------------------------- */

/* len bytes, or < 0: the stream ended, broke or is being detached */
static int ho_recv(struct cl_ho *h, void *buf, size_t len)
{
	return cl_recv_all(h->fd, buf, len, &h->detaching);
}

/* the next frame into buf (SCHED_FE_FRAME_MAX + room for a seal): its
 * length, or < 0 */
static long ho_read_frame(struct cl_ho *h, uint8_t *buf)
{
	uint8_t tag[KV_WIRE_TAG_LEN];
	uint32_t len;
	long size;
	int rc;

	if (h->tagged) {
		rc = ho_recv(h, buf, 4);
		if (rc < 0)
			return rc;
		len = kv_get_le32(buf);
		if (len < SCHED_FE_HDR || len > SCHED_FE_FRAME_MAX)
			return -EBADMSG;
		rc = ho_recv(h, buf + 4, len);
		if (rc == 0)
			rc = ho_recv(h, tag, sizeof(tag));
		if (rc == 0)
			rc = kv_tagger_begin(&h->rtag);
		if (rc == 0)
			rc = kv_tagger_update(&h->rtag, buf, 4 + (size_t)len);
		if (rc == 0)
			rc = kv_tagger_check(&h->rtag, tag);
		if (rc < 0)
			return rc == -ECANCELED ? rc : -EBADMSG;
		memmove(buf, buf + 4, len);
		return len;
	}
	rc = ho_recv(h, buf, SCHED_FE_HDR);
	if (rc < 0)
		return rc;
	size = sched_fe_frame_len(buf);
	if (size < 0)
		return size;
	rc = ho_recv(h, buf + SCHED_FE_HDR, (size_t)size - SCHED_FE_HDR);
	return rc < 0 ? rc : size;
}

static void *ho_reader(void *arg)
{
	struct cl_ho *h = arg;
	uint8_t *buf = malloc(SCHED_FE_FRAME_MAX + 4);
	struct sched_fe fe;
	long len;

	if (!buf)
		return NULL;
	for (;;) {
		int rc;

		len = ho_read_frame(h, buf);
		if (len < 0) {
			rc = (int)len;
		} else {
			rc = sched_fe_decode(buf, (size_t)len, &fe);
			if (rc == 0 &&
			    (fe.node != h->node || fe.seq != h->next_seq))
				rc = -EPROTO;
		}
		if (rc < 0) {
			if (rc == -EBADMSG || rc == -EPROTO ||
			    rc == -EPROTONOSUPPORT) {
				atomic_fetch_add(&h->bad_frames, 1);
				kvfs_warn("conductor: a FETCH frame fails its "
					  "checks (%s): reconnecting",
					  strerror(-rc));
				/* the event thread's next send fails */
				shutdown(h->fd, SHUT_RDWR);
			}
			break;
		}
		h->next_seq++;
		ho_queue(h, &fe);
	}
	/* the conductor went (or broke the rules): the event thread
	 * reconnects now, not at its next send */
	if (!atomic_load(&h->detaching))
		atomic_store(&h->broken, true);
	free(buf);
	return NULL;
}

int cl_ho_attach(struct kvfsd_cluster *c, int fd, uint16_t node,
		 const uint8_t *key)
{
	struct cl_ho *h = c->ho;
	int rc;

	if (!h || h->reading)
		return h ? -EBUSY : 0;
	h->fd = fd;
	h->node = node;
	h->next_seq = 0;
	h->tagged = false;
	atomic_store(&h->detaching, false);
	atomic_store(&h->broken, false);
	if (key) {
		rc = kv_tagger_init(&h->rtag, key);
		if (rc < 0)
			return rc;
		h->tagged = true;
	}
	rc = -pthread_create(&h->reader, NULL, ho_reader, h);
	if (rc < 0) {
		if (h->tagged)
			kv_tagger_fini(&h->rtag);
		h->tagged = false;
		return rc;
	}
	h->reading = true;
	return 0;
}

bool cl_ho_broken(struct kvfsd_cluster *c)
{
	return c->ho && c->ho->reading && atomic_load(&c->ho->broken);
}

void cl_ho_detach(struct kvfsd_cluster *c)
{
	struct cl_ho *h = c->ho;

	if (!h || !h->reading)
		return;
	atomic_store(&h->detaching, true);
	/* wakes a recv that waits: it returns 0 */
	shutdown(h->fd, SHUT_RD);
	pthread_join(h->reader, NULL);
	h->reading = false;
	if (h->tagged)
		kv_tagger_fini(&h->rtag);
	h->tagged = false;
}

/* ---- life and figures ---------------------------------------------------- */

int cl_ho_start(struct kvfsd_cluster *c)
{
	struct cl_ho *h = calloc(1, sizeof(*h));
	int rc = 0;

	if (!h)
		return -ENOMEM;
	h->q = calloc(HO_QUEUE, sizeof(*h->q));
	if (!h->q) {
		free(h);
		return -ENOMEM;
	}
	h->c = c;
	h->fd = -1;
	pthread_mutex_init(&h->lock, NULL);
	pthread_cond_init(&h->work, NULL);
	c->ho = h;
	for (int i = 0; i < HO_WORKERS && rc == 0; i++) {
		rc = -pthread_create(&h->worker[i], NULL, ho_main, h);
		if (rc == 0)
			h->nworkers++;
	}
	if (rc < 0)
		cl_ho_stop(c);
	return rc;
}

void cl_ho_stop(struct kvfsd_cluster *c)
{
	struct cl_ho *h = c->ho;

	if (!h)
		return;
	cl_ho_detach(c);
	pthread_mutex_lock(&h->lock);
	h->stop = true;
	atomic_store(&h->cancel, true);
	pthread_cond_broadcast(&h->work);
	pthread_mutex_unlock(&h->lock);
	for (int i = 0; i < h->nworkers; i++)
		pthread_join(h->worker[i], NULL);
	pthread_mutex_destroy(&h->lock);
	pthread_cond_destroy(&h->work);
	free(h->q);
	free(h);
	c->ho = NULL;
}

void kvfsd_cluster_handoff_stats(struct kvfsd_cluster *c,
				 struct kvfsd_handoff_stats *out)
{
	struct cl_ho *h = c ? c->ho : NULL;

	memset(out, 0, sizeof(*out));
	if (!h)
		return;
	out->enabled = true;
	pthread_mutex_lock(&h->lock);
	out->queued = h->len;
	pthread_mutex_unlock(&h->lock);
	out->fetched = atomic_load(&h->fetched);
	out->already = atomic_load(&h->already);
	out->failed = atomic_load(&h->failed);
	out->dropped = atomic_load(&h->dropped);
	out->bad_frames = atomic_load(&h->bad_frames);
}
