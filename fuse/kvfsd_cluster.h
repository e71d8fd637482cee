/*
 * kvfsd_cluster.h - kvfsd's side of a cluster: membership (kvstore/cluster.h),
 * the transfer engine (kvstore/xfer.h), and what the mount does with
 * them.
 *
 *   remote read   a lookup that misses locally asks the block's home set,
 *                 then every other live node, and fetches it into the
 *                 local pool (an ordinary, evictable block) before
 *                 answering: the engine sees an ordinary file
 *   replication   after a local seal the block is queued and pushed in the
 *                 background to its home set (the R live nodes of highest
 *                 rendezvous weight); close() returns after the local seal
 *   fsync         pushes to the home set now and returns 0 only when R
 *                 nodes hold the block (-EIO otherwise)
 *   repair        when membership changes, each node walks its blocks and
 *                 pushes those it is home for to the home members that
 *                 lack them, at most repair_rate blocks a second
 *   namespaces    published under the cluster's etcd prefix, so a node
 *                 that never saw a namespace finds it at lookup
 *   conductor     with --conductor, a stream of block events (the format
 *                 of sched/event.h): a RESET and every local block at
 *                 connect, then INSERT on every seal or arrival and EVICT
 *                 on every eviction
 *
 * Without --cluster none of this exists and kvfsd needs no etcd.
 * Calls return 0 (or a count) or a negative errno.
 */
#ifndef KVFS_FUSE_CLUSTER_H
#define KVFS_FUSE_CLUSTER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "src/common/hash.h"
#include "src/common/json.h"
#include "kvstore/cluster.h"
#include "kvstore/store.h"
#include "kvstore/xfer.h"

#define KVFSD_REPLICAS 2u
#define KVFSD_REPAIR_RATE 200u /* blocks per second */

struct kvfsd_cluster;
struct kvfs_fs;

struct kvfsd_cluster_config {
	struct kv_store *store;
	const char *url; /* etcd://HOST:PORT[,HOST:PORT...]/NAME */
	const char *node_id;
	const char *listen; /* HOST:PORT peers reach us on */
	const char *secret_file;
	struct kv_etcd_auth etcd; /* --etcd-*: TLS and auth to etcd */
	const char *conductor;	  /* HOST:PORT or NULL */
	enum kv_transport transport;
	unsigned replicas;
	uint32_t timeout_ms;
	unsigned repair_rate;
};

/* one line on stderr says why it failed */
int kvfsd_cluster_start(const struct kvfsd_cluster_config *cfg,
			struct kvfsd_cluster **out);
/*
 * A single node's conductor stream (cfg->conductor, cfg->node_id and
 * cfg->store only): no etcd, no transfer engine, no replication.  The
 * result is only for kvfsd_cluster_stop, never for the mount or the
 * control socket, which take it for a cluster.
 */
int kvfsd_events_start(const struct kvfsd_cluster_config *cfg,
		       struct kvfsd_cluster **out);
/* leave the cluster, stop every thread; NULL: no-op */
void kvfsd_cluster_stop(struct kvfsd_cluster *c);
/* the mount, told of blocks that arrive from peers (its dentry cache);
 * NULL before the mount exists and after it is gone */
void kvfsd_cluster_set_fs(struct kvfsd_cluster *c, struct kvfs_fs *fs);

/* the remote read: 0 once (ns, hash) is local, -ENOENT when no live node
 * has it, or another negative errno */
int kvfsd_cluster_fetch(struct kvfsd_cluster *c, const char *ns,
			const uint8_t hash[KVFS_HASH_LEN]);
/* a block was sealed here: queue its replication */
void kvfsd_cluster_sealed(struct kvfsd_cluster *c, const char *ns,
			  const uint8_t hash[KVFS_HASH_LEN]);
/* fsync: 0 once R home nodes hold it */
int kvfsd_cluster_sync(struct kvfsd_cluster *c, const char *ns,
		       const uint8_t hash[KVFS_HASH_LEN]);
/* a namespace was made here (mkdir, kvctl ns create): published to the
 * cluster now, not at the next housekeeping pass a second later, so that
 * another node's look for it finds it at once.  NULL: no-op */
void kvfsd_cluster_ns_made(struct kvfsd_cluster *c);
/* a namespace this node does not have: known to the cluster?  Creates it
 * locally with the cluster's block_tokens; 0, -ENOENT */
int kvfsd_cluster_ns_import(struct kvfsd_cluster *c, const char *ns);
/* control socket: "nodes" and "prefetch" */
int kvfsd_cluster_nodes_json(struct kvfsd_cluster *c, struct kvfs_buf *out);
/* the replication figures of .kvfs/stats (kvfs(7)) */
struct kvfsd_repl_stats {
	unsigned replicas;   /* R: copies each block should have */
	unsigned live_nodes; /* members now, this one included */
	size_t queued;	     /* sealed blocks waiting to be pushed */
	unsigned busy;	     /* being pushed now */
	uint64_t pushed;     /* copies pushed to home members */
	uint64_t gave_up;    /* blocks left short of R after every try */
};
/* NULL (a single node): R 1, one live node, nothing else */
void kvfsd_cluster_repl_stats(struct kvfsd_cluster *c,
			      struct kvfsd_repl_stats *out);
/* the handoff's figures of .kvfs/stats: blocks the conductor's FETCH
 * frames named (kvconductor(8) HANDOFF) */
struct kvfsd_handoff_stats {
	bool enabled;	     /* a cluster with --conductor */
	size_t queued;	     /* waiting to be pulled */
	uint64_t fetched;    /* pulled from a peer */
	uint64_t already;    /* local already: nothing to do */
	uint64_t failed;     /* no peer had it, or the fetch failed */
	uint64_t dropped;    /* the queue was full */
	uint64_t bad_frames; /* frames that failed their checks */
};
/* NULL, or no conductor: all zero */
void kvfsd_cluster_handoff_stats(struct kvfsd_cluster *c,
				 struct kvfsd_handoff_stats *out);

/*
 * .kvfs/nodes: append "nodes":[...] (every live node by id, this one
 * first, with "self":true and self_fields, a JSON fragment starting
 * with ',') and the cluster's replicas, transport, epoch and queue
 */
int kvfsd_cluster_view_json(struct kvfsd_cluster *c, struct kvfs_buf *out,
			    const char *self_fields);
/* warm node (NULL: this one) with n blocks; res[i] per block; returns how
 * many are there now.  Once *stop (may be NULL) is set, the blocks left
 * are not tried: -ECANCELED each */
long kvfsd_cluster_prefetch(struct kvfsd_cluster *c, const char *node,
			    const char *ns,
			    const uint8_t (*hashes)[KVFS_HASH_LEN], size_t n,
			    int *res, const atomic_bool *stop);

#endif /* KVFS_FUSE_CLUSTER_H */
