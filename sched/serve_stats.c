/*
 * serve_stats.c - `kvconductor serve`'s GET /v1/stats (JSON) and GET
 * /metrics (Prometheus text exposition format 0.0.4).
 *
 * Both copy a snapshot out under the lock and format it after, so a
 * scrape holds up scheduling for a copy only.
 */
#include "config.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>

#include "sched/serve_int.h"

struct snap {
	double now;
	bool set;
	struct srv_counters c;
	struct sched_load load;
	uint64_t blocks;
	bool handoff;
	size_t ho_reqs, ho_keys; /* the handoff's books now */
	uint32_t np, nd;
	struct {
		uint32_t node;
		uint64_t node_blocks;
		double queue;	/* prefill: est wait, s */
		uint32_t batch; /* decode: requests decoding */
	} pf[SCHED_MAX_INSTANCES], dc[SCHED_MAX_INSTANCES];
};

static void snap_locked(struct srv *srv, struct snap *sn)
{
	sn->now = srv_now(srv);
	sn->set = srv->s != NULL;
	sn->c = srv->c;
	sn->np = srv->nprefill;
	sn->nd = srv->ndecode;
	sn->handoff = srv->ho != NULL;
	if (srv->ho)
		srv_ho_size(srv->ho, &sn->ho_reqs, &sn->ho_keys);
	if (!srv->s)
		return;
	sched_get_load(srv->s, &sn->load);
	sn->blocks = sched_blocks(srv->s);
	for (uint32_t i = 0; i < sn->np; i++) {
		sn->pf[i].node = srv->pf_node[i];
		sn->pf[i].node_blocks =
			sched_node_blocks(srv->s, srv->pf_node[i]);
		sn->pf[i].queue = sched_prefill_queue(srv->s, i, sn->now);
	}
	for (uint32_t j = 0; j < sn->nd; j++) {
		sn->dc[j].node = srv->dc_node[j];
		sn->dc[j].node_blocks =
			sched_node_blocks(srv->s, srv->dc_node[j]);
		sn->dc[j].batch = sched_decode_batch(srv->s, j);
	}
}

static struct snap *snap_take(struct srv *srv)
{
	struct snap *sn = calloc(1, sizeof(*sn));

	if (!sn)
		return NULL;
	pthread_mutex_lock(&srv->lock);
	snap_locked(srv, sn);
	pthread_mutex_unlock(&srv->lock);
	return sn;
}

/* ---- JSON ---------------------------------------------------------------- */

static void add_u64(struct json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_uint64(v));
}

static struct json_object *instances_json(const struct snap *sn, bool pf)
{
	struct json_object *arr = json_object_new_array();
	uint32_t n = pf ? sn->np : sn->nd;

	for (uint32_t i = 0; arr && i < n; i++) {
		struct json_object *e = json_object_new_object();

		if (!e)
			break;
		add_u64(e, "node", pf ? sn->pf[i].node : sn->dc[i].node);
		add_u64(e, "node_blocks",
			pf ? sn->pf[i].node_blocks : sn->dc[i].node_blocks);
		if (pf)
			json_object_object_add(
				e, "queue_s",
				json_object_new_double(sn->pf[i].queue));
		else
			add_u64(e, "batch", sn->dc[i].batch);
		json_object_array_add(arr, e);
	}
	return arr;
}

/* "handoff": kvconductor(8) HANDOFF */
static void handoff_fill(struct json_object *o, const struct snap *sn)
{
	struct json_object *h = json_object_new_object();

	if (!h)
		return;
	json_object_object_add(h, "enabled",
			       json_object_new_boolean(sn->handoff));
	add_u64(h, "requests", sn->c.ho_requests);
	add_u64(h, "refused", sn->c.ho_refused);
	add_u64(h, "fetch_frames", sn->c.ho_fetch_frames);
	add_u64(h, "fetch_blocks", sn->c.ho_fetch_blocks);
	add_u64(h, "dropped", sn->c.ho_dropped);
	add_u64(h, "expired", sn->c.ho_expired);
	add_u64(h, "waiting_requests", sn->ho_reqs);
	add_u64(h, "waiting_blocks", sn->ho_keys);
	json_object_object_add(o, "handoff", h);
}

