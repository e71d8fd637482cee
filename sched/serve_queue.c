/*
 * serve_queue.c - `kvconductor serve` with a held-queue policy (queue):
 * how an engine learns its next request and its chunk boundaries
 * (kvconductor(8) HELD QUEUES).
 *
 *   POST /v1/next      {"instance": I, "wait_ms": W}: a long poll.  The
 *                      request instance I runs next, from sched_next(),
 *                      as soon as there is one (at most W ms, default
 *                      10000), else {"id": null}.  A CPP pipeline is
 *                      answered to its first instance, which asked, as
 *                      "role": "lead", and announced to every other
 *                      instance of it through its own /v1/next, as
 *                      "role": "stage" with its place in the pipeline.
 *   POST /v1/progress  {"id": N, "done_tokens": T} at each chunk
 *                      boundary: "continue", or "yield" (the request is
 *                      queued again; the engine keeps its computed KV and
 *                      asks /v1/next).
 *
 * The waiters sleep on one condition variable under srv->lock; every
 * change that can make work runnable (an accepted schedule, a prefill
 * done, a cancel, a yield) broadcasts it, and each waiter also looks
 * again every second, for what nobody announces (sched_expire).
 */
#include "config.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/common/clock.h"
#include "sched/serve_int.h"

#define NEXT_WAIT_MS 10000
#define NEXT_WAIT_MAX_MS 30000

/* a pipeline stage not yet told to its instance */
struct srv_q_box {
	bool full;
	uint32_t stage;
	struct sched_dispatch d;
};

struct srv_q {
	pthread_cond_t cond; /* CLOCK_MONOTONIC */
	bool stopping;
	struct srv_q_box box[SCHED_MAX_INSTANCES];
};

/* under the lock: the waiters' state, made at first use */
static struct srv_q *q_get(struct srv *srv)
{
	pthread_condattr_t at;

	if (srv->q)
		return srv->q;
	srv->q = calloc(1, sizeof(*srv->q));
	if (!srv->q)
		return NULL;
	pthread_condattr_init(&at);
	pthread_condattr_setclock(&at, CLOCK_MONOTONIC);
	pthread_cond_init(&srv->q->cond, &at);
	pthread_condattr_destroy(&at);
	return srv->q;
}

void srv_q_kick(struct srv *srv)
{
	if (srv->q)
		pthread_cond_broadcast(&srv->q->cond);
}

void srv_q_stop(struct srv *srv)
{
	pthread_mutex_lock(&srv->lock);
	if (q_get(srv)) {
		srv->q->stopping = true;
		pthread_cond_broadcast(&srv->q->cond);
	}
	pthread_mutex_unlock(&srv->lock);
}

void srv_q_free(struct srv *srv)
{
	if (!srv->q)
		return;
	pthread_cond_destroy(&srv->q->cond);
	free(srv->q);
	srv->q = NULL;
}

/* ---- POST /v1/next ------------------------------------------------------- */

static void dispatch_json(const struct srv *srv, const struct sched_dispatch *d,
			  uint32_t stage, struct srv_answer *a)
{
	struct json_object *j = json_object_new_object(), *in;

	a->status = 200;
	a->json = j;
	if (!j)
		return;
	json_object_object_add(j, "id", json_object_new_uint64(d->id));
	json_object_object_add(
		j, "role", json_object_new_string(stage ? "stage" : "lead"));
	json_object_object_add(j, "stage", json_object_new_int64(stage));
	in = json_object_new_array();
	for (uint32_t i = 0; in && i < d->ninst; i++)
		json_object_array_add(in, json_object_new_int64(d->inst[i]));
	json_object_object_add(j, "instances", in);
	srv_plan_json(j, d->prefill, d->decode, d->local_blocks,
		      d->reuse_blocks, d->xfer_blocks, d->src_node);
	json_object_object_add(j, "done_tokens",
			       json_object_new_uint64(d->done_tokens));
	json_object_object_add(j, "chunk_tokens",
			       json_object_new_int64(d->chunk_tokens));
	json_object_object_add(j, "stolen", json_object_new_boolean(d->stolen));
	json_object_object_add(j, "est_service_s",
			       json_object_new_double(d->est_service));
	(void)srv;
}

/* the other stages of a pipeline wait in their instances' boxes */
static void announce(struct srv_q *q, const struct sched_dispatch *d)
{
	for (uint32_t k = 1; k < d->ninst; k++) {
		struct srv_q_box *b = &q->box[d->inst[k]];

		b->full = true;
		b->stage = k;
		b->d = *d;
	}
}

/* under the lock: 1 answered a dispatch, 0 nothing yet, -errno */
static int next_try(struct srv *srv, struct srv_q *q, uint32_t inst,
		    struct sched_dispatch *d, uint32_t *stage)
{
	int rc;

