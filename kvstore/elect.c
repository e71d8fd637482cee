/*
 * elect.c - leader election and leader finding through etcd (elect.h).
 *
 * Threads: a candidate has one (campaign_main), which alone uses its etcd
 * connection and watch; a follower has one (follow_main) likewise.  The
 * fields a caller reads (role, deadline, leader) are under el->lock.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvstore/cluster_int.h"
#include "kvstore/elect.h"
#include "src/common/clock.h"
#include "src/common/log.h"

#define ELECT_MARGIN_MS 500u /* the lease ends this much sooner for us */
#define ELECT_LOOK_MS 1000u  /* look at the key, watch event or not */
#define ELECT_RETRY_MS 500u  /* after a failed call */
#define FOLLOW_LOOK_MS 2000u /* a follower's look without events */
#define NAME_MAX_ 64
#define KEY_MAX (16 + NAME_MAX_ + 24)

/* what every user of an election url sets up: endpoints, key, TLS and
 * auth (the password read from its file) */
struct elect_conn {
	char endpoint[ETCD_URLS_MAX];
	char name[NAME_MAX_];
	char key[KEY_MAX];
	struct etcd_conf conf;
	char *password;
	/* the cluster secret: the leader's record is signed with it, and
	 * read only when its MAC checks; NULL: unsigned, read as it is */
	uint8_t *secret;
	size_t secret_len;
	uint64_t warned_ms; /* vouch's last warning; its caller's thread */
};

struct kv_elect {
	struct elect_conn c;
	char *value;
	size_t vlen;
	uint32_t ttl_req;
	struct etcd api;	 /* campaign thread (and stop, after join) */
	struct etcd_watch watch; /* campaign thread; wakeup from stop */

	pthread_mutex_t lock; /* everything below */
	bool stopping;
	bool leading;	      /* the key holds our lease */
	uint64_t deadline_ms; /* our lease is valid (for us) until then */
	uint64_t won;
	uint32_t ttl_s; /* as granted */
	int64_t lease;	/* 0: none */
	char leader[KV_ELECT_VALUE_MAX];

	pthread_t thread;
	bool started;
};

struct kv_elect_watch {
	struct elect_conn c;
	struct etcd api;
	struct etcd_watch watch;
	void (*fn)(void *arg, const char *value);
	void *arg;
	pthread_mutex_t lock; /* stopping */
	bool stopping;
	pthread_t thread;
};

static uint64_t mono_ms(void)
{
	return kvfs_mono_ns() / 1000000u;
}

/* ---- setup ------------------------------------------------------------ */

static int conn_setup(struct elect_conn *c, const char *url,
		      const struct kv_etcd_auth *a)
{
	const char *why;
	int rc;

	memset(c, 0, sizeof(*c));
	if (etcd_url_parse(url, c->endpoint, sizeof(c->endpoint), c->name,
			   sizeof(c->name), &why) < 0) {
		kvfs_err("bad election url '%s': %s (want "
			 "etcd[s]://HOST:PORT[,HOST:PORT...]/NAME)",
			 url ? url : "", why);
		return -EINVAL;
	}
	if (etcd_auth_check(a, strncmp(c->endpoint, "https://", 8) == 0, &why) <
	    0) {
		kvfs_err("election %s: %s", c->name, why);
		return -EINVAL;
	}
	snprintf(c->key, sizeof(c->key), "/kvfs/%s/conductor/leader", c->name);
	rc = etcd_conf_load(&c->conf, a, &c->password);
	return rc;
}

static void conn_release(struct elect_conn *c)
{
	etcd_conf_release(&c->conf, c->password);
	c->password = NULL;
	if (c->secret)
		explicit_bzero(c->secret, c->secret_len);
	free(c->secret);
	c->secret = NULL;
}

static int conn_secret(struct elect_conn *c, const uint8_t *secret, size_t len)
{
	if (!secret)
		return 0;
	c->secret = malloc(len);
	if (!c->secret)
		return -ENOMEM;
	memcpy(c->secret, secret, len);
	c->secret_len = len;
	return 0;
}

/* a unary call must end well inside one renewal period */
static long call_timeout_ms(uint32_t ttl_s)
{
	long ms = (long)ttl_s * 1000 / 3;

	if (ms > ETCD_TIMEOUT_MS)
		ms = ETCD_TIMEOUT_MS;
	return ms < 500 ? 500 : ms;
}

