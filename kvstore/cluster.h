/*
 * cluster.h - membership through etcd, and where blocks live (HRW).
 *
 * A cluster is an etcd (v3, reached through its JSON gateway over
 * libcurl) and a kvfsd on every node.  Each node puts one key,
 *
 *   /kvfs/<cluster name>/nodes/<node id>  ->  JSON (struct kv_node_info)
 *
 * under a lease it keeps alive; a node that dies disappears when its lease
 * expires (ttl_s).  Each node watches the prefix and keeps a snapshot of
 * the live nodes.  Block data never passes through etcd.
 *
 * Placement: rendezvous (highest random weight) hashing.  The weight of
 * node N for block (ns, hash) is the first 8 bytes of
 * SHA-256(node id || 0 || ns || 0 || hash), big-endian; a block's home set
 * is the R live nodes of highest weight (ties broken by id).  Every node
 * computes the same set from the same membership, and a change of
 * membership moves only the blocks whose home set gained or lost a node.
 *
 * Threads: kv_cluster_* calls are thread-safe; on_change runs on the
 * watcher thread.  Calls return 0 (or a count) or a negative errno.
 */
#ifndef KVFS_CLUSTER_H
#define KVFS_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "src/common/hash.h"
#include "src/common/node_id.h"

#define KV_CLUSTER_TTL_S 5u

struct kv_node_info {
	char id[KV_NODE_ID_MAX + 1]; /* [A-Za-z0-9._-], 1..63 chars */
	char addr[128];		     /* HOST:PORT of its transfer engine */
	char transports[32];	     /* "tcp" or "tcp,rdma" */
	uint64_t slot_size;
	uint32_t nslots;
	char rdma[256];	     /* RDMA endpoint (gid, qpn, rkey...), "" none */
	char conductor[128]; /* --conductor it reports to, "" none */
};

struct kv_cluster;

struct kv_cluster_config {
	const char *url; /* etcd://HOST:PORT[,HOST:PORT...]/NAME */
	struct kv_node_info self;
	uint32_t ttl_s; /* lease TTL; 0: KV_CLUSTER_TTL_S */
	/* membership changed (a node joined or left); may be NULL */
	void (*on_change)(void *arg);
	void *arg;
};

/* etcd://HOST:PORT[,HOST:PORT...]/NAME (at most 8 endpoints) ->
 * "http://HOST:PORT[,http://HOST:PORT...]" (KV_CLUSTER_EPS_MAX bytes
 * always fit) and NAME; -EINVAL */
#define KV_CLUSTER_EPS_MAX 2400
int kv_cluster_url_parse(const char *url, char *endpoint, size_t elen,
			 char *name, size_t nlen);

/*
 * Register self under a fresh lease and start keepalive and watch.
 * -ECONNREFUSED (or -ETIMEDOUT, -EHOSTUNREACH): etcd cannot be reached;
 * -EEXIST: a live node already has this id (also a node restarted
 * within ttl_s of its crash: its old lease has not expired yet);
 * -EINVAL: bad url or id.
 * Logs a one-line reason on failure.
 */
int kv_cluster_join(const struct kv_cluster_config *cfg,
		    struct kv_cluster **out);
/* revoke the lease (the node leaves at once) and stop the threads */
void kv_cluster_leave(struct kv_cluster *c);

/* snapshot of the live nodes, self included, sorted by id: *out is
 * malloc'd (free it); returns the count or a negative errno */
long kv_cluster_nodes(struct kv_cluster *c, struct kv_node_info **out);
/* incremented at each change of membership seen; 1 after join, whose
 * own first snapshot does not call on_change */
uint64_t kv_cluster_epoch(struct kv_cluster *c);
const char *kv_cluster_self(const struct kv_cluster *c);

/*
 * The cluster's namespaces: /kvfs/<name>/ns/<namespace> -> block_tokens
 * (decimal), followed by " open" for an open namespace (layout 1; store.h),
 * no lease: a namespace outlives the node that made it.  publish is
 * idempotent (an existing key keeps its value: -EEXIST when it differs);
 * find is -ENOENT for an unknown namespace (layout may be NULL).
 */
int kv_cluster_ns_publish(struct kv_cluster *c, const char *ns,
			  uint32_t block_tokens, unsigned layout);
int kv_cluster_ns_find(struct kv_cluster *c, const char *ns,
		       uint32_t *block_tokens, unsigned *layout);

/* HRW weight of node id for (ns, hash) */
uint64_t kv_hrw_weight(const char *id, const char *ns,
		       const uint8_t hash[KVFS_HASH_LEN]);
/*
 * The min(r, n) nodes of nodes[0..n-1] with the highest weight for (ns,
 * hash), best first: their indices go to out[].  Returns the count.
 */
size_t kv_hrw_pick(const struct kv_node_info *nodes, size_t n, const char *ns,
		   const uint8_t hash[KVFS_HASH_LEN], size_t r, size_t *out);

#endif /* KVFS_CLUSTER_H */
