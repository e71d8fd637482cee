/*
 * ctl_int.h - private to fuse/ctl*.c: the control server's state.
 *
 * Threading: one thread runs an epoll loop over the listening socket, an
 * eventfd (the stop signal) and every client, all non-blocking.  Every
 * command is one short store call (the store's own mutex bounds it, and a
 * lookup of CTLP_HASHES_MAX hashes takes well under a millisecond), so one
 * thread serves them all in turn; a thread per client would only queue on
 * the same store mutex.  What one thread must not do is wait on a client,
 * so sockets never block: a client that stops reading its responses
 * stalls only itself, since its next request is not read until its last
 * response is out (which also bounds each client's memory to one request
 * plus one response).
 *
 * The exception is a command that waits on the network ("prefetch"):
 * it runs on a thread of its own (struct ctl_job), and its connection
 * serves nothing more until the answer is queued, so its answers stay in
 * order while every other client goes on being served.
 *
 * Everything below is touched by the loop thread only, after start and
 * before stop, so it needs no lock, but for the job fields, which
 * job_mu guards.
 */
#ifndef KVFS_CTL_INT_H
#define KVFS_CTL_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fuse/ctl.h"
#include "src/common/ctlproto.h"
#include "src/common/hash.h"
#include "src/common/json.h"

#define CTL_MAX_CLIENTS 256 /* more are told -EMFILE and closed */
/* a full table closes the longest-idle connection that holds nothing
 * for a new one, if it has been idle this long: a client between its
 * connect and its first request is not idle, only slow */
#define CTL_EVICT_IDLE_MS 1000
#define CTL_BATCH 32 /* requests served per client per turn */
#define CTL_READ_CHUNK 65536
#define CTL_CONN_WRITERS_MAX 1024 /* zero-copy writers of one connection */
#define CTL_LEASES_PAGE 1000u	  /* leases per "lease list" page */
#define CTL_JOBS_MAX 4		  /* commands running off the loop at once */

/*
 * A mapped block (command "map"): the reference kv_store_get handed out,
 * dropped by "unmap" or when the connection closes.  While it is held the
 * slot is neither evicted nor reused, which is what makes the client's
 * pointer into its own mapping of the pool safe to read.
 */
struct ctl_map {
	uint64_t id;
	struct kv_ref ref;
	bool dead; /* unmapped: a hole until compacted */
};

/* a zero-copy writer (command "alloc"): sealed by "commit", freed by
 * "abort" or when the connection closes, so a dead writer leaves nothing */
struct ctl_writer {
	uint64_t id;
	uint32_t wh;
	uint32_t ns; /* what it writes, for the cluster's sake */
	uint8_t hash[KVFS_HASH_LEN];
};

/* a match lease as its connection remembers it */
struct ctl_lease {
	uint64_t id;
	uint64_t expires_ns; /* monotonic; past it the entry is dead */
};

struct ctl_conn {
	uint64_t id; /* never reused: a job finds its client by it */
	int fd;
	uid_t uid;	  /* the peer's, from SO_PEERCRED at accept */
	pid_t pid;	  /* 0 when the kernel could not say */
	uint64_t last_ns; /* monotonic: its last request (or its connect) */
	char *in;	  /* bytes read, not yet served */
	size_t in_len;
	size_t in_cap;
	char *out; /* response being sent */
	size_t out_len;
	size_t out_off;
	uint32_t events; /* what epoll waits for now */
	bool eof;	 /* the client shut its writing side */
	bool closing;	 /* close once out is sent */
	bool busy;	 /* a job of its is running: serve no more */
	/* match leases taken here, released on close.  An entry may outlive
	 * its lease (expired, or released by another client): ids are never
	 * reused by the store, so releasing it then is a harmless -ENOENT,
	 * and expired entries are pruned when the array is full */
	struct ctl_lease *leases;
	size_t nleases;
	size_t leases_cap;
	/* in id order (ids come from srv->next_ref, which only grows), so
	 * an unmap is a binary search; unmapped entries stay as holes
	 * until they are half of all, then are squeezed out */
	struct ctl_map *maps;
	size_t nmaps;	  /* entries, holes included */
	size_t maps_dead; /* holes */
	size_t maps_cap;
	struct ctl_writer *writers;
	size_t nwriters;
	size_t writers_cap;
	struct ctl_conn *prev, *next;
};

