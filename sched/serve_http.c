/*
 * serve_http.c - `kvconductor serve`'s HTTP front end: libmicrohttpd, one
 * thread per connection, JSON bodies parsed by json-c (serve_int.h).
 *
 * A body is collected whole (at most max_body bytes) before its handler
 * runs; a longer one is read and dropped, so the client gets its 413
 * instead of a reset, while the request deadline bounds a slow sender.
 * Routing is a table of (path, method, handler): a known path with
 * another method is 405, any other path 404.
 *
 * With a token (--token-file), every request but GET /metrics must carry
 * "Authorization: Bearer TOKEN", else 401 before its body is read.
 * /metrics stays open for scrapers: it holds counters and gauges only,
 * no request, block or node the API would reveal.
 *
 * The guard: libmicrohttpd's connection timeout is reset by every byte
 * received, so a client sending a header line every few seconds would
 * hold its connection (and its thread) for ever, and enough of them
 * lock everyone out.  So every connection is tracked here (connection
 * notifications) with the time its current request began (connect, or
 * the previous answer); a reaper thread shuts down a connection whose
 * request is not in whole after http_timeout, and a connection past
 * http_conns evicts the one that has waited longest for its request.
 * Shutting down the socket makes the connection's thread see EOF and
 * close it; the lock makes that safe, as libmicrohttpd notifies the close
 * (and the entry goes) before it closes the descriptor.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <microhttpd.h>
#include <json-c/json.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "src/common/clock.h"
#include "sched/serve_int.h"

/* connections libmicrohttpd takes past http_conns: each makes the guard
 * evict one, which is gone a moment later */
#define HTTP_EVICT_SLACK 32
#define REAP_EVERY_MS 100

enum {
	ST_OK = 200,
	ST_BAD = 400,
	ST_UNAUTHORIZED = 401,
	ST_NOT_FOUND = 404,
	ST_METHOD = 405,
	ST_CONFLICT = 409,
	ST_TOO_LARGE = 413,
	ST_TOO_MANY = 429,
	ST_INTERNAL = 500,
	ST_UNAVAILABLE = 503,
};

/* one connection, the guard's view; its socket context */
struct http_conn {
	struct http_conn *prev, *next; /* [lock] h->conns */
	int fd;
	uint64_t since_ns; /* [lock] its current request began */
	bool answering;	   /* [lock] the request is in, not answered yet */
	bool cut;	   /* [lock] shut down by the guard */
};

struct srv_http {
	struct srv *srv;
	struct MHD_Daemon *d;
	pthread_mutex_t lock; /* the guard's; never held with srv->lock */
	struct http_conn *conns;
	unsigned live; /* [lock] connections not cut */
	pthread_t reaper;
	int wake[2]; /* a byte on wake[1] stops the reaper */
};

struct body {
	char *buf;
	size_t len, cap;
	bool too_big;
};

/* ---- answers ----------------------------------------------------------- */

void srv_answer_error(struct srv_answer *a, unsigned status, const char *msg,
		      const char *reason)
{
	a->status = status;
	a->json = json_object_new_object();
	if (!a->json)
		return;
	json_object_object_add(a->json, "error", json_object_new_string(msg));
	if (reason)
		json_object_object_add(a->json, "reason",
				       json_object_new_string(reason));
}

void srv_answer_id(struct srv_answer *a, uint64_t id, const char *key,
		   const char *val)
{
	a->status = ST_OK;
	a->json = json_object_new_object();
	if (!a->json)
		return;
	json_object_object_add(a->json, "id", json_object_new_uint64(id));
	json_object_object_add(a->json, key, json_object_new_string(val));
}

void srv_plan_json(struct json_object *j, uint32_t prefill, uint32_t decode,
		   uint32_t local, uint32_t reuse, uint32_t xfer,
		   uint32_t src_node)
{
	/* instances by index (their place in POST /v1/instances or
	 * --prefill/--decode), nodes by kvfsd node id: the names say which */
	json_object_object_add(j, "prefill_instance",
			       json_object_new_int64(prefill));
	json_object_object_add(j, "decode_instance",
			       json_object_new_int64(decode));
	json_object_object_add(j, "cached_blocks",
			       json_object_new_int64(local));
	json_object_object_add(j, "reuse_blocks", json_object_new_int64(reuse));
	json_object_object_add(j, "transfer_blocks",
			       json_object_new_int64(xfer));
	json_object_object_add(j, "src_node_id",
			       src_node == SCHED_NO_NODE
				       ? NULL
				       : json_object_new_int64(src_node));
}

