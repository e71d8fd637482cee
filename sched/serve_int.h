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
#include <stdio.h>

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
	/* the handoff (serve_handoff.c) */
	uint64_t ho_requests;	  /* requests whose blocks it waits for */
	uint64_t ho_refused;	  /* requests past its caps: not handed off */
	uint64_t ho_fetch_frames; /* FETCH frames queued to a stream */
	uint64_t ho_fetch_blocks; /* block hashes in them */
	uint64_t ho_dropped; /* blocks due with no FETCH stream or no room */
	uint64_t ho_expired; /* requests forgotten by SRV_HO_TTL */
};

struct kv_elect;

/* an IPv4 network, host order */
#define SRV_NETS_MAX 16
struct srv_net {
	uint32_t addr, mask;
};
/* "none", or NET[,NET...] with NET A.B.C.D[/BITS]: 0 or -EINVAL */
int srv_parse_nets(const char *s, struct srv_net *out, unsigned *n);
/* an endpoint "tcp://A.B.C.D:PORT" whose address lies in one of nets
 * (ipc://, a host name or another form: no) */
bool srv_endpoint_in(const char *ep, size_t len, const struct srv_net *nets,
		     unsigned n);

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
	/* --kv-events-allow: the networks POST /v1/kv-events may name */
	struct srv_net kv_allow[SRV_NETS_MAX];
	unsigned nkv_allow;  /* 0: none */
	struct kv_elect *el; /* --election; NULL: none, always the leader */
	uint64_t adopt_won;  /* run()'s thread: srv_instances_adopt's */
	uint64_t adopt_next_ns;

	/* fixed after start */
	char *token;	 /* the HTTP API's bearer token; NULL: none */
	uint8_t *secret; /* event streams authenticate; NULL: plain */
	size_t secret_len;
	double http_timeout; /* s, see SRV_DEF_HTTP_TIMEOUT */
	unsigned http_conns, http_per_ip;
	double ev_hello, ev_idle; /* s; 0: no deadline */
	double request_ttl;	  /* s; 0: requests never expire */
	bool handoff;		  /* --handoff on */
	struct srv_ho *ho;	  /* [lock] its books; NULL when off */
	struct srv_kvev *kvev;	  /* [lock] vLLM's KV events; NULL: none */
	struct srv_q *q; /* [lock] /v1/next's waiters (serve_queue.c) */

	/* the event listener (serve.c) */
	int ev_fd;   /* -1: no --events */
	int wake[2]; /* a byte on wake[1]: SRV_WAKE_STOP or _FETCH */
	pthread_t ev_thread;
	bool ev_running;
};

/*
 * The prefill-to-decode handoff (serve_handoff.c; kvconductor(8)
 * HANDOFF).  When a request's prefill is on node src and its decode on
 * node dst != src (known at /v1/schedule, or for a held request at its
 * dispatch by /v1/next), the request is bound to them: the blocks of its
 * prefix the index says src holds already seal no INSERT, so those dst
 * lacks are due at once (when the request named its blocks: FETCH
 * carries names, not keys); its other keys are remembered, and an INSERT
 * of one of them from src (srv_ho_sealed) makes a FETCH of it due on
 * dst's event stream.  A CPP pipeline's src is its lead's node, where
 * the scheduler's books put its blocks; an INSERT from another node of
 * the pipeline is taken as well, in case that stage's engine writes
 * them.  A held request's keys (and names) wait unbound from its
 * schedule to its dispatch.  A request is forgotten at /v1/complete of
 * its decode, once every block went, or SRV_HO_TTL after its schedule
 * (after its dispatch, once bound there).  The caps bound the books
 * (about 48 bytes a key, 32 more for a held request's names).
 */
#define SRV_HO_TTL 120.0	   /* s: 4 times the default TTFT SLO */
#define SRV_HO_MAX_REQS 65536u	   /* requests remembered at once */
#define SRV_HO_MAX_KEYS (1u << 20) /* their keys in all */
#define SRV_HO_MAX_DUE 65536u	   /* cached blocks due, not yet staged */
#define SRV_FE_OUT_MAX (1u << 20)  /* FETCH bytes waiting on one stream */
#define SRV_FE_STAGE 1024u	   /* blocks staged before encoding */

