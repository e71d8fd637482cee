/*
 * cluster_etcd.c - the etcd v3 JSON-gateway client of etcd.h.
 *
 * Requests are small JSON texts written with kvfs_buf (keys and values
 * are base64, so nothing but the base64 alphabet goes inside quotes);
 * replies are parsed with json-c.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "kvstore/etcd.h"
#include "src/common/json.h"

/* ---- base64 ---------------------------------------------------------- */

char *etcd_b64(const void *data, size_t len)
{
	char *out;

	if (len > INT_MAX / 2)
		return NULL;
	out = malloc(4 * ((len + 2) / 3) + 1);
	if (out)
		EVP_EncodeBlock((unsigned char *)out, data, (int)len);
	return out;
}

char *etcd_unb64(const char *s, size_t *len)
{
	size_t n = strlen(s), pad = 0;
	char *out;
	int got;

	if (n % 4 != 0 || n > INT_MAX / 2)
		return NULL;
	out = malloc(n / 4 * 3 + 1);
	if (!out)
		return NULL;
	/* EVP_DecodeBlock counts the padding as decoded zero bytes */
	got = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)s,
			      (int)n);
	if (got < 0) {
		free(out);
		return NULL;
	}
	if (n >= 1 && s[n - 1] == '=')
		pad++;
	if (n >= 2 && s[n - 2] == '=')
		pad++;
	*len = (size_t)got - pad;
	out[*len] = '\0';
	return out;
}

/* ---- json-c helpers -------------------------------------------------- */

static json_object *jget(json_object *o, const char *key)
{
	json_object *v = NULL;

	if (!o || !json_object_is_type(o, json_type_object))
		return NULL;
	return json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static const char *jstr(json_object *o, const char *key)
{
	json_object *v = jget(o, key);

	return v && json_object_is_type(v, json_type_string)
		       ? json_object_get_string(v)
		       : NULL;
}

/* the gateway writes int64 fields as decimal strings and omits zeros */
static int64_t jint(json_object *o, const char *key)
{
	json_object *v = jget(o, key);

	if (!v)
		return 0;
	if (json_object_is_type(v, json_type_string))
		return strtoll(json_object_get_string(v), NULL, 10);
	if (json_object_is_type(v, json_type_int))
		return json_object_get_int64(v);
	return 0;
}

static int jtrue(json_object *o, const char *key)
{
	json_object *v = jget(o, key);

	return v && json_object_is_type(v, json_type_boolean) &&
	       json_object_get_boolean(v);
}

/* gRPC status codes (the "code" of an error reply) as errnos */
static int grpc_errno(int64_t code)
{
	switch (code) {
	case 3:	 /* INVALID_ARGUMENT */
	case 11: /* OUT_OF_RANGE */
		return -EINVAL;
	case 4: /* DEADLINE_EXCEEDED */
		return -ETIMEDOUT;
	case 5: /* NOT_FOUND */
		return -ENOENT;
	case 6: /* ALREADY_EXISTS */
		return -EEXIST;
	case 7: /* PERMISSION_DENIED: the user may not touch the key */
		return -EACCES;
	case 8: /* RESOURCE_EXHAUSTED */
		return -ENOSPC;
	case 14: /* UNAVAILABLE */
		return -EAGAIN;
	case 16: /* UNAUTHENTICATED: "invalid auth token"; etcd_call
		  * authenticates again, and says -EACCES if that fails */
		return -EKEYEXPIRED;
	default:
		return -EIO;
	}
}

/* range_end for "every key with this prefix": the prefix with its last
 * byte that is not 0xff incremented, what follows dropped */
static char *prefix_end(const char *prefix, size_t *len)
{
	size_t n = strlen(prefix);
	char *end = malloc(n + 1);

	if (!end)
		return NULL;
	memcpy(end, prefix, n + 1);
	while (n > 0 && (unsigned char)end[n - 1] == 0xff)
		n--;
	if (n == 0) {
		free(end);
		return NULL;
	}
	end[n - 1] = (char)((unsigned char)end[n - 1] + 1);
	end[n] = '\0';
	*len = n;
	return end;
}

/* ---- transport ------------------------------------------------------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

static void curl_init_once(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int curl_ready(void)
{
	pthread_once(&curl_once, curl_init_once);
	return curl_init_rc == CURLE_OK ? 0 : -ENOMEM;
}

/* one reason line for a failed transfer, and its errno */
static int curl_fail(char *err, size_t errlen, const char *endpoint, CURL *h,
		     CURLcode cc, const char *curl_err)
{
	const char *what =
		curl_err && *curl_err ? curl_err : curl_easy_strerror(cc);
	long oserr = 0;
	curl_off_t connected = 0;
	int rc;

	switch (cc) {
	case CURLE_COULDNT_CONNECT:
		curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &oserr);
		rc = oserr > 0 ? -(int)oserr : -ECONNREFUSED;
		snprintf(err, errlen, "cannot reach etcd at %s: %s", endpoint,
			 strerror(-rc));
		return rc;
	case CURLE_COULDNT_RESOLVE_HOST:
		snprintf(err, errlen,
			 "cannot reach etcd at %s: unknown host name",
			 endpoint);
		return -EHOSTUNREACH;
	case CURLE_OPERATION_TIMEDOUT:
		curl_easy_getinfo(h, CURLINFO_CONNECT_TIME_T, &connected);
		if (connected == 0)
			snprintf(err, errlen, "cannot reach etcd at %s: %s",
				 endpoint, strerror(ETIMEDOUT));
		else
			snprintf(err, errlen,
				 "etcd at %s did not answer in time", endpoint);
		return -ETIMEDOUT;
	case CURLE_GOT_NOTHING:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_PARTIAL_FILE:
		snprintf(err, errlen, "etcd at %s dropped the connection (%s)",
			 endpoint, what);
		return -ECONNRESET;
	case CURLE_WRITE_ERROR:
		snprintf(err, errlen,
			 "etcd at %s: reply too large or no memory", endpoint);
		return -EPROTO;
	default:
		snprintf(err, errlen, "etcd at %s: %s", endpoint, what);
		return -EIO;
	}
}

