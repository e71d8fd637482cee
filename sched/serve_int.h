/*
 * serve_int.h - private to `kvconductor serve`: the daemon's state, shared
 * by its CLI (cmd_serve.c), the state and event listener (serve.c) and
 * the HTTP front end (serve_http.c).
 *
 * Threads: libmicrohttpd's (one per connection), the event listener's
 * one, and main, which only waits for a signal.  The scheduling core has
 * no locks (sched.h), so every field below marked [lock] is read and
 * written under srv->lock only, and every sched_* call on srv->s is made
 * under it.  Nothing is done under the lock but book-keeping: no I/O, no
 * JSON formatting of more than a snapshot.
 *
 * Instances: sched_create() fixes them, so they are set once, either at
 * start (--prefill/--decode) or by the first POST /v1/instances, which
 * creates the scheduler; a second POST is 409.
 */
#ifndef KVFS_SCHED_SERVE_INT_H
#define KVFS_SCHED_SERVE_INT_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "sched/event.h"
#include "sched/sched.h"

#define SRV_DEF_MAX_BODY (1u << 20)
#define SRV_MAX_EV_CONNS 64 /* event streams at once; more are refused */
#define SRV_MAX_HTTP_CONNS 256
#define SRV_MAX_KEYS 65536 /* blocks in one schedule request */

struct srv_counters {
	uint64_t requests;  /* schedule calls that reached a decision */
	uint64_t completed; /* complete, phase decode */
	uint64_t prefill_done;
	uint64_t bad;	   /* 4xx answers */
	uint64_t ev_conns; /* event streams accepted in all */
	uint64_t ev_frames;
	uint64_t ev_records;
	uint64_t ev_errors; /* streams ended by a bad frame */
};

struct srv {
	pthread_mutex_t lock;
	struct sched *s;		    /* [lock] NULL: no instances */
	struct sched_config cfg;	    /* fixed after start */
	const struct sched_policy_ops *pol; /* fixed after start */
	uint64_t seed;
	uint32_t nprefill, ndecode;  /* [lock] 0 until instances */
	uint32_t *pf_node, *dc_node; /* [lock] */
	struct srv_counters c;	     /* [lock] */
	uint64_t start_ns;	     /* CLOCK_MONOTONIC at start */
	size_t max_body;

	/* the event listener (serve.c) */
	int ev_fd;   /* -1: no --events */
	int wake[2]; /* a byte on wake[1] stops it */
	pthread_t ev_thread;
	bool ev_running;
};

/* seconds since start, the scheduler's `now` */
double srv_now(const struct srv *srv);

/*
 * Set the instances and create the scheduler: nodes may be NULL (node i
 * for prefill i, nprefill + j for decode j).  -EEXIST when set before,
 * -EINVAL for counts out of 1..SCHED_MAX_INSTANCES, -ENOMEM.  Takes the
 * lock.
 */
int srv_set_instances(struct srv *srv, uint32_t np, const uint32_t *pnode,
		      uint32_t nd, const uint32_t *dnode);

/* "A.B.C.D:PORT" -> a listening TCP socket (port 0: any); -errno */
int srv_listen(const char *spec, int *fd);
/* the port fd is bound to, 0 if unknown */
unsigned srv_port(int fd);

/* the event listener thread on srv->ev_fd; 0 or -errno */
int srv_events_start(struct srv *srv);
void srv_events_stop(struct srv *srv);

/* what a handler answers: a JSON body (owned, put after sending) or a
 * text body (malloc'd, freed after sending) */
struct json_object;
struct srv_answer {
	unsigned status;
	struct json_object *json;
	char *text;
	size_t len;
};

/* GET /v1/stats and GET /metrics (serve_stats.c); they take the lock for
 * a snapshot only */
void srv_stats_json(struct srv *srv, struct srv_answer *a);
void srv_metrics(struct srv *srv, struct srv_answer *a);

/* the HTTP front end on a listening socket, which it then owns */
struct srv_http;
int srv_http_start(struct srv *srv, int fd, struct srv_http **out);
void srv_http_stop(struct srv_http *h);

#endif /* KVFS_SCHED_SERVE_INT_H */
