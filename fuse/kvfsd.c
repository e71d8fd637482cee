/*
 * kvfsd.c - the node daemon: mounts the namespace, owns the store, serves
 * the control socket.
 *
 * Start:  options -> (fork: the parent waits for "mounted") -> store ->
 *         control socket -> FUSE session and mount -> invalidation thread
 *         -> "ready" to the parent -> multi-threaded session loop.
 * Stop (SIGTERM, SIGINT, SIGHUP, or an unmount from outside): the
 *         invalidation thread first, while requests are still answered
 *         (fs_notify.c says why), then the loop, the mount, the control
 *         socket, the store.  Every sealed block is already durable, so a
 *         kill -9 loses nothing sealed either; a restart re-attaches the
 *         pool and re-validates it (store.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fuse/ctl.h"
#include "fuse/kvfsd_cluster.h"
#include "fuse/fs.h"
#include "fuse/kvfsd.h"
#include "src/common/cli.h"
#include "src/common/log.h"
#include "kvstore/pool.h"
#include "kvstore/store.h"

struct daemon {
	struct kvfsd_opts o;
	bool allow_other; /* -o allow_other: every user reads the mount */
	struct fuse_args args;
	struct kv_store *st;
	struct kvfs_fs *fs;
	struct ctl_server *ctl;
	struct kvfsd_cluster *cl;      /* NULL: a single node */
	struct kvfsd_cluster *ev;      /* a single node's conductor stream */
	struct ctl_cluster_ops cl_ops; /* what ctl calls of it */
	struct fuse_session *se;
	bool mounted;
	bool bad_option; /* fuse_session_new refused an option */
	int ready_fd;	 /* to the waiting parent; -1 in foreground */

	/* the stopper thread (see stopper_main) */
	pthread_t stopper;
	bool stopper_running;
	pthread_t main_thread;
	atomic_bool loop_done;
};

/* ---- backgrounding ------------------------------------------------- */

/*
 * Fork before any thread exists (RocksDB, the control server and libfuse
 * all start threads, and threads do not survive fork).  The parent stays
 * until the child reports: one byte, 0 once mounted or its exit status,
 * so a failed start still fails the command that ran kvfsd (and mount).
 */
static int go_background(struct daemon *d)
{
	int p[2];
	unsigned char status = KVFSD_EXIT_FAIL;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		close(p[1]);
		if (read(p[0], &status, 1) != 1)
			status = KVFSD_EXIT_FAIL; /* died before reporting */
		_exit(status);
	}
	close(p[0]);
	setsid();
	d->ready_fd = p[1];
	return 0;
}

static void report(struct daemon *d, unsigned char status)
{
	int fd;

	if (d->ready_fd < 0)
		return;
	if (write(d->ready_fd, &status, 1) != 1)
		kvfs_debug("the parent went away before the report");
	close(d->ready_fd);
	d->ready_fd = -1;
	if (status != 0)
		return;
	/* detached: stdin and stdout go; stderr stays, it is the log */
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		close(fd);
	}
	if (chdir("/") < 0)
		kvfs_debug("chdir /: %s", strerror(errno));
}

/* ---- signals ------------------------------------------------------- */

static void wake_handler(int sig)
{
	(void)sig;
}

static void stop_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGHUP);
}

/*
 * SIGTERM, SIGINT and SIGHUP are blocked in every thread and taken here
 * with sigwait, so the stop runs in a thread of its own, in order: the
 * invalidation thread first (it may be waiting on a directory lock that
 * only an answered request releases), then the session.  The loop's main
 * thread sleeps in sem_wait (or read), which only a signal interrupts:
 * SIGUSR1, with an empty handler, does that.  It is repeated because it
 * may land just before the loop starts waiting.
 */
static void *stopper_main(void *arg)
{
	struct daemon *d = arg;
	struct timespec pause = { 0, 50 * 1000 * 1000 };
	sigset_t set;
	int sig = 0;

	stop_signals(&set);
	sigwait(&set, &sig);
	if (!atomic_load(&d->loop_done))
		kvfs_info("%s: unmounting %s", strsignal(sig),
			  d->o.cmd.mountpoint);
	kvfs_fs_stop(d->fs);
	fuse_session_exit(d->se);
	for (int i = 0; i < 200 && !atomic_load(&d->loop_done); i++) {
		pthread_kill(d->main_thread, SIGUSR1);
		nanosleep(&pause, NULL);
	}
	return NULL;
}

