/*
 * net.h - TCP addresses and bounded connects, shared by the transfer
 * engine (kvstore/xfer.c) and the conductor event stream
 * (fuse/kvfsd_cluster_ev.c).
 *
 * Deadlines are CLOCK_MONOTONIC milliseconds (kvfs_net_now_ms()).  A
 * wait may also be cut short by cancel(arg), asked every
 * KVFS_NET_TICK_MS, so that a thread being stopped is not held for a
 * whole timeout by a peer that never answers.
 */
#ifndef KVFS_NET_H
#define KVFS_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct addrinfo;

#define KVFS_NET_TICK_MS 50

uint64_t kvfs_net_now_ms(void);

/* "HOST:PORT" or "[V6]:PORT" into host (hlen) and port (plen, decimal
 * digits only); -EINVAL for anything else or what does not fit */
int kvfs_split_hostport(const char *s, char *host, size_t hlen, char *port,
			size_t plen);

/* poll fd for events until deadline_ms: 0 when ready, -ETIMEDOUT,
 * -ECANCELED when cancel (may be NULL) said so, or poll's -errno */
int kvfs_poll_until(int fd, short events, uint64_t deadline_ms,
		    bool (*cancel)(void *arg), void *arg);

/*
 * Connect to the first address of res (getaddrinfo's list, stream
 * sockets) that takes it, each with a non-blocking connect bounded by
 * deadline_ms.  Returns a blocking, close-on-exec socket, or a negative
 * errno: the last address's, -ETIMEDOUT or -ECANCELED (which end the
 * walk at once), -EHOSTUNREACH for an empty list.
 */
int kvfs_tcp_connect(const struct addrinfo *res, uint64_t deadline_ms,
		     bool (*cancel)(void *arg), void *arg);

#endif /* KVFS_NET_H */