/* ---- the key ---------------------------------------------------------- */

struct look {
	const char *key;
	bool found;
	int64_t lease;
	char val[KV_ELECT_VALUE_MAX];
};

/* the range is over the key as a prefix: only the key itself counts */
static int look_fn(const char *key, size_t klen, const char *val, size_t vlen,
		   int64_t lease, void *arg)
{
	struct look *l = arg;

	if (klen != strlen(l->key) || memcmp(key, l->key, klen))
		return 0;
	l->found = true;
	l->lease = lease;
	if (vlen >= sizeof(l->val))
		vlen = sizeof(l->val) - 1;
	memcpy(l->val, val, vlen);
	l->val[vlen] = '\0';
	return 0;
}

/* val (vlen bytes, writable) checked against c's secret for key and
 * lease, and cut to its body in place (*blen): 0, -ENOMSG (not signed),
 * -EBADMSG (the MAC fails) */
static int rec_check(const struct elect_conn *c, const char *key, int64_t lease,
		     char *val, size_t vlen, size_t *blen)
{
	int rc = kv_cluster_rec_open(c->secret, c->secret_len, key, lease, val,
				     vlen, blen);

	if (rc == 0)
		val[*blen] = '\0';
	return rc;
}

static const char *rec_why(int rc)
{
	return rc == -ENOMSG ? "is not signed"
			     : "fails its MAC (another secret?)";
}

/*
 * The leader's record as read (val, NUL-terminated, under lease) cut down
 * to what it vouches for, in place: with a secret, its body when its MAC
 * binds it to the key, the lease and the secret, else "" (a leader, but
 * none we can name: a record anyone who can write etcd could have put
 * there, to send routers and nodes elsewhere); without one, the body
 * whether signed or not.
 */
static void vouch(struct elect_conn *c, int64_t lease, char *val)
{
	size_t vlen = strlen(val), blen;
	uint64_t now;
	int rc;

	if (!c->secret) {
		val[kv_cluster_rec_body(val, vlen)] = '\0';
		return;
	}
	rc = rec_check(c, c->key, lease, val, vlen, &blen);
	if (rc == 0)
		return;
	val[0] = '\0';
	now = mono_ms();
	if (now >= c->warned_ms) {
		kvfs_warn("election %s: the leader's record %s; its address "
			  "is not used",
			  c->name, rec_why(rc));
		c->warned_ms = now + 10000;
	}
}

/* who holds the key, and what it vouches for; *rev: the revision seen,
 * for the watch */
static int look(struct etcd *e, struct elect_conn *c, struct look *l,
		int64_t *rev)
{
	int rc;

	l->found = false;
	l->lease = 0;
	l->val[0] = '\0';
	rc = etcd_range_prefix(e, l->key, look_fn, l, rev);
	if (rc == 0 && l->found)
		vouch(c, l->lease, l->val);
	return rc;
}

/* ---- the candidate ---------------------------------------------------- */

static bool stopping(struct kv_elect *el)
{
	bool s;

	pthread_mutex_lock(&el->lock);
	s = el->stopping;
	pthread_mutex_unlock(&el->lock);
	return s;
}

static bool leading_locked(struct kv_elect *el, uint64_t now)
{
	return el->leading && now < el->deadline_ms;
}

/* the key holds lease holder and value val: our role, logged when it
 * changes */
static void set_role(struct kv_elect *el, bool ours, const char *val)
{
	uint64_t now = mono_ms();
	bool was, is, moved;

	pthread_mutex_lock(&el->lock);
	was = leading_locked(el, now);
	el->leading = ours;
	is = leading_locked(el, now);
	if (is && !was)
		el->won++;
	moved = strcmp(el->leader, val) != 0;
	snprintf(el->leader, sizeof(el->leader), "%s", val);
	pthread_mutex_unlock(&el->lock);
	if (is && !was)
		kvfs_info("election %s: leading (lease %u s)", el->c.name,
			  el->ttl_s);
	else if (!is && (was || moved))
		kvfs_info("election %s: standby; leader %s", el->c.name,
			  *val ? val : "(none)");
}

/* our lease is gone (or may be, by our clock): stop leading now */
static void lose_lease(struct kv_elect *el, int64_t *lease, const char *why)
{
	bool was;

	pthread_mutex_lock(&el->lock);
	was = el->leading;
	el->leading = false;
	el->lease = 0;
	el->deadline_ms = 0;
	pthread_mutex_unlock(&el->lock);
	*lease = 0;
	if (was)
		kvfs_warn("election %s: stepping down: %s", el->c.name, why);
}