struct ctl_server {
	struct kv_store *st;
	char *path;
	dev_t dev; /* the socket file we bound: stop unlinks */
	ino_t ino; /* it only if the path still names it */
	char *info_json;
	int lfd;
	int efd; /* eventfd: ctl_server_stop wakes the loop */
	int epfd;
	bool accept_paused; /* out of fds: retry at resume_ns */
	uint64_t resume_ns;
	pthread_t thread;
	struct ctl_limits lim; /* set at start, never changed */
	struct ctl_conn *conns;
	unsigned nconns;
	uint64_t requests;
	/* kvfsd_cluster's, set once at any time (NULL: not in a cluster) */
	_Atomic(const struct ctl_cluster_ops *) cluster;
	uint64_t next_ref;  /* last map/writer id given; never reused */
	uint64_t next_conn; /* last connection id given */
	/* jobs: njobs running, done ones waiting for the loop to answer
	 * them (jfd wakes it); stopping tells the running ones to end */
	pthread_mutex_t job_mu;
	pthread_cond_t job_cv;
	unsigned njobs;
	struct ctl_job *done;
	int jfd;
	atomic_bool stopping;
};

/*
 * A command running off the loop thread: run(arg, stop, out) appends the
 * whole response line to out (ctl_cmd_error for a failure) and frees arg.
 * ctl_job_start starts one for connection c, which is then busy until
 * the answer is queued; -EAGAIN when CTL_JOBS_MAX run already, and then
 * nothing is started (arg is still the caller's).
 */
typedef void ctl_job_fn(void *arg, const atomic_bool *stop,
			struct kvfs_buf *out);
struct ctl_job {
	struct ctl_server *srv;
	uint64_t conn_id;
	ctl_job_fn *run;
	void *arg;
	struct kvfs_buf out;
	struct ctl_job *next;
};
int ctl_job_start(struct ctl_server *srv, struct ctl_conn *c, ctl_job_fn *run,
		  void *arg);

/* ctl_cmd.c: serve one request line (NUL-terminated, no "\n"; len bytes,
 * which may hold NULs) and append its response line to out */
void ctl_cmd_serve(struct ctl_server *srv, struct ctl_conn *c, char *line,
		   size_t len, struct kvfs_buf *out);
/* an error response line in out */
void ctl_cmd_error(struct kvfs_buf *out, int err, const char *msg);
/* ctl.c: the connection leases.  ctl_lease_room makes room for one more
 * in c (-EAGAIN when lim.conn_leases live ones are held, -ENOMEM), so
 * that ctl_lease_track, called after the pin, cannot fail. */
int ctl_lease_room(const struct ctl_server *srv, struct ctl_conn *c);
void ctl_lease_track(struct ctl_conn *c, uint64_t id, uint64_t expires_ns);
/* after unpin / renew by any client: update whichever connection holds
 * it, c first */
void ctl_lease_forget(struct ctl_server *srv, struct ctl_conn *c, uint64_t id);
void ctl_lease_renewed(struct ctl_server *srv, struct ctl_conn *c, uint64_t id,
		       uint64_t expires_ns);

/*
 * ctl.c: c's maps.  ctl_map_room makes room for n more (-EAGAIN when
 * that would hold more than lim.conn_maps, -ENOMEM), so that the
 * ctl_map_add calls after the store's gets cannot fail.
 * ctl_map_unmap puts the references of the n maps ids[] names, all or
 * none: -ENOENT, with *bad the index of the first id that is not a map
 * of c (or names one a second time), and nothing dropped.
 * ctl_map_drop_last takes back the last n ctl_map_add calls.
 */
int ctl_map_room(const struct ctl_server *srv, struct ctl_conn *c, size_t n);
void ctl_map_add(struct ctl_conn *c, uint64_t id, const struct kv_ref *ref);
int ctl_map_unmap(struct ctl_server *srv, struct ctl_conn *c,
		  const uint64_t *ids, size_t n, size_t *bad);
void ctl_map_drop_last(struct ctl_server *srv, struct ctl_conn *c, size_t n);
static inline size_t ctl_map_count(const struct ctl_conn *c)
{
	return c->nmaps - c->maps_dead;
}
/* grow c's writer array for one more; -EAGAIN past CTL_CONN_WRITERS_MAX,
 * -ENOMEM */
int ctl_writer_room(struct ctl_conn *c);
/* does c hold anything that its close would drop? */
bool ctl_conn_holds(const struct ctl_conn *c);

#endif /* KVFS_CTL_INT_H */
