/*
 * serve_kvev_reg.c - vLLM's KV events: registering an engine (--kv-events,
 * POST /v1/kv-events), its sockets, and the subscriber's start
 * (serve_kvev_int.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "sched/kvev.h"
#include "sched/locality.h"
#include "sched/serve_kvev_int.h"

/* ---- registration -------------------------------------------------------- */

struct kvev_spec {
	const char *ep, *replay, *model, *id, *topic;
	size_t ep_len, replay_len, model_len, id_len, topic_len;
	uint64_t node, block_size;
	bool has_node, has_block_size;
};

/* an instance id, model or topic: printable, none of  " \ , =  (they
 * separate --kv-events' fields and would need escaping in /metrics) */
static bool name_ok(const char *s, size_t n, bool empty_ok)
{
	if (!n)
		return empty_ok;
	if (n > KVEV_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x21 || s[i] > 0x7e || strchr("\"\\,=", s[i]))
			return false;
	return true;
}

static bool endpoint_ok(const char *s, size_t n)
{
	if (n > KVEV_EP_MAX || memchr(s, ',', n) || memchr(s, 0, n))
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x21 || s[i] > 0x7e)
			return false;
	return (n > 6 && !strncmp(s, "tcp://", 6)) ||
	       (n > 6 && !strncmp(s, "ipc://", 6));
}

static int spec_check(const struct kvev_spec *sp, const char **msg)
{
	if (!sp->ep || !endpoint_ok(sp->ep, sp->ep_len)) {
		*msg = "the endpoint: tcp://HOST:PORT or ipc://PATH";
		return -EINVAL;
	}
	if (sp->replay && !endpoint_ok(sp->replay, sp->replay_len)) {
		*msg = "replay: tcp://HOST:PORT or ipc://PATH";
		return -EINVAL;
	}
	if (!sp->has_node || sp->node >= SCHED_MAX_NODES) {
		*msg = "node: the engine's kvfs node, 0..255";
		return -EINVAL;
	}
	if (sp->has_block_size &&
	    (!sp->block_size || sp->block_size > 1u << 20)) {
		*msg = "block-size: tokens a block, 1..1048576";
		return -EINVAL;
	}
	if ((sp->id && !name_ok(sp->id, sp->id_len, false)) ||
	    (sp->model && !name_ok(sp->model, sp->model_len, false)) ||
	    (sp->topic && !name_ok(sp->topic, sp->topic_len, true))) {
		*msg = "instance, model, topic: at most 128 printable "
		       "characters, none of \" \\ , =";
		return -EINVAL;
	}
	return 0;
}

static void copy_name(char *dst, const char *s, size_t n)
{
	memcpy(dst, s ? s : "", s ? n : 0);
	dst[s ? n : 0] = 0;
}

/* kv->lock: another engine of this id or endpoint */
static bool taken(const struct srv_kvev *kv, const struct kvev_engine *e)
{
	for (uint32_t i = 0; i < kv->n; i++)
		if (!strcmp(kv->e[i]->id, e->id) ||
		    !strcmp(kv->e[i]->ep, e->ep))
			return true;
	return false;
}

static void *sock_new(void *ctx, int type)
{
	void *s = zmq_socket(ctx, type);
	int zero = 0, hwm = KVEV_RCVHWM;
	/* a message past the payload limit makes ZMQ drop the connection */
	int64_t max = KVEV_MAX_PAYLOAD + 4096;

	if (!s)
		return NULL;
	zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof(hwm));
	zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max, sizeof(max));
	return s;
}

void *srv_kvev_replay_sock(void *ctx, const char *ep)
{
	void *s = sock_new(ctx, ZMQ_DEALER);

	if (s && zmq_connect(s, ep) < 0) {
		zmq_close(s);
		return NULL;
	}
	return s;
}

static int engine_sockets(struct srv_kvev *kv, struct kvev_engine *e,
			  const char **msg)
{
	e->sub = sock_new(kv->ctx, ZMQ_SUB);
	if (!e->sub) {
		*msg = "cannot make a ZMQ socket";
		return -ENOMEM;
	}
	if (zmq_setsockopt(e->sub, ZMQ_SUBSCRIBE, e->topic, strlen(e->topic)) <
		    0 ||
	    zmq_connect(e->sub, e->ep) < 0) {
		*msg = "the endpoint: ZMQ refuses it";
		return -EINVAL;
	}
	if (!e->replay_ep[0])
		return 0;
	e->rep = srv_kvev_replay_sock(kv->ctx, e->replay_ep);
	if (!e->rep) {
		*msg = "replay: ZMQ refuses the endpoint";
		return -EINVAL;
	}
	return 0;
}