/*
 * Options every handle gets.  CURLOPT_PROXY "": etcd is a cluster-local
 * control plane, and an http_proxy in the environment (common on build
 * and GPU hosts) must not route the keepalive through a proxy.
 * NOSIGNAL: these handles live in threads of a daemon.  TLS: curl
 * verifies the server's certificate and name by default (against
 * ca_file when given); a client certificate is sent when etcd asks
 * (--client-cert-auth).  An http:// endpoint ignores them.
 */
static void curl_common(CURL *h, struct curl_slist *hdr, long timeout_ms,
			char *curl_err, const struct etcd_conf *conf)
{
	if (conf && conf->ca_file)
		curl_easy_setopt(h, CURLOPT_CAINFO, conf->ca_file);
	if (conf && conf->cert_file) {
		curl_easy_setopt(h, CURLOPT_SSLCERT, conf->cert_file);
		curl_easy_setopt(h, CURLOPT_SSLKEY, conf->key_file);
	}
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROXY, "");
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			 timeout_ms < ETCD_CONNECT_MS ? timeout_ms
						      : ETCD_CONNECT_MS);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, curl_err);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
}

/* "Expect:" off: curl would wait for a 100-continue on larger bodies;
 * token (may be NULL or ""): etcd's auth token, sent bare as the
 * gateway passes Authorization on to the gRPC call's metadata */
static struct curl_slist *json_headers(const char *token)
{
	struct curl_slist *a, *b;
	char *line;

	a = curl_slist_append(NULL, "Content-Type: application/json");
	if (!a)
		return NULL;
	b = curl_slist_append(a, "Expect:");
	if (!b) {
		curl_slist_free_all(a);
		return NULL;
	}
	if (!token || !*token)
		return b;
	line = malloc(strlen(token) + 32);
	if (!line) {
		curl_slist_free_all(b);
		return NULL;
	}
	sprintf(line, "Authorization: %s", token);
	a = curl_slist_append(b, line);
	OPENSSL_cleanse(line, strlen(line));
	free(line);
	if (!a)
		curl_slist_free_all(b);
	return a;
}

