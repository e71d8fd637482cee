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

#include <sys/types.h>

#include "store.h"

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
/* stop serving, close every client, unlink the socket.  NULL: no-op. */
void ctl_server_stop(struct ctl_server *srv);

#endif /* KVFS_CTL_H */
