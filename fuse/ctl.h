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
#include <sys/types.h>

#include "kvstore/store.h"

struct ctl_server;

/*
 * Bind path (an existing socket file there is replaced only when nobody
 * answers on it; -EADDRINUSE when a live daemon does), chmod it to mode,
 * and serve in the background.  info_json is a JSON object text describing
 * the daemon (mountpoint, pid, version) returned by the "status" request;
 * it is copied.
 */
int ctl_server_start(struct kv_store *st, const char *path, mode_t mode,
		     const char *info_json, struct ctl_server **out);
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
