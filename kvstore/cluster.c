/*
 * cluster.c - membership through etcd (cluster.h): join, keepalive,
 * watch, leave, and the cluster's namespaces.
 *
 * Keys under /kvfs/<name>/ (etcd keys are bytes; these are text):
 *
 *   nodes/<node id>   JSON of struct kv_node_info, under this node's lease:
 *                     {"id", "addr", "transports", "slot_size", "nslots",
 *                      "rdma", "conductor"}; unknown members are ignored,
 *                     missing ones read as "" or 0
 *   ns/<namespace>    block_tokens in decimal, " open" for an open one,
 *                     no lease
 *
 * and each value ends in " mac=<64 hex>" (kv_cluster_rec_seal, cluster_int.h).
 * A record that fails its MAC is never used; a node or namespace record in our
 * way (our own id or a namespace we publish) that fails it is replaced,
 * compare-and-swap on its mod_revision.
 *
 * Threads, besides the callers':
 *
 *   keeper    renews the lease every ttl/3 (a failed renewal is logged
 *             once and retried every RETRY_MS); when etcd says the lease
 *             is gone (it expired while we could not reach etcd) it
 *             registers again under a new lease
 *   watcher   watches nodes/ and, after every batch of events and at
 *             least every RESYNC_MS, ranges the prefix again and replaces
 *             the snapshot when it differs (epoch + 1, on_change).  The
 *             range, not the events, is the truth: events only say when
 *             to look, so a missed or replayed event costs nothing.
 *
 * Each thread has its own etcd connection; join, leave and the ns_* calls
 * share c->api under c->api_lock.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "src/common/clock.h"
#include "kvstore/cluster.h"
#include "kvstore/cluster_int.h"
#include "src/common/json.h"
#include "src/common/log.h"

#define CLUSTER_NAME_MAX KV_NODE_ID_MAX
#define RESYNC_MS 5000u /* a watch can die silently: range anyway */
#define RETRY_MS 500u	/* after a failed keepalive or watch */
#define KEY_MAX (8 + CLUSTER_NAME_MAX + 4 + KVFS_NS_MAX + 1)
#define BAD_LOG_MS 10000u /* one line per kind of bad record per 10 s */
#define SECRET_MAX 4096

enum rec_kind { REC_NODE, REC_NS, REC_KINDS };

struct kv_cluster {
	char endpoint[ETCD_URLS_MAX];
	char name[CLUSTER_NAME_MAX + 1];
	char prefix[KEY_MAX]; /* /kvfs/<name>/nodes/ */
	char self_key[KEY_MAX];
	char *self_val; /* JSON of self, without its MAC (it names the lease) */
	size_t self_len;
	struct kv_node_info self;
	uint8_t *secret; /* the MAC key */
	size_t secret_len;
	char *password;	       /* of conf.user, read from its file */
	struct etcd_conf conf; /* the connections point at it */
	struct kvfs_ratelimit bad_log[REC_KINDS];
	atomic_uint_least64_t bad_records;
	void (*on_change)(void *arg);
	void *arg;

	pthread_mutex_t api_lock; /* c->api */
	struct etcd api;
	struct etcd ka;		 /* keeper thread only (and join, before it) */
	struct etcd wa;		 /* watcher thread only (and join, before it) */
	struct etcd_watch watch; /* watcher thread; wakeup from leave */
	int64_t join_rev;	 /* revision of join's range, for the watcher */

	pthread_mutex_t lock;	    /* everything below */
	pthread_cond_t ka_wake;	    /* stopping, or self_missing */
	struct kv_node_info *nodes; /* sorted by id */
	size_t nnodes;
	uint64_t epoch;
	int64_t lease;
	uint32_t ttl_s; /* as granted */
	bool stopping;
	bool self_missing; /* the watcher saw our key gone */

	pthread_t keeper, watcher;
	bool keeper_started, watcher_started;
};

/* ---- names ------------------------------------------------------------ */

/* urls: etcd_url_parse (kvstore/etcd_conf.c) */

