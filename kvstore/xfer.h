/*
 * xfer.h - the transfer engine: moves sealed blocks between nodes' pools.
 *
 * Each kvfsd in a cluster runs one engine.  It serves peers on a listening
 * TCP socket (the control and, for tcp, the data channel) and fetches from
 * or pushes to peers on their listening addresses.  Blocks travel straight
 * between pool slots: a fetch receives into a fresh slot of the local
 * store (kv_store_create + kv_store_wptr), verifies the CRC-32C the sender
 * gives, and seals it as an ordinary evictable block; a push sends from
 * the slot a reference pins.
 *
 * Transports (one ops table, xfer_int.h): "tcp", io_uring driven, and
 * "rdma", RC queue pairs with the whole pool one memory region (RDMA READ
 * to fetch, RDMA WRITE to push; the TCP connection still carries the
 * requests).  KV_TRANSPORT_AUTO takes rdma when a device is usable and
 * says which and why in one log line; an explicit KV_TRANSPORT_RDMA
 * without a device fails kv_xfer_open with -ENODEV.
 *
 * Every connection starts with a challenge-response over the cluster
 * secret (HMAC-SHA-256) in both directions, bound to both node ids; a
 * peer that fails it is refused before any block request is read, and
 * every frame after it carries tags under the session's keys (auth.h).
 * A peer is "HOST:PORT", or "ID@HOST:PORT" to reach node ID there: the
 * handshake then fails unless that node answers.  The frame layout is in
 * wire.h and kvfs(7).
 *
 * Serving is bounded against peers that never authenticate: at most
 * KV_XFER_UNAUTH_MAX connections are in the handshake at once (a new one
 * beyond that closes the oldest still waiting, so an idle flood cannot
 * keep a real peer out), the whole handshake must be done within
 * KV_XFER_HANDSHAKE_MS of the accept or the connection is closed, and at
 * most KV_XFER_CONN_MAX peer connections are served at all (beyond that
 * a new one is closed at once).  Each of these costs one thread at most;
 * the warnings a peer can provoke (refusals, failed handshakes) say one
 * line per KV_XFER_WARN_MS per kind, with a count of those held back.
 *
 * Threads: all calls are thread-safe; fetch/push/has block the caller up
 * to the engine's timeout, and many callers may have requests in flight
 * to the same peer at once.  Every call returns 0 (or a count) or a
 * negative errno; none touches errno.
 */
#ifndef KVFS_XFER_H
#define KVFS_XFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "src/common/hash.h"

struct kv_store;
struct kv_xfer;

enum kv_transport {
	KV_TRANSPORT_AUTO = 0,
	KV_TRANSPORT_TCP,
	KV_TRANSPORT_RDMA,
};

/* "auto", "tcp", "rdma"; -EINVAL otherwise */
int kv_transport_parse(const char *s, enum kv_transport *t);

#define KV_XFER_SECRET_MIN 16 /* bytes */
#define KV_XFER_TIMEOUT_MS 5000u
#define KV_XFER_UNAUTH_MAX 32	   /* connections in the handshake */
#define KV_XFER_HANDSHAKE_MS 5000u /* accept to authenticated */
#define KV_XFER_CONN_MAX 256	   /* peer connections served, in all */
#define KV_XFER_WARN_MS 10000u	   /* one line per kind per this */

struct kv_xfer_config {
	struct kv_store *store;
	/* "HOST:PORT" (IPv4, [IPv6] or a name) to serve peers on; port 0
	 * picks a free one (kv_xfer_port).  NULL: client only. */
	const char *listen;
	const uint8_t *secret; /* cluster secret, >= KV_XFER_SECRET_MIN */
	size_t secret_len;
	/* our node id (1..63 of [A-Za-z0-9._-]); NULL: none.  A served
	 * peer must have dialled "ID@..." with it, or plain HOST:PORT
	 * when it is NULL. */
	const char *node;
	enum kv_transport transport;
	uint32_t timeout_ms; /* connect and each remote call; 0: default */
	/* a served connection's whole handshake; 0: KV_XFER_HANDSHAKE_MS
	 * or timeout_ms, whichever is shorter */
	uint32_t handshake_ms;
	/* called on an engine thread after a block a peer pushed here is
	 * sealed in the local store (NULL: nothing); must not block long */
	void (*on_insert)(void *arg, const char *ns,
			  const uint8_t hash[KVFS_HASH_LEN]);
	void *cb_arg;
};

/* -ENODEV: transport rdma asked for, no usable device; -EADDRINUSE etc.
 * from bind; -EINVAL bad config (short secret, bad address).  Logs why. */
int kv_xfer_open(const struct kv_xfer_config *cfg, struct kv_xfer **out);
/* stops serving, fails calls in flight with -ECANCELED, frees */
void kv_xfer_close(struct kv_xfer *x);

/* "tcp" or "rdma": the transport chosen */
const char *kv_xfer_transport(const struct kv_xfer *x);
/* the bound listening port (0 when client only) */
int kv_xfer_port(const struct kv_xfer *x);

/*
 * Fetch (ns, hash) from peer ("[ID@]HOST:PORT") into the local store.  The
 * namespace is created locally when absent, with the sender's
 * block_tokens.  0 on success or when the block is already local;
 * -ENOENT the peer does not have it; -ETIMEDOUT no answer in time;
 * -ECONNREFUSED (or another socket errno) cannot reach the peer;
 * -EACCES authentication failed; -EBADMSG a malformed reply or a
 * checksum mismatch (nothing is sealed); -ENOSPC no slot free.
 */
int kv_xfer_fetch(struct kv_xfer *x, const char *peer, const char *ns,
		  const uint8_t hash[KVFS_HASH_LEN]);
/*
 * Fetch n blocks of one namespace, all in flight at once; res[i] gets
 * each one's result as kv_xfer_fetch would return it.  Returns the
 * number fetched (or already local), or a negative errno when nothing
 * could be sent at all.
 */
long kv_xfer_fetch_many(struct kv_xfer *x, const char *peer, const char *ns,
			const uint8_t (*hashes)[KVFS_HASH_LEN], size_t n,
			int *res);
/*
 * Push the local sealed block (ns, hash) to peer; returns once the peer
 * has sealed it (or already had it): 0.  -ENOENT not local; other errors
 * as for fetch.  The peer keeps the sender's parent hash.
 */
int kv_xfer_push(struct kv_xfer *x, const char *peer, const char *ns,
		 const uint8_t hash[KVFS_HASH_LEN]);
/* does peer hold (ns, hash) sealed: 1 / 0, or a negative errno */
int kv_xfer_has(struct kv_xfer *x, const char *peer, const char *ns,
		const uint8_t hash[KVFS_HASH_LEN]);
/* an authenticated round trip: 0, or why not */
int kv_xfer_ping(struct kv_xfer *x, const char *peer);
/* close cached connections to peer (it left the cluster) */
void kv_xfer_forget(struct kv_xfer *x, const char *peer);

struct kv_xfer_stats {
	uint64_t fetches, fetch_bytes, fetch_errors;
	uint64_t pushes, push_bytes, push_errors;
	uint64_t served, served_bytes; /* requests answered for peers */
	uint64_t auth_failures;	       /* peers refused */
	uint64_t bad_frames;	       /* frames rejected by the parser */
	uint64_t conns;		       /* connections open now */
	uint64_t refused; /* closed unauthenticated by a cap above */
};
void kv_xfer_stats(struct kv_xfer *x, struct kv_xfer_stats *out);

#endif /* KVFS_XFER_H */
