/*
 * kvfsd_cluster.c - kvfsd in a cluster: remote reads, replication, fsync,
 * repair, namespaces and prefetch (kvfsd_cluster.h says what each does).
 *
 * Threads: NREPL replication workers take sealed blocks off a queue and
 * push them to their home sets; one housekeeping thread publishes
 * namespaces and, when the membership epoch moves, walks the local blocks
 * to repair home sets (rate-limited); the conductor stream has its own
 * thread (kvfsd_cluster_ev.c).  Remote reads and fsync run on the FUSE thread
 * that asked, bounded by the transfer engine's timeouts.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "src/common/clock.h"
#include "fuse/kvfsd_cluster.h"
#include "fuse/kvfsd_cluster_int.h"
#include "fuse/fs.h"
#include "src/common/log.h"
#include "src/common/privfile.h"

#define NREPL 2
#define REPL_TRIES 5
#define SECRET_MAX 4096

/* ---- the secret ---------------------------------------------------- */

int cl_read_secret(const char *path, uint8_t **out, size_t *len)
{
	const char *why;
	char *buf;
	mode_t perm;
	ssize_t n = kvfs_privfile_read(path, SECRET_MAX, &buf, &perm, &why);

	if (n < 0 && n != -EFBIG) {
		kvfs_err("--secret-file %s: %s", path, why);
		return (int)n;
	}
	if (n < KV_XFER_SECRET_MIN) {
		kvfs_err("--secret-file %s: the secret must be %u to %u bytes",
			 path, KV_XFER_SECRET_MIN, SECRET_MAX);
		kvfs_privfile_free(buf, n > 0 ? (size_t)n : 0);
		return -EINVAL;
	}
	if (perm & 077)
		kvfs_warn("--secret-file %s is readable by others (mode %04o)",
			  path, (unsigned)perm);
	*out = (uint8_t *)buf;
	*len = (size_t)n;
	return 0;
}

/* ---- membership helpers -------------------------------------------- */

/* live nodes and, in home[0..*nhome-1], the home set of (ns, hash) */
long cl_home(struct kvfsd_cluster *c, const char *ns,
	     const uint8_t hash[KVFS_HASH_LEN], struct kv_node_info **nodes,
	     size_t *home, size_t *nhome)
{
	long n = kv_cluster_nodes(c->cl, nodes);

	if (n < 0)
		return n;
	*nhome = kv_hrw_pick(*nodes, (size_t)n, ns, hash, c->replicas, home);
	return n;
}

static bool is_self(const struct kvfsd_cluster *c, const struct kv_node_info *n)
{
	return strcmp(n->id, c->node_id) == 0;
}

/* how the transfer engine reaches node n: by its id at its address, so
 * that the handshake fails unless n itself answers (auth.h) */
struct peer {
	char s[KV_NODE_ID_MAX + 1 + 128 + 1];
};

static const char *peer_of(const struct kv_node_info *n, struct peer *p)
{
	snprintf(p->s, sizeof(p->s), "%s@%s", n->id, n->addr);
	return p->s;
}

/* ---- remote reads -------------------------------------------------- */

struct inflight {
	char ns[KVFS_NS_MAX + 1];
	uint8_t hash[KVFS_HASH_LEN];
	bool done;
	int rc;
	unsigned waiters;
	struct inflight *next;
};

