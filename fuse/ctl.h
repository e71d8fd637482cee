/*
 * ctl.h - kvfsd's control socket: the server side.
 *
 * A unix stream socket beside the mount (kvfsd(8) says where) serves kvctl
 * and libkvfs.  The protocol is in src/ctlproto.h.  The server runs its own
 * thread(s) and talks only to the store, never to the FUSE session, so a
 * wedged mount cannot wedge the control path.
 */
#ifndef KVFS_CTL_H
#define KVFS_CTL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kvstore/store.h"

struct ctl_server;

/*
 * What one client may hold, and for how long it may sit idle: kvfsd's
 * -o ctl_* options (kvfsd(8) justifies each default).  A "client" is one
 * connection; the uid caps add up every connection of one peer uid
 * (SO_PEERCRED), so that opening more connections gains nothing.  A
 * value of 0 means no limit.
 *
 *   idle_s       a connection that has sent nothing for this long and
 *                holds nothing (no lease, map, writer or running job) is
 *                closed.  One that holds something is kept, since its
 *                close would drop what it holds (libkvfs does not
 *                reconnect); the caps below bound those instead.
 *   uid_clients  connections one uid may have open (-EMFILE past it)
 *   conn_leases  live match leases of one connection (-EAGAIN)
 *   uid_leases   live leases, match and pin, of one uid (-EAGAIN)
 *   conn_maps    blocks one connection maps at once (-EAGAIN)
 *   lease_max_ms the longest lease or renewal: a longer one is granted
 *                for lease_max_ms, and the answer says so
 *
 * Whatever the caps, a full table (CTL_MAX_CLIENTS) does not turn a new
 * client away while some connection holds nothing and has been idle for
 * CTL_EVICT_IDLE_MS (ctl_int.h): the one idle longest is closed to make
 * room.
 */
struct ctl_limits {
	unsigned idle_s;
	unsigned uid_clients;
	unsigned conn_leases;
	unsigned uid_leases;
	unsigned conn_maps;
	uint32_t lease_max_ms;
};
#define CTL_IDLE_S_DEFAULT 60u
#define CTL_UID_CLIENTS_DEFAULT 128u /* half of CTL_MAX_CLIENTS */
#define CTL_CONN_LEASES_DEFAULT 4096u
#define CTL_UID_LEASES_DEFAULT 32768u /* half of what the store holds */
#define CTL_CONN_MAPS_DEFAULT 65536u
#define CTL_LEASE_MAX_MS_DEFAULT 3600000u /* 1 h */
void ctl_limits_default(struct ctl_limits *lim);

/*
 * Bind path (an existing socket file there is replaced only when nobody
 * answers on it; -EADDRINUSE when a live daemon does), chmod it to mode,
 * and serve in the background.  info_json is a JSON object text describing
 * the daemon (mountpoint, pid, version) returned by the "status" request;
 * it is copied.
 */
int ctl_server_start(struct kv_store *st, const char *path, mode_t mode,
		     const char *info_json, struct ctl_server **out);
/* the same with limits (copied); NULL: ctl_limits_default's */
int ctl_server_start_limits(struct kv_store *st, const char *path, mode_t mode,
			    const char *info_json, const struct ctl_limits *lim,
			    struct ctl_server **out);
/*
 * What the control socket asks of a cluster (kvfsd_cluster.h), as
 * function pointers so that the server builds without it: "nodes",
 * "prefetch", and the replication of blocks committed through "commit".
 * ops must outlive the server; until it is set, those commands are
 * -ENOTSUP and commits replicate nothing.  prefetch waits on the network,
 * so it runs on a thread of its own (ctl_int.h), and gives up on the
 * blocks left (-ECANCELED each) once *stop is set: the server stops.
 */
struct kvfs_buf;
struct ctl_cluster_ops {
	void *arg;
	void (*sealed)(void *arg, const char *ns, const uint8_t *hash);
	void (*ns_made)(void *arg); /* "ns create" made one */
	int (*nodes)(void *arg, struct kvfs_buf *out);
	long (*prefetch)(void *arg, const char *node, const char *ns,
			 const uint8_t (*hashes)[32], size_t n, int *res,
			 const atomic_bool *stop);
};
void ctl_server_set_cluster(struct ctl_server *srv,
			    const struct ctl_cluster_ops *ops);

/* stop serving, close every client, unlink the socket.  NULL: no-op. */
void ctl_server_stop(struct ctl_server *srv);

#endif /* KVFS_CTL_H */