int etcd_init(struct etcd *e, const char *endpoints, long timeout_ms,
	      const struct etcd_conf *conf)
{
	const char *p = endpoints;
	int rc = curl_ready();

	memset(e, 0, sizeof(*e));
	if (rc < 0)
		return rc;
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);

		if (!len || len >= ETCD_ENDPOINT_MAX ||
		    e->neps == ETCD_ENDPOINTS_MAX)
			return -EINVAL;
		memcpy(e->eps[e->neps], p, len);
		e->eps[e->neps++][len] = '\0';
		if (!comma)
			break;
		p = comma + 1;
	}
	e->endpoint = e->eps[0];
	e->timeout_ms = timeout_ms > 0 ? timeout_ms : ETCD_TIMEOUT_MS;
	e->conf = conf;
	e->hdr = json_headers(NULL);
	e->h = curl_easy_init();
	if (!e->hdr || !e->h) {
		etcd_release(e);
		return -ENOMEM;
	}
	return 0;
}

void etcd_release(struct etcd *e)
{
	if (e->h)
		curl_easy_cleanup(e->h);
	curl_slist_free_all(e->hdr);
	OPENSSL_cleanse(e->token, sizeof(e->token));
	e->h = NULL;
	e->hdr = NULL;
}

static size_t sink_write(char *p, size_t sz, size_t n, void *arg)
{
	struct kvfs_buf *b = arg;
	size_t len = sz * n;

	if (b->len + len > ETCD_REPLY_MAX)
		return 0;
	kvfs_buf_add(b, p, len);
	return b->err ? 0 : len;
}

/* the reason an error reply gives: {"error", "message", "code"} */
static int reply_error(struct etcd *e, const char *path, long status,
		       const char *text)
{
	json_object *o = text ? json_tokener_parse(text) : NULL;
	const char *msg = jstr(o, "message");
	int rc = o && jget(o, "code") ? grpc_errno(jint(o, "code")) : -EIO;

	if (msg)
		snprintf(e->err, sizeof(e->err), "etcd at %s: %s: %s",
			 e->endpoint, path, msg);
	else
		snprintf(e->err, sizeof(e->err),
			 "etcd at %s: %s: HTTP %ld (is it etcd v3.4+?)",
			 e->endpoint, path, status);
	json_object_put(o);
	return rc;
}

/*
 * POST body to path; *out: the reply, a JSON object (json_object_put
 * it).  A stream call (keepalive) answers {"result": ...} or
 * {"error": {...}} with status 200: the error is turned into an errno
 * here too.
 */