/* before any thread exists, so that every thread inherits the mask */
static void setup_signals(void)
{
	struct sigaction sa;
	sigset_t set;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = wake_handler; /* no SA_RESTART: interrupt */
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL); /* a control client went away */
	stop_signals(&set);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

static int start_stopper(struct daemon *d)
{
	int rc;

	d->main_thread = pthread_self();
	rc = pthread_create(&d->stopper, NULL, stopper_main, d);
	if (rc)
		return -rc;
	d->stopper_running = true;
	return 0;
}

static void join_stopper(struct daemon *d)
{
	atomic_store(&d->loop_done, true);
	if (!d->stopper_running)
		return;
	/* an unmount from outside ended the loop: release the stopper */
	pthread_kill(d->stopper, SIGTERM);
	pthread_join(d->stopper, NULL);
	d->stopper_running = false;
}

/* ---- start --------------------------------------------------------- */

static int open_store(struct daemon *d)
{
	struct kv_store_config sc = {
		.pool_path = d->o.pool_path,
		.index_dir = d->o.index_dir,
		.slot_size = d->o.slot_size,
		.nslots = d->o.slots,
		.capacity = d->o.capacity,
		.lease_ms = d->o.lease_ms,
		.reformat = d->o.reformat,
		.prealloc = d->o.prealloc,
		/* libkvfs maps the pool itself: whoever may use the control
		 * socket may map it (kvfsd(8), ACCESS CONTROL), nobody else */
		.pool_mode = d->o.ctl_mode & 0666,
	};
	struct kv_store_stats s;
	int rc = kv_store_open(&sc, &d->st);

	if (rc < 0) {
		kvfs_err("cannot open the store (pool %s, index %s): %s%s",
			 d->o.pool_path, d->o.index_dir, strerror(-rc),
			 rc == -EINVAL ? "; -o reformat starts it anew" : "");
		return rc;
	}
	kv_store_stats(d->st, &s);
	kvfs_info("pool %s: %llu slots of %llu bytes, %llu blocks recovered, "
		  "%llu dropped",
		  d->o.pool_path, (unsigned long long)s.slots_total,
		  (unsigned long long)s.slot_size,
		  (unsigned long long)s.recovered,
		  (unsigned long long)s.recovery_dropped);
	return 0;
}

static void json_field(FILE *fp, const char *key, const char *val)
{
	fprintf(fp, ",\"%s\":\"", key);
	for (; *val; val++) {
		if (*val == '"' || *val == '\\')
			fputc('\\', fp);
		if ((unsigned char)*val >= 0x20)
			fputc(*val, fp);
	}
	fputc('"', fp);
}

/* what the control socket's "status" says about us */
static char *info_json(struct daemon *d)
{
	char *s = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&s, &len);

	if (!fp)
		return NULL;
	fputs("{\"program\":\"kvfsd\",\"version\":\"" PACKAGE_VERSION "\"", fp);
	fprintf(fp, ",\"pid\":%ld", (long)getpid());
	json_field(fp, "mountpoint", d->o.cmd.mountpoint);
	json_field(fp, "state", d->o.state_dir);
	json_field(fp, "pool", d->o.pool_path);
	json_field(fp, "socket", d->o.ctl_path);
	json_field(fp, "node_id", d->o.node_id);
	/* the pool file's size, so that a pool left in /dev/shm is seen */
	fprintf(fp, ",\"pool_bytes\":%llu",
		(unsigned long long)kv_pool_file_size(kv_store_pool(d->st)));
	fprintf(fp, ",\"slot_size\":%llu,\"slots\":%u}",
		(unsigned long long)d->o.slot_size, d->o.slots);
	if (fclose(fp) != 0) {
		free(s);
		return NULL;
	}
	return s;
}

static int start_ctl(struct daemon *d)
{
	char *info = info_json(d);
	int rc;

	if (!info)
		return -ENOMEM;
	rc = ctl_server_start_limits(d->st, d->o.ctl_path, d->o.ctl_mode, info,
				     &d->o.ctl_limits, &d->ctl);
	free(info);
	if (rc < 0)
		kvfs_err("control socket %s: %s", d->o.ctl_path, strerror(-rc));
	return rc;
}