static int fetch_from_cluster(struct kvfsd_cluster *c, const char *ns,
			      const uint8_t hash[KVFS_HASH_LEN])
{
	struct kv_node_info *nodes = NULL;
	size_t home[64], nhome = 0;
	bool tried[256] = { false };
	struct peer p;
	long n = cl_home(c, ns, hash, &nodes, home, &nhome);
	int rc = -ENOENT, last = -ENOENT;

	if (n < 0)
		return (int)n;
	if (n > 256)
		n = 256;
	/* the home set first, best first; then everyone else */
	for (size_t pass = 0; pass < 2 && rc != 0; pass++) {
		size_t cnt = pass == 0 ? nhome : (size_t)n;

		for (size_t k = 0; k < cnt && rc != 0; k++) {
			size_t i = pass == 0 ? home[k] : k;

			if (tried[i] || is_self(c, &nodes[i]))
				continue;
			tried[i] = true;
			rc = kv_xfer_fetch(c->xf, peer_of(&nodes[i], &p), ns,
					   hash);
			if (rc == 0) {
				kvfs_debug("fetched %s block from node %s", ns,
					   nodes[i].id);
			} else if (rc != -ENOENT) {
				kvfs_warn("fetch from node %s (%s): %s",
					  nodes[i].id, nodes[i].addr,
					  rc == -EACCES
						  ? "authentication refused"
						  : strerror(-rc));
				last = rc;
			}
		}
	}
	free(nodes);
	/* nobody had it: ENOENT; everyone failed some other way: that */
	return rc == 0 ? 0 : last;
}

