/*
 * event_apply.c - apply decoded block events (event.h) to a scheduler.
 *
 * Kept out of event.c so that kvfsd, which only encodes events, links the
 * wire format without the scheduler.
 */
#include "config.h"

#include <errno.h>

#include "sched/event.h"
#include "sched/sched.h"

int sched_ev_apply(void *sched, const struct sched_ev *ev)
{
	struct sched *s = sched;
	long rc;

	switch (ev->op) {
	case SCHED_EV_INSERT:
		rc = sched_block_insert(s, ev->node,
					sched_key_from_hash(ev->hash));
		break;
	case SCHED_EV_EVICT:
		rc = sched_block_evict(s, ev->node,
				       sched_key_from_hash(ev->hash));
		break;
	case SCHED_EV_RESET:
		rc = sched_node_reset(s, ev->node);
		break;
	default:
		rc = -EINVAL;
	}
	return rc < 0 ? (int)rc : 0;
}