static int start_fs(struct daemon *d)
{
	struct kvfs_fs_config fc = {
		.store = d->st,
		.block_tokens = d->o.block_tokens,
		.layout = d->o.layout,
		.mountpoint = d->o.cmd.mountpoint,
		.socket = d->o.ctl_path,
		.node = d->o.node_id,
		.uid = geteuid(),
		.gid = getegid(),
		.cluster = d->cl,
		/* the kernel passes nothing through under the write-back
		 * cache (fs_io.c) */
		.writeback = !d->o.writethrough && !d->o.passthrough,
		.allow_other = d->allow_other,
		.passthrough = d->o.passthrough,
	};
	int rc;

	rc = kvfs_fs_new(&fc, &d->fs);
	if (rc < 0)
		return rc;
	d->se = fuse_session_new(&d->args, kvfs_fs_ops(),
				 sizeof(struct fuse_lowlevel_ops), d->fs);
	if (!d->se) {
		d->bad_option = true; /* libfuse said which */
		return -EINVAL;
	}
	kvfsd_cluster_set_fs(d->cl, d->fs);
	return 0;
}

/* ---- the cluster --------------------------------------------------- */

static void ctl_sealed(void *arg, const char *ns, const uint8_t *hash)
{
	kvfsd_cluster_sealed(arg, ns, hash);
}

static void ctl_ns_made(void *arg)
{
	kvfsd_cluster_ns_made(arg);
}

static int ctl_nodes(void *arg, struct kvfs_buf *out)
{
	return kvfsd_cluster_nodes_json(arg, out);
}

static long ctl_prefetch(void *arg, const char *node, const char *ns,
			 const uint8_t (*hashes)[32], size_t n, int *res,
			 const atomic_bool *stop)
{
	return kvfsd_cluster_prefetch(arg, node, ns, hashes, n, res, stop);
}

static int start_cluster(struct daemon *d)
{
	struct kvfsd_cluster_config cc = {
		.store = d->st,
		.url = d->o.cluster_o,
		.node_id = d->o.node_id,
		.listen = d->o.listen_o,
		.secret_file = d->o.secret_file_o,
		.etcd = { .ca_file = d->o.etcd_ca_o,
			  .cert_file = d->o.etcd_cert_o,
			  .key_file = d->o.etcd_key_o,
			  .user = d->o.etcd_user_o,
			  .password_file = d->o.etcd_password_file_o },
		.conductor = d->o.conductor_o,
		.transport = (enum kv_transport)d->o.transport,
		.replicas = d->o.replicas,
		.timeout_ms = d->o.timeout_ms,
		.repair_rate = KVFSD_REPAIR_RATE,
	};
	int rc;

	/* a single node feeding a conductor: the event stream alone */
	if (!d->o.cluster_o && d->o.conductor_o)
		return kvfsd_events_start(&cc, &d->ev);
	if (!d->o.cluster_o)
		return 0;
	rc = kvfsd_cluster_start(&cc, &d->cl);
	if (rc < 0)
		return rc;
	d->cl_ops = (struct ctl_cluster_ops){
		.arg = d->cl,
		.sealed = ctl_sealed,
		.ns_made = ctl_ns_made,
		.nodes = ctl_nodes,
		.prefetch = ctl_prefetch,
	};
	ctl_server_set_cluster(d->ctl, &d->cl_ops);
	return 0;
}

struct readahead {
	uint64_t kb;
	char mnt[];
};

/*
 * stat(2) of our own mount returns only once the kernel has our INIT
 * reply, which is what this thread waits for: INIT is where the kernel
 * caps read-ahead (to what it offered, its 128 KiB default), so a value
 * written before it would be undone.
 */
static void *readahead_main(void *arg)
{
	struct readahead *ra = arg;
	char bdi[32], kb[24];
	struct stat sb;

	if (stat(ra->mnt, &sb) < 0)
		goto out_free;
	snprintf(bdi, sizeof(bdi), "%u:%u", major(sb.st_dev), minor(sb.st_dev));
	snprintf(kb, sizeof(kb), "%llu\n", (unsigned long long)ra->kb);
	if (kvfsd_bdi_set(bdi, "read_ahead_kb", kb) < 0)
		kvfs_debug("read-ahead of the mount left at the default");
	else
		kvfs_debug("read-ahead of the mount set to %llu KiB",
			   (unsigned long long)ra->kb);
out_free:
	free(ra);
	return NULL;
}

/*
 * The kernel gives a FUSE mount 128 KiB of read-ahead and the INIT
 * handshake can only lower it, so a cold read of a 2 MiB block would take
 * sixteen round trips.  Blocks are read whole: raise it to a slot (at
 * most 2 MiB) through the mount's bdi in sysfs.  Only root may; anyone
 * else keeps the default.  A detached thread, since it must wait for the
 * session loop to answer INIT (readahead_main).
 */