int kvfsd_cluster_fetch(struct kvfsd_cluster *c, const char *ns,
			const uint8_t hash[KVFS_HASH_LEN])
{
	struct inflight *f, **pp;
	int rc;

	/* one fetch per block: concurrent lookups of it wait for it */
	pthread_mutex_lock(&c->lock);
	for (f = c->inflight; f; f = f->next)
		if (!memcmp(f->hash, hash, KVFS_HASH_LEN) && !strcmp(f->ns, ns))
			break;
	if (f) {
		f->waiters++;
		while (!f->done)
			pthread_cond_wait(&c->fetched, &c->lock);
		rc = f->rc;
		if (--f->waiters == 0)
			free(f);
		pthread_mutex_unlock(&c->lock);
		return rc;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		pthread_mutex_unlock(&c->lock);
		return -ENOMEM;
	}
	strcpy(f->ns, ns);
	memcpy(f->hash, hash, KVFS_HASH_LEN);
	f->waiters = 1;
	f->next = c->inflight;
	c->inflight = f;
	pthread_mutex_unlock(&c->lock);

	rc = fetch_from_cluster(c, ns, hash);

	pthread_mutex_lock(&c->lock);
	for (pp = &c->inflight; *pp != f; pp = &(*pp)->next)
		;
	*pp = f->next;
	f->done = true;
	f->rc = rc;
	if (--f->waiters == 0)
		free(f);
	pthread_cond_broadcast(&c->fetched);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* ---- replication --------------------------------------------------- */

struct job {
	char ns[KVFS_NS_MAX + 1];
	uint8_t hash[KVFS_HASH_LEN];
	unsigned tries;
	uint64_t not_before; /* monotonic ns */
	struct job *next;
};

/*
 * Push (ns, hash) to every member of its home set (nodes[home[0..nhome-1]])
 * but us.  Returns how many members hold it afterwards, us included (of
 * c->replicas wanted), or -ENOENT when it left this node meanwhile.
 */
static int push_home(struct kvfsd_cluster *c, const char *ns,
		     const uint8_t hash[KVFS_HASH_LEN],
		     const struct kv_node_info *nodes, const size_t *home,
		     size_t nhome, bool check_first)
{
	struct peer p;
	int have = 0;

	for (size_t k = 0; k < nhome; k++) {
		const struct kv_node_info *m = &nodes[home[k]];
		int rc;

		if (is_self(c, m)) {
			have++;
			continue;
		}
		rc = check_first ? kv_xfer_has(c->xf, peer_of(m, &p), ns, hash)
				 : 0;
		if (rc == 1) {
			have++;
			continue;
		}
		rc = kv_xfer_push(c->xf, peer_of(m, &p), ns, hash);
		if (rc == 0) {
			have++;
			atomic_fetch_add(&c->pushed, 1);
		} else if (rc == -ENOENT) {
			/* evicted here before it could go: nothing to do */
			return -ENOENT;
		} else if (rc == -EACCES) {
			kvfs_warn("replicate to node %s (%s): authentication "
				  "refused (is its --secret-file ours?)",
				  m->id, m->addr);
		} else {
			kvfs_warn("replicate to node %s (%s): %s", m->id,
				  m->addr, strerror(-rc));
		}
	}
	return have;
}

/* push_home on the home set of the membership now */
static int replicate(struct kvfsd_cluster *c, const char *ns,
		     const uint8_t hash[KVFS_HASH_LEN], bool check_first)
{
	struct kv_node_info *nodes = NULL;
	size_t home[64], nhome = 0;
	long n = cl_home(c, ns, hash, &nodes, home, &nhome);
	int have;

	if (n < 0)
		return (int)n;
	have = push_home(c, ns, hash, nodes, home, nhome, check_first);
	free(nodes);
	return have;
}

void kvfsd_cluster_sealed(struct kvfsd_cluster *c, const char *ns,
			  const uint8_t hash[KVFS_HASH_LEN])
{
	struct job *j;

	if (!c)
		return;
	j = calloc(1, sizeof(*j));
	if (!j) {
		kvfs_warn("replication of a %s block dropped: out of memory",
			  ns);
		return;
	}
	snprintf(j->ns, sizeof(j->ns), "%s", ns);
	memcpy(j->hash, hash, KVFS_HASH_LEN);
	pthread_mutex_lock(&c->lock);
	*c->jobs_tail = j;
	c->jobs_tail = &j->next;
	c->njobs++;
	pthread_cond_signal(&c->work);
	pthread_mutex_unlock(&c->lock);
}

static struct job *take_job(struct kvfsd_cluster *c)
{
	struct job *j;

	pthread_mutex_lock(&c->lock);
	while (!c->stopping && !c->jobs)
		pthread_cond_wait(&c->work, &c->lock);
	j = c->jobs;
	if (j) {
		c->jobs = j->next;
		if (!c->jobs)
			c->jobs_tail = &c->jobs;
		c->njobs--;
		c->busy++;
	}
	pthread_mutex_unlock(&c->lock);
	return j;
}

static void *repl_main(void *arg)
{
	struct kvfsd_cluster *c = arg;
	struct job *j;

	while ((j = take_job(c))) {
		int have;
		uint64_t now = kvfs_mono_ns();

		if (j->not_before > now) {
			struct timespec ts = {
				.tv_sec = (time_t)((j->not_before - now) /
						   1000000000u),
				.tv_nsec = (long)((j->not_before - now) %
						  1000000000u),
			};
			nanosleep(&ts, NULL);
		}
		have = c->stopping ? -ECANCELED
				   : replicate(c, j->ns, j->hash, false);
		pthread_mutex_lock(&c->lock);
		c->busy--;
		if (have >= 0 && (unsigned)have < c->replicas &&
		    ++j->tries < REPL_TRIES && !c->stopping) {
			/* a member was unreachable: again, later */
			j->not_before = kvfs_mono_ns() +
					(uint64_t)j->tries * 500000000u;
			j->next = NULL;
			*c->jobs_tail = j;
			c->jobs_tail = &j->next;
			c->njobs++;
			j = NULL;
		} else if (have >= 0 && (unsigned)have < c->replicas &&
			   !c->stopping) {
			atomic_fetch_add(&c->gave_up, 1);
		}
		pthread_cond_broadcast(&c->idle);
		pthread_mutex_unlock(&c->lock);
		free(j);
	}
	return NULL;
}

int kvfsd_cluster_sync(struct kvfsd_cluster *c, const char *ns,
		       const uint8_t hash[KVFS_HASH_LEN])
{
	int have = replicate(c, ns, hash, true);

	if (have < 0)
		return have;
	if ((unsigned)have < c->replicas) {
		kvfs_warn("fsync of a %s block: %d of %u replicas", ns, have,
			  c->replicas);
		return -EIO;
	}
	return 0;
}

/* ---- namespaces ---------------------------------------------------- */

int kvfsd_cluster_ns_import(struct kvfsd_cluster *c, const char *ns)
{
	unsigned layout;
	uint32_t bt, id;
	int rc = kv_cluster_ns_find(c->cl, ns, &bt, &layout);

	if (rc < 0)
		return rc;
	rc = kv_store_ns_create_layout(c->st, ns, bt, layout, &id);
	return rc == -EEXIST ? 0 : rc;
}

static int ns_collect(const char *name, uint32_t id, uint32_t block_tokens,
		      const struct kv_stats *s, void *arg)
{
	struct ns_list_view *l = arg;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		void *a = realloc(l->name, cap * sizeof(*l->name));

		if (!a)
			return -ENOMEM;
		l->name = a;
		a = realloc(l->id, cap * sizeof(*l->id));
		if (!a)
			return -ENOMEM;
		l->id = a;
		a = realloc(l->bt, cap * sizeof(*l->bt));
		if (!a)
			return -ENOMEM;
		l->bt = a;
		l->cap = cap;
	}
	snprintf(l->name[l->n], sizeof(l->name[0]), "%s", name);
	l->id[l->n] = id;
	l->bt[l->n] = block_tokens;
	l->n++;
	return 0;
}

