/*
 * serve_kvev_int.h - private to serve_kvev*.c: `kvconductor serve`
 * subscribed to vLLM engines' KV event publishers (kvev.h for the
 * format; kvconductor(8), "KV EVENTS").
 *
 * Each engine is registered once (--kv-events or POST /v1/kv-events) with
 * the kvfs node it runs on; its BlockStored/BlockRemoved/AllBlocksCleared
 * events enter the scheduler's locality index as that node's inserts and
 * evictions, as kvfsd's own events do (event.h).
 *
 * One thread polls every engine's SUB socket (and, while it replays, its
 * replay socket) with zmq_poll, and a pipe that wakes it for a new engine
 * or to stop.  The sockets are made and connected by the caller of
 * srv_kvev_add_spec or srv_kvev_post (so a bad endpoint is refused there and
 * then) and handed to the thread through kv->lock, which is the barrier ZMQ
 * asks for when a socket changes threads; after that only the thread touches
 * them.
 *
 * Replay: vLLM's replay socket is a ROUTER that answers one request with
 * many messages, which a REQ socket (one reply per request) cannot take,
 * so a DEALER sends what a REQ would (an empty delimiter, then the start
 * seq).  While a replay runs, live batches wait in the engine's pending
 * list (bounded); when the end marker comes (or the replay times out,
 * when the socket is made anew so a late answer cannot be taken for the
 * next one's) they are applied after it, those already replayed skipped.
 *
 * Locks: srv->lock covers the index, every engine's key set and its
 * counters (the thread changes them under it, stats read them under it);
 * kv->lock covers the list of engines (append-only; an engine's
 * registration fields never change) and the thread's start and stop.
 * Order: srv->lock, then kv->lock.
 *
 * Several engines may share a node: each keeps the keys it holds, and a
 * block leaves the node's index entry only when no engine of the node
 * holds it any more.  A kvfsd stream of the same node that ends (or
 * opens with its RESET) drops the node's blocks, so the engines' are put
 * back (srv_kvev_node_reset).
 */
#ifndef KVFS_SCHED_SERVE_KVEV_INT_H
#define KVFS_SCHED_SERVE_KVEV_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sched/serve_int.h"
#include "sched/tab.h"

#define KVEV_MAX_ENGINES 64
#define KVEV_NAME_MAX 128     /* instance id, model, topic */
#define KVEV_EP_MAX 255	      /* an endpoint */
#define KVEV_MAX_PENDING 4096 /* live batches held while a replay runs */
#define KVEV_PENDING_BYTES (64u << 20)
#define KVEV_REPLAY_TIMEOUT_NS (5 * 1000000000ull) /* quiet replay: over */
#define KVEV_RCVHWM 10000 /* batches ZMQ queues before it drops (a gap) */
#define KVEV_BURST 256	  /* messages read from one socket per round */
#define KVEV_TICK_MS 1000

struct kvev_pend {
	uint64_t seq;
	void *buf;
	size_t len;
};

/* [srv->lock] */
struct kvev_count {
	uint64_t batches, events, stored, removed, cleared;
	uint64_t gaps, replays, replay_failures, restarts, lost;
	uint64_t decode_errors, mismatched, refused, unknown;
};

struct kvev_engine {
	/* fixed at registration */
	char id[KVEV_NAME_MAX + 1], model[KVEV_NAME_MAX + 1];
	char topic[KVEV_NAME_MAX + 1];
	char ep[KVEV_EP_MAX + 1], replay_ep[KVEV_EP_MAX + 1];
	uint32_t node;
	int64_t block_size; /* -1: any */

	/* the thread's */
	void *sub, *rep;
	bool replaying, initial;
	uint64_t replay_due; /* CLOCK_MONOTONIC ns */
	struct kvev_pend *pend;
	uint32_t npend;
	size_t pend_bytes;

	/* [srv->lock] */
	bool have;	       /* a batch applied since start or reset */
	uint64_t last;	       /* its seq */
	struct sched_tab keys; /* key -> key: the blocks it holds */
	struct sched *synced;  /* the scheduler its keys are in, or NULL */
	struct kvev_count c;
};

struct srv_kvev {
	struct srv *srv;
	void *ctx;
	pthread_mutex_t lock;
	struct kvev_engine *e[KVEV_MAX_ENGINES]; /* [lock] */
	uint32_t n;				 /* [lock] */
	int wake[2];
	bool running, stop; /* [lock] */
	pthread_t thread;
};

/* serve_kvev_reg.c */
void *srv_kvev_replay_sock(void *ctx, const char *ep); /* NULL: refused */
void srv_kvev_engine_free(struct kvev_engine *e);
void srv_kvev_wake(struct srv_kvev *kv);

/* serve_kvev.c: the thread, started by the first registration */
void *srv_kvev_thread(void *arg);

#endif /* KVFS_SCHED_SERVE_KVEV_INT_H */