struct srv_ho;
int srv_ho_create(size_t max_req, size_t max_keys, struct srv_ho **out);
void srv_ho_destroy(struct srv_ho *h);
/* bound at once to one src, without a cached prefix: 0 (also for src ==
 * dst or no keys: nothing to do), -EEXIST (id is there), -ENOSPC (past a
 * cap), -ENOMEM */
int srv_ho_add(struct srv_ho *h, uint64_t id, uint16_t src, uint16_t dst,
	       const uint64_t *keys, uint32_t n, double now);

/* a request's block names, for the FETCH of its cached prefix: hash NULL
 * (block_keys) or ns NULL or "" (none given): none */
struct srv_ho_names {
	const uint8_t (*hash)[KVFS_HASH_LEN]; /* [n], as the keys */
	const char *ns;
};
/* whether node holds key (the locality index) */
typedef bool (*srv_ho_holds_fn)(void *arg, uint16_t node, uint64_t key);
/*
 * Bind id to its prefill nodes src[0..nsrc) (src[0] the lead, whose
 * cached prefix of keys, by holds, is due at once where dst lacks it;
 * nsrc 1..SCHED_CPP_LIMIT) and its decode node dst.  srv_ho_start
 * remembers a request and binds it; srv_ho_dispatch binds one
 * srv_ho_hold remembered at its schedule.  *due: blocks made due (a due
 * block the queue had no room for is counted in *over, and dropped).
 * 1 remembered or something due, 0 nothing to hand off (src[0] == dst,
 * no keys, every key on dst already), -EEXIST, -ENOSPC, -ENOMEM;
 * srv_ho_dispatch: -ENOENT (not held: never, refused, or forgotten),
 * -EALREADY (bound at an earlier dispatch: a yielded request resumes).
 */
int srv_ho_start(struct srv_ho *h, uint64_t id, const uint16_t *src,
		 uint32_t nsrc, uint16_t dst, const uint64_t *keys,
		 const struct srv_ho_names *nm, uint32_t n,
		 srv_ho_holds_fn holds, void *arg, double now, uint32_t *due,
		 uint32_t *over);
/* remember a held request until its dispatch: 0 (also without keys),
 * -EEXIST, -ENOSPC, -ENOMEM; its names, when given, are copied */
int srv_ho_hold(struct srv_ho *h, uint64_t id, const uint64_t *keys,
		const struct srv_ho_names *nm, uint32_t n, double now);
int srv_ho_dispatch(struct srv_ho *h, uint64_t id, const uint16_t *src,
		    uint32_t nsrc, uint16_t dst, srv_ho_holds_fn holds,
		    void *arg, double now, uint32_t *due, uint32_t *over);
/* node sealed key: the nodes that are to pull it, each once, at most max
 * of them, in dst; the entries it matched are forgotten */
uint32_t srv_ho_sealed(struct srv_ho *h, uint16_t node, uint64_t key,
		       uint16_t *dst, uint32_t max);
/* each due block, oldest first, to fn (NULL: dropped), and forgotten;
 * how many */
typedef void (*srv_ho_due_fn)(void *arg, uint16_t src, uint16_t dst,
			      const char *ns, uint8_t ns_len,
			      const uint8_t *hash);
uint32_t srv_ho_due_take(struct srv_ho *h, srv_ho_due_fn fn, void *arg);
/* false: id was not there */
bool srv_ho_forget(struct srv_ho *h, uint64_t id);
/* forget the requests scheduled ttl or more before now; how many */
uint64_t srv_ho_expire(struct srv_ho *h, double now, double ttl);
void srv_ho_size(const struct srv_ho *h, size_t *reqs, size_t *keys);

struct sched_body;
/* under the lock, after an accepted decision d of the body q: bind the
 * request when its prefill and decode nodes differ, or remember it until
 * its dispatch when d->held; count; and wake the event listener for what
 * is due at once */
void srv_handoff_add(struct srv *srv, const struct sched_decision *d,
		     const struct sched_body *q);
/* under the lock, after sched_next dispatched d: bind a held request */
void srv_handoff_dispatch(struct srv *srv, const struct sched_dispatch *d);

/* a stream's FETCH frames on their way out, event thread only */
struct srv_fe_out {
	bool ok;      /* the stream opened with a RESET in "-fetch" */
	uint64_t seq; /* FETCH frames queued on it so far */
	uint8_t *buf; /* buf[off..len) is still to send */
	size_t off, len, cap;
};
struct kv_tagger;
/* one FETCH frame (a sealed record when tag is not NULL) appended; 0,
 * -ENOBUFS (SRV_FE_OUT_MAX waiting already), -ENOMEM, -EINVAL */