void cl_ns_list_free(struct ns_list_view *v)
{
	free(v->name);
	free(v->id);
	free(v->bt);
	memset(v, 0, sizeof(*v));
}

int cl_ns_list(struct kvfsd_cluster *c, struct ns_list_view *v)
{
	int rc;

	memset(v, 0, sizeof(*v));
	rc = kv_store_ns_foreach(c->st, ns_collect, v);
	if (rc < 0)
		cl_ns_list_free(v);
	return rc;
}

/* when one was made here, when the local set changed, and every 30 s in
 * case etcd lost them */
static void publish_namespaces(struct kvfsd_cluster *c)
{
	bool made = atomic_exchange(&c->ns_made, false);
	struct ns_list_view v;
	uint64_t now = kvfs_mono_ns();

	if (cl_ns_list(c, &v) < 0)
		return;
	if (!made && v.n == c->ns_published && now < c->ns_publish_due) {
		cl_ns_list_free(&v);
		return;
	}
	c->ns_publish_due = now + 30 * 1000000000ull;
	for (size_t i = 0; i < v.n; i++) {
		int layout = kv_store_ns_layout(c->st, v.id[i]);
		int rc = kv_cluster_ns_publish(c->cl, v.name[i], v.bt[i],
					       layout > 0 ? (unsigned)layout
							  : 0);

		if (rc == -EEXIST)
			kvfs_warn("namespace %s: the cluster knows it with "
				  "other block_tokens than our %u",
				  v.name[i], v.bt[i]);
	}
	c->ns_published = v.n;
	cl_ns_list_free(&v);
}

/* ---- repair -------------------------------------------------------- */

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000,
			       .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* does some member of the home set hold the block?  A member that does
 * not answer counts as holding it: it is likely gone, and the next
 * membership change repairs again */
static bool home_holds(struct kvfsd_cluster *c, const char *ns,
		       const uint8_t hash[KVFS_HASH_LEN],
		       const struct kv_node_info *nodes, const size_t *home,
		       size_t nhome)
{
	struct peer p;

	for (size_t k = 0; k < nhome; k++)
		if (kv_xfer_has(c->xf, peer_of(&nodes[home[k]], &p), ns,
				hash) != 0)
			return true;
	return false;
}

/*
 * Walk every local block.  For those we are home for, make sure the other
 * home members hold them.  For the others (copies fetched by reads),
 * ask the home set: when none of it holds the block any more (all its
 * members went at once), we push it there, so a cached copy outliving
 * every home member is not the last one left.
 */