static int grant(struct kv_elect *el, int64_t *lease, uint64_t *next_ka)
{
	uint64_t t0 = mono_ms();
	int64_t id, granted;
	int rc = etcd_lease_grant(&el->api, el->ttl_req, &id, &granted);

	if (rc < 0)
		return rc;
	pthread_mutex_lock(&el->lock);
	el->lease = id;
	el->ttl_s = (uint32_t)granted;
	el->deadline_ms = t0 + (uint64_t)granted * 1000 - ELECT_MARGIN_MS;
	pthread_mutex_unlock(&el->lock);
	*lease = id;
	*next_ka = t0 + (uint64_t)granted * 1000 / 3;
	return 0;
}

static int renew(struct kv_elect *el, int64_t *lease, uint64_t *next_ka)
{
	uint64_t t0 = mono_ms();
	int64_t ttl = 0;
	int rc = etcd_lease_keepalive(&el->api, *lease, &ttl);

	if (rc == 0 && ttl > 0) {
		pthread_mutex_lock(&el->lock);
		/* from the send time: etcd restarted the TTL later */
		el->deadline_ms = t0 + (uint64_t)ttl * 1000 - ELECT_MARGIN_MS;
		pthread_mutex_unlock(&el->lock);
		*next_ka = t0 + (uint64_t)ttl * 1000 / 3;
		return 0;
	}
	if (rc == 0 || rc == -ENOENT) {
		lose_lease(el, lease, "the lease expired");
		return 0;
	}
	*next_ka = mono_ms() + ELECT_RETRY_MS;
	return rc;
}

/* look at the key and, when nobody holds it, claim it */
static int claim(struct kv_elect *el, int64_t *lease, int64_t *rev)
{
	struct look l = { .key = el->c.key };
	struct etcd_val old = { 0 };
	char *sealed = NULL;
	size_t slen = el->vlen;
	int rc = look(&el->api, &el->c, &l, rev);

	if (rc < 0)
		return rc;
	if (l.found) {
		set_role(el, l.lease == *lease, l.val);
		return 0;
	}
	/* signed for this lease: a record copied under another is refused */
	if (el->c.secret)
		rc = kv_cluster_rec_seal(el->c.secret, el->c.secret_len,
					 el->c.key, *lease, el->value, el->vlen,
					 &sealed, &slen);
	if (rc == 0)
		rc = etcd_put_if(&el->api, el->c.key,
				 sealed ? sealed : el->value, slen, *lease, 0,
				 &old);
	free(sealed);
	if (rc == 0) {
		set_role(el, true, el->value);
	} else if (rc == -EEXIST) {
		/* another candidate came first (or ours went through and
		 * its reply was lost: then it holds our lease) */
		if (old.val)
			vouch(&el->c, old.lease, old.val);
		set_role(el, old.lease == *lease, old.val ? old.val : "");
		rc = 0;
	} else if (rc == -ENOENT) {
		/* etcd does not know the lease: it expired */
		lose_lease(el, lease, "the lease expired");
		rc = 0;
	}
	etcd_val_release(&old);
	return rc;
}

static void *campaign_main(void *arg)
{
	struct kv_elect *el = arg;
	uint64_t next_ka = 0;
	int64_t lease = 0, rev = 0;
	bool failing = false;

	while (!stopping(el)) {
		uint64_t now = mono_ms(), wait = ELECT_LOOK_MS;
		int rc = 0, wrc;

		if (!lease)
			rc = grant(el, &lease, &next_ka);
		else if (now >= next_ka)
			rc = renew(el, &lease, &next_ka);
		pthread_mutex_lock(&el->lock);
		now = mono_ms();
		if (lease && now >= el->deadline_ms) {
			pthread_mutex_unlock(&el->lock);
			/* not renewed in time: it may be gone in etcd; a
			 * fresh one, and the old one's key (if it is still
			 * there) is someone else's until it expires */
			lose_lease(el, &lease,
				   "the lease was not renewed "
				   "in time");
		} else {
			pthread_mutex_unlock(&el->lock);
		}
		if (rc == 0 && lease)
			rc = claim(el, &lease, &rev);
		if (rc < 0 && !failing)
			kvfs_warn("election %s: %s (retrying)", el->c.name,
				  el->api.err);
		else if (rc == 0 && failing)
			kvfs_info("election %s: etcd answers again",
				  el->c.name);
		failing = rc < 0;
		if (rc == 0 && lease && !el->watch.h &&
		    etcd_watch_start(&el->watch, &el->api, el->c.key, rev + 1) <
			    0)
			etcd_watch_end(&el->watch);
		if (!lease)
			wait = rc < 0 ? ELECT_RETRY_MS : 0;
		else if (rc < 0)
			wait = ELECT_RETRY_MS;
		now = mono_ms();
		if (lease && next_ka <= now)
			wait = 0;
		else if (lease && next_ka - now < wait)
			wait = next_ka - now;
		if (!wait)
			continue;
		wrc = etcd_watch_wait(&el->watch, (int)wait);
		if (wrc < 0)
			etcd_watch_end(&el->watch); /* started again */
	}
	return NULL;
}