void srv_kvev_engine_free(struct kvev_engine *e)
{
	if (!e)
		return;
	if (e->sub)
		zmq_close(e->sub);
	if (e->rep)
		zmq_close(e->rep);
	for (uint32_t i = 0; i < e->npend; i++)
		free(e->pend[i].buf);
	free(e->pend);
	sched_tab_release(&e->keys);
	free(e);
}

/* kv->lock: the thread, on the first engine */
static int kv_start_locked(struct srv_kvev *kv)
{
	int rc;

	if (kv->running)
		return 0;
	if (pipe2(kv->wake, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	rc = -pthread_create(&kv->thread, NULL, srv_kvev_thread, kv);
	if (rc < 0) {
		close(kv->wake[0]);
		close(kv->wake[1]);
		return rc;
	}
	kv->running = true;
	return 0;
}

void srv_kvev_wake(struct srv_kvev *kv)
{
	ssize_t n;

	do
		n = write(kv->wake[1], "x", 1);
	while (n < 0 && errno == EINTR);
}

/* the module, made on first use */
static struct srv_kvev *kv_get(struct srv *srv)
{
	struct srv_kvev *kv;

	pthread_mutex_lock(&srv->lock);
	kv = srv->kvev;
	if (!kv) {
		kv = calloc(1, sizeof(*kv));
		if (kv) {
			kv->ctx = zmq_ctx_new();
			if (!kv->ctx) {
				free(kv);
				kv = NULL;
			} else {
				kv->srv = srv;
				pthread_mutex_init(&kv->lock, NULL);
				srv->kvev = kv;
			}
		}
	}
	pthread_mutex_unlock(&srv->lock);
	return kv;
}

/* -EEXIST (id or endpoint taken), -ENOSPC, -EINVAL, -ENOMEM with *msg */
static int kvev_add(struct srv *srv, const struct kvev_spec *sp,
		    const char **msg)
{
	struct srv_kvev *kv;
	struct kvev_engine *e;
	int rc = spec_check(sp, msg);

	if (rc < 0)
		return rc;
	*msg = "out of memory";
	kv = kv_get(srv);
	e = kv ? calloc(1, sizeof(*e)) : NULL;
	if (!e)
		return -ENOMEM;
	copy_name(e->ep, sp->ep, sp->ep_len);
	copy_name(e->replay_ep, sp->replay, sp->replay_len);
	copy_name(e->model, sp->model, sp->model_len);
	copy_name(e->topic, sp->topic, sp->topic_len);
	if (sp->id)
		copy_name(e->id, sp->id, sp->id_len);
	else
		snprintf(e->id, sizeof(e->id), "%.*s", KVEV_NAME_MAX, e->ep);
	e->node = (uint32_t)sp->node;
	e->block_size = sp->has_block_size ? (int64_t)sp->block_size : -1;
	rc = sched_tab_init(&e->keys, 1, 1024);
	if (rc < 0)
		goto out_free;
	pthread_mutex_lock(&kv->lock);
	if (taken(kv, e)) {
		rc = -EEXIST;
		*msg = "an engine of that instance id or endpoint is "
		       "registered";
	} else if (kv->n == KVEV_MAX_ENGINES) {
		rc = -ENOSPC;
		*msg = "64 engines are registered, the most there may be";
	} else {
		rc = engine_sockets(kv, e, msg);
		if (rc == 0)
			rc = kv_start_locked(kv);
		if (rc == 0)
			kv->e[kv->n++] = e;
	}
	pthread_mutex_unlock(&kv->lock);
	if (rc < 0)
		goto out_free;
	srv_kvev_wake(kv);
	return 0;

out_free:
	srv_kvev_engine_free(e);
	return rc;
}

/* "ENDPOINT,node=N[,replay=EP][,model=M][,block-size=B][,instance=ID]
 * [,topic=T]" */
int srv_kvev_add_spec(struct srv *srv, const char *spec, const char **msg)
{
	struct kvev_spec sp = { .ep = spec };
	const char *p = strchr(spec, ',');

	sp.ep_len = p ? (size_t)(p - spec) : strlen(spec);
	while (p) {
		const char *f = p + 1, *eq, *v;
		size_t n, vn;
		char *end;

		p = strchr(f, ',');
		n = p ? (size_t)(p - f) : strlen(f);
		eq = memchr(f, '=', n);
		*msg = "fields: node=N, replay=EP, model=M, block-size=B, "
		       "instance=ID, topic=T";
		if (!eq)
			return -EINVAL;
		v = eq + 1;
		vn = n - (size_t)(v - f);
#define FIELD(name)                                                            \
	((size_t)(eq - f) == strlen(name) && !strncmp(f, name, strlen(name)))
		if (FIELD("node") || FIELD("block-size")) {
			bool node = FIELD("node");
			uint64_t x;

			errno = 0;
			x = strtoull(v, &end, 10);
			if (!vn || *v < '0' || *v > '9' || end != v + vn ||
			    errno)
				x = UINT64_MAX;
			if (node) {
				sp.node = x;
				sp.has_node = true;
			} else {
				sp.block_size = x;
				sp.has_block_size = true;
			}
		} else if (FIELD("replay")) {
			sp.replay = v;
			sp.replay_len = vn;
		} else if (FIELD("model")) {
			sp.model = v;
			sp.model_len = vn;
		} else if (FIELD("instance")) {
			sp.id = v;
			sp.id_len = vn;
		} else if (FIELD("topic")) {
			sp.topic = v;
			sp.topic_len = vn;
		} else {
			return -EINVAL;
		}
#undef FIELD
	}
	return kvev_add(srv, &sp, msg);
}

/* a string member of o, or -EINVAL when there and not a string */
static int json_str(struct json_object *o, const char *k, const char **s,
		    size_t *n)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, k, &v))
		return 0;
	if (!json_object_is_type(v, json_type_string))
		return -EINVAL;
	*s = json_object_get_string(v);
	*n = (size_t)json_object_get_string_len(v);
	return 0;
}

