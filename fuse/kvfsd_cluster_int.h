/*
 * kvfsd_cluster_int.h - private to fuse/kvfsd_cluster*.c.
 */
#ifndef KVFS_FUSE_CLUSTER_INT_H
#define KVFS_FUSE_CLUSTER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "fuse/kvfsd_cluster.h"
#include "kvstore/cluster.h"

struct job;
struct inflight;
struct cl_ev;
struct cl_ho;

struct kvfsd_cluster {
	struct kv_store *st;
	struct kv_xfer *xf;
	struct kv_cluster *cl;
	struct kvfs_fs *fs; /* under lock */
	char node_id[KV_NODE_ID_MAX + 1];
	unsigned replicas;
	unsigned repair_rate;

	pthread_mutex_t lock;
	pthread_cond_t work;	/* a job was queued, or stopping */
	pthread_cond_t idle;	/* a job finished */
	pthread_cond_t fetched; /* an inflight fetch finished */
	pthread_cond_t hk_wake; /* membership moved, or stopping */
	bool stopping;
	struct job *jobs, **jobs_tail;
	size_t njobs;
	unsigned busy;
	struct inflight *inflight;

	pthread_t repl[2];
	int nrepl;
	pthread_t hk;
	bool hk_running;
	uint64_t epoch_seen;	 /* housekeeping thread only */
	size_t ns_published;	 /* namespaces at the last publish */
	uint64_t ns_publish_due; /* monotonic ns of the next one anyway */
	atomic_bool ns_made;	 /* kvfsd_cluster_ns_made: publish now */
	atomic_uint_fast64_t pushed;
	atomic_uint_fast64_t gave_up; /* jobs that ran out of tries */

	struct cl_ev *ev; /* kvfsd_cluster_ev.c: the conductor stream */
	struct kv_elect_watch *lead; /* kvfsd_cluster_lead.c; NULL none */
	struct cl_ho *ho; /* kvfsd_handoff.c: its FETCH frames; NULL: none */
};

/* a snapshot of the store's namespaces */
struct ns_list_view {
	char (*name)[KVFS_NS_MAX + 1];
	uint32_t *id, *bt;
	size_t n, cap;
};
int cl_ns_list(struct kvfsd_cluster *c, struct ns_list_view *v);
void cl_ns_list_free(struct ns_list_view *v);

long cl_home(struct kvfsd_cluster *c, const char *ns,
	     const uint8_t hash[KVFS_HASH_LEN], struct kv_node_info **nodes,
	     size_t *home, size_t *nhome);

/* kvfsd_cluster_ev.c */
/* secret_file (NULL: none) makes the stream authenticated (event.h,
 * "Authentication") */
int cl_ev_start(struct kvfsd_cluster *c, const char *addr,
		const char *secret_file);
/* the cluster secret of --secret-file, malloc'd; logs why not */
int cl_read_secret(const char *path, uint8_t **out, size_t *len);
void cl_ev_stop(struct kvfsd_cluster *c);
/* the leader's events address (NULL or "": none) for the stream */
void cl_ev_target(struct kvfsd_cluster *c, const char *addr);
/* len bytes from fd: 0, -ECONNRESET at its end, or -errno.  With cancel
 * (kvfsd_handoff.c's reader): a receive timeout is no error, and cancel
 * set (looked at after every recv) ends it with -ECANCELED. */
int cl_recv_all(int fd, void *buf, size_t len, atomic_bool *cancel);

/* kvfsd_cluster_lead.c: --conductor etcd:NAME (the --cluster's etcd) or
 * etcd[s]://HOST:PORT[,...]/NAME follows the conductors' election
 * (kvstore/elect.h) and points the stream at the leader */
bool cl_lead_wanted(const char *conductor);
/* after cl_ev_start; 0 when not wanted */
int cl_lead_start(struct kvfsd_cluster *c,
		  const struct kvfsd_cluster_config *cfg);
void cl_lead_stop(struct kvfsd_cluster *c);

/* kvfsd_handoff.c: the queue and workers that pull what FETCH frames
 * name (c->ho); a stream opens with a RESET in "-fetch" only when they
 * run.  attach starts reading FETCH frames on a new connection (key: the
 * handshake's receiving key, NULL on a plain stream), detach stops that
 * before the connection closes; the event thread calls both. */
int cl_ho_start(struct kvfsd_cluster *c);
void cl_ho_stop(struct kvfsd_cluster *c);
int cl_ho_attach(struct kvfsd_cluster *c, int fd, uint16_t node,
		 const uint8_t *key);
void cl_ho_detach(struct kvfsd_cluster *c);
/* the reader saw the connection end or break: reconnect */
bool cl_ho_broken(struct kvfsd_cluster *c);

#endif /* KVFS_FUSE_CLUSTER_INT_H */