/* hdr: one more header, "Name: value" split at hval; may be NULL */
static enum MHD_Result send_answer(struct MHD_Connection *conn,
				   struct srv_answer *a, const char *hdr,
				   const char *hval)
{
	struct MHD_Response *r;
	const char *body, *type = "text/plain; version=0.0.4";
	enum MHD_Result rc;
	size_t len;

	if (a->json) {
		body = json_object_to_json_string_ext(a->json,
						      JSON_C_TO_STRING_PLAIN);
		len = strlen(body);
		type = "application/json";
	} else if (a->text) {
		body = a->text;
		len = a->len;
	} else {
		/* out of memory making the answer: an empty 500 */
		a->status = ST_INTERNAL;
		body = "";
		len = 0;
	}
	r = MHD_create_response_from_buffer(len, (void *)body,
					    MHD_RESPMEM_MUST_COPY);
	json_object_put(a->json);
	free(a->text);
	if (!r) {
		free(a->leader);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", type);
	if (hdr)
		MHD_add_response_header(r, hdr, hval);
	if (a->leader)
		MHD_add_response_header(r, "X-Kvfs-Leader", a->leader);
	free(a->leader);
	rc = MHD_queue_response(conn, a->status, r);
	MHD_destroy_response(r);
	return rc;
}

/* ---- request fields ---------------------------------------------------- */

/* ---- POST /v1/instances ------------------------------------------------- */

static void instances_error(struct srv_answer *a, int rc)
{
	if (rc == -EEXIST)
		srv_answer_error(a, ST_CONFLICT, "instances are set", NULL);
	else if (rc == -ENOMEM)
		srv_answer_error(a, ST_INTERNAL, "out of memory", NULL);
	else
		srv_answer_error(a, ST_BAD,
				 "instances refused by the scheduler", NULL);
}

static void h_instances(struct srv *srv, struct json_object *o,
			struct srv_answer *a)
{
	uint32_t pf[SCHED_MAX_INSTANCES], dc[SCHED_MAX_INSTANCES], np, nd;
	const char *msg;
	int rc;

	if (srv_body_nodes(srv_body_array(o, "prefill"), pf, &np, &msg) < 0 ||
	    srv_body_nodes(srv_body_array(o, "decode"), dc, &nd, &msg) < 0) {
		srv_answer_error(a, ST_BAD, msg, NULL);
		return;
	}
	rc = srv_set_instances(srv, np, pf, nd, dc);
	if (rc < 0) {
		instances_error(a, rc);
		return;
	}
	/* for a successor; a failure is logged, and costs only that */
	srv_instances_keep(srv, np, pf, nd, dc);
	a->status = ST_OK;
	a->json = json_object_new_object();
	if (a->json) {
		json_object_object_add(a->json, "prefill",
				       json_object_new_int64(np));
		json_object_object_add(a->json, "decode",
				       json_object_new_int64(nd));
	}
}

/* ---- POST /v1/schedule --------------------------------------------------- */

static void decision_json(const struct sched_decision *d, struct srv_answer *a)
{
	struct json_object *j = json_object_new_object();

	a->status = ST_OK;
	a->json = j;
	if (!j)
		return;
	json_object_object_add(j, "id", json_object_new_uint64(d->id));
	srv_plan_json(j, d->prefill, d->decode, d->local_blocks,
		      d->reuse_blocks, d->xfer_blocks, d->src_node);
	json_object_object_add(j, "est_queue_s",
			       json_object_new_double(d->est_queue));
	json_object_object_add(j, "est_ttft_s",
			       json_object_new_double(d->est_ttft));
	json_object_object_add(j, "est_tbt_s",
			       json_object_new_double(d->est_tbt));
	if (d->held) /* the instance learns it from POST /v1/next */
		json_object_object_add(j, "held", json_object_new_boolean(1));
}

/* under the lock: decide, count */
static int schedule_locked(struct srv *srv, const struct sched_body *q,
			   struct sched_decision *d)
{
	struct sched_req r = { .keys = q->keys,
			       .nkeys = q->nkeys,
			       .input_tokens = q->input,
			       .output_tokens = q->output };
	int rc;

	/* here, under the lock: a lease that ran out while the body was
	 * parsed stops this decision */
	if (!srv_leading(srv))
		return -EREMOTE;
	if (!srv->s)
		return -EAGAIN;
	rc = sched_schedule(srv->s, &r, srv_now(srv), d);
	if (rc == 0)
		srv->c.requests++;
	if (rc == 0 && srv->ho && d->verdict == SCHED_ACCEPT)
		srv_handoff_add(srv, d, q);
	if (rc == 0 && d->held && d->verdict == SCHED_ACCEPT)
		srv_q_kick(srv);
	return rc;
}

static void h_schedule(struct srv *srv, struct json_object *o,
		       struct srv_answer *a)
{
	struct sched_body q = { 0 };
	struct sched_decision d;
	const char *msg;
	int rc;

	rc = srv_body_schedule(o, srv->cfg.cost.block_tokens, &q, &msg);
	if (rc < 0) {
		srv_answer_error(a, rc == -ENOMEM ? ST_INTERNAL : ST_BAD, msg,
				 NULL);
		goto out_free;
	}
	pthread_mutex_lock(&srv->lock);
	rc = schedule_locked(srv, &q, &d);
	pthread_mutex_unlock(&srv->lock);
	if (rc == -EREMOTE)
		srv_standby_answer(srv, a);
	else if (rc == -EAGAIN)
		srv_answer_error(a, ST_UNAVAILABLE, "no instances yet", NULL);
	else if (rc < 0)
		srv_answer_error(a, rc == -ENOMEM ? ST_INTERNAL : ST_BAD,
				 rc == -ENOMEM
					 ? "out of memory"
					 : "request refused by the scheduler",
				 NULL);
	else if (d.verdict == SCHED_REJECT_TTFT)
		srv_answer_error(a, ST_TOO_MANY,
				 "no prefill instance meets the TTFT SLO",
				 "ttft");
	else if (d.verdict == SCHED_REJECT_TBT)
		srv_answer_error(a, ST_TOO_MANY,
				 "no decode instance meets the TBT SLO", "tbt");
	else
		decision_json(&d, a);
out_free:
	free(q.keys);
	free(q.hash);
}

/* ---- POST /v1/complete --------------------------------------------------- */

static int complete_locked(struct srv *srv, uint64_t id, bool prefill)
{
	int rc;

	if (!srv->s)
		return -ENOENT;
	if (prefill) {
		rc = sched_prefill_done(srv->s, id, srv_now(srv));
		srv->c.prefill_done += rc == 0;
	} else {
		rc = sched_complete(srv->s, id, srv_now(srv));
		srv->c.completed += rc == 0;
		if (srv->ho)
			srv_ho_forget(srv->ho, id);
	}
	if (rc == 0)
		srv_q_kick(srv); /* an instance may be free */
	return rc;
}

static void h_complete(struct srv *srv, struct json_object *o,
		       struct srv_answer *a)
{
	const char *msg, *phase;
	bool prefill;
	uint64_t id;
	int rc;

	if (srv_body_complete(o, &id, &prefill, &msg) < 0) {
		srv_answer_error(a, ST_BAD, msg, NULL);
		return;
	}
	phase = prefill ? "prefill" : "decode";
	pthread_mutex_lock(&srv->lock);
	rc = complete_locked(srv, id, prefill);
	pthread_mutex_unlock(&srv->lock);
	if (rc == -EALREADY) {
		srv_answer_error(a, ST_CONFLICT, "prefill reported before",
				 NULL);
		return;
	}
	if (rc < 0) {
		srv_answer_error(a, ST_NOT_FOUND, "no such request", NULL);
		return;
	}
	srv_answer_id(a, id, "phase", phase);
}

/* ---- routing ------------------------------------------------------------- */

struct route {
	const char *path;
	const char *method;
	/* POST: o is the parsed body; GET: NULL */
	void (*fn)(struct srv *srv, struct json_object *o,
		   struct srv_answer *a);
	/* a standby answers 503 (srv_standby_answer) once the body parsed;
	 * /v1/schedule asks again under the lock, right before deciding */
	bool leader;
};

static void h_stats(struct srv *srv, struct json_object *o,
		    struct srv_answer *a)
{
	srv_stats_json(srv, a);
}

static void h_metrics(struct srv *srv, struct json_object *o,
		      struct srv_answer *a)
{
	srv_metrics(srv, a);
}

static const struct route routes[] = {
	/* path, method, handler, leader only */
	{ "/v1/instances", "POST", h_instances, true },
	{ "/v1/schedule", "POST", h_schedule, false },
	{ "/v1/complete", "POST", h_complete, true },
	{ "/v1/next", "POST", srv_next_post, true },
	{ "/v1/progress", "POST", srv_progress_post, true },
	{ "/v1/kv-events", "POST", srv_kvev_post, false },
	{ "/v1/stats", "GET", h_stats, false },
	{ "/metrics", "GET", h_metrics, false },
};

#define NROUTES (sizeof(routes) / sizeof(routes[0]))

static const struct route *route_find(const char *path)
{
	for (size_t i = 0; i < NROUTES; i++)
		if (!strcmp(routes[i].path, path))
			return &routes[i];
	return NULL;
}

static void dispatch(struct srv *srv, const struct route *rt,
		     const struct body *b, struct srv_answer *a)
{
	struct json_object *o = NULL;
	const char *msg;

	if (!strcmp(rt->method, "POST")) {
		o = srv_body_json(b->buf, b->len, &msg);
		if (!o) {
			srv_answer_error(a, ST_BAD, msg, NULL);
			return;
		}
	}
	if (rt->leader && !srv_leading(srv))
		srv_standby_answer(srv, a);
	else
		rt->fn(srv, o, a);
	json_object_put(o);
}

/* ---- libmicrohttpd ------------------------------------------------------ */

/* 0, or -EFBIG: the body goes past max_body and is dropped */
static int body_add(struct body *b, const char *data, size_t len, size_t max)
{
	if (b->too_big || len > max - b->len) {
		b->too_big = true;
		return -EFBIG;
	}
	if (b->len + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *p;

		while (cap < b->len + len + 1)
			cap *= 2;
		p = realloc(b->buf, cap);
		if (!p)
			return -ENOMEM;
		b->buf = p;
		b->cap = cap;
	}
	memcpy(b->buf + b->len, data, len);
	b->len += len;
	b->buf[b->len] = 0; /* for strspn after the JSON value */
	return 0;
}

static struct body *body_new(struct MHD_Connection *conn, size_t max)
{
	const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						     "Content-Length");
	struct body *b = calloc(1, sizeof(*b));

	/* told up front: drop it without growing a buffer */
	if (b && cl && strtoull(cl, NULL, 10) > max)
		b->too_big = true;
	return b;
}