int srv_fe_put(struct srv_fe_out *o, struct kv_tagger *tag, uint16_t node,
	       uint16_t src, const char *ns, const uint8_t *hashes, uint32_t n);
/* send without blocking: 0 all sent, 1 some left (poll for POLLOUT),
 * -errno */
int srv_fe_send(struct srv_fe_out *o, int fd);
void srv_fe_release(struct srv_fe_out *o);

/* the fetches an INSERT frame made due, staged until the frame's end
 * (or a change of source or namespace) and then encoded per stream */
struct srv_fe_stage {
	uint16_t src;
	uint8_t ns_len;
	char ns[KVFS_NS_MAX];
	uint32_t n;
	struct {
		uint16_t dst;
		uint8_t hash[KVFS_HASH_LEN];
	} item[SRV_FE_STAGE];
	uint8_t scratch[SCHED_FE_MAX_RECORDS][KVFS_HASH_LEN];
};
/* the output of node's stream that takes FETCH (and its sending tagger
 * when authenticated), or NULL */
typedef struct srv_fe_out *(*srv_fe_find_fn)(void *arg, uint16_t node,
					     struct kv_tagger **tag);
void srv_fe_stage_add(struct srv_fe_stage *st, srv_fe_find_fn find, void *arg,
		      struct srv_counters *c, uint16_t src, const char *ns,
		      uint8_t ns_len, const uint16_t *dst, uint32_t ndst,
		      const uint8_t *hash);
/* encode what is staged; counts frames, blocks and drops in c */
void srv_fe_stage_flush(struct srv_fe_stage *st, srv_fe_find_fn find, void *arg,
			struct srv_counters *c);
/* the event thread, under the lock, woken by SRV_WAKE_FETCH: stage and
 * encode the blocks due at once */
void srv_handoff_due(struct srv *srv, struct srv_fe_stage *st,
		     srv_fe_find_fn find, void *arg);

/* seconds since start, the scheduler's `now` */
double srv_now(const struct srv *srv);

/* forget requests past request_ttl (sched_expire), and the handoff's
 * past SRV_HO_TTL, and count them; takes the lock.  main calls it about
 * once a second. */
void srv_expire(struct srv *srv);

/*
 * Set the instances and create the scheduler: nodes may be NULL (node i
 * for prefill i, nprefill + j for decode j).  -EEXIST when set before,
 * -EINVAL for counts out of 1..SCHED_MAX_INSTANCES, -ENOMEM.  Takes the
 * lock.
 */
/*
 * Instances a successor takes over (serve_elect.c): POST /v1/instances's
 * lists, kept in etcd beside the election's key (signed with the cluster
 * secret when there is one), and adopted by a leader that has none, once
 * a second from run() (srv_instances_adopt: at once after an election
 * won, every 10 s else).  srv_instances_keep: 0 or etcd's error, logged;
 * without --election nothing is kept.
 */
int srv_instances_keep(struct srv *srv, uint32_t np, const uint32_t *pnode,
		       uint32_t nd, const uint32_t *dnode);
void srv_instances_adopt(struct srv *srv);
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
	uint8_t (*hash)[KVFS_HASH_LEN]; /* the same with "hashes": the names
					 * (the handoff's FETCH); else NULL */
	uint32_t nkeys;
	uint64_t input, output;
	char ns[KVFS_NS_MAX + 1]; /* "namespace", "" when absent */
};
int srv_body_schedule(struct json_object *o, uint32_t block_tokens,
		      struct sched_body *q, const char **msg);
/* POST /v1/complete: its id and phase; 0, or -EINVAL with *msg */
int srv_body_complete(struct json_object *o, uint64_t *id, bool *prefill,
		      const char **msg);

/* the event listener thread on srv->ev_fd; 0 or -errno.  What a byte on
 * srv->wake[1] asks of it: stop, or send the handoff's due blocks (at
 * most one such byte waits, so the pipe never fills) */
#define SRV_WAKE_STOP 'x'
#define SRV_WAKE_FETCH 'f'
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
	char *leader; /* malloc'd: the X-Kvfs-Leader header; NULL none */
};

