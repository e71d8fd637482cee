/*
 * fuzz_kvev.c - libFuzzer target: arbitrary bytes as one vLLM KV event
 * batch (sched/kvev.h), the payload frame a ZMQ publisher sends.
 *
 * Every event the decoder hands out must be one of the three types with
 * its keys readable, and a refused batch must hand out none (it is
 * checked whole first).  The limits keep msgpack-c's allocations to
 * what the bytes justify, so libFuzzer's malloc limit holds too.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>

#include "sched/kvev.h"

struct seen {
	unsigned events;
	uint64_t sum;
};

static int check(void *arg, const struct kvev_event *ev)
{
	struct seen *s = arg;

	if (ev->type != KVEV_STORED && ev->type != KVEV_REMOVED &&
	    ev->type != KVEV_CLEARED)
		abort();
	if (ev->type == KVEV_CLEARED && ev->nkeys)
		abort();
	if (ev->type != KVEV_STORED && ev->block_size != -1)
		abort();
	for (uint32_t i = 0; i < ev->nkeys; i++)
		s->sum += ev->keys[i]; /* every key readable (ASan) */
	s->events++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct seen s = { 0 };
	struct kvev_batch b;
	int rc = kvev_decode(data, size, check, &s, &b);

	if (rc < 0 && s.events)
		abort(); /* a refused batch applied something */
	if (rc == 0 && s.events != b.events)
		abort();
	return 0;
}