static enum MHD_Result respond(struct srv *srv, struct MHD_Connection *conn,
			       const char *url, const char *method,
			       struct body *b)
{
	const struct route *rt = route_find(url);
	struct srv_answer a = { 0 };
	const char *allow = NULL;

	if (!rt) {
		srv_answer_error(&a, ST_NOT_FOUND, "no such path", NULL);
	} else if (strcmp(rt->method, method)) {
		srv_answer_error(&a, ST_METHOD, "method not allowed", NULL);
		allow = rt->method;
	} else if (b->too_big) {
		srv_answer_error(&a, ST_TOO_LARGE, "body too large", NULL);
	} else {
		dispatch(srv, rt, b, &a);
	}
	if (a.status >= 400) {
		pthread_mutex_lock(&srv->lock);
		srv->c.bad++;
		pthread_mutex_unlock(&srv->lock);
	}
	return send_answer(conn, &a, allow ? "Allow" : NULL, allow);
}

/* ---- the bearer token ---------------------------------------------------- */

/* a == b in time that depends on their lengths only */
static bool same_secret(const char *a, size_t alen, const char *b, size_t blen)
{
	volatile unsigned char d = alen != blen;

	for (size_t i = 0; i < alen && i < blen; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

static bool authorized(const struct srv *srv, struct MHD_Connection *conn,
		       const char *url, const char *method)
{
	const char *v;

	if (!srv->token)
		return true;
	if (!strcmp(url, "/metrics") && !strcmp(method, "GET"))
		return true;
	v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
	/* RFC 6750: the scheme is case-insensitive */
	if (!v || strncasecmp(v, "Bearer ", 7))
		return false;
	v += 7;
	v += strspn(v, " ");
	return same_secret(v, strlen(v), srv->token, strlen(srv->token));
}

static enum MHD_Result unauthorized(struct srv *srv,
				    struct MHD_Connection *conn)
{
	struct srv_answer a = { 0 };

	pthread_mutex_lock(&srv->lock);
	srv->c.bad++;
	srv->c.http_unauthorized++;
	pthread_mutex_unlock(&srv->lock);
	srv_answer_error(&a, ST_UNAUTHORIZED, "missing or wrong bearer token",
			 NULL);
	return send_answer(conn, &a, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
			   "Bearer realm=\"kvconductor\"");
}

/* ---- the guard ------------------------------------------------------------
 */

static struct http_conn *conn_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

/* under h->lock: the socket's thread will see EOF and close it */
static void guard_cut(struct srv_http *h, struct http_conn *c)
{
	shutdown(c->fd, SHUT_RDWR);
	c->cut = true;
	h->live--;
}

/* under h->lock: the connection waiting longest for its request */
static struct http_conn *guard_victim(struct srv_http *h)
{
	struct http_conn *v = NULL;

	for (struct http_conn *c = h->conns; c; c = c->next)
		if (!c->cut && !c->answering &&
		    (!v || c->since_ns < v->since_ns))
			v = c;
	return v;
}

static void guard_add(struct srv_http *h, struct MHD_Connection *conn,
		      void **socket_context)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct http_conn *c = calloc(1, sizeof(*c)), *v = NULL;

	*socket_context = c;
	if (!c)
		return;
	if (!ci) {
		/* untracked: libmicrohttpd's own timeout still holds */
		c->fd = -1;
		return;
	}
	c->fd = ci->connect_fd;
	c->since_ns = kvfs_mono_ns();
	pthread_mutex_lock(&h->lock);
	c->next = h->conns;
	if (h->conns)
		h->conns->prev = c;
	h->conns = c;
	if (++h->live > h->srv->http_conns) {
		v = guard_victim(h);
		if (v)
			guard_cut(h, v);
	}
	pthread_mutex_unlock(&h->lock);
	if (v) {
		pthread_mutex_lock(&h->srv->lock);
		h->srv->c.http_evicted++;
		pthread_mutex_unlock(&h->srv->lock);
	}
}

static void guard_del(struct srv_http *h, struct http_conn *c)
{
	if (!c)
		return;
	if (c->fd < 0) {
		free(c);
		return;
	}
	pthread_mutex_lock(&h->lock);
	if (c->prev)
		c->prev->next = c->next;
	else
		h->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (!c->cut)
		h->live--;
	pthread_mutex_unlock(&h->lock);
	free(c);
}

static void on_connection(void *cls, struct MHD_Connection *conn,
			  void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct srv_http *h = cls;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED)
		guard_add(h, conn, socket_context);
	else
		guard_del(h, *socket_context);
}