static void repair(struct kvfsd_cluster *c)
{
	struct ns_list_view v;
	uint64_t checked = 0, start = kvfs_mono_ns();
	unsigned gap_ms = c->repair_rate ? 1000 / c->repair_rate : 0;
	uint64_t pushed0 = atomic_load(&c->pushed);

	if (cl_ns_list(c, &v) < 0)
		return;
	for (size_t i = 0; i < v.n && !c->stopping; i++) {
		uint64_t cursor = 0;
		uint8_t h[KVFS_HASH_LEN];
		struct kv_block_info bi;

		while (!c->stopping &&
		       kv_store_ns_next(c->st, v.id[i], &cursor, h, &bi) == 1) {
			struct kv_node_info *nodes = NULL;
			size_t home[64], nhome = 0;
			bool mine = false;
			long n = cl_home(c, v.name[i], h, &nodes, home, &nhome);

			for (size_t k = 0; n > 0 && k < nhome; k++)
				mine |= is_self(c, &nodes[home[k]]);
			if (mine)
				push_home(c, v.name[i], h, nodes, home, nhome,
					  true);
			else if (n > 0 && nhome &&
				 !home_holds(c, v.name[i], h, nodes, home,
					     nhome))
				push_home(c, v.name[i], h, nodes, home, nhome,
					  false);
			free(nodes);
			checked++;
			if (n <= 0 || !nhome)
				continue;
			if (gap_ms)
				sleep_ms(gap_ms);
			if (c->epoch_seen != kv_cluster_epoch(c->cl))
				break; /* it moved again: start over */
		}
	}
	cl_ns_list_free(&v);
	kvfs_info("repair: %llu blocks checked, %llu pushed, in %.1f s",
		  (unsigned long long)checked,
		  (unsigned long long)(atomic_load(&c->pushed) - pushed0),
		  (double)(kvfs_mono_ns() - start) / 1e9);
}

/* wake the housekeeping thread (a membership change, or ns_made) */
static void on_change(void *arg)
{
	struct kvfsd_cluster *c = arg;

	pthread_mutex_lock(&c->lock);
	pthread_cond_broadcast(&c->hk_wake);
	pthread_mutex_unlock(&c->lock);
}

void kvfsd_cluster_ns_made(struct kvfsd_cluster *c)
{
	if (!c)
		return;
	atomic_store(&c->ns_made, true);
	on_change(c);
}

static void *housekeeping_main(void *arg)
{
	struct kvfsd_cluster *c = arg;

	pthread_mutex_lock(&c->lock);
	while (!c->stopping) {
		uint64_t epoch = kv_cluster_epoch(c->cl);
		bool moved = epoch != c->epoch_seen;
		struct timespec ts;

		pthread_mutex_unlock(&c->lock);
		publish_namespaces(c);
		if (moved) {
			/* let a burst of changes settle first */
			sleep_ms(500);
			c->epoch_seen = kv_cluster_epoch(c->cl);
			if (!c->stopping)
				repair(c);
		}
		pthread_mutex_lock(&c->lock);
		if (c->stopping || kv_cluster_epoch(c->cl) != c->epoch_seen)
			continue;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&c->hk_wake, &c->lock, &ts);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* ---- blocks that arrive from peers --------------------------------- */

static void on_insert(void *arg, const char *ns,
		      const uint8_t hash[KVFS_HASH_LEN])
{
	struct kvfsd_cluster *c = arg;

	pthread_mutex_lock(&c->lock);
	if (c->fs)
		kvfs_fs_block_arrived(c->fs, ns, hash);
	pthread_mutex_unlock(&c->lock);
}

void kvfsd_cluster_set_fs(struct kvfsd_cluster *c, struct kvfs_fs *fs)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->fs = fs;
	pthread_mutex_unlock(&c->lock);
}

/* ---- control socket ------------------------------------------------ */