int kv_elect_start(const struct kv_elect_config *cfg, struct kv_elect **out)
{
	struct kv_elect *el;
	uint32_t ttl = cfg->ttl_s ? cfg->ttl_s : KV_ELECT_TTL_S;
	int rc;

	*out = NULL;
	/* room for the MAC in a reader's buffer of KV_ELECT_VALUE_MAX */
	if (!cfg->value ||
	    strlen(cfg->value) >= KV_ELECT_VALUE_MAX - REC_MAC_EXTRA ||
	    ttl > KV_ELECT_TTL_MAX)
		return -EINVAL;
	el = calloc(1, sizeof(*el));
	if (!el)
		return -ENOMEM;
	pthread_mutex_init(&el->lock, NULL);
	el->ttl_req = ttl;
	el->ttl_s = ttl;
	rc = conn_setup(&el->c, cfg->url, &cfg->etcd);
	if (rc < 0)
		goto out_free;
	rc = conn_secret(&el->c, cfg->secret, cfg->secret_len);
	if (rc < 0) {
		conn_release(&el->c);
		goto out_free;
	}
	el->value = strdup(cfg->value);
	el->vlen = strlen(cfg->value);
	rc = el->value ? 0 : -ENOMEM;
	if (rc == 0)
		rc = etcd_init(&el->api, el->c.endpoint, call_timeout_ms(ttl),
			       &el->c.conf);
	if (rc == 0)
		rc = etcd_watch_init(&el->watch);
	if (rc == 0)
		rc = -pthread_create(&el->thread, NULL, campaign_main, el);
	if (rc < 0)
		goto out_release;
	el->started = true;
	kvfs_info("election %s: campaigning through %s", el->c.name,
		  el->c.endpoint);
	*out = el;
	return 0;

out_release:
	etcd_watch_release(&el->watch);
	etcd_release(&el->api);
	free(el->value);
	conn_release(&el->c);
out_free:
	pthread_mutex_destroy(&el->lock);
	free(el);
	return rc;
}

void kv_elect_resign(struct kv_elect *el)
{
	int64_t lease;

	if (!el || !el->started)
		return;
	pthread_mutex_lock(&el->lock);
	el->stopping = true;
	el->leading = false;
	pthread_mutex_unlock(&el->lock);
	etcd_watch_wakeup(&el->watch);
	pthread_join(el->thread, NULL);
	el->started = false;
	pthread_mutex_lock(&el->lock);
	lease = el->lease;
	el->lease = 0;
	pthread_mutex_unlock(&el->lock);
	/* the key goes with the lease */
	if (lease && etcd_lease_revoke(&el->api, lease) < 0)
		kvfs_warn("election %s: resigning: %s", el->c.name,
			  el->api.err);
}

void kv_elect_stop(struct kv_elect *el)
{
	if (!el)
		return;
	kv_elect_resign(el);
	etcd_watch_release(&el->watch);
	etcd_release(&el->api);
	free(el->value);
	conn_release(&el->c);
	pthread_mutex_destroy(&el->lock);
	free(el);
}

bool kv_elect_leading(struct kv_elect *el)
{
	bool r;

	pthread_mutex_lock(&el->lock);
	r = leading_locked(el, mono_ms());
	pthread_mutex_unlock(&el->lock);
	return r;
}