static int call_one(struct etcd *e, const char *path, const char *body,
		    json_object **out, bool *unreached)
{
	char url[ETCD_ENDPOINT_MAX + 64];
	struct kvfs_buf b = KVFS_BUF_INIT;
	struct curl_slist *hdr = e->hdr, *auth = NULL;
	json_object *o, *serr;
	long status = 0;
	CURLcode cc;
	int rc;

	*out = NULL;
	e->err[0] = '\0';
	if (e->token[0]) {
		auth = json_headers(e->token);
		if (!auth)
			return -ENOMEM;
		hdr = auth;
	}
	snprintf(url, sizeof(url), "%s%s", e->endpoint, path);
	curl_easy_reset(e->h);
	e->curl_err[0] = '\0';
	curl_common(e->h, hdr, e->timeout_ms, e->curl_err, e->conf);
	curl_easy_setopt(e->h, CURLOPT_URL, url);
	curl_easy_setopt(e->h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(e->h, CURLOPT_WRITEFUNCTION, sink_write);
	curl_easy_setopt(e->h, CURLOPT_WRITEDATA, &b);
	cc = curl_easy_perform(e->h);
	if (cc != CURLE_OK) {
		curl_off_t connected = 0;

		curl_easy_getinfo(e->h, CURLINFO_CONNECT_TIME_T, &connected);
		*unreached = cc == CURLE_COULDNT_CONNECT ||
			     cc == CURLE_COULDNT_RESOLVE_HOST ||
			     (cc == CURLE_OPERATION_TIMEDOUT && !connected);
		rc = curl_fail(e->err, sizeof(e->err), e->endpoint, e->h, cc,
			       e->curl_err);
		goto out_release;
	}
	curl_easy_getinfo(e->h, CURLINFO_RESPONSE_CODE, &status);
	if (b.err) {
		rc = -ENOMEM;
		goto out_release;
	}
	if (status != 200) {
		rc = reply_error(e, path, status, b.p);
		goto out_release;
	}
	o = b.p ? json_tokener_parse(b.p) : NULL;
	if (!o || !json_object_is_type(o, json_type_object)) {
		snprintf(e->err, sizeof(e->err),
			 "etcd at %s: %s: the reply is not a JSON object",
			 e->endpoint, path);
		json_object_put(o);
		rc = -EPROTO;
		goto out_release;
	}
	serr = jget(o, "error");
	if (serr && json_object_is_type(serr, json_type_object)) {
		const char *msg = jstr(serr, "message");

		snprintf(e->err, sizeof(e->err), "etcd at %s: %s: %s",
			 e->endpoint, path, msg ? msg : "error");
		rc = grpc_errno(jint(serr, "grpc_code"));
		json_object_put(o);
		goto out_release;
	}
	*out = o;
	rc = 0;
out_release:
	/* the body of authenticate holds the password */
	if (b.p)
		OPENSSL_cleanse(b.p, b.len);
	kvfs_buf_release(&b);
	curl_slist_free_all(auth);
	return rc;
}

/* call_one on the endpoint in use, then, while one cannot be reached
 * at all, on each of the others once */
static int call_any(struct etcd *e, const char *path, const char *body,
		    json_object **out)
{
	int rc;

	for (unsigned tried = 1;; tried++) {
		bool unreached = false;

		rc = call_one(e, path, body, out, &unreached);
		if (!unreached || tried >= e->neps)
			return rc;
		/* the token goes along: a JWT one is good on every member;
		 * a simple one is not, and the next member's "invalid auth
		 * token" makes etcd_call authenticate there */
		e->cur = (e->cur + 1) % e->neps;
		e->endpoint = e->eps[e->cur];
	}
}

/* it goes into a header line: printable ASCII, no blank, CR or LF */
static bool token_chars(const char *t)
{
	for (; *t; t++)
		if (*t < 0x21 || *t > 0x7e)
			return false;
	return true;
}

/* a fresh token for e->conf's user, on the endpoint in use */
static int authenticate(struct etcd *e)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	const char *tok;
	json_object *o;
	char *body;
	size_t blen;
	int rc;

	e->token[0] = '\0';
	kvfs_buf_puts(&b, "{\"name\":");
	kvfs_buf_json_str(&b, e->conf->user, strlen(e->conf->user));
	kvfs_buf_puts(&b, ",\"password\":");
	kvfs_buf_json_str(&b, e->conf->password, strlen(e->conf->password));
	kvfs_buf_puts(&b, "}");
	rc = kvfs_buf_finish(&b, &body, &blen);
	if (rc < 0)
		return rc;
	rc = call_any(e, "/v3/auth/authenticate", body, &o);
	OPENSSL_cleanse(body, blen);
	free(body);
	if (rc < 0) {
		/* a wrong user or password is INVALID_ARGUMENT */
		if (rc == -EINVAL || rc == -EKEYEXPIRED)
			rc = -EACCES;
		return rc;
	}
	tok = jstr(o, "token");
	if (!tok || !*tok || strlen(tok) >= sizeof(e->token) ||
	    !token_chars(tok)) {
		snprintf(e->err, sizeof(e->err), "etcd at %s: authenticate: %s",
			 e->endpoint,
			 tok && *tok ? "a token too long or not printable"
				     : "no token (is auth enabled in etcd?)");
		rc = -EPROTO;
	} else {
		strcpy(e->token, tok);
	}
	json_object_put(o);
	return rc;
}

/* call_any, authenticated first when the cluster has a user, and once
 * again when etcd no longer takes the token (even a fresh one: the
 * endpoint may have changed since) */