int kvfsd_cluster_nodes_json(struct kvfsd_cluster *c, struct kvfs_buf *out)
{
	struct kv_node_info *nodes = NULL;
	long n = kv_cluster_nodes(c->cl, &nodes);

	if (n < 0)
		return (int)n;
	kvfs_buf_printf(out, ",\"self\":");
	kvfs_buf_json_str(out, c->node_id, strlen(c->node_id));
	kvfs_buf_printf(out,
			",\"replicas\":%u,\"transport\":\"%s\","
			"\"epoch\":%llu,\"queued\":%zu,\"bad_records\":%llu,"
			"\"nodes\":[",
			c->replicas, kv_xfer_transport(c->xf),
			(unsigned long long)kv_cluster_epoch(c->cl), c->njobs,
			(unsigned long long)kv_cluster_bad_records(c->cl));
	for (long i = 0; i < n; i++) {
		kvfs_buf_puts(out, i ? ",{\"id\":" : "{\"id\":");
		kvfs_buf_json_str(out, nodes[i].id, strlen(nodes[i].id));
		kvfs_buf_puts(out, ",\"addr\":");
		kvfs_buf_json_str(out, nodes[i].addr, strlen(nodes[i].addr));
		kvfs_buf_puts(out, ",\"transports\":");
		kvfs_buf_json_str(out, nodes[i].transports,
				  strlen(nodes[i].transports));
		kvfs_buf_printf(out, ",\"slot_size\":%llu,\"slots\":%u}",
				(unsigned long long)nodes[i].slot_size,
				nodes[i].nslots);
	}
	kvfs_buf_puts(out, "]");
	free(nodes);
	return 0;
}

void kvfsd_cluster_repl_stats(struct kvfsd_cluster *c,
			      struct kvfsd_repl_stats *out)
{
	struct kv_node_info *nodes = NULL;
	long n;

	memset(out, 0, sizeof(*out));
	out->replicas = 1;
	out->live_nodes = 1;
	if (!c)
		return;
	n = kv_cluster_nodes(c->cl, &nodes);
	free(nodes);
	out->replicas = c->replicas;
	out->live_nodes = n > 0 ? (unsigned)n : 0;
	pthread_mutex_lock(&c->lock);
	out->queued = c->njobs;
	out->busy = c->busy;
	pthread_mutex_unlock(&c->lock);
	out->pushed = atomic_load(&c->pushed);
	out->gave_up = atomic_load(&c->gave_up);
}

static void view_node(struct kvfs_buf *out, const struct kv_node_info *n,
		      bool self, const char *self_fields)
{
	kvfs_buf_puts(out, "{\"id\":");
	kvfs_buf_json_str(out, n->id, strlen(n->id));
	kvfs_buf_printf(out, ",\"self\":%s,\"state\":\"up\",\"addr\":",
			self ? "true" : "false");
	kvfs_buf_json_str(out, n->addr, strlen(n->addr));
	kvfs_buf_puts(out, ",\"transports\":");
	kvfs_buf_json_str(out, n->transports, strlen(n->transports));
	/* this node's own pool figures come with self_fields */
	if (self)
		kvfs_buf_puts(out, self_fields);
	else
		kvfs_buf_printf(out, ",\"slot_size\":%llu,\"slots\":%u",
				(unsigned long long)n->slot_size, n->nslots);
	kvfs_buf_puts(out, "}");
}

int kvfsd_cluster_view_json(struct kvfsd_cluster *c, struct kvfs_buf *out,
			    const char *self_fields)
{
	struct kv_node_info *nodes = NULL, me = { 0 };
	long n = kv_cluster_nodes(c->cl, &nodes);
	bool listed = false;

	if (n < 0)
		return (int)n;
	for (long i = 0; i < n; i++)
		if (!strcmp(nodes[i].id, c->node_id)) {
			me = nodes[i];
			listed = true;
		}
	/* not in the view yet (joining): itself all the same */
	if (!listed)
		snprintf(me.id, sizeof(me.id), "%s", c->node_id);
	kvfs_buf_puts(out, "\"nodes\":[");
	view_node(out, &me, true, self_fields);
	for (long i = 0; i < n; i++) {
		if (!strcmp(nodes[i].id, c->node_id))
			continue;
		kvfs_buf_puts(out, ",");
		view_node(out, &nodes[i], false, NULL);
	}
	kvfs_buf_printf(out,
			"],\"replicas\":%u,\"transport\":\"%s\","
			"\"epoch\":%llu",
			c->replicas, kv_xfer_transport(c->xf),
			(unsigned long long)kv_cluster_epoch(c->cl));
	free(nodes);
	return out->err;
}

