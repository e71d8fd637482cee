/*
 * etcd.h - a small etcd v3 client, shared by kvfsd's membership
 * (kvstore/cluster.c), the conductor's leader election (kvstore/elect.h)
 * and whoever else needs etcd: the url syntax of --cluster and
 * --election, the TLS and authentication options (--etcd-*), and the
 * calls.
 *
 * etcd is reached through its JSON gateway (grpc-gateway, POST
 * /v3/<service>/<call>, a JSON body, a JSON reply).  In that API keys and
 * values are base64 and 64-bit integers (lease ids, revisions, TTLs) are
 * decimal strings.  Errors come back as an HTTP status with
 * {"error", "message", "code"} where code is a gRPC status.
 *
 * Every request has a connect timeout (ETCD_CONNECT_MS) and an overall
 * one (etcd->timeout_ms); the watch has both too and is simply started
 * again when its time is up, so no call here blocks for long.
 *
 * One struct etcd is one connection (curl easy handle), used by one
 * thread at a time: the cluster gives each of its threads its own.  When a
 * call fails, etcd->err holds a one-line reason ("cannot reach etcd at
 * http://127.0.0.1:2379: Connection refused"); the caller decides whether
 * and how loudly to log it, because the keepalive thread retrying every
 * ttl/3 must not flood the log.
 *
 * Authentication (conf->user): a connection authenticates (POST
 * /v3/auth/authenticate) before its first request and sends the token as
 * the Authorization header of every request; when etcd answers that the
 * token is invalid (gRPC UNAUTHENTICATED: it expired, --auth-token-ttl,
 * or the member restarted) it authenticates again and retries that
 * request once.
 *
 * Calls return 0 or a negative errno:
 *   -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH, -ENETUNREACH, -ECONNRESET:
 *                 etcd could not be reached or dropped the connection
 *   -ENOENT       gRPC NOT_FOUND (a lease etcd does not know), or no key
 *   -EEXIST       etcd_put_if: the compare failed (the key exists, or
 *                 changed)
 *   -EACCES       etcd refused the user, password, token or the key
 *                 (gRPC PERMISSION_DENIED or UNAUTHENTICATED)
 *   -EPROTO       the reply was not what the API promises
 *   -EIO          any other error etcd reported (etcd->err says which)
 */
#ifndef KVFS_ETCD_H
#define KVFS_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <json-c/json.h>

/* how to reach etcd beyond its url; every member may be NULL */
struct kv_etcd_auth {
	/* TLS, with an etcds:// url only: the CAs the server's certificate
	 * must chain to (NULL: the system's), and a client certificate and
	 * its key for an etcd with --client-cert-auth (both or neither) */
	const char *ca_file;
	const char *cert_file;
	const char *key_file;
	/* etcd's authentication: user and a file holding the password
	 * (both or neither); the file must not be readable by group or
	 * others, its trailing newline is dropped */
	const char *user;
	const char *password_file;
};

#define ETCD_URLS_MAX 2400 /* every endpoint of one url, "," between */

/*
 * etcd://HOST:PORT[,HOST:PORT...]/NAME (at most ETCD_ENDPOINTS_MAX
 * endpoints) -> "http://HOST:PORT[,http://HOST:PORT...]" (ETCD_URLS_MAX
 * bytes always fit) and NAME (1..63 of [A-Za-z0-9._-]); etcds://... (TLS)
 * -> "https://...".  -EINVAL with *why (may be NULL) saying what is wrong.
 */
int etcd_url_parse(const char *url, char *endpoint, size_t elen, char *name,
		   size_t nlen, const char **why);
/* the --etcd-* options against the url's scheme (tls: etcds://): pairs
 * given together, TLS files only with TLS; -EINVAL with *why */
int etcd_auth_check(const struct kv_etcd_auth *a, bool tls, const char **why);

#define ETCD_ENDPOINT_MAX 300 /* "http://" HOST ":" PORT, NUL included */
#define ETCD_ENDPOINTS_MAX 8  /* endpoints of one cluster url */
_Static_assert(ETCD_URLS_MAX >= ETCD_ENDPOINTS_MAX * ETCD_ENDPOINT_MAX,
	       "room for every endpoint");
#define ETCD_CONNECT_MS 1000L
#define ETCD_TIMEOUT_MS 2000L	   /* a unary request, reply included */
#define ETCD_WATCH_MS 30000L	   /* one watch stream, then a fresh one */
#define ETCD_REPLY_MAX (16u << 20) /* a reply larger than this is -EPROTO */

/*
 * How every connection of one cluster reaches etcd beyond its endpoints:
 * TLS files (used with https:// endpoints) and, with user set, etcd's own
 * authentication.  Read-only once the cluster is set up; the connections
 * point at it and it outlives them.
 */
struct etcd_conf {
	const char *ca_file;   /* PEM CAs the server's certificate must chain
				* to; NULL: the system's */
	const char *cert_file; /* PEM client certificate, with key_file */
	const char *key_file;
	const char *user; /* NULL: no authentication */
	const char *password;
};

#define ETCD_TOKEN_MAX 4096 /* a JWT token with a big key fits */