int kv_cluster_url_parse(const char *url, char *endpoint, size_t elen,
			 char *name, size_t nlen)
{
	const char *why;

	return etcd_url_parse(url, endpoint, elen, name, nlen, &why);
}

/* ---- node records ----------------------------------------------------- */

static void put_str(struct kvfs_buf *b, const char *key, const char *s,
		    size_t max)
{
	kvfs_buf_printf(b, "\"%s\":", key);
	kvfs_buf_json_str(b, s, strnlen(s, max));
}

static int node_encode(const struct kv_node_info *n, char **out, size_t *len)
{
	struct kvfs_buf b = KVFS_BUF_INIT;

	kvfs_buf_puts(&b, "{");
	put_str(&b, "id", n->id, sizeof(n->id));
	kvfs_buf_puts(&b, ",");
	put_str(&b, "addr", n->addr, sizeof(n->addr));
	kvfs_buf_puts(&b, ",");
	put_str(&b, "transports", n->transports, sizeof(n->transports));
	kvfs_buf_printf(&b,
			",\"slot_size\":%" PRIu64 ",\"nslots\":%" PRIu32 ",",
			n->slot_size, n->nslots);
	put_str(&b, "rdma", n->rdma, sizeof(n->rdma));
	kvfs_buf_puts(&b, ",");
	put_str(&b, "conductor", n->conductor, sizeof(n->conductor));
	kvfs_buf_puts(&b, "}");
	return kvfs_buf_finish(&b, out, len);
}

/* a string member into a fixed field: -EINVAL when it does not fit */
static int get_str(json_object *o, const char *key, char *dst, size_t size)
{
	json_object *v;
	const char *s;
	size_t n;

	if (!json_object_object_get_ex(o, key, &v) || !v)
		return 0;
	if (!json_object_is_type(v, json_type_string))
		return -EINVAL;
	s = json_object_get_string(v);
	n = (size_t)json_object_get_string_len(v);
	if (n >= size || strlen(s) != n)
		return -EINVAL;
	memcpy(dst, s, n + 1);
	return 0;
}

static int get_u64(json_object *o, const char *key, uint64_t max, uint64_t *out)
{
	json_object *v;

	*out = 0;
	if (!json_object_object_get_ex(o, key, &v) || !v)
		return 0;
	if (!json_object_is_type(v, json_type_int))
		return -EINVAL;
	*out = json_object_get_uint64(v);
	return *out <= max ? 0 : -EINVAL;
}

/* n must be zeroed: snapshots are compared with memcmp; val: len bytes,
 * one JSON object and nothing after it */
static int node_decode(const char *id, const char *val, size_t len,
		       struct kv_node_info *n)
{
	json_tokener *tok = json_tokener_new();
	json_object *o = NULL;
	uint64_t slot_size, nslots;
	int rc = -EINVAL;

	if (!tok)
		return -ENOMEM;
	if (len < INT32_MAX && !memchr(val, '\0', len))
		o = json_tokener_parse_ex(tok, val, (int)len);
	if (!o || json_tokener_get_error(tok) != json_tokener_success ||
	    json_tokener_get_parse_end(tok) != len ||
	    !json_object_is_type(o, json_type_object))
		goto out_put;
	if (get_str(o, "addr", n->addr, sizeof(n->addr)) ||
	    get_str(o, "transports", n->transports, sizeof(n->transports)) ||
	    get_str(o, "rdma", n->rdma, sizeof(n->rdma)) ||
	    get_str(o, "conductor", n->conductor, sizeof(n->conductor)) ||
	    get_u64(o, "slot_size", UINT64_MAX, &slot_size) ||
	    get_u64(o, "nslots", UINT32_MAX, &nslots))
		goto out_put;
	/* the key names the node; an "id" member is informative only */
	snprintf(n->id, sizeof(n->id), "%s", id);
	n->slot_size = slot_size;
	n->nslots = (uint32_t)nslots;
	rc = 0;
out_put:
	json_object_put(o);
	json_tokener_free(tok);
	return rc;
}