static int etcd_call(struct etcd *e, const char *path, const char *body,
		     json_object **out)
{
	int rc;

	if (e->conf && e->conf->user && !e->token[0]) {
		rc = authenticate(e);
		if (rc < 0)
			return rc;
	}
	rc = call_any(e, path, body, out);
	if (rc == -EKEYEXPIRED && e->conf && e->conf->user) {
		rc = authenticate(e);
		if (rc == 0)
			rc = call_any(e, path, body, out);
	}
	return rc == -EKEYEXPIRED ? -EACCES : rc;
}

/* ---- leases ---------------------------------------------------------- */

int etcd_lease_grant(struct etcd *e, uint32_t ttl_s, int64_t *id,
		     int64_t *granted)
{
	char body[64];
	json_object *o;
	const char *err;
	int rc;

	snprintf(body, sizeof(body), "{\"TTL\":\"%" PRIu32 "\"}", ttl_s);
	rc = etcd_call(e, "/v3/lease/grant", body, &o);
	if (rc < 0)
		return rc;
	err = jstr(o, "error");
	*id = jint(o, "ID");
	*granted = jint(o, "TTL");
	if (err && *err) {
		snprintf(e->err, sizeof(e->err), "etcd at %s: lease grant: %s",
			 e->endpoint, err);
		rc = -EIO;
	} else if (*id == 0 || *granted <= 0) {
		snprintf(e->err, sizeof(e->err),
			 "etcd at %s: lease grant: no ID or TTL in the reply",
			 e->endpoint);
		rc = -EPROTO;
	}
	json_object_put(o);
	return rc;
}

int etcd_lease_keepalive(struct etcd *e, int64_t id, int64_t *ttl)
{
	char body[64];
	json_object *o;
	int rc;

	snprintf(body, sizeof(body), "{\"ID\":\"%" PRId64 "\"}", id);
	rc = etcd_call(e, "/v3/lease/keepalive", body, &o);
	if (rc < 0)
		return rc;
	/* a lease etcd no longer has answers with no TTL (0) */
	*ttl = jint(jget(o, "result"), "TTL");
	json_object_put(o);
	return 0;
}

int etcd_lease_revoke(struct etcd *e, int64_t id)
{
	char body[64];
	json_object *o;
	int rc;

	snprintf(body, sizeof(body), "{\"ID\":\"%" PRId64 "\"}", id);
	rc = etcd_call(e, "/v3/lease/revoke", body, &o);
	json_object_put(o);
	return rc;
}

/* ---- keys ------------------------------------------------------------ */

void etcd_val_release(struct etcd_val *v)
{
	free(v->val);
	memset(v, 0, sizeof(*v));
}

/* value of the first kv of a range reply (or response_range) */
static int first_value(struct etcd *e, json_object *range, struct etcd_val *v)
{
	json_object *kvs = jget(range, "kvs");
	json_object *kv;
	const char *v64;

	memset(v, 0, sizeof(*v));
	if (!kvs || !json_object_is_type(kvs, json_type_array) ||
	    json_object_array_length(kvs) == 0)
		return -ENOENT;
	kv = json_object_array_get_idx(kvs, 0);
	v64 = jstr(kv, "value");
	v->lease = jint(kv, "lease");
	v->mod_rev = jint(kv, "mod_revision");
	/* an empty value is omitted */
	v->val = etcd_unb64(v64 ? v64 : "", &v->len);
	if (!v->val) {
		snprintf(e->err, sizeof(e->err),
			 "etcd at %s: a value is not base64", e->endpoint);
		return -EPROTO;
	}
	return 0;
}

