/*
 * serve_elect.c - `kvconductor serve --election`: campaign through etcd
 * (kvstore/elect.h), and what the HTTP side makes of the role.
 *
 * A standby answers the scheduling calls with 503, the leader's HTTP
 * address in the body ("leader") and in an X-Kvfs-Leader header, not
 * with a redirect: a POST redirected by 307 is re-sent by a client that
 * follows it, and a router that retries a schedule on its own terms (it
 * knows whether the first try may have been acted on) is the safer
 * default.  GET /v1/stats and /metrics answer on every conductor.
 */
#include "config.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvstore/elect.h"
#include "sched/serve_int.h"

int srv_elect_start(struct srv *srv, const char *url,
		    const struct kv_etcd_auth *a, uint32_t ttl_s,
		    const char *http, const char *events)
{
	struct kv_elect_config cfg = { .url = url, .etcd = *a, .ttl_s = ttl_s };
	json_object *v = json_object_new_object();
	int rc = -ENOMEM;

	if (!v)
		return rc;
	json_object_object_add(v, "http", json_object_new_string(http));
	json_object_object_add(v, "events",
			       json_object_new_string(events ? events : ""));
	cfg.value = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
	if (cfg.value)
		rc = kv_elect_start(&cfg, &srv->el);
	json_object_put(v);
	return rc;
}

void srv_elect_resign(struct srv *srv)
{
	kv_elect_resign(srv->el);
}

void srv_elect_stop(struct srv *srv)
{
	kv_elect_stop(srv->el);
	srv->el = NULL;
}

bool srv_leading(struct srv *srv)
{
	return !srv->el || kv_elect_leading(srv->el);
}

void srv_standby_answer(struct srv *srv, struct srv_answer *a)
{
	struct kv_elect_state st = { 0 };
	char addr[256];
	bool known = false;

	if (srv->el) {
		kv_elect_state(srv->el, &st);
		known = kv_elect_field(st.leader, "http", addr, sizeof(addr)) ==
			0;
	}
	srv_answer_error(a, 503, "this conductor is a standby", "standby");
	if (!a->json)
		return;
	json_object_object_add(a->json, "leader",
			       known ? json_object_new_string(addr) : NULL);
	if (known)
		a->leader = strdup(addr);
}

void srv_elect_json(struct srv *srv, struct json_object *j)
{
	struct kv_elect_state st = { .leading = true };
	char addr[256];
	json_object *l = NULL;

	if (srv->el)
		kv_elect_state(srv->el, &st);
	json_object_object_add(
		j, "role",
		json_object_new_string(st.leading ? "leader" : "standby"));
	json_object_object_add(j, "election",
			       json_object_new_boolean(srv->el != NULL));
	if (srv->el && st.leader[0]) {
		l = json_object_new_object();
		if (l &&
		    kv_elect_field(st.leader, "http", addr, sizeof(addr)) == 0)
			json_object_object_add(l, "http",
					       json_object_new_string(addr));
		if (l && kv_elect_field(st.leader, "events", addr,
					sizeof(addr)) == 0)
			json_object_object_add(l, "events",
					       json_object_new_string(addr));
	}
	json_object_object_add(j, "leader", l);
	json_object_object_add(j, "elections_won",
			       json_object_new_uint64(st.won));
}

void srv_elect_metrics(struct srv *srv, FILE *f)
{
	struct kv_elect_state st = { .leading = true };
	char addr[256];

	if (srv->el)
		kv_elect_state(srv->el, &st);
	fputs("# HELP kvconductor_leader 1 when this conductor leads (or runs "
	      "without --election), 0 when it stands by.\n"
	      "# TYPE kvconductor_leader gauge\n",
	      f);
	fprintf(f, "kvconductor_leader %d\n", st.leading ? 1 : 0);
	fputs("# HELP kvconductor_elections_won_total Times this conductor "
	      "became the leader.\n"
	      "# TYPE kvconductor_elections_won_total counter\n",
	      f);
	fprintf(f, "kvconductor_elections_won_total %llu\n",
		(unsigned long long)st.won);
	/* the record comes from etcd: a value that would need escaping in
	 * a label is left out rather than trusted */
	if (!srv->el ||
	    kv_elect_field(st.leader, "http", addr, sizeof(addr)) < 0 ||
	    strpbrk(addr, "\"\\\n"))
		return;
	fputs("# HELP kvconductor_leader_info The leader this conductor "
	      "knows of, by HTTP address.\n"
	      "# TYPE kvconductor_leader_info gauge\n",
	      f);
	fprintf(f, "kvconductor_leader_info{http=\"%s\"} 1\n", addr);
}