static void stats_fill(struct json_object *o, const struct snap *sn)
{
	struct json_object *rej = json_object_new_object(), *ev, *http;

	json_object_object_add(o, "uptime_s", json_object_new_double(sn->now));
	json_object_object_add(o, "instances_set",
			       json_object_new_boolean(sn->set));
	add_u64(o, "requests", sn->c.requests);
	add_u64(o, "accepted", sn->load.accepted);
	if (rej) {
		add_u64(rej, "ttft", sn->load.rejected_ttft);
		add_u64(rej, "tbt", sn->load.rejected_tbt);
		json_object_object_add(o, "rejected", rej);
	}
	add_u64(o, "live", sn->load.live);
	add_u64(o, "prefill_done", sn->c.prefill_done);
	add_u64(o, "completed", sn->c.completed);
	add_u64(o, "expired", sn->c.expired);
	add_u64(o, "bad_requests", sn->c.bad);
	add_u64(o, "blocks_indexed", sn->blocks);
	ev = json_object_new_object();
	if (ev) {
		add_u64(ev, "streams", sn->c.ev_conns);
		add_u64(ev, "frames", sn->c.ev_frames);
		add_u64(ev, "records", sn->c.ev_records);
		add_u64(ev, "errors", sn->c.ev_errors);
		add_u64(ev, "no_reset", sn->c.ev_no_reset);
		add_u64(ev, "auth_failures", sn->c.ev_auth_failures);
		add_u64(ev, "timeouts", sn->c.ev_timeouts);
		add_u64(ev, "evicted", sn->c.ev_evicted);
		json_object_object_add(o, "events", ev);
	}
	handoff_fill(o, sn);
	http = json_object_new_object();
	if (http) {
		add_u64(http, "unauthorized", sn->c.http_unauthorized);
		add_u64(http, "timeouts", sn->c.http_timeouts);
		add_u64(http, "evicted", sn->c.http_evicted);
		json_object_object_add(o, "http", http);
	}
	json_object_object_add(o, "prefill", instances_json(sn, true));
	json_object_object_add(o, "decode", instances_json(sn, false));
}

void srv_stats_json(struct srv *srv, struct srv_answer *a)
{
	struct snap *sn = snap_take(srv);

	a->status = 200;
	if (!sn)
		return;
	a->json = json_object_new_object();
	if (a->json) {
		stats_fill(a->json, sn);
		srv_elect_json(srv, a->json);
		srv_kvev_stats_json(srv, a->json);
	}
	free(sn);
}

/* ---- Prometheus ---------------------------------------------------------- */

static void metric(FILE *f, const char *name, const char *type,
		   const char *help)
{
	fprintf(f, "# HELP kvconductor_%s %s\n# TYPE kvconductor_%s %s\n", name,
		help, name, type);
}

/* a metric of one sample, no labels */
static void metric1(FILE *f, const char *name, const char *type,
		    const char *help, uint64_t v)
{
	metric(f, name, type, help);
	fprintf(f, "kvconductor_%s %llu\n", name, (unsigned long long)v);
}

/* one sample of a metric labelled by reason */
static void by_reason(FILE *f, const char *name, const char *reason, uint64_t v)
{
	fprintf(f, "kvconductor_%s{reason=\"%s\"} %llu\n", name, reason,
		(unsigned long long)v);
}

