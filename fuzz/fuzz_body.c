/*
 * fuzz_body.c - libFuzzer target: arbitrary bytes as the body of each of
 * `kvconductor serve`'s POST requests, through the very parsers the
 * daemon runs (sched/serve_body.c).
 *
 * What a parser accepts must be what its endpoint documents
 * (kvconductor(8)): at most 65536 keys, input_length at least the blocks
 * times block_tokens, output_length at least 1, 1 to 256 instances of
 * node ids below 65536, an id from 1.
 */
#include "config.h"

#include <json-c/json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sched/serve_int.h"

#define BLOCK_TOKENS 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t nodes[SCHED_MAX_INSTANCES], n = 0;
	struct sched_body q = { 0 };
	struct json_object *o;
	const char *msg;
	char *buf = malloc(size + 1);
	bool prefill;
	uint64_t id;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = 0; /* as the daemon keeps its bodies */
	o = srv_body_json(buf, size, &msg);
	if (!o) {
		free(buf);
		return 0;
	}
	if (srv_body_nodes(srv_body_array(o, "prefill"), nodes, &n, &msg) ==
	    0) {
		if (n < 1 || n > SCHED_MAX_INSTANCES)
			abort();
		for (uint32_t i = 0; i < n; i++)
			if (nodes[i] > UINT16_MAX)
				abort();
	}
	if (srv_body_schedule(o, BLOCK_TOKENS, &q, &msg) == 0) {
		if (q.nkeys > SRV_MAX_KEYS || q.output < 1 ||
		    q.input < (uint64_t)q.nkeys * BLOCK_TOKENS)
			abort();
		/* a namespace given is a valid one, with its NUL */
		if (q.ns[0] && kvfs_ns_valid(q.ns) < 0)
			abort();
	}
	free(q.keys);
	free(q.hash);
	if (srv_body_complete(o, &id, &prefill, &msg) == 0 && id < 1)
		abort();
	json_object_put(o);
	free(buf);
	return 0;
}