/* ---- record MACs ------------------------------------------------------ */

/* a record that failed its MAC: counted, and said at most once per
 * BAD_LOG_MS per kind (a forged node is seen again at every resync) */
static void bad_record(struct kv_cluster *c, enum rec_kind kind,
		       const char *key, int why)
{
	uint64_t missed = 0;

	atomic_fetch_add(&c->bad_records, 1);
	if (!kvfs_ratelimit(&c->bad_log[kind], BAD_LOG_MS, &missed))
		return;
	kvfs_warn("cluster %s: ignoring the %s record %s in etcd: %s (not "
		  "written by a node with our --secret-file); %" PRIu64
		  " more held back",
		  c->name, kind == REC_NODE ? "node" : "namespace", key,
		  why == -ENOMSG ? "it has no MAC" : "its MAC is wrong",
		  missed);
}

static int rec_check(struct kv_cluster *c, enum rec_kind kind, const char *key,
		     int64_t lease, const char *val, size_t vlen, size_t *blen)
{
	int rc = kv_cluster_rec_open(c->secret, c->secret_len, key, lease, val,
				     vlen, blen);

	if (rc == -ENOMSG || rc == -EBADMSG)
		bad_record(c, kind, key, rc);
	return rc;
}

/* ---- snapshots -------------------------------------------------------- */

struct snap {
	struct kv_cluster *c;
	struct kv_node_info *v;
	size_t n, cap;
};

static int snap_add(const char *key, size_t klen, const char *val, size_t vlen,
		    int64_t lease, void *arg)
{
	struct snap *s = arg;
	size_t plen = strlen(s->c->prefix), blen;
	const char *id = key + plen;
	int rc;

	if (klen <= plen || kv_node_id_valid(id) < 0 ||
	    strlen(id) != klen - plen) {
		kvfs_debug("cluster %s: ignoring key %s", s->c->name, key);
		return 0;
	}
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 8;
		struct kv_node_info *v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	rc = rec_check(s->c, REC_NODE, key, lease, val, vlen, &blen);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0)
		return 0;
	memset(&s->v[s->n], 0, sizeof(s->v[s->n]));
	if (node_decode(id, val, blen, &s->v[s->n]) < 0) {
		kvfs_debug("cluster %s: node %s: unreadable record", s->c->name,
			   id);
		return 0;
	}
	s->n++;
	return 0;
}

static int node_cmp(const void *a, const void *b)
{
	const struct kv_node_info *x = a, *y = b;

	return strcmp(x->id, y->id);
}

/*
 * Range the nodes again; replace the snapshot when it differs.  Runs on
 * the watcher thread (or in join, before it exists, with notify false:
 * on_change runs on the watcher thread only).  on_change is called here,
 * without the lock, so that it may call kv_cluster_nodes().
 */
static int resync(struct kv_cluster *c, int64_t *rev, bool notify)
{
	struct snap s = { .c = c };
	struct kv_node_info *old = NULL;
	bool changed, self_seen = false;
	int rc;

	rc = etcd_range_prefix(&c->wa, c->prefix, snap_add, &s, rev);
	if (rc < 0) {
		free(s.v);
		return rc;
	}
	qsort(s.v, s.n, sizeof(*s.v), node_cmp);
	for (size_t i = 0; i < s.n; i++)
		self_seen |= strcmp(s.v[i].id, c->self.id) == 0;

	pthread_mutex_lock(&c->lock);
	changed = s.n != c->nnodes ||
		  (s.n && memcmp(s.v, c->nodes, s.n * sizeof(*s.v)) != 0);
	if (changed) {
		old = c->nodes;
		c->nodes = s.v;
		c->nnodes = s.n;
		c->epoch++;
		s.v = NULL;
	}
	if (!self_seen && !c->stopping) {
		/* our key is gone: the lease expired; the keeper finds
		 * out now rather than at its next renewal */
		c->self_missing = true;
		pthread_cond_signal(&c->ka_wake);
	}
	pthread_mutex_unlock(&c->lock);
	free(old);
	free(s.v);
	if (changed) {
		kvfs_debug("cluster %s: %zu live nodes", c->name, s.n);
		if (notify && c->on_change)
			c->on_change(c->arg);
	}
	return 0;
}