/* what the deadlines and caps closed or refused */
static void metrics_guards(FILE *f, const struct snap *sn)
{
	metric1(f, "expired_total", "counter",
		"Requests forgotten by --request-ttl.", sn->c.expired);
	metric(f, "event_streams_closed_total", "counter",
	       "Event streams closed by the conductor's rules.");
	by_reason(f, "event_streams_closed_total", "no_reset",
		  sn->c.ev_no_reset);
	by_reason(f, "event_streams_closed_total", "timeout",
		  sn->c.ev_timeouts);
	by_reason(f, "event_streams_closed_total", "evicted", sn->c.ev_evicted);
	by_reason(f, "event_streams_closed_total", "auth",
		  sn->c.ev_auth_failures);
	metric1(f, "http_unauthorized_total", "counter",
		"HTTP requests without the bearer token.",
		sn->c.http_unauthorized);
	metric(f, "http_connections_closed_total", "counter",
	       "HTTP connections closed by the guard.");
	by_reason(f, "http_connections_closed_total", "timeout",
		  sn->c.http_timeouts);
	by_reason(f, "http_connections_closed_total", "evicted",
		  sn->c.http_evicted);
}

static void metrics_counters(FILE *f, const struct snap *sn)
{
	metric1(f, "requests_total", "counter", "Schedule requests decided.",
		sn->c.requests);
	metric1(f, "accepted_total", "counter", "Requests accepted.",
		sn->load.accepted);
	metric(f, "rejected_total", "counter",
	       "Requests rejected early, by the SLO they would miss.");
	by_reason(f, "rejected_total", "ttft", sn->load.rejected_ttft);
	by_reason(f, "rejected_total", "tbt", sn->load.rejected_tbt);
	metric1(f, "completed_total", "counter", "Requests completed.",
		sn->c.completed);
	metric1(f, "http_errors_total", "counter", "HTTP answers 400 and up.",
		sn->c.bad);
	metric1(f, "event_frames_total", "counter", "Block-event frames.",
		sn->c.ev_frames);
	metric1(f, "event_records_total", "counter", "Block-event records.",
		sn->c.ev_records);
	metric1(f, "event_errors_total", "counter",
		"Event streams ended by a bad frame.", sn->c.ev_errors);
	metrics_guards(f, sn);
}

static void metrics_handoff(FILE *f, const struct snap *sn)
{
	metric1(f, "handoff_fetch_frames_total", "counter",
		"FETCH frames sent to decode nodes.", sn->c.ho_fetch_frames);
	metric1(f, "handoff_fetch_blocks_total", "counter",
		"Blocks decode nodes were asked to pull.",
		sn->c.ho_fetch_blocks);
	metric1(f, "handoff_dropped_total", "counter",
		"Blocks due for a FETCH that found no stream or room.",
		sn->c.ho_dropped);
	metric1(f, "handoff_waiting_blocks", "gauge",
		"Blocks of scheduled requests the handoff waits for.",
		sn->ho_keys);
}

static void metrics_gauges(FILE *f, const struct snap *sn)
{
	metric1(f, "live_requests", "gauge", "Accepted, not completed.",
		sn->load.live);
	metric1(f, "blocks_indexed", "gauge", "Blocks in the locality index.",
		sn->blocks);
	metric(f, "prefill_queue_seconds", "gauge",
	       "Estimated queue wait per prefill instance.");
	for (uint32_t i = 0; i < sn->np; i++)
		fprintf(f,
			"kvconductor_prefill_queue_seconds{instance=\"%u\","
			"node=\"%u\"} %.9g\n",
			i, sn->pf[i].node, sn->pf[i].queue);
	metric(f, "decode_batch", "gauge",
	       "Requests decoding per decode instance.");
	for (uint32_t j = 0; j < sn->nd; j++)
		fprintf(f,
			"kvconductor_decode_batch{instance=\"%u\","
			"node=\"%u\"} %u\n",
			j, sn->dc[j].node, sn->dc[j].batch);
}

void srv_metrics(struct srv *srv, struct srv_answer *a)
{
	struct snap *sn = snap_take(srv);
	FILE *f;

	a->status = 200;
	if (!sn)
		return;
	f = open_memstream(&a->text, &a->len);
	if (f) {
		metrics_counters(f, sn);
		metrics_gauges(f, sn);
		metrics_handoff(f, sn);
		srv_elect_metrics(srv, f);
		srv_kvev_metrics(srv, f);
		if (fclose(f)) {
			free(a->text);
			a->text = NULL;
		}
	}
	free(sn);
}