static bool outside(const struct srv *srv, const char *ep, size_t len)
{
	return ep && endpoint_ok(ep, len) &&
	       !srv_endpoint_in(ep, len, srv->kv_allow, srv->nkv_allow);
}

void srv_kvev_post(struct srv *srv, struct json_object *o, struct srv_answer *a)
{
	struct kvev_spec sp = { 0 };
	const char *msg = "endpoint, replay, model, instance, topic: strings";
	int rc;

	if (json_str(o, "endpoint", &sp.ep, &sp.ep_len) < 0 ||
	    json_str(o, "replay", &sp.replay, &sp.replay_len) < 0 ||
	    json_str(o, "model", &sp.model, &sp.model_len) < 0 ||
	    json_str(o, "instance", &sp.id, &sp.id_len) < 0 ||
	    json_str(o, "topic", &sp.topic, &sp.topic_len) < 0) {
		srv_answer_error(a, 400, msg, NULL);
		return;
	}
	rc = srv_body_u64(o, "node", 0, UINT64_MAX, &sp.node);
	sp.has_node = rc == 0;
	if (rc == -EINVAL)
		sp.node = UINT64_MAX;
	rc = srv_body_u64(o, "block_size", 0, UINT64_MAX, &sp.block_size);
	sp.has_block_size = rc != -ENOENT;
	if (rc == -EINVAL)
		sp.block_size = 0;
	/* whoever holds the API token must not make the conductor connect
	 * anywhere: only to the networks --kv-events-allow names (an
	 * endpoint of another form is kvev_add's 400) */
	if (outside(srv, sp.ep, sp.ep_len) ||
	    outside(srv, sp.replay, sp.replay_len)) {
		srv_answer_error(a, 403,
				 "endpoint not allowed: tcp://A.B.C.D:PORT "
				 "in the networks of --kv-events-allow "
				 "(default 127.0.0.0/8) only",
				 NULL);
		return;
	}
	rc = kvev_add(srv, &sp, &msg);
	if (rc < 0) {
		unsigned st = rc == -EEXIST ? 409 : rc == -ENOMEM ? 500 : 400;

		srv_answer_error(a, st, msg, NULL);
		return;
	}
	a->status = 200;
	a->json = json_object_new_object();
	if (!a->json)
		return;
	json_object_object_add(
		a->json, "endpoint",
		json_object_new_string_len(sp.ep, (int)sp.ep_len));
	json_object_object_add(a->json, "node",
			       json_object_new_int64((int64_t)sp.node));
}
