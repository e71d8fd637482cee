/*
 * cluster.h - membership through etcd, and where blocks live (HRW).
 *
 * A cluster is an etcd (v3, reached through its JSON gateway over
 * libcurl, over TLS with etcds://, optionally as an etcd user) and a kvfsd
 * on every node.  Each node puts one key,
 *
 *   /kvfs/<cluster name>/nodes/<node id>  ->  JSON (struct kv_node_info)
 *
 * Every record kvfs writes to etcd (this one and the namespaces below)
 * ends in " mac=<64 hex>", an HMAC-SHA-256 under the cluster secret over
 * the key, the lease and the record (kvstore/cluster_int.h); a record
 * without it, or whose MAC is wrong, is ignored, logged (at most once per
 * 10 s per kind) and counted (kv_cluster_bad_records): whoever can write
 * etcd but lacks the secret cannot add a node or change a namespace.
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
#include "kvstore/etcd.h"

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

#define KV_CLUSTER_SECRET_MIN 16u

struct kv_cluster_config {
	const char *url; /* etcd[s]://HOST:PORT[,HOST:PORT...]/NAME */
	/* the cluster secret (KV_CLUSTER_SECRET_MIN bytes at least), the
	 * MAC key of the records; copied */
	const uint8_t *secret;
	size_t secret_len;
	struct kv_etcd_auth etcd;
	struct kv_node_info self;
	uint32_t ttl_s; /* lease TTL; 0: KV_CLUSTER_TTL_S */
	/* membership changed (a node joined or left); may be NULL */
	void (*on_change)(void *arg);
	void *arg;
};

/* etcd://HOST:PORT[,HOST:PORT...]/NAME (at most 8 endpoints) ->
 * "http://HOST:PORT[,http://HOST:PORT...]" (KV_CLUSTER_EPS_MAX bytes
 * always fit) and NAME; etcds://... (TLS) -> "https://..."; -EINVAL */
#define KV_CLUSTER_EPS_MAX ETCD_URLS_MAX
int kv_cluster_url_parse(const char *url, char *endpoint, size_t elen,
			 char *name, size_t nlen);

/*
 * Register self under a fresh lease and start keepalive and watch.
 * -ECONNREFUSED (or -ETIMEDOUT, -EHOSTUNREACH): etcd cannot be reached;
 * -EEXIST: a live node already has this id (also a node restarted
 * within ttl_s of its crash: its old lease has not expired yet);
 * -EACCES: etcd refused the user or password (or a TLS file cannot be
 * used: -EIO); -EPERM: the password file is readable by others;
 * -EINVAL: bad url, id, secret or auth options.
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
/* records in etcd ignored so far for a missing or wrong MAC (each time
 * one is seen: a forged node is counted at every resync) */
uint64_t kv_cluster_bad_records(struct kv_cluster *c);

/*
 * The cluster's namespaces: /kvfs/<name>/ns/<namespace> -> block_tokens
 * (decimal), followed by " open" for an open namespace (layout 1; store.h),
 * then the MAC, no lease: a namespace outlives the node that made it.
 * publish is idempotent (an existing key keeps its value: -EEXIST when it
 * differs; one whose MAC fails is replaced); find is -ENOENT for an
 * unknown namespace, or one whose record fails its MAC (layout may be
 * NULL).
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

/*
 * Records other nodes trust carry a MAC under the cluster secret
 * (kvstore/cluster_rec.c).  The value etcd holds is
 *
 *   BODY " mac=" HEX
 *
 * BODY the record (JSON of a node, "512 open" of a namespace), HEX the
 * 64 lowercase hex digits of
 *
 *   HMAC-SHA-256(secret, "kvfs-etcd-record-v1" 0x00 KEY 0x00 u64be(LEASE)
 *                        BODY)
 *
 * KEY the etcd key (no NUL in it), LEASE the lease the key is attached
 * to (0: none).  The key binds a value to its place (a node's record
 * copied under another id fails); the lease binds it to one life of the
 * node (a dead node's record written back under a fresh lease fails:
 * etcd does not attach a revoked or expired lease).
 */

/* the length of BODY in val when it ends in " mac=" HEX, else vlen: a
 * record as read by whoever has no secret to check it with */
size_t kv_cluster_rec_body(const char *val, size_t vlen);
/* BODY and its MAC: *out malloc'd, NUL-terminated; -ENOMEM */
int kv_cluster_rec_seal(const uint8_t *secret, size_t slen, const char *key,
			int64_t lease, const char *body, size_t blen,
			char **out, size_t *olen);
/*
 * 0 when val (vlen bytes) is BODY " mac=" HEX with the right MAC; *blen
 * is then BODY's length.  -ENOMSG: no " mac=" and 64 lowercase hex at its
 * end (an unsigned record, or one of an older kvfs); -EBADMSG: the MAC is
 * wrong (another secret, another key or lease, a changed body).  The MAC
 * is compared in constant time.
 */
int kv_cluster_rec_open(const uint8_t *secret, size_t slen, const char *key,
			int64_t lease, const char *val, size_t vlen,
			size_t *blen);

#endif /* KVFS_CLUSTER_H */
