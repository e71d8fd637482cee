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
/* event streams at once; one more evicts a stream that has not sent its
 * RESET yet, or one quiet for half EV_IDLE, else it is refused (serve.c
 * ev_victim) */
#define SRV_MAX_EV_CONNS 64
#define SRV_MAX_KEYS 65536 /* blocks in one schedule request */

/*
 * Deadlines and caps, kvconductor(8) lists them as options.  Why these
 * defaults:
 *
 *   HTTP_TIMEOUT   a request (headers and body, at most max_body) must be
 *                  in whole this long after its connection opened or its
 *                  previous answer: a router sends one in milliseconds,
 *                  and libmicrohttpd's own timeout is reset by every byte,
 *                  so alone it lets a client dribbling a header line
 *                  every few seconds hold a connection for ever.
 *   HTTP_CONNS     connections at once; one more evicts the connection
 *                  that has waited longest for its request, so idle
 *                  clients cannot exhaust them.
 *   HTTP_PER_IP    connections from one address (libmicrohttpd refuses
 *                  more); a router keeps a few, not hundreds.
 *   EV_HELLO       a new event stream's first frame (its RESET) is due
 *                  this long after it connects; kvfsd sends it at once.
 *   EV_IDLE        a stream quiet this long is closed: kvfsd sends a
 *                  keepalive (an empty frame) every 30 s of quiet, so
 *                  four of them lost means the node is gone.
 *   REQUEST_TTL    a scheduled request whose last call (schedule, or
 *                  prefill done) is this old is forgotten: 10 min is 20
 *                  times the default TTFT SLO, and 6000 decode steps at
 *                  the default TBT SLO.
 */
#define SRV_DEF_HTTP_TIMEOUT 10.0
#define SRV_DEF_HTTP_CONNS 256
#define SRV_DEF_HTTP_PER_IP 64
#define SRV_DEF_EV_HELLO 10.0
#define SRV_DEF_EV_IDLE 120.0
#define SRV_DEF_REQUEST_TTL 600.0

struct srv_counters {
	uint64_t requests;  /* schedule calls that reached a decision */
	uint64_t completed; /* complete, phase decode */
	uint64_t prefill_done;
	uint64_t bad;	   /* 4xx answers */
	uint64_t ev_conns; /* event streams accepted in all */
	uint64_t ev_frames;
	uint64_t ev_records;
	uint64_t ev_errors;	   /* streams ended by a bad frame */
	uint64_t ev_no_reset;	   /* of those, first frame not a RESET */
	uint64_t ev_auth_failures; /* handshakes or record tags failed */
	uint64_t ev_timeouts; /* streams closed: no RESET in time, or idle */
	uint64_t ev_evicted;  /* streams closed for a newer one */
	uint64_t expired;     /* requests forgotten by request_ttl */
	uint64_t http_unauthorized; /* 401 answers */
	uint64_t http_timeouts;	    /* requests not in whole in time */
	uint64_t http_evicted;	    /* connections closed for a newer one */
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

	/* fixed after start */
	char *token;	 /* the HTTP API's bearer token; NULL: none */
	uint8_t *secret; /* event streams authenticate; NULL: plain */
	size_t secret_len;
	double http_timeout; /* s, see SRV_DEF_HTTP_TIMEOUT */
	unsigned http_conns, http_per_ip;
	double ev_hello, ev_idle; /* s; 0: no deadline */
	double request_ttl;	  /* s; 0: requests never expire */

	/* the event listener (serve.c) */
	int ev_fd;   /* -1: no --events */
	int wake[2]; /* a byte on wake[1] stops it */
	pthread_t ev_thread;
	bool ev_running;
};

/* seconds since start, the scheduler's `now` */
double srv_now(const struct srv *srv);

/* forget requests past request_ttl (sched_expire) and count them; takes
 * the lock.  main calls it about once a second. */
void srv_expire(struct srv *srv);

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

#define SRV_SECRET_MIN 16 /* KV_XFER_SECRET_MIN: the same file as kvfsd's */

/* ---- request bodies (serve_body.c) --------------------------------------- */

struct json_object;

/* one JSON object, nothing after it but white space; buf has a NUL at
 * buf[len].  NULL with *msg on anything else. */
struct json_object *srv_body_json(const char *buf, size_t len,
				  const char **msg);
/* a whole number min..max; -ENOENT when absent, -EINVAL when not one */
int srv_body_u64(struct json_object *o, const char *key, uint64_t min,
		 uint64_t max, uint64_t *out);
/* o's member key when it is an array, else NULL */
struct json_object *srv_body_array(struct json_object *o, const char *key);
/* POST /v1/instances: [{"node": N}, ...] -> nodes (SCHED_MAX_INSTANCES
 * of room); 0, or -EINVAL with *msg */
int srv_body_nodes(struct json_object *arr, uint32_t *nodes, uint32_t *n,
		   const char **msg);

/* POST /v1/schedule */
struct sched_body {
	uint64_t *keys; /* malloc'd: free it, also after an error */
	uint32_t nkeys;
	uint64_t input, output;
};
int srv_body_schedule(struct json_object *o, uint32_t block_tokens,
		      struct sched_body *q, const char **msg);
/* POST /v1/complete: its id and phase; 0, or -EINVAL with *msg */
int srv_body_complete(struct json_object *o, uint64_t *id, bool *prefill,
		      const char **msg);

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
