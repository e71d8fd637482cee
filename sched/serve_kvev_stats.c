/*
 * serve_kvev_stats.c - vLLM's KV events in GET /v1/stats and GET /metrics:
 * a snapshot under the locks, formatted after
 * (serve_kvev_int.h).
 */
#include "config.h"

#include <json-c/json.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/serve_kvev_int.h"

/* ---- stats --------------------------------------------------------------- */

static void add_u64(struct json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_uint64(v));
}

static void count_json(struct json_object *o, const struct kvev_count *c)
{
	add_u64(o, "batches", c->batches);
	add_u64(o, "events", c->events);
	add_u64(o, "blocks_stored", c->stored);
	add_u64(o, "blocks_removed", c->removed);
	add_u64(o, "cleared", c->cleared);
	add_u64(o, "gaps", c->gaps);
	add_u64(o, "replays", c->replays);
	add_u64(o, "replay_failures", c->replay_failures);
	add_u64(o, "restarts", c->restarts);
	add_u64(o, "lost", c->lost);
	add_u64(o, "decode_errors", c->decode_errors);
	add_u64(o, "block_size_mismatches", c->mismatched);
	add_u64(o, "refused", c->refused);
	add_u64(o, "unknown_events", c->unknown);
}

static void sum(struct kvev_count *t, const struct kvev_count *c)
{
	const uint64_t *s = (const uint64_t *)c;
	uint64_t *d = (uint64_t *)t;

	for (size_t i = 0; i < sizeof(*c) / sizeof(uint64_t); i++)
		d[i] += s[i];
}

static struct json_object *engine_json(const struct kvev_engine *e)
{
	struct json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	json_object_object_add(o, "instance", json_object_new_string(e->id));
	json_object_object_add(o, "endpoint", json_object_new_string(e->ep));
	json_object_object_add(
		o, "replay",
		e->replay_ep[0] ? json_object_new_string(e->replay_ep) : NULL);
	add_u64(o, "node", e->node);
	json_object_object_add(o, "model",
			       e->model[0] ? json_object_new_string(e->model)
					   : NULL);
	json_object_object_add(o, "block_size",
			       e->block_size >= 0
				       ? json_object_new_int64(e->block_size)
				       : NULL);
	json_object_object_add(o, "topic", json_object_new_string(e->topic));
	json_object_object_add(o, "last_seq",
			       e->have ? json_object_new_uint64(e->last)
				       : NULL);
	add_u64(o, "blocks", e->keys.n);
	count_json(o, &e->c);
	return o;
}

void srv_kvev_stats_json(struct srv *srv, struct json_object *parent)
{
	struct json_object *o = json_object_new_object(), *arr;
	struct srv_kvev *kv;
	struct kvev_count t = { 0 };

	if (!o)
		return;
	json_object_object_add(o, "available", json_object_new_boolean(1));
	arr = json_object_new_array();
	pthread_mutex_lock(&srv->lock);
	kv = srv->kvev;
	if (kv)
		pthread_mutex_lock(&kv->lock);
	for (uint32_t i = 0; kv && i < kv->n; i++) {
		sum(&t, &kv->e[i]->c);
		if (arr)
			json_object_array_add(arr, engine_json(kv->e[i]));
	}
	if (kv)
		pthread_mutex_unlock(&kv->lock);
	pthread_mutex_unlock(&srv->lock);
	add_u64(o, "engines", arr ? json_object_array_length(arr) : 0);
	count_json(o, &t);
	json_object_object_add(o, "engine", arr);
	json_object_object_add(parent, "kv_events", o);
}

/* what /metrics shows of one engine */
struct kvev_line {
	char id[KVEV_NAME_MAX + 1];
	uint32_t node;
	uint64_t blocks;
	struct kvev_count c;
};

static const struct {
	const char *name, *help;
	size_t off;
} kvev_metrics[] = {
	{ "kv_event_batches_total", "vLLM KV event batches applied.",
	  offsetof(struct kvev_count, batches) },
	{ "kv_events_total", "vLLM KV events applied.",
	  offsetof(struct kvev_count, events) },
	{ "kv_event_gaps_total", "Sequence gaps seen on a live stream.",
	  offsetof(struct kvev_count, gaps) },
	{ "kv_event_replays_total", "Replays asked of a publisher.",
	  offsetof(struct kvev_count, replays) },
	{ "kv_event_replay_failures_total",
	  "Replays not answered in time, or refused.",
	  offsetof(struct kvev_count, replay_failures) },
	{ "kv_event_restarts_total", "Publisher restarts (seq went back).",
	  offsetof(struct kvev_count, restarts) },
	{ "kv_event_lost_total",
	  "Gaps no replay filled: the engine's blocks were forgotten.",
	  offsetof(struct kvev_count, lost) },
	{ "kv_event_decode_errors_total",
	  "Messages or batches that could not be decoded.",
	  offsetof(struct kvev_count, decode_errors) },
};

static uint64_t field(const struct kvev_count *c, size_t off)
{
	uint64_t v;

	memcpy(&v, (const char *)c + off, sizeof(v));
	return v;
}

void srv_kvev_metrics(struct srv *srv, FILE *f)
{
	struct kvev_line *l = NULL;
	struct srv_kvev *kv;
	uint32_t n = 0;

	pthread_mutex_lock(&srv->lock);
	kv = srv->kvev;
	if (kv) {
		pthread_mutex_lock(&kv->lock);
		l = calloc(kv->n ? kv->n : 1, sizeof(*l));
		for (uint32_t i = 0; l && i < kv->n; i++) {
			memcpy(l[i].id, kv->e[i]->id, sizeof(l[i].id));
			l[i].node = kv->e[i]->node;
			l[i].blocks = kv->e[i]->keys.n;
			l[i].c = kv->e[i]->c;
		}
		n = l ? kv->n : 0;
		pthread_mutex_unlock(&kv->lock);
	}
	pthread_mutex_unlock(&srv->lock);
	for (size_t m = 0; m < sizeof(kvev_metrics) / sizeof(kvev_metrics[0]);
	     m++) {
		fprintf(f,
			"# HELP kvconductor_%s %s\n# TYPE kvconductor_%s "
			"counter\n",
			kvev_metrics[m].name, kvev_metrics[m].help,
			kvev_metrics[m].name);
		for (uint32_t i = 0; i < n; i++)
			fprintf(f,
				"kvconductor_%s{instance=\"%s\",node=\"%u\"} "
				"%llu\n",
				kvev_metrics[m].name, l[i].id, l[i].node,
				(unsigned long long)field(&l[i].c,
							  kvev_metrics[m].off));
	}
	fprintf(f, "# HELP kvconductor_kv_event_blocks Blocks a vLLM engine "
		   "holds, by its events.\n# TYPE kvconductor_kv_event_blocks "
		   "gauge\n");
	for (uint32_t i = 0; i < n; i++)
		fprintf(f,
			"kvconductor_kv_event_blocks{instance=\"%s\",node=\"%"
			"u\"}"
			" %llu\n",
			l[i].id, l[i].node, (unsigned long long)l[i].blocks);
	free(l);
}