struct etcd {
	const char *endpoint; /* the one in use: eps[cur] */
	char eps[ETCD_ENDPOINTS_MAX][ETCD_ENDPOINT_MAX];
	unsigned neps, cur;
	CURL *h; /* kept: the connection is reused */
	struct curl_slist *hdr;
	long timeout_ms;
	const struct etcd_conf *conf; /* NULL: plain http, no auth */
	/* etcd auth: this connection's token, "" before the first
	 * authenticate.  Per connection, not shared: a simple token is only
	 * good on the member that issued it, and connections may fail over
	 * to different endpoints. */
	char token[ETCD_TOKEN_MAX];
	char curl_err[CURL_ERROR_SIZE]; /* curl's words, for err */
	char err[512];			/* reason of the last failure */
};

/*
 * endpoints: "http://HOST:PORT", or several of them separated by ",".
 * A request that cannot reach the one in use (it failed before anything
 * was sent, so nothing can have happened twice) tries the next ones,
 * each once; the one that answers stays in use.  -EINVAL, -ENOMEM.
 */
int etcd_init(struct etcd *e, const char *endpoints, long timeout_ms,
	      const struct etcd_conf *conf);
void etcd_release(struct etcd *e);

/* a lease of ttl_s seconds: its id, and the TTL etcd granted (which may
 * be longer: etcd has a minimum) */
int etcd_lease_grant(struct etcd *e, uint32_t ttl_s, int64_t *id,
		     int64_t *granted);
/* one keepalive: *ttl is the TTL left, 0 when the lease is gone */
int etcd_lease_keepalive(struct etcd *e, int64_t id, int64_t *ttl);
/* -ENOENT when etcd does not know the lease (already expired) */
int etcd_lease_revoke(struct etcd *e, int64_t id);

/* one key's value as etcd holds it (etcd_val_release frees val) */
struct etcd_val {
	char *val; /* malloc'd, NUL-terminated */
	size_t len;
	int64_t lease;	 /* the lease it is attached to, 0: none */
	int64_t mod_rev; /* revision of its last change */
};
void etcd_val_release(struct etcd_val *v);

/*
 * Put key -> val attached to lease (0: none), in a txn: when mod_rev is 0
 * only if key does not exist (its create_revision is 0), else only if its
 * mod_revision is still mod_rev (it was not changed since it was read).
 * -EEXIST when the compare fails; then, if old is not NULL, *old is what
 * the key holds (old->val NULL when the key is gone).
 */
int etcd_put_if(struct etcd *e, const char *key, const void *val, size_t vlen,
		int64_t lease, int64_t mod_rev, struct etcd_val *old);
/* value of one key; -ENOENT */
int etcd_get(struct etcd *e, const char *key, struct etcd_val *v);

/* one key of a range; the strings are NUL-terminated and live only
 * during the call; lease as in struct etcd_val.  A nonzero return stops
 * the walk and is returned. */
typedef int (*etcd_kv_fn)(const char *key, size_t klen, const char *val,
			  size_t vlen, int64_t lease, void *arg);
/* every key that starts with prefix, in key order; *rev: the store's
 * revision the range saw (the watch starts after it) */
int etcd_range_prefix(struct etcd *e, const char *prefix, etcd_kv_fn fn,
		      void *arg, int64_t *rev);

/*
 * A watch on a prefix: a streaming POST /v3/watch driven through a curl
 * multi handle, so that the watcher thread waits on the stream and on
 * etcd_watch_wakeup() at once and stops promptly.
 */
struct etcd_watch {
	char endpoint[ETCD_ENDPOINT_MAX];
	CURLM *m;
	CURL *h;		/* NULL: no stream running */
	struct curl_slist *hdr; /* JSON headers, and the token's */
	json_tokener *tok;	/* the stream is JSON objects back to back */
	int http_checked;	/* the status was looked at (first bytes) */
	unsigned events;	/* messages with events since the last wait */
	int ended;		/* 0, or why the stream is over (< 0) */
	char curl_err[CURL_ERROR_SIZE];
	char err[512];
};

int etcd_watch_init(struct etcd_watch *w);
void etcd_watch_release(struct etcd_watch *w);
/* start streaming changes under prefix from revision start_rev on, on
 * the endpoint conn uses, with its TLS settings and token */
int etcd_watch_start(struct etcd_watch *w, const struct etcd *conn,
		     const char *prefix, int64_t start_rev);
/* drop the stream (if any) */
void etcd_watch_end(struct etcd_watch *w);
/*
 * Wait up to timeout_ms for the stream (or just sleep when there is
 * none).  Returns 1 when changes arrived, 0 when none did (timeout or
 * wakeup), or a negative errno when the stream is over: it ended, failed,
 * ran ETCD_WATCH_MS, or etcd canceled it (compaction); w->err says why.
 * The caller then ranges again and starts a new one.
 */
int etcd_watch_wait(struct etcd_watch *w, int timeout_ms);
/* make a wait in another thread return now; safe from any thread */
void etcd_watch_wakeup(struct etcd_watch *w);

/*
 * conf from the options a (which etcd_auth_check passed): the file names
 * are pointed at, the password is read from its file into *password
 * (malloc'd; etcd_conf_release cleanses and frees it).  The password
 * file is refused when group or others may read it (-EPERM), or when it
 * is empty or too long (-EINVAL); the reason is logged.
 */
int etcd_conf_load(struct etcd_conf *conf, const struct kv_etcd_auth *a,
		   char **password);
void etcd_conf_release(struct etcd_conf *conf, char *password);

/* base64 (standard alphabet, padded), as etcd's JSON carries bytes */
char *etcd_b64(const void *data, size_t len);
/* decoded bytes, NUL-terminated, malloc'd; NULL when s is not base64 */
char *etcd_unb64(const char *s, size_t *len);

#endif /* KVFS_ETCD_H */