/* ---- registration ----------------------------------------------------- */

/*
 * Put key -> val unless it exists; an existing value that fails its MAC
 * (forged, or of a kvfs before MACs) is in the way of no legitimate
 * node: it is replaced, unless it changed meanwhile.  -EEXIST: a valid
 * record is there, *old (may be NULL) holds it.
 */
static int put_or_replace(struct kv_cluster *c, struct etcd *e,
			  enum rec_kind kind, const char *key, const char *val,
			  size_t vlen, int64_t lease, struct etcd_val *old)
{
	struct etcd_val have;
	int64_t mod_rev = 0;
	size_t blen;
	int rc;

	for (int tries = 0; tries < 3; tries++) {
		rc = etcd_put_if(e, key, val, vlen, lease, mod_rev, &have);
		if (rc != -EEXIST)
			break;
		if (!have.val) { /* gone since: create it */
			mod_rev = 0;
			continue;
		}
		rc = rec_check(c, kind, key, have.lease, have.val, have.len,
			       &blen);
		if (rc == 0) {
			have.val[blen] = '\0'; /* the body, for the caller */
			have.len = blen;
			if (old) {
				*old = have;
				have.val = NULL;
			}
			etcd_val_release(&have);
			return -EEXIST;
		}
		mod_rev = have.mod_rev;
		etcd_val_release(&have);
		if (rc != -ENOMSG && rc != -EBADMSG)
			return rc;
		kvfs_warn("cluster %s: replacing %s, whose MAC fails", c->name,
			  key);
		rc = -EEXIST;
	}
	return rc;
}

/* a fresh lease and our key under it; *lease, *ttl_s on success */
static int register_self(struct kv_cluster *c, struct etcd *e, uint32_t ttl_s,
			 int64_t *lease, uint32_t *granted)
{
	int64_t id, ttl;
	char *val;
	size_t vlen;
	int rc;

	rc = etcd_lease_grant(e, ttl_s, &id, &ttl);
	if (rc < 0)
		return rc;
	/* the MAC names the lease: sealed anew for each one */
	rc = kv_cluster_rec_seal(c->secret, c->secret_len, c->self_key, id,
				 c->self_val, c->self_len, &val, &vlen);
	if (rc == 0) {
		rc = put_or_replace(c, e, REC_NODE, c->self_key, val, vlen, id,
				    NULL);
		free(val);
	}
	if (rc < 0) {
		char why[sizeof(e->err)];

		/* best effort, it would expire anyway; it overwrites e->err */
		snprintf(why, sizeof(why), "%s", e->err);
		(void)etcd_lease_revoke(e, id);
		if (rc == -EEXIST)
			snprintf(e->err, sizeof(e->err),
				 "node id '%s' is already live in cluster "
				 "'%s' (etcd at %s)",
				 c->self.id, c->name, e->endpoint);
		else
			memcpy(e->err, why, sizeof(why));
		return rc;
	}
	*lease = id;
	*granted = ttl > UINT32_MAX ? UINT32_MAX : (uint32_t)ttl;
	return 0;
}

/* ---- threads ---------------------------------------------------------- */