static void raise_readahead(struct daemon *d)
{
	uint64_t kb = kv_store_slot_size(d->st) / 1024;
	size_t len = strlen(d->o.cmd.mountpoint) + 1;
	struct readahead *ra;
	pthread_attr_t at;
	pthread_t th;

	if (kb > 2048)
		kb = 2048;
	if (kb <= 128 || geteuid() != 0)
		return;
	ra = malloc(sizeof(*ra) + len);
	if (!ra)
		return;
	ra->kb = kb;
	memcpy(ra->mnt, d->o.cmd.mountpoint, len);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &at, readahead_main, ra) != 0)
		free(ra);
	pthread_attr_destroy(&at);
}

/*
 * fs.c's write-back cache needs the mount's dirty-page limit lifted
 * (kvfsd_bdi_lift); where it cannot be (not root, a read-only /sys), the
 * mount goes without the cache.  Decided before the session loop answers
 * INIT, where the cache is asked for.
 */
static void choose_writeback(struct daemon *d)
{
	char bdi[32];
	int rc = kvfsd_bdi_of(d->o.cmd.mountpoint, bdi, sizeof(bdi));

	if (rc == 0)
		rc = kvfsd_bdi_lift(bdi);
	if (rc == 0) {
		kvfs_debug("bdi %s: dirty-page limit lifted", bdi);
		return;
	}
	kvfs_fs_set_writeback(d->fs, false);
	kvfs_info("no write-back cache: the mount's dirty-page limit cannot "
		  "be lifted (%s); each write(2) reaches kvfsd on its own "
		  "(kvfsd(8), CACHING)",
		  strerror(-rc));
}

static int mount_fs(struct daemon *d)
{
	int rc;

	if (fuse_session_mount(d->se, d->o.cmd.mountpoint) != 0)
		return -EIO; /* libfuse said why */
	d->mounted = true;
	if (!d->o.writethrough && !d->o.passthrough)
		choose_writeback(d);
	rc = kvfs_fs_attach_io(d->fs, d->se);
	if (rc < 0) {
		kvfs_err("/dev/fuse: %s", strerror(-rc));
		return rc;
	}
	raise_readahead(d);
	rc = kvfs_fs_start(d->fs, d->se);
	if (rc < 0)
		kvfs_err("invalidation thread: %s", strerror(-rc));
	return rc;
}

static int run_loop(struct daemon *d)
{
	struct fuse_loop_config *lc;
	int rc;

	if (d->o.cmd.singlethread)
		return fuse_session_loop(d->se);
	lc = fuse_loop_cfg_create();
	if (!lc)
		return -ENOMEM;
	fuse_loop_cfg_set_clone_fd(lc, (unsigned)d->o.cmd.clone_fd);
	/* UINT_MAX: not given, libfuse's defaults stand */
	if (d->o.cmd.max_idle_threads != UINT_MAX)
		fuse_loop_cfg_set_idle_threads(lc, d->o.cmd.max_idle_threads);
	if (d->o.cmd.max_threads != UINT_MAX)
		fuse_loop_cfg_set_max_threads(lc, d->o.cmd.max_threads);
	rc = fuse_session_loop_mt(d->se, lc);
	fuse_loop_cfg_destroy(lc);
	return rc;
}

/* ---- stop ---------------------------------------------------------- */

static void teardown(struct daemon *d)
{
	join_stopper(d);
	if (d->fs)
		kvfs_fs_stop(d->fs);
	if (d->mounted)
		fuse_session_unmount(d->se);
	ctl_server_stop(d->ctl);
	kvfsd_cluster_set_fs(d->cl, NULL);
	kvfsd_cluster_stop(d->cl);
	kvfsd_cluster_stop(d->ev);
	if (d->se)
		fuse_session_destroy(d->se);
	kvfs_fs_free(d->fs);
	kv_store_close(d->st);
}

/* --no-mount: the control socket and the cluster serve until a signal */
static int serve_unmounted(struct daemon *d)
{
	sigset_t set;
	int sig = 0;

	kvfs_info("serving control socket %s without a mount", d->o.ctl_path);
	report(d, 0);
	stop_signals(&set);
	sigwait(&set, &sig);
	kvfs_info("%s: stopping", strsignal(sig));
	teardown(d);
	return KVFSD_EXIT_OK;
}