long kvfsd_cluster_prefetch(struct kvfsd_cluster *c, const char *node,
			    const char *ns,
			    const uint8_t (*hashes)[KVFS_HASH_LEN], size_t n,
			    int *res, const atomic_bool *stop)
{
	struct kv_node_info *nodes = NULL, *to = NULL;
	long nn = 0, ok = 0;
	uint32_t id;

	if (node && strcmp(node, c->node_id) != 0) {
		nn = kv_cluster_nodes(c->cl, &nodes);
		if (nn < 0)
			return nn;
		for (long i = 0; i < nn; i++)
			if (!strcmp(nodes[i].id, node))
				to = &nodes[i];
		if (!to) {
			free(nodes);
			return -ENXIO;
		}
	}
	for (size_t i = 0; i < n; i++) {
		struct peer p;
		int rc = 0;

		if (stop && atomic_load(stop)) {
			res[i] = -ECANCELED;
			continue;
		}
		if (kv_store_ns_find(c->st, ns, &id, NULL) < 0)
			rc = kvfsd_cluster_ns_import(c, ns);
		if (rc == 0 && (kv_store_ns_find(c->st, ns, &id, NULL) < 0 ||
				kv_store_lookup(c->st, id, hashes[i]) != 1))
			rc = kvfsd_cluster_fetch(c, ns, hashes[i]);
		if (rc == 0 && to)
			rc = kv_xfer_push(c->xf, peer_of(to, &p), ns,
					  hashes[i]);
		res[i] = rc;
		ok += rc == 0;
	}
	free(nodes);
	return ok;
}

/* ---- start and stop ------------------------------------------------ */

static int join(struct kvfsd_cluster *c, const struct kvfsd_cluster_config *cfg)
{
	struct kv_cluster_config cc = {
		.url = cfg->url,
		.etcd = cfg->etcd,
		.on_change = on_change,
		.arg = c,
	};
	const char *host_end = strrchr(cfg->listen, ':');
	uint8_t *secret = NULL;
	size_t secret_len = 0;
	int rc;

	snprintf(cc.self.id, sizeof(cc.self.id), "%s", cfg->node_id);
	/* the port the engine bound, which may have been 0 */
	snprintf(cc.self.addr, sizeof(cc.self.addr), "%.*s:%d",
		 (int)(host_end - cfg->listen), cfg->listen,
		 kv_xfer_port(c->xf));
	snprintf(cc.self.transports, sizeof(cc.self.transports), "%s",
		 kv_xfer_transport(c->xf));
	cc.self.slot_size = kv_store_slot_size(cfg->store);
	{
		struct kv_store_stats s;

		kv_store_stats(cfg->store, &s);
		cc.self.nslots = (uint32_t)s.slots_total;
	}
	if (cfg->conductor)
		snprintf(cc.self.conductor, sizeof(cc.self.conductor), "%s",
			 cfg->conductor);
	/* the records in etcd carry a MAC under the same secret */
	rc = cl_read_secret(cfg->secret_file, &secret, &secret_len);
	if (rc < 0)
		return rc;
	cc.secret = secret;
	cc.secret_len = secret_len;
	rc = kv_cluster_join(&cc, &c->cl);
	explicit_bzero(secret, secret_len);
	free(secret);
	return rc;
}

/* what kvfsd_cluster_stop undoes, however far a start got */
static struct kvfsd_cluster *cl_new(const struct kvfsd_cluster_config *cfg)
{
	struct kvfsd_cluster *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->work, NULL);
	pthread_cond_init(&c->idle, NULL);
	pthread_cond_init(&c->fetched, NULL);
	pthread_cond_init(&c->hk_wake, NULL);
	c->jobs_tail = &c->jobs;
	c->st = cfg->store;
	c->replicas = cfg->replicas ? cfg->replicas : KVFSD_REPLICAS;
	c->repair_rate = cfg->repair_rate;
	snprintf(c->node_id, sizeof(c->node_id), "%s", cfg->node_id);
	return c;
}

int kvfsd_events_start(const struct kvfsd_cluster_config *cfg,
		       struct kvfsd_cluster **out)
{
	struct kvfsd_cluster *c = cl_new(cfg);
	int rc;

