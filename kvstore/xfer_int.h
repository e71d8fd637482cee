/*
 * xfer_int.h - private to kvstore/xfer*.c: engine, connections, transports.
 *
 * A connection (struct xconn) is one authenticated TCP socket, either
 * dialled by this engine (client: cached per peer, shared by all callers)
 * or accepted (server: one thread per peer).  Its I/O runs on two
 * io_uring rings (xfer_tcp.c):
 *
 *   rring  owned by the connection's reader thread alone: it receives
 *          every frame, block data straight into a pool slot
 *   sring  owned by whoever holds send_lock: a frame is sent whole
 *          under the lock, so frames of concurrent callers never mix on
 *          the stream
 *
 * Requests (struct xreq) live on their caller's stack and are linked in
 * the connection's pending list under lock until answered, timed out or
 * failed; the reader matches each reply by request id, so any number of
 * requests may be in flight on one connection.  The reader copies what
 * it needs out of a request under lock and never touches it after the
 * caller may have left (done set, or unlinked by a timed-out caller).
 *
 * Lock order: x->lock, then c->lock.  send_lock is never taken with
 * either held.
 *
 * Transports: struct xfer_ops moves block data.  "tcp" sends it inline in
 * GET_OK/PUT frames; "rdma" locates/allocates a slot over the connection
 * and moves the bytes with RDMA READ/WRITE.  The control path (handshake,
 * HAS, PING, the frames that set up RDMA) is the connection's in both.
 */
#ifndef KVFS_XFER_INT_H
#define KVFS_XFER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <liburing.h>

#include "src/common/log.h"
#include "kvstore/auth.h"
#include "kvstore/store.h"
#include "kvstore/wire.h"
#include "kvstore/xfer.h"

#define XFER_PEER_MAX 256
#define XFER_TICK_MS 100 /* how often blocked threads look at stop */

struct kv_xfer;
struct xconn;

/* a caller's request in flight on a connection */
struct xreq {
	uint64_t id;
	uint8_t type;	   /* request type sent */
	struct xreq *next; /* c->pending, under c->lock */
	/* GET over tcp: where the reader stores the block */
	const char *ns;
	const uint8_t *hash;
	bool claimed; /* the reader is receiving its data */
	bool done;
	int result;		  /* 0 or -errno once done */
	struct kv_wire_msg reply; /* the reply's meta */
};

struct xfer_ops {
	const char *name;
	/* engine: device, protection domain, pool MR.  why gets one line. */
	int (*init)(struct kv_xfer *x, char *why, size_t len);
	void (*fini)(struct kv_xfer *x);
	/* client connection just authenticated: set up the data path;
	 * a transport that cannot reach this peer returns < 0 and the
	 * connection falls back to tcp */
	int (*conn_init)(struct kv_xfer *x, struct xconn *c, uint64_t deadline);
	void (*conn_fini)(struct xconn *c);
	/* fetch: start sends the request, finish waits and stores it */
	int (*fetch_start)(struct xconn *c, struct xreq *r, const char *ns,
			   const uint8_t *hash);
	int (*fetch_finish)(struct xconn *c, struct xreq *r, uint64_t deadline);
	int (*push)(struct xconn *c, const char *ns, const uint8_t *hash,
		    uint64_t deadline);
	/* server side: a transport frame (RDMA_EP, LOCATE, ...); NULL or
	 * -EBADMSG when it is not one of this transport's */
	int (*serve)(struct xconn *c, const struct kv_wire_msg *m);
};

extern const struct xfer_ops xfer_tcp_ops;
extern const struct xfer_ops xfer_rdma_ops;
/* > 0 devices, 0 none, -ENOTSUP built without; why gets one line */
int xfer_rdma_probe(char *why, size_t len);

/*
 * Send a request of type (GET, LOCATE) for (ns, hash), tracked as r so
 * that xconn_wait finds its reply.  A failed send kills the connection,
 * which fails r: the wait reports it.
 */
int xfer_block_req(struct xconn *c, struct xreq *r, uint8_t type,
		   const char *ns, const uint8_t *hash);

/*
 * The block a push sends: a reference on the local sealed (ns, hash) in
 * *ref (kv_store_put it), and m's ns, hash, size, crc, block_tokens and
 * parent filled from it.  -ENOENT when it is not here.
 */
int xfer_pin_block(struct kv_xfer *x, const char *ns, const uint8_t *hash,
		   struct kv_ref *ref, struct kv_wire_msg *m);

struct xconn {
	struct kv_xfer *x;
	const struct xfer_ops *ops; /* data path of this connection */
	char peer[XFER_PEER_MAX];   /* "HOST:PORT" (client), or address */
	bool server;
	int fd;
	/* the peer is this host (loopback): SEND_ZC only costs there, since
	 * the kernel copies the pages on loopback anyway and adds a
	 * notification per send (docs/BENCHMARKS.md, kvbench xfer) */
	bool local;
	uint32_t peer_transports;