int etcd_put_if(struct etcd *e, const char *key, const void *val, size_t vlen,
		int64_t lease, int64_t mod_rev, struct etcd_val *old)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	char *k64 = etcd_b64(key, strlen(key)), *v64 = etcd_b64(val, vlen);
	char *body = NULL, lease_s[48] = "";
	json_object *o = NULL, *resp;
	size_t blen;
	int rc = -ENOMEM;

	if (old)
		memset(old, 0, sizeof(*old));
	if (!k64 || !v64)
		goto out_free;
	if (lease)
		snprintf(lease_s, sizeof(lease_s), ",\"lease\":\"%" PRId64 "\"",
			 lease);
	kvfs_buf_printf(&b, "{\"compare\":[{\"key\":\"%s\",", k64);
	if (mod_rev)
		kvfs_buf_printf(&b,
				"\"result\":\"EQUAL\",\"target\":\"MOD\","
				"\"mod_revision\":\"%" PRId64 "\"}],",
				mod_rev);
	else
		kvfs_buf_puts(&b, "\"result\":\"EQUAL\",\"target\":\"CREATE\","
				  "\"create_revision\":\"0\"}],");
	kvfs_buf_printf(&b,
			"\"success\":[{\"request_put\":{\"key\":\"%s\","
			"\"value\":\"%s\"%s}}],"
			"\"failure\":[{\"request_range\":{\"key\":\"%s\"}}]}",
			k64, v64, lease_s, k64);
	rc = kvfs_buf_finish(&b, &body, &blen);
	if (rc < 0)
		goto out_free;
	rc = etcd_call(e, "/v3/kv/txn", body, &o);
	if (rc < 0)
		goto out_free;
	if (jtrue(o, "succeeded"))
		goto out_free;
	rc = -EEXIST;
	if (old) {
		int vrc;

		resp = json_object_array_get_idx(jget(o, "responses"), 0);
		vrc = first_value(e, jget(resp, "response_range"), old);
		/* a create found it, so it is there (same txn); a replace
		 * may find it gone */
		if (vrc < 0 && (vrc != -ENOENT || !mod_rev)) {
			snprintf(e->err, sizeof(e->err),
				 "etcd at %s: txn failed without a value",
				 e->endpoint);
			rc = -EPROTO;
		}
	}
out_free:
	json_object_put(o);
	free(body);
	free(k64);
	free(v64);
	return rc;
}

int etcd_get(struct etcd *e, const char *key, struct etcd_val *v)
{
	char *k64 = etcd_b64(key, strlen(key)), *body;
	json_object *o;
	int rc;

	if (!k64)
		return -ENOMEM;
	body = malloc(strlen(k64) + 16);
	if (!body) {
		free(k64);
		return -ENOMEM;
	}
	sprintf(body, "{\"key\":\"%s\"}", k64);
	rc = etcd_call(e, "/v3/kv/range", body, &o);
	if (rc == 0)
		rc = first_value(e, o, v);
	json_object_put(o);
	free(body);
	free(k64);
	return rc;
}

/* ---- ranges ---------------------------------------------------------- */

static int range_walk(struct etcd *e, json_object *kvs, etcd_kv_fn fn,
		      void *arg)
{
	size_t n = kvs && json_object_is_type(kvs, json_type_array)
			   ? json_object_array_length(kvs)
			   : 0;

	for (size_t i = 0; i < n; i++) {
		json_object *kv = json_object_array_get_idx(kvs, i);
		const char *k64 = jstr(kv, "key"), *v64 = jstr(kv, "value");
		size_t klen, vlen;
		char *k, *v;
		int rc;

		k = etcd_unb64(k64 ? k64 : "", &klen);
		v = etcd_unb64(v64 ? v64 : "", &vlen);
		if (!k || !v) {
			free(k);
			free(v);
			snprintf(e->err, sizeof(e->err),
				 "etcd at %s: a key or value is not base64",
				 e->endpoint);
			return -EPROTO;
		}
		rc = fn(k, klen, v, vlen, jint(kv, "lease"), arg);
		free(k);
		free(v);
		if (rc)
			return rc;
	}
	return 0;
}

int etcd_range_prefix(struct etcd *e, const char *prefix, etcd_kv_fn fn,
		      void *arg, int64_t *rev)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	char *k64 = NULL, *e64 = NULL, *end, *body = NULL;
	json_object *o = NULL;
	size_t elen, blen;
	int rc = -ENOMEM;

	end = prefix_end(prefix, &elen);
	if (!end)
		return -EINVAL;
	k64 = etcd_b64(prefix, strlen(prefix));
	e64 = etcd_b64(end, elen);
	if (!k64 || !e64)
		goto out_free;
	kvfs_buf_printf(&b, "{\"key\":\"%s\",\"range_end\":\"%s\"}", k64, e64);
	rc = kvfs_buf_finish(&b, &body, &blen);
	if (rc < 0)
		goto out_free;
	rc = etcd_call(e, "/v3/kv/range", body, &o);
	if (rc < 0)
		goto out_free;
	*rev = jint(jget(o, "header"), "revision");
	rc = range_walk(e, jget(o, "kvs"), fn, arg);