/* the request is in: its handler runs, its answer goes out */
static void guard_answering(struct srv_http *h, struct MHD_Connection *conn,
			    bool answering)
{
	struct http_conn *c = conn_of(conn);

	if (!c)
		return;
	pthread_mutex_lock(&h->lock);
	c->answering = answering;
	c->since_ns = kvfs_mono_ns();
	pthread_mutex_unlock(&h->lock);
}

static uint64_t guard_reap(struct srv_http *h)
{
	uint64_t now = kvfs_mono_ns(), n = 0;
	uint64_t limit = (uint64_t)(h->srv->http_timeout * 1e9);

	pthread_mutex_lock(&h->lock);
	for (struct http_conn *c = h->conns; c; c = c->next)
		if (!c->cut && !c->answering && now - c->since_ns >= limit) {
			guard_cut(h, c);
			n++;
		}
	pthread_mutex_unlock(&h->lock);
	return n;
}

static void *reaper_main(void *arg)
{
	struct srv_http *h = arg;
	struct pollfd p = { .fd = h->wake[0], .events = POLLIN };

	for (;;) {
		int rc = poll(&p, 1, REAP_EVERY_MS);
		uint64_t n;

		if (rc > 0 || (rc < 0 && errno != EINTR))
			break;
		n = guard_reap(h);
		if (n) {
			pthread_mutex_lock(&h->srv->lock);
			h->srv->c.http_timeouts += n;
			pthread_mutex_unlock(&h->srv->lock);
		}
	}
	return NULL;
}