static void deadline_in(struct timespec *ts, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static unsigned renew_ms(uint32_t ttl_s)
{
	unsigned ms = ttl_s * 1000u / 3u;

	return ms < 100 ? 100 : ms;
}

/* the lease is gone: register again under a new one */
static void keeper_rejoin(struct kv_cluster *c, bool *failing)
{
	int64_t lease;
	uint32_t ttl;
	int rc;

	pthread_mutex_lock(&c->lock);
	ttl = c->ttl_s;
	pthread_mutex_unlock(&c->lock);
	rc = register_self(c, &c->ka, ttl, &lease, &ttl);
	if (rc < 0) {
		if (!*failing)
			kvfs_warn("cluster %s: registering again: %s "
				  "(retrying)",
				  c->name, c->ka.err);
		*failing = true;
		return;
	}
	pthread_mutex_lock(&c->lock);
	c->lease = lease;
	c->ttl_s = ttl;
	pthread_mutex_unlock(&c->lock);
	kvfs_info("cluster %s: node %s registered again", c->name, c->self.id);
	*failing = false;
}

static void *keeper_main(void *arg)
{
	struct kv_cluster *c = arg;
	bool failing = false;
	struct timespec ts;

	pthread_mutex_lock(&c->lock);
	while (!c->stopping) {
		int64_t lease, ttl = 0;
		unsigned ms = renew_ms(c->ttl_s);
		int rc = 0;

		if (failing && ms > RETRY_MS)
			ms = RETRY_MS;
		deadline_in(&ts, ms);
		while (!c->stopping && !c->self_missing && rc != ETIMEDOUT)
			rc = pthread_cond_timedwait(&c->ka_wake, &c->lock, &ts);
		if (c->stopping)
			break;
		c->self_missing = false;
		lease = c->lease;
		pthread_mutex_unlock(&c->lock);

		rc = etcd_lease_keepalive(&c->ka, lease, &ttl);
		if (rc == 0 && ttl > 0) {
			if (failing)
				kvfs_info("cluster %s: keepalive works again",
					  c->name);
			failing = false;
		} else if (rc == 0 || rc == -ENOENT) {
			kvfs_warn("cluster %s: the lease of node %s expired; "
				  "registering again",
				  c->name, c->self.id);
			keeper_rejoin(c, &failing);
		} else {
			if (!failing)
				kvfs_warn("cluster %s: keepalive failed: %s "
					  "(retrying)",
					  c->name, c->ka.err);
			failing = true;
		}
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

static bool stopping(struct kv_cluster *c)
{
	bool s;

	pthread_mutex_lock(&c->lock);
	s = c->stopping;
	pthread_mutex_unlock(&c->lock);
	return s;
}

static uint64_t mono_ms(void)
{
	return kvfs_mono_ns() / 1000000u;
}

static void *watcher_main(void *arg)
{
	struct kv_cluster *c = arg;
	/* join ranged once: go on from the revision it saw */
	int64_t rev = c->join_rev;
	uint64_t synced = mono_ms();
	bool watching = false, need_sync = false, down = false;

	while (!stopping(c)) {
		int rc;

		if (!watching)
			/* where the ranges last got through */
			watching = etcd_watch_start(&c->watch, &c->wa,
						    c->prefix, rev + 1) == 0;
		rc = etcd_watch_wait(&c->watch, (int)RETRY_MS);
		if (rc > 0)
			need_sync = true;
		if (rc < 0) {
			kvfs_debug("cluster %s: %s", c->name, c->watch.err);
			etcd_watch_end(&c->watch);
			watching = false;
			need_sync = true;
			/* a stream that failed (not one that ran its time)
			 * waits before the next try: etcd may be down */
			if (rc != -ETIMEDOUT)
				etcd_watch_wait(&c->watch, (int)RETRY_MS);
		}
		if (stopping(c))
			break;
		if (!need_sync && mono_ms() - synced < RESYNC_MS)
			continue;
		rc = resync(c, &rev, true);
		synced = mono_ms();
		if (rc < 0) {
			if (!down)
				kvfs_warn("cluster %s: membership not updated: "
					  "%s (retrying)",
					  c->name, c->wa.err);
			down = true;
			continue;
		}
		if (down)
			kvfs_info("cluster %s: etcd at %s answers again",
				  c->name, c->endpoint);
		down = false;
		need_sync = false;
	}
	etcd_watch_end(&c->watch);
	return NULL;
}

/* ---- join and leave --------------------------------------------------- */

static void cluster_free(struct kv_cluster *c)
{
	etcd_watch_release(&c->watch);
	etcd_release(&c->wa);
	etcd_release(&c->ka);
	etcd_release(&c->api);
	pthread_cond_destroy(&c->ka_wake);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->api_lock);
	free(c->nodes);
	free(c->self_val);
	if (c->secret)
		OPENSSL_cleanse(c->secret, c->secret_len);
	free(c->secret);
	etcd_conf_release(&c->conf, c->password);
	free(c);
}

/* the secret and the TLS and auth options against the url's scheme;
 * why: join's line */
static int auth_check(const struct kv_cluster_config *cfg, const char *endpoint,
		      const char **why)
{
	*why = "the cluster secret is missing or shorter than 16 bytes";
	if (!cfg->secret || cfg->secret_len < KV_CLUSTER_SECRET_MIN ||
	    cfg->secret_len > SECRET_MAX)
		return -EINVAL;
	return etcd_auth_check(&cfg->etcd,
			       strncmp(endpoint, "https://", 8) == 0, why);
}

/* copy the caller's record, every string cut to its field */
static void self_copy(struct kv_node_info *dst, const struct kv_node_info *src)
{
	*dst = *src;
	dst->id[sizeof(dst->id) - 1] = '\0';
	dst->addr[sizeof(dst->addr) - 1] = '\0';
	dst->transports[sizeof(dst->transports) - 1] = '\0';
	dst->rdma[sizeof(dst->rdma) - 1] = '\0';
	dst->conductor[sizeof(dst->conductor) - 1] = '\0';
}

static int cluster_alloc(const struct kv_cluster_config *cfg,
			 const char *endpoint, const char *name,
			 struct kv_cluster **out)
{
	struct kv_cluster *c = calloc(1, sizeof(*c));
	pthread_condattr_t ca;
	int rc;

	if (!c)
		return -ENOMEM;
	snprintf(c->endpoint, sizeof(c->endpoint), "%s", endpoint);
	snprintf(c->name, sizeof(c->name), "%s", name);
	self_copy(&c->self, &cfg->self);
	snprintf(c->prefix, sizeof(c->prefix), "/kvfs/%s/nodes/", name);
	snprintf(c->self_key, sizeof(c->self_key), "/kvfs/%s/nodes/%s", name,
		 c->self.id);
	c->ttl_s = cfg->ttl_s ? cfg->ttl_s : KV_CLUSTER_TTL_S;
	c->on_change = cfg->on_change;
	c->arg = cfg->arg;
	/* the keeper's sleeps are durations: a clock step must not
	 * stretch or skip them */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->ka_wake, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->api_lock, NULL);
	c->secret = malloc(cfg->secret_len);
	rc = c->secret ? 0 : -ENOMEM;
	if (rc == 0) {
		memcpy(c->secret, cfg->secret, cfg->secret_len);
		c->secret_len = cfg->secret_len;
	}
	if (rc == 0)
		rc = etcd_conf_load(&c->conf, &cfg->etcd, &c->password);
	if (rc == 0)
		rc = node_encode(&c->self, &c->self_val, &c->self_len);
	if (rc == 0)
		rc = etcd_init(&c->api, endpoint, ETCD_TIMEOUT_MS, &c->conf);
	if (rc == 0)
		rc = etcd_init(&c->ka, endpoint, ETCD_TIMEOUT_MS, &c->conf);
	if (rc == 0)
		rc = etcd_init(&c->wa, endpoint, ETCD_TIMEOUT_MS, &c->conf);
	if (rc == 0)
		rc = etcd_watch_init(&c->watch);
	if (rc < 0) {
		cluster_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* stop and join whichever threads run */
static void threads_stop(struct kv_cluster *c)
{
	pthread_mutex_lock(&c->lock);
	c->stopping = true;
	pthread_cond_broadcast(&c->ka_wake);
	pthread_mutex_unlock(&c->lock);
	etcd_watch_wakeup(&c->watch);
	if (c->keeper_started)
		pthread_join(c->keeper, NULL);
	if (c->watcher_started)
		pthread_join(c->watcher, NULL);
	c->keeper_started = c->watcher_started = false;
}

static void lease_revoke(struct kv_cluster *c)
{
	int rc;

	pthread_mutex_lock(&c->api_lock);
	rc = etcd_lease_revoke(&c->api, c->lease);
	if (rc < 0 && rc != -ENOENT)
		kvfs_warn("cluster %s: node %s stays listed for up to %u s: %s",
			  c->name, c->self.id, c->ttl_s, c->api.err);
	pthread_mutex_unlock(&c->api_lock);
}

int kv_cluster_join(const struct kv_cluster_config *cfg,
		    struct kv_cluster **out)
{
	char endpoint[ETCD_URLS_MAX], name[CLUSTER_NAME_MAX + 1];
	struct kv_cluster *c;
	const char *why;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!cfg)
		return -EINVAL;
	if (etcd_url_parse(cfg->url, endpoint, sizeof(endpoint), name,
			   sizeof(name), &why) < 0) {
		kvfs_err("bad cluster url '%s': %s (want "
			 "etcd[s]://HOST:PORT[,HOST:PORT...]/NAME)",
			 cfg->url ? cfg->url : "", why);
		return -EINVAL;
	}
	if (kv_node_id_valid(cfg->self.id) < 0) {
		kvfs_err("bad node id '%.*s': 1..%d of A-Z a-z 0-9 . _ -",
			 KV_NODE_ID_MAX, cfg->self.id, KV_NODE_ID_MAX);
		return -EINVAL;
	}
	if (auth_check(cfg, endpoint, &why) < 0) {
		kvfs_err("cluster %s: %s", name, why);
		return -EINVAL;
	}
	rc = cluster_alloc(cfg, endpoint, name, &c);
	if (rc < 0) {
		kvfs_err("cluster %s: %s", name, strerror(-rc));
		return rc;
	}
	rc = register_self(c, &c->api, c->ttl_s, &c->lease, &c->ttl_s);
	if (rc < 0) {
		kvfs_err("%s", c->api.err);
		goto out_free;
	}
	rc = resync(c, &c->join_rev, false);
	if (rc < 0) {
		kvfs_err("%s", c->wa.err);
		goto out_revoke;
	}
	rc = -pthread_create(&c->keeper, NULL, keeper_main, c);
	if (rc < 0)
		goto out_threads;
	c->keeper_started = true;
	rc = -pthread_create(&c->watcher, NULL, watcher_main, c);
	if (rc < 0)
		goto out_threads;
	c->watcher_started = true;
	kvfs_info("cluster %s: node %s joined through %s (lease %u s)", name,
		  c->self.id, endpoint, c->ttl_s);
	*out = c;
	return 0;

out_threads:
	kvfs_err("cluster %s: cannot start a thread: %s", name, strerror(-rc));
	threads_stop(c);
out_revoke:
	lease_revoke(c);
out_free:
	cluster_free(c);
	return rc;
}

void kv_cluster_leave(struct kv_cluster *c)
{
	if (!c)
		return;
	/* the keeper first: once it is stopped it cannot register us
	 * again after the revoke */
	threads_stop(c);
	lease_revoke(c);
	kvfs_info("cluster %s: node %s left", c->name, c->self.id);
	cluster_free(c);
}

/* ---- views ------------------------------------------------------------ */

long kv_cluster_nodes(struct kv_cluster *c, struct kv_node_info **out)
{
	struct kv_node_info *v;
	size_t n;

	if (!c || !out)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	n = c->nnodes;
	v = malloc((n ? n : 1) * sizeof(*v));
	if (v && n)
		memcpy(v, c->nodes, n * sizeof(*v));
	pthread_mutex_unlock(&c->lock);
	if (!v)
		return -ENOMEM;
	*out = v;
	return (long)n;
}

uint64_t kv_cluster_epoch(struct kv_cluster *c)
{
	uint64_t e;

	pthread_mutex_lock(&c->lock);
	e = c->epoch;
	pthread_mutex_unlock(&c->lock);
	return e;
}

const char *kv_cluster_self(const struct kv_cluster *c)
{
	return c->self.id;
}

uint64_t kv_cluster_bad_records(struct kv_cluster *c)
{
	return atomic_load(&c->bad_records);
}

/* ---- namespaces ------------------------------------------------------- */

/* "BLOCK_TOKENS" (a chain namespace) or "BLOCK_TOKENS open" */
static int ns_value_parse(const char *s, uint32_t *out, unsigned *layout)
{
	unsigned long v = 0;
	const char *p;

	for (p = s; *p >= '0' && *p <= '9' && v <= KVFS_BLOCK_TOKENS_MAX; p++)
		v = v * 10 + (unsigned long)(*p - '0');
	if (p == s || v == 0 || v > KVFS_BLOCK_TOKENS_MAX)
		return -EPROTO;
	if (*p && strcmp(p, " open") != 0)
		return -EPROTO;
	*out = (uint32_t)v;
	*layout = *p ? 1 : 0;
	return 0;
}

int kv_cluster_ns_publish(struct kv_cluster *c, const char *ns,
			  uint32_t block_tokens, unsigned layout)
{
	char key[KEY_MAX], body[24], *val;
	struct etcd_val old = { 0 };
	unsigned have_layout;
	uint32_t have;
	size_t vlen;
	int rc;

	if (!c || kvfs_ns_valid(ns) < 0 || block_tokens == 0 ||
	    block_tokens > KVFS_BLOCK_TOKENS_MAX || layout > 1)
		return -EINVAL;
	snprintf(key, sizeof(key), "/kvfs/%s/ns/%s", c->name, ns);
	snprintf(body, sizeof(body), "%" PRIu32 "%s", block_tokens,
		 layout ? " open" : "");
	rc = kv_cluster_rec_seal(c->secret, c->secret_len, key, 0, body,
				 strlen(body), &val, &vlen);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&c->api_lock);
	rc = put_or_replace(c, &c->api, REC_NS, key, val, vlen, 0, &old);
	if (rc < 0 && rc != -EEXIST)
		kvfs_warn("cluster %s: publishing namespace %s: %s", c->name,
			  ns, c->api.err);
	pthread_mutex_unlock(&c->api_lock);
	/* old: a valid record's body */
	if (rc == -EEXIST &&
	    ns_value_parse(old.val, &have, &have_layout) == 0 &&
	    have == block_tokens && have_layout == layout)
		rc = 0;
	etcd_val_release(&old);
	free(val);
	return rc;
}

int kv_cluster_ns_find(struct kv_cluster *c, const char *ns,
		       uint32_t *block_tokens, unsigned *layout)
{
	char key[KEY_MAX];
	struct etcd_val v = { 0 };
	unsigned lay;
	size_t blen;
	int rc;

	if (!c || !block_tokens || kvfs_ns_valid(ns) < 0)
		return -EINVAL;
	snprintf(key, sizeof(key), "/kvfs/%s/ns/%s", c->name, ns);
	pthread_mutex_lock(&c->api_lock);
	rc = etcd_get(&c->api, key, &v);
	if (rc < 0 && rc != -ENOENT)
		kvfs_warn("cluster %s: looking up namespace %s: %s", c->name,
			  ns, c->api.err);
	pthread_mutex_unlock(&c->api_lock);
	if (rc == 0) {
		rc = rec_check(c, REC_NS, key, v.lease, v.val, v.len, &blen);
		/* a record that fails its MAC is no namespace */
		if (rc == -ENOMSG || rc == -EBADMSG)
			rc = -ENOENT;
	}
	if (rc == 0) {
		v.val[blen] = '\0';
		rc = ns_value_parse(v.val, block_tokens,
				    layout ? layout : &lay);
		if (rc < 0)
			kvfs_warn("cluster %s: namespace %s: bad block_tokens "
				  "'%.16s' in etcd",
				  c->name, ns, v.val);
	}
	etcd_val_release(&v);
	return rc;
}