out_free:
	json_object_put(o);
	free(body);
	free(k64);
	free(e64);
	free(end);
	return rc;
}

/* ---- watch ----------------------------------------------------------- */

int etcd_watch_init(struct etcd_watch *w)
{
	int rc = curl_ready();

	memset(w, 0, sizeof(*w));
	if (rc < 0)
		return rc;
	w->m = curl_multi_init();
	w->tok = json_tokener_new();
	if (!w->m || !w->tok) {
		etcd_watch_release(w);
		return -ENOMEM;
	}
	return 0;
}

void etcd_watch_release(struct etcd_watch *w)
{
	etcd_watch_end(w);
	if (w->m)
		curl_multi_cleanup(w->m);
	if (w->tok)
		json_tokener_free(w->tok);
	w->m = NULL;
	w->tok = NULL;
}

/* one message of the stream: {"result": WatchResponse} or {"error": ...} */
static void watch_msg(struct etcd_watch *w, json_object *o)
{
	json_object *res = jget(o, "result"), *err = jget(o, "error");
	json_object *ev;

	if (err) {
		const char *msg = jstr(err, "message");

		snprintf(w->err, sizeof(w->err), "etcd at %s: watch: %s",
			 w->endpoint, msg ? msg : "error");
		w->ended = -EIO;
		return;
	}
	if (jtrue(res, "canceled") || jint(res, "compact_revision") > 0) {
		const char *why = jstr(res, "cancel_reason");

		snprintf(w->err, sizeof(w->err),
			 "etcd at %s: watch canceled (%s)", w->endpoint,
			 why ? why : "compacted");
		w->ended = -ECANCELED;
		return;
	}
	ev = jget(res, "events");
	if (ev && json_object_is_type(ev, json_type_array) &&
	    json_object_array_length(ev) > 0)
		w->events++;
}

/* the stream's bytes: JSON objects, one after the other (newlines between
 * them in practice, but the tokener needs no framing) */
static size_t watch_write(char *p, size_t sz, size_t n, void *arg)
{
	struct etcd_watch *w = arg;
	size_t len = sz * n, off = 0;

	if (!w->http_checked) {
		long status = 0;

		curl_easy_getinfo(w->h, CURLINFO_RESPONSE_CODE, &status);
		w->http_checked = 1;
		if (status != 200) {
			snprintf(w->err, sizeof(w->err),
				 "etcd at %s: watch: HTTP %ld", w->endpoint,
				 status);
			w->ended = -EIO;
			return 0;
		}
	}
	while (off < len) {
		size_t chunk = len - off > INT_MAX ? INT_MAX : len - off;
		json_object *o =
			json_tokener_parse_ex(w->tok, p + off, (int)chunk);
		enum json_tokener_error je = json_tokener_get_error(w->tok);

		if (je == json_tokener_continue)
			break;
		if (je != json_tokener_success) {
			snprintf(w->err, sizeof(w->err),
				 "etcd at %s: watch: bad JSON (%s)",
				 w->endpoint, json_tokener_error_desc(je));
			w->ended = -EPROTO;
			return 0;
		}
		off += json_tokener_get_parse_end(w->tok);
		json_tokener_reset(w->tok);
		watch_msg(w, o);
		json_object_put(o);
	}
	return len;
}