/* ---- libmicrohttpd callbacks ----------------------------------------------
 */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
				  const char *url, const char *method,
				  const char *version, const char *data,
				  size_t *data_len, void **con_cls)
{
	struct srv_http *h = cls;
	struct srv *srv = h->srv;
	struct body *b = *con_cls;

	if (!b) {
		/* the headers are in: refused before any body is read */
		if (!authorized(srv, conn, url, method)) {
			guard_answering(h, conn, true);
			return unauthorized(srv, conn);
		}
		b = body_new(conn, srv->max_body);
		if (!b)
			return MHD_NO;
		*con_cls = b;
		return MHD_YES;
	}
	if (*data_len) {
		if (body_add(b, data, *data_len, srv->max_body) == -ENOMEM)
			return MHD_NO;
		*data_len = 0;
		return MHD_YES;
	}
	guard_answering(h, conn, true);
	return respond(srv, conn, url, method, b);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode t)
{
	struct body *b = *con_cls;

	/* a kept-alive connection owes its next request from now */
	guard_answering(cls, conn, false);

	if (b) {
		free(b->buf);
		free(b);
		*con_cls = NULL;
	}
}

static void reaper_stop(struct srv_http *h)
{
	ssize_t n;

	do
		n = write(h->wake[1], "x", 1);
	while (n < 0 && errno == EINTR);
	pthread_join(h->reaper, NULL);
}

