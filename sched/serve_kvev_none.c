/*
 * serve_kvev_none.c - `kvconductor serve` built without vLLM's KV events
 * (configure found no libzmq or msgpack-c, or --without-kv-events): the
 * same calls as serve_kvev.c, refusing registrations with a clear reason.
 */
#include "config.h"

#include <errno.h>
#include <json-c/json.h>

#include "sched/serve_int.h"

#define NONE_MSG                                                               \
	"built without KV events (configure --with-kv-events needs libzmq "    \
	"and msgpack-c)"

int srv_kvev_add_spec(struct srv *srv, const char *spec, const char **msg)
{
	*msg = NONE_MSG;
	return -ENOTSUP;
}

void srv_kvev_post(struct srv *srv, struct json_object *o, struct srv_answer *a)
{
	srv_answer_error(a, 501, NONE_MSG, NULL);
}

void srv_kvev_node_reset(struct srv *srv, uint32_t node)
{
}

void srv_kvev_stats_json(struct srv *srv, struct json_object *parent)
{
	struct json_object *o = json_object_new_object();

	if (!o)
		return;
	json_object_object_add(o, "available", json_object_new_boolean(0));
	json_object_object_add(parent, "kv_events", o);
}

void srv_kvev_metrics(struct srv *srv, FILE *f)
{
}

void srv_kvev_stop(struct srv *srv)
{
}