int etcd_watch_start(struct etcd_watch *w, const struct etcd *conn,
		     const char *prefix, int64_t start_rev)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	char url[ETCD_ENDPOINT_MAX + 16];
	char *k64 = NULL, *e64 = NULL, *end, *body = NULL;
	const char *endpoint = conn->endpoint;
	size_t elen, blen;
	int rc = -ENOMEM;

	etcd_watch_end(w);
	if (strlen(endpoint) >= sizeof(w->endpoint))
		return -EINVAL;
	strcpy(w->endpoint, endpoint);
	/* the token of the connection that just ranged there: a watch
	 * with a stale one is canceled, and the watcher ranges (and so
	 * authenticates) again before its next start */
	w->hdr = json_headers(conn->token);
	if (!w->hdr)
		return -ENOMEM;
	end = prefix_end(prefix, &elen);
	if (!end)
		return -EINVAL;
	k64 = etcd_b64(prefix, strlen(prefix));
	e64 = etcd_b64(end, elen);
	if (!k64 || !e64)
		goto out_free;
	kvfs_buf_printf(&b,
			"{\"create_request\":{\"key\":\"%s\",\"range_end\":"
			"\"%s\",\"start_revision\":\"%" PRId64 "\"}}",
			k64, e64, start_rev);
	rc = kvfs_buf_finish(&b, &body, &blen);
	if (rc < 0)
		goto out_free;
	w->h = curl_easy_init();
	if (!w->h) {
		rc = -ENOMEM;
		goto out_free;
	}
	snprintf(url, sizeof(url), "%s/v3/watch", endpoint);
	w->curl_err[0] = '\0';
	curl_common(w->h, w->hdr, ETCD_WATCH_MS, w->curl_err, conn->conf);
	curl_easy_setopt(w->h, CURLOPT_URL, url);
	curl_easy_setopt(w->h, CURLOPT_COPYPOSTFIELDS, body);
	curl_easy_setopt(w->h, CURLOPT_WRITEFUNCTION, watch_write);
	curl_easy_setopt(w->h, CURLOPT_WRITEDATA, w);
	if (curl_multi_add_handle(w->m, w->h) != CURLM_OK) {
		curl_easy_cleanup(w->h);
		w->h = NULL;
		rc = -ENOMEM;
		goto out_free;
	}
	rc = 0;
out_free:
	free(body);
	free(k64);
	free(e64);
	free(end);
	return rc;
}

void etcd_watch_end(struct etcd_watch *w)
{
	if (w->h) {
		curl_multi_remove_handle(w->m, w->h);
		curl_easy_cleanup(w->h);
		w->h = NULL;
	}
	curl_slist_free_all(w->hdr);
	w->hdr = NULL;
	if (w->tok)
		json_tokener_reset(w->tok);
	w->http_checked = 0;
	w->events = 0;
	w->ended = 0;
}

/* a finished transfer: why the stream is over */
static void watch_done(struct etcd_watch *w)
{
	struct CURLMsg *msg;
	int left;

	while ((msg = curl_multi_info_read(w->m, &left))) {
		if (msg->msg != CURLMSG_DONE || w->ended)
			continue;
		if (msg->data.result == CURLE_OK) {
			snprintf(w->err, sizeof(w->err),
				 "etcd at %s closed the watch", w->endpoint);
			w->ended = -EPIPE;
		} else {
			w->ended =
				curl_fail(w->err, sizeof(w->err), w->endpoint,
					  w->h, msg->data.result, w->curl_err);
		}
	}
}

int etcd_watch_wait(struct etcd_watch *w, int timeout_ms)
{
	int running = 0;

	if (!w->h) {
		/* no stream: an interruptible sleep */
		curl_multi_poll(w->m, NULL, 0, timeout_ms, NULL);
		return 0;
	}
	curl_multi_perform(w->m, &running);
	if (!w->events && !w->ended && running) {
		curl_multi_poll(w->m, NULL, 0, timeout_ms, NULL);
		curl_multi_perform(w->m, &running);
	}
	if (!running) {
		watch_done(w);
		if (!w->ended) {
			snprintf(w->err, sizeof(w->err),
				 "etcd at %s: the watch stopped", w->endpoint);
			w->ended = -EPIPE;
		}
	}
	if (w->events) {
		w->events = 0;
		return 1;
	}
	return w->ended;
}

void etcd_watch_wakeup(struct etcd_watch *w)
{
	curl_multi_wakeup(w->m);
}