	pthread_mutex_t lock;
	pthread_cond_t cond; /* a request finished or the conn died */
	struct xreq *pending;
	int dead; /* 0 alive, else -errno: why it died */
	int refs; /* client: cache + callers */
	uint64_t next_id;

	pthread_mutex_t send_lock;
	struct io_uring sring;
	struct io_uring rring;
	bool rings;
	bool counted; /* in st.conns */

	pthread_t thread; /* reader (client) / handshake+reader (server) */
	bool thread_started;
	atomic_bool finished; /* server thread ended: reap it */
	/* server, under x->lock: still in the handshake, since when (for
	 * its deadline and to pick the oldest), closed to make room */
	bool in_hs;
	bool evicted;
	uint64_t since_ms;
	atomic_bool stop;

	void *tp;	    /* transport state (rdma QP) */
	struct xconn *next; /* x->clients or x->served */

	/* frame tags (wire.h): stag under send_lock, rtag the reader's;
	 * rtag_on while the bytes received belong to a tag being checked */
	char peer_id[KV_WIRE_ID_LEN];
	struct kv_tagger stag, rtag;
	bool tagged;
	bool rtag_on;
};

struct kv_xfer {
	struct kv_store *store;
	uint8_t *secret;
	size_t secret_len;
	char node[KV_WIRE_ID_LEN]; /* our node id, "" for none */
	uint32_t timeout_ms;
	void (*on_insert)(void *arg, const char *ns,
			  const uint8_t hash[KVFS_HASH_LEN]);
	void *cb_arg;
	const struct xfer_ops *ops; /* chosen transport */
	void *tp;		    /* its engine state */
	atomic_bool zc;		    /* IORING_OP_SEND_ZC usable */

	int lfd;
	int port;
	pthread_t acceptor;
	bool accepting;
	uint32_t hs_ms; /* a served connection's whole handshake */
	/* warnings a peer can provoke at will: caps hit, handshakes failed */
	struct kvfs_ratelimit warn_cap, warn_auth;

	pthread_mutex_t lock; /* clients, served, calls, stopping */
	pthread_cond_t idle;  /* calls dropped to 0 */
	struct xconn *clients;
	struct xconn *served;
	unsigned calls; /* public calls in progress */
	bool stopping;

	struct {
		atomic_uint_least64_t fetches, fetch_bytes, fetch_errors;
		atomic_uint_least64_t pushes, push_bytes, push_errors;
		atomic_uint_least64_t served, served_bytes;
		atomic_uint_least64_t auth_failures, bad_frames, conns;
		atomic_uint_least64_t refused;
	} st;
};

/* ---- xfer.c -------------------------------------------------------- */
uint64_t xfer_now_ms(void);
/* register r (type and id set here) in c's pending list; -errno if dead */
int xconn_track(struct xconn *c, struct xreq *r, uint8_t type);
/* wait for r until deadline; unlinks it.  -ETIMEDOUT kills the conn. */
int xconn_wait(struct xconn *c, struct xreq *r, uint64_t deadline);
/* mark dead (first reason wins), shut the socket, fail everything */
void xconn_kill(struct xconn *c, int why);
/* send m (header + meta) and, for data frames, data; then wait */
int xconn_call(struct xconn *c, struct kv_wire_msg *m, uint8_t reply_type,
	       struct kv_wire_msg *reply, uint64_t deadline);
/* start tagging c's frames with the handshake's keys */
int xconn_tags(struct xconn *c, const struct kv_auth *a);
/* reply to a peer's request id with errno e (> 0) */
int xconn_send_err(struct xconn *c, uint64_t id, int e);
/* local namespace for a block arriving with block_tokens: found or made;
 * -EMEDIUMTYPE when ours has other block_tokens (0: not said, any) */
int xfer_ns_ensure(struct kv_xfer *x, const char *ns, uint32_t block_tokens,
		   bool open, uint32_t *id);
/* a block a peer pushed is sealed here */
void xfer_inserted(struct kv_xfer *x, const char *ns, const uint8_t *hash);

/* ---- xfer_tcp.c: connection I/O over io_uring ---------------------- */
int xio_init(struct xconn *c);
void xio_fini(struct xconn *c);
/* send hdr (hlen bytes) then data (dlen bytes, may be 0) as one frame,
 * under send_lock; any failure kills the connection */
int xio_send(struct xconn *c, const void *hdr, size_t hlen, const void *data,
	     size_t dlen, uint64_t deadline);
/* send an encoded message without data */
int xio_send_msg(struct xconn *c, const struct kv_wire_msg *m,
		 uint64_t deadline);
/* the reader loop, client or server; returns when the conn dies */
void xio_reader(struct xconn *c);
/* serve one request frame on a server conn (xfer.c); data frames
 * (PUT) are handled by xfer_tcp.c itself */
int xfer_serve(struct xconn *c, const struct kv_wire_msg *m);

#endif /* KVFS_XFER_INT_H */