	if (!c)
		return -ENOMEM;
	rc = cl_ev_start(c, cfg->conductor, cfg->secret_file);
	if (rc == 0)
		rc = cl_lead_start(c, cfg);
	if (rc < 0) {
		kvfsd_cluster_stop(c);
		return rc;
	}
	kvfs_info("block events to the conductor at %s as node %s",
		  cfg->conductor, cfg->node_id);
	*out = c;
	return 0;
}

int kvfsd_cluster_start(const struct kvfsd_cluster_config *cfg,
			struct kvfsd_cluster **out)
{
	struct kvfsd_cluster *c = cl_new(cfg);
	struct kv_xfer_config xc = { 0 };
	uint8_t *secret = NULL;
	size_t secret_len = 0;
	int rc;

	if (!c)
		return -ENOMEM;
	rc = cl_read_secret(cfg->secret_file, &secret, &secret_len);
	if (rc < 0)
		goto fail;
	xc.store = cfg->store;
	xc.listen = cfg->listen;
	xc.secret = secret;
	xc.secret_len = secret_len;
	xc.node = cfg->node_id;
	xc.transport = cfg->transport;
	xc.timeout_ms = cfg->timeout_ms;
	xc.on_insert = on_insert;
	xc.cb_arg = c;
	rc = kv_xfer_open(&xc, &c->xf);
	explicit_bzero(secret, secret_len);
	free(secret);
	if (rc < 0) {
		kvfs_err("transfer engine on %s: %s", cfg->listen,
			 strerror(-rc));
		goto fail;
	}
	rc = join(c, cfg);
	if (rc < 0) {
		kvfs_err("cannot join cluster %s as node %s: %s", cfg->url,
			 cfg->node_id, strerror(-rc));
		goto fail;
	}
	if (cfg->conductor) {
		/* the handoff first: the stream announces it at once */
		rc = cl_ho_start(c);
		if (rc == 0)
			rc = cl_ev_start(c, cfg->conductor, cfg->secret_file);
		if (rc == 0)
			rc = cl_lead_start(c, cfg);
		if (rc < 0)
			goto fail;
	}
	for (int i = 0; i < NREPL; i++) {
		rc = -pthread_create(&c->repl[i], NULL, repl_main, c);
		if (rc < 0)
			goto fail;
		c->nrepl++;
	}
	c->epoch_seen = kv_cluster_epoch(c->cl);
	rc = -pthread_create(&c->hk, NULL, housekeeping_main, c);
	if (rc < 0)
		goto fail;
	c->hk_running = true;
	/* the port bound too: --listen may have left it to the kernel (0) */
	kvfs_info("cluster %s: node %s on %s (port %d), transport %s, "
		  "%u replicas",
		  cfg->url, cfg->node_id, cfg->listen, kv_xfer_port(c->xf),
		  kv_xfer_transport(c->xf), c->replicas);
	*out = c;
	return 0;
fail:
	kvfsd_cluster_stop(c);
	return rc;
}

void kvfsd_cluster_stop(struct kvfsd_cluster *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->stopping = true;
	pthread_cond_broadcast(&c->work);
	pthread_cond_broadcast(&c->hk_wake);
	pthread_mutex_unlock(&c->lock);
	for (int i = 0; i < c->nrepl; i++)
		pthread_join(c->repl[i], NULL);
	if (c->hk_running)
		pthread_join(c->hk, NULL);
	cl_ev_stop(c);
	cl_ho_stop(c);
	/* leave first: peers stop sending to us before we stop answering */
	if (c->cl)
		kv_cluster_leave(c->cl);
	if (c->xf)
		kv_xfer_close(c->xf);
	while (c->jobs) {
		struct job *j = c->jobs;

		c->jobs = j->next;
		free(j);
	}
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->work);
	pthread_cond_destroy(&c->idle);
	pthread_cond_destroy(&c->fetched);
	pthread_cond_destroy(&c->hk_wake);
	free(c);
}