void kv_elect_state(struct kv_elect *el, struct kv_elect_state *st)
{
	pthread_mutex_lock(&el->lock);
	st->leading = leading_locked(el, mono_ms());
	st->won = el->won;
	st->ttl_s = el->ttl_s;
	if (st->leading)
		snprintf(st->leader, sizeof(st->leader), "%s", el->value);
	else if (el->leading)
		st->leader[0] = '\0'; /* ours, on a lease we cannot vouch for */
	else
		snprintf(st->leader, sizeof(st->leader), "%s", el->leader);
	pthread_mutex_unlock(&el->lock);
}

/* ---- followers -------------------------------------------------------- */

static void *follow_main(void *arg)
{
	struct kv_elect_watch *w = arg;
	char last[KV_ELECT_VALUE_MAX] = "";
	bool known = false, failing = false;

	for (;;) {
		struct look l = { .key = w->c.key };
		int64_t rev = 0;
		int rc, wrc;

		pthread_mutex_lock(&w->lock);
		if (w->stopping) {
			pthread_mutex_unlock(&w->lock);
			break;
		}
		pthread_mutex_unlock(&w->lock);
		rc = look(&w->api, &w->c, &l, &rev);
		if (rc == 0 &&
		    (!known || strcmp(last, l.val) || (!l.found && last[0]))) {
			/* a record we cannot vouch for names nobody */
			w->fn(w->arg, l.found && l.val[0] ? l.val : NULL);
			snprintf(last, sizeof(last), "%s",
				 l.found ? l.val : "");
			known = true;
		}
		if (rc < 0 && !failing)
			kvfs_warn("election %s: %s (retrying)", w->c.name,
				  w->api.err);
		failing = rc < 0;
		if (rc == 0 && !w->watch.h &&
		    etcd_watch_start(&w->watch, &w->api, w->c.key, rev + 1) < 0)
			etcd_watch_end(&w->watch);
		wrc = etcd_watch_wait(&w->watch,
				      rc < 0 ? ELECT_RETRY_MS : FOLLOW_LOOK_MS);
		if (wrc < 0)
			etcd_watch_end(&w->watch);
	}
	return NULL;
}

int kv_elect_follow(const char *url, const struct kv_etcd_auth *a,
		    const uint8_t *secret, size_t secret_len,
		    void (*fn)(void *arg, const char *value), void *arg,
		    struct kv_elect_watch **out)
{
	struct kv_elect_watch *w = calloc(1, sizeof(*w));
	int rc;

	*out = NULL;
	if (!w)
		return -ENOMEM;
	pthread_mutex_init(&w->lock, NULL);
	w->fn = fn;
	w->arg = arg;
	rc = conn_setup(&w->c, url, a);
	if (rc < 0)
		goto out_free;
	rc = conn_secret(&w->c, secret, secret_len);
	if (rc == 0)
		rc = etcd_init(&w->api, w->c.endpoint, ETCD_TIMEOUT_MS,
			       &w->c.conf);
	if (rc == 0)
		rc = etcd_watch_init(&w->watch);
	if (rc == 0)
		rc = -pthread_create(&w->thread, NULL, follow_main, w);
	if (rc < 0) {
		etcd_watch_release(&w->watch);
		etcd_release(&w->api);
		conn_release(&w->c);
		goto out_free;
	}
	*out = w;
	return 0;

out_free:
	pthread_mutex_destroy(&w->lock);
	free(w);
	return rc;
}