int srv_http_start(struct srv *srv, int fd, struct srv_http **out)
{
	struct srv_http *h = calloc(1, sizeof(*h));
	/* libmicrohttpd's idle timeout, whole seconds: the guard's deadline
	 * is the tighter one while a request comes in; this one bounds a
	 * client that does not read its answer */
	unsigned idle = (unsigned)ceil(srv->http_timeout);
	int rc;

	if (!h)
		return -ENOMEM;
	h->srv = srv;
	pthread_mutex_init(&h->lock, NULL);
	if (pipe2(h->wake, O_CLOEXEC) < 0) {
		rc = -errno;
		goto out_free;
	}
	rc = -pthread_create(&h->reaper, NULL, reaper_main, h);
	if (rc < 0)
		goto out_close_pipe;
	h->d = MHD_start_daemon(
		MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD, 0,
		NULL, NULL, on_request, h, MHD_OPTION_LISTEN_SOCKET, fd,
		MHD_OPTION_CONNECTION_LIMIT, srv->http_conns + HTTP_EVICT_SLACK,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, srv->http_per_ip,
		MHD_OPTION_CONNECTION_TIMEOUT, idle ? idle : 1u,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, h, MHD_OPTION_END);
	if (!h->d) {
		rc = -EIO;
		goto out_stop_reaper;
	}
	*out = h;
	return 0;

out_stop_reaper:
	reaper_stop(h);
out_close_pipe:
	close(h->wake[0]);
	close(h->wake[1]);
out_free:
	pthread_mutex_destroy(&h->lock);
	free(h);
	return rc;
}

void srv_http_stop(struct srv_http *h)
{
	if (!h)
		return;
	reaper_stop(h);
	/* closes the listening socket too, and notifies every close, so
	 * the guard's list is empty after it */
	MHD_stop_daemon(h->d);
	close(h->wake[0]);
	close(h->wake[1]);
	pthread_mutex_destroy(&h->lock);
	free(h);
}