/*
 * Answers the handlers share (serve_http.c).  A json-c allocation that
 * fails leaves a->json NULL: an empty 500 goes out.  The routing table
 * there answers a standby's 503 for every route only the leader serves,
 * before its handler runs.
 */
/* status with {"error": msg} and, unless NULL, "reason" */
void srv_answer_error(struct srv_answer *a, unsigned status, const char *msg,
		      const char *reason);
/* 200 with {"id": id, key: val} */
void srv_answer_id(struct srv_answer *a, uint64_t id, const char *key,
		   const char *val);
/* a placement's fields into j, as /v1/schedule and /v1/next name them:
 * prefill_instance, decode_instance, cached_blocks, reuse_blocks,
 * transfer_blocks, src_node_id (null for SCHED_NO_NODE) */
void srv_plan_json(struct json_object *j, uint32_t prefill, uint32_t decode,
		   uint32_t local, uint32_t reuse, uint32_t xfer,
		   uint32_t src_node);

/* GET /v1/stats and GET /metrics (serve_stats.c); they take the lock for
 * a snapshot only */
void srv_stats_json(struct srv *srv, struct srv_answer *a);
void srv_metrics(struct srv *srv, struct srv_answer *a);

/*
 * Held queues (serve_queue.c; kvconductor(8) HELD QUEUES): POST /v1/next
 * (an instance's long poll for its next request, CPP stages announced)
 * and POST /v1/progress (chunk boundaries: continue or yield).
 * srv_q_kick, under the lock, wakes the waiters after a change that can
 * make a request runnable; srv_q_stop ends every wait (before the HTTP
 * daemon stops); srv_q_free after.
 */
void srv_next_post(struct srv *srv, struct json_object *o,
		   struct srv_answer *a);
void srv_progress_post(struct srv *srv, struct json_object *o,
		       struct srv_answer *a);
void srv_q_kick(struct srv *srv);
void srv_q_stop(struct srv *srv);
void srv_q_free(struct srv *srv);

/* the HTTP front end on a listening socket, which it then owns */
struct srv_http;
int srv_http_start(struct srv *srv, int fd, struct srv_http **out);
void srv_http_stop(struct srv_http *h);

/*
 * --election (serve_elect.c; kvconductor(8) ELECTION).  The leader's
 * record names http and events (HOST:PORT, events "" without --events).
 * Only a leader answers /v1/schedule, /v1/complete and /v1/instances;
 * srv_leading is checked under srv->lock right before a decision.
 */
struct kv_etcd_auth;
int srv_elect_start(struct srv *srv, const char *url,
		    const struct kv_etcd_auth *a, uint32_t ttl_s,
		    const char *http, const char *events);
void srv_elect_resign(struct srv *srv); /* HTTP may still ask the role */
void srv_elect_stop(struct srv *srv);	/* after the HTTP daemon stopped */
/* true without --election */
bool srv_leading(struct srv *srv);
/* a standby's answer: 503 with the leader's address (JSON and header) */
void srv_standby_answer(struct srv *srv, struct srv_answer *a);
/* role and leader: into GET /v1/stats, and as /metrics lines */
void srv_elect_json(struct srv *srv, struct json_object *j);
void srv_elect_metrics(struct srv *srv, FILE *f);

/*
 * vLLM's KV events (serve_kvev.c, kvev.h; serve_kvev_none.c without
 * libzmq and msgpack-c; kvconductor(8) KV EVENTS).  An engine registered
 * (--kv-events SPEC, or POST /v1/kv-events) is subscribed to at once; its
 * blocks enter the index as its node's.  srv_kvev_node_reset is called
 * under srv->lock after the node's blocks were dropped (a kvfsd stream
 * ended or reset) and puts the engines' of that node back.  Stop it
 * before the scheduler goes.
 */
struct srv_kvev;
/* 0, or -errno with *msg: -EINVAL (SPEC), -EEXIST, -ENOSPC, -ENOTSUP */
int srv_kvev_add_spec(struct srv *srv, const char *spec, const char **msg);
void srv_kvev_post(struct srv *srv, struct json_object *o,
		   struct srv_answer *a);
void srv_kvev_node_reset(struct srv *srv, uint32_t node);
void srv_kvev_stats_json(struct srv *srv, struct json_object *parent);
void srv_kvev_metrics(struct srv *srv, FILE *f);
void srv_kvev_stop(struct srv *srv);

#endif /* KVFS_SCHED_SERVE_INT_H */