void kv_elect_unfollow(struct kv_elect_watch *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stopping = true;
	pthread_mutex_unlock(&w->lock);
	etcd_watch_wakeup(&w->watch);
	pthread_join(w->thread, NULL);
	etcd_watch_release(&w->watch);
	etcd_release(&w->api);
	conn_release(&w->c);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

/* ---- one look ----------------------------------------------------------- */

int kv_elect_get(const char *url, const struct kv_etcd_auth *a, char *value,
		 size_t len, char *err, size_t errlen)
{
	struct elect_conn c;
	struct etcd e;
	struct etcd_val v;
	int rc;

	snprintf(err, errlen, "bad election url or etcd options");
	rc = conn_setup(&c, url, a);
	if (rc < 0)
		return rc;
	rc = etcd_init(&e, c.endpoint, ETCD_TIMEOUT_MS, &c.conf);
	if (rc == 0) {
		rc = etcd_get(&e, c.key, &v);
		if (rc == 0) {
			/* shown, not trusted: the MAC is not checked */
			v.val[kv_cluster_rec_body(v.val, v.len)] = '\0';
			snprintf(value, len, "%s", v.val);
			etcd_val_release(&v);
		} else if (rc == -ENOENT) {
			snprintf(err, errlen, "election %s: no leader", c.name);
		} else {
			snprintf(err, errlen, "%s", e.err);
		}
		etcd_release(&e);
	} else {
		snprintf(err, errlen, "%s", strerror(-rc));
	}
	conn_release(&c);
	return rc;
}

/* ---- the leader's records --------------------------------------------- */

/* a connection of its own for one record's call, and the record's key */
static int rec_conn(struct kv_elect *el, const char *what, struct etcd *e,
		    char key[KEY_MAX])
{
	snprintf(key, KEY_MAX, "/kvfs/%s/conductor/%s", el->c.name, what);
	return etcd_init(e, el->c.endpoint, ETCD_TIMEOUT_MS, &el->c.conf);
}

static void rec_warn(struct kv_elect *el, const char *doing, const char *what,
		     const struct etcd *e, int rc)
{
	kvfs_warn("election %s: %s %s in etcd: %s", el->c.name, doing, what,
		  e->err[0] ? e->err : strerror(-rc));
}

int kv_elect_put_rec(struct kv_elect *el, const char *what, const char *val,
		     size_t vlen)
{
	char key[KEY_MAX], *sealed = NULL;
	struct etcd e;
	struct etcd_val v;
	int rc = rec_conn(el, what, &e, key);

	if (rc < 0)
		return rc;
	/* signed without a lease: it outlives ours */
	if (el->c.secret) {
		rc = kv_cluster_rec_seal(el->c.secret, el->c.secret_len, key, 0,
					 val, vlen, &sealed, &vlen);
		if (rc < 0) {
			etcd_release(&e);
			return rc;
		}
		val = sealed;
	}
	/* a put over whatever the key holds: read its revision, then put
	 * if it did not move meanwhile (a few tries) */
	for (int tries = 0; tries < 3; tries++) {
		int64_t rev = 0;

		rc = etcd_get(&e, key, &v);
		if (rc == 0) {
			rev = v.mod_rev;
			etcd_val_release(&v);
		} else if (rc != -ENOENT) {
			break;
		}
		rc = etcd_put_if(&e, key, val, vlen, 0, rev, NULL);
		if (rc != -EEXIST)
			break;
	}
	if (rc < 0)
		rec_warn(el, "keeping", what, &e, rc);
	free(sealed);
	etcd_release(&e);
	return rc;
}

int kv_elect_get_rec(struct kv_elect *el, const char *what, char **val,
		     size_t *vlen)
{
	char key[KEY_MAX];
	struct etcd e;
	struct etcd_val v = { 0 };
	int rc = rec_conn(el, what, &e, key);

	*val = NULL;
	*vlen = 0;
	if (rc < 0)
		return rc;
	rc = etcd_get(&e, key, &v);
	if (rc == 0 && el->c.secret) {
		rc = rec_check(&el->c, key, 0, v.val, v.len, &v.len);
		if (rc < 0)
			kvfs_warn("election %s: the %s kept in etcd (%s) "
				  "%s; not used",
				  el->c.name, what, key,
				  rc == -ENOMSG
					  ? "are not signed"
					  : "fail their MAC (another secret?)");
	}
	if (rc == 0) {
		/* malloc'd and NUL-terminated: now the caller's */
		*val = v.val;
		*vlen = v.len;
		v.val = NULL;
	} else if (rc != -ENOENT && rc != -ENOMSG && rc != -EBADMSG) {
		rec_warn(el, "reading", what, &e, rc);
	}
	etcd_val_release(&v);
	etcd_release(&e);
	return rc;
}

int kv_elect_field(const char *value, const char *name, char *out, size_t len)
{
	json_object *o = value ? json_tokener_parse(value) : NULL;
	json_object *v = NULL;
	const char *s;
	int rc = -ENOENT;

	if (o && json_object_is_type(o, json_type_object) &&
	    json_object_object_get_ex(o, name, &v) &&
	    json_object_is_type(v, json_type_string)) {
		s = json_object_get_string(v);
		if (*s && strlen(s) < len) {
			memcpy(out, s, strlen(s) + 1);
			rc = 0;
		}
	}
	json_object_put(o);
	return rc;
}