static int serve(struct daemon *d)
{
	int rc;

	setup_signals();
	rc = open_store(d);
	if (rc == 0)
		rc = start_ctl(d);
	if (rc == 0)
		rc = start_cluster(d);
	if (rc == 0 && d->o.no_mount)
		return serve_unmounted(d);
	if (rc == 0)
		rc = start_fs(d);
	if (rc == 0)
		rc = start_stopper(d);
	if (rc == 0)
		rc = mount_fs(d);
	if (rc < 0) {
		rc = d->bad_option ? KVFSD_EXIT_USAGE : KVFSD_EXIT_FAIL;
		teardown(d);
		/* before the report: the parent's exit means it is done */
		kvfsd_opts_undo(&d->o);
		report(d, (unsigned char)rc);
		return rc;
	}
	kvfs_info("mounted %s (control socket %s)", d->o.cmd.mountpoint,
		  d->o.ctl_path);
	report(d, 0);
	rc = run_loop(d);
	teardown(d);
	/* a positive rc is the signal that ended the loop: a clean stop */
	if (rc < 0)
		kvfs_err("session loop: %s", strerror(-rc));
	return rc < 0 ? KVFSD_EXIT_FAIL : KVFSD_EXIT_OK;
}

enum { KEY_ALLOW_OTHER = 1 };

static int find_allow_other(void *data, const char *arg, int key,
			    struct fuse_args *outargs)
{
	if (key == KEY_ALLOW_OTHER)
		*(bool *)data = true;
	return 1;
}

/*
 * With allow_other every local user reaches the mount, and FUSE checks no
 * mode unless told to: the kernel then enforces the modes and owners the
 * file system reports (fs.c), so only the daemon's user (and root) may
 * create, write, unlink, mkdir, rmdir or set attributes.  Checking in
 * each handler instead would leave any path forgotten open.  The scan
 * runs on a copy: fuse_opt_parse rewrites what it parses.
 */
static int force_default_permissions(struct fuse_args *args, bool *other)
{
	static const struct fuse_opt opts[] = {
		FUSE_OPT_KEY("allow_other", KEY_ALLOW_OTHER),
		FUSE_OPT_END,
	};
	struct fuse_args copy = FUSE_ARGS_INIT(0, NULL);
	int rc = 0;

	*other = false;
	for (int i = 0; i < args->argc && rc == 0; i++)
		rc = fuse_opt_add_arg(&copy, args->argv[i]);
	if (rc == 0)
		rc = fuse_opt_parse(&copy, other, opts, find_allow_other);
	fuse_opt_free_args(&copy);
	if (rc < 0)
		return -ENOMEM;
	if (*other && fuse_opt_add_arg(args, "-odefault_permissions") < 0)
		return -ENOMEM;
	return 0;
}

int main(int argc, char **argv)
{
	struct daemon d = {
		.args = FUSE_ARGS_INIT(argc, argv),
		.ready_fd = -1,
	};
	int rc;

	cli_init("kvfsd");
	kvfs_log_init("kvfsd", KVFS_LOG_INFO);
	rc = kvfsd_opts_parse(&d.args, &d.o);
	if (rc == 0)
		rc = force_default_permissions(&d.args, &d.allow_other);
	if (rc == 0) {
		if (d.o.cmd.debug)
			kvfs_log_set_level(KVFS_LOG_DEBUG);
		/* all of it checked before anything is made: a start refused
		 * leaves no state directory, pool or socket behind */
		rc = kvfsd_opts_check(&d.o, &d.args);
	}
	if (rc == 0 && d.o.discard) {
		rc = kvfsd_discard(&d.o) < 0 ? KVFSD_EXIT_FAIL : KVFSD_EXIT_OK;
		goto out_free;
	}
	if (rc == 0)
		rc = kvfsd_opts_create(&d.o);
	if (rc == 0 && !d.o.cmd.foreground)
		rc = go_background(&d);
	if (rc == 0)
		rc = serve(&d);
	else if (rc == 1)
		rc = KVFSD_EXIT_OK;
	else {
		kvfsd_opts_undo(&d.o);
		rc = rc == -EINVAL ? KVFSD_EXIT_USAGE : KVFSD_EXIT_FAIL;
	}
out_free:
	kvfsd_opts_free(&d.o);
	fuse_opt_free_args(&d.args);
	return rc;
}