	if (q->box[inst].full) {
		q->box[inst].full = false;
		*d = q->box[inst].d;
		*stage = q->box[inst].stage;
		return 1;
	}
	rc = sched_next(srv->s, inst, srv_now(srv), d);
	if (rc == -EBUSY)
		return 0;
	/* its instances are known now: the handoff binds it */
	if (rc == 1 && srv->ho)
		srv_handoff_dispatch(srv, d);
	if (rc == 1 && d->ninst > 1) {
		announce(q, d);
		pthread_cond_broadcast(&q->cond);
	}
	*stage = 0;
	return rc;
}

static void deadline_at(struct timespec *ts, uint64_t ns)
{
	ts->tv_sec = (time_t)(ns / 1000000000u);
	ts->tv_nsec = (long)(ns % 1000000000u);
}

/* under the lock; 1 with *d, 0 nothing in time, -errno */
static int next_wait(struct srv *srv, uint32_t inst, uint64_t wait_ms,
		     struct sched_dispatch *d, uint32_t *stage)
{
	uint64_t end = kvfs_mono_ns() + wait_ms * 1000000u;
	struct srv_q *q = q_get(srv);
	int rc;

	if (!q)
		return -ENOMEM;
	for (;;) {
		uint64_t now = kvfs_mono_ns(), until = now + 1000000000u;
		struct timespec ts;

		rc = next_try(srv, q, inst, d, stage);
		if (rc != 0 || q->stopping || now >= end)
			return rc;
		deadline_at(&ts, until < end ? until : end);
		pthread_cond_timedwait(&q->cond, &srv->lock, &ts);
	}
}

void srv_next_post(struct srv *srv, struct json_object *o, struct srv_answer *a)
{
	struct sched_dispatch d;
	uint64_t inst, wait_ms = NEXT_WAIT_MS;
	uint32_t stage = 0;
	int rc;

	if (srv_body_u64(o, "instance", 0, SCHED_MAX_INSTANCES - 1, &inst) <
	    0) {
		srv_answer_error(a, 400, "instance: a prefill instance index",
				 NULL);
		return;
	}
	rc = srv_body_u64(o, "wait_ms", 0, NEXT_WAIT_MAX_MS, &wait_ms);
	if (rc == -EINVAL) {
		srv_answer_error(a, 400, "wait_ms: 0 to 30000", NULL);
		return;
	}
	pthread_mutex_lock(&srv->lock);
	if (!srv->s)
		rc = -EAGAIN;
	else if (!sched_policy_held(srv->pol))
		rc = -EPERM;
	else if (inst >= srv->nprefill)
		rc = -ERANGE;
	else
		rc = next_wait(srv, (uint32_t)inst, wait_ms, &d, &stage);
	pthread_mutex_unlock(&srv->lock);
	if (rc == -EAGAIN)
		srv_answer_error(a, 503, "no instances yet", NULL);
	else if (rc == -EPERM)
		srv_answer_error(a, 409,
				 "the policy holds no queues: decisions are "
				 "final at /v1/schedule",
				 NULL);
	else if (rc == -ERANGE)
		srv_answer_error(a, 400, "instance: no such prefill instance",
				 NULL);
	else if (rc < 0)
		srv_answer_error(a, 500, "out of memory", NULL);
	else if (rc == 1)
		dispatch_json(srv, &d, stage, a);
	else if ((a->json = json_object_new_object())) {
		a->status = 200;
		json_object_object_add(a->json, "id", NULL);
	}
}

/* ---- POST /v1/progress --------------------------------------------------- */

void srv_progress_post(struct srv *srv, struct json_object *o,
		       struct srv_answer *a)
{
	uint64_t id, done;
	int rc;

	if (srv_body_u64(o, "id", 1, UINT64_MAX - 1, &id) < 0 ||
	    srv_body_u64(o, "done_tokens", 0, UINT64_MAX - 1, &done) < 0) {
		srv_answer_error(a, 400, "id and done_tokens: whole numbers",
				 NULL);
		return;
	}
	pthread_mutex_lock(&srv->lock);
	rc = srv->s ? sched_progress(srv->s, id, done, srv_now(srv)) : -ENOENT;
	if (rc == 1)
		srv_q_kick(srv);
	pthread_mutex_unlock(&srv->lock);
	if (rc == -ENOENT) {
		srv_answer_error(a, 404, "no such request", NULL);
		return;
	}
	if (rc < 0) {
		srv_answer_error(a, 409, "the request is not running", NULL);
		return;
	}
	srv_answer_id(a, id, "action", rc ? "yield" : "continue");
}
