/*
 * kvbench.c - the kvbench program: subcommand table and shared helpers.
 *
 * See kvbench.h for what the helpers promise and kvbench(1) for the
 * program's interface.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "src/common/cli.h"
#include "src/common/ctl_client.h"
#include "src/common/json.h"
#include "src/kvbench/kvbench.h"
#include "src/common/log.h"

#define KVB_SHM_DIR "/dev/shm"
#define KVB_MAX_CLEANUP 8
/* block_tokens of a namespace made through a control socket: kvfsd's
 * default for mkdir (-o block_tokens), and kvctl ns create's */
#define KVB_NS_BLOCK_TOKENS "512"

struct kvb_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	void (*usage)(FILE *f);
	const char *summary;
};

static int cmd_help(int argc, char **argv);

static const struct kvb_cmd kvb_cmds[] = {
	{
		.name = "store",
		.fn = kvb_store_main,
		.usage = kvb_store_usage,
		.summary = "block store against a RocksDB point read",
	},
	{
		.name = "demo",
		.fn = kvb_demo_main,
		.usage = kvb_demo_usage,
		.summary = "engine workload on the store, then a restart",
	},
	{
		.name = "engine",
		.fn = kvb_engine_main,
		.usage = kvb_engine_usage,
		.summary = "LLM engine emulator on a mount, driven by a trace",
	},
	{
		.name = "io",
		.fn = kvb_io_main,
		.usage = kvb_io_usage,
		.summary = "block file I/O on a mount against tmpfs",
	},
	{
		.name = "engines",
		.fn = kvb_engines_main,
		.usage = kvb_engines_usage,
		.summary = "engines' file backends on a mount against tmpfs",
	},
	{
		.name = "xfer",
		.fn = kvb_xfer_main,
		.usage = kvb_xfer_usage,
		.summary = "block fetch between two nodes against a TCP copy",
	},
	{
		.name = "gpu",
		.fn = kvb_gpu_main,
		.usage = kvb_gpu_usage,
		.summary = "pool <-> GPU copies through libkvfs against "
			   "cudaMemcpy",
	},
	{
		.name = "help",
		.fn = cmd_help,
		.usage = NULL,
		.summary = "this text, or a subcommand's (help CMD)",
	},
};

#define KVB_NCMDS (sizeof(kvb_cmds) / sizeof(kvb_cmds[0]))

/* ---- cleanup -------------------------------------------------------- */

struct kvb_tmp {
	char path[PATH_MAX];
	bool dir;
	bool live;
};

/* fixed array, no malloc: the signal handler reads it */
static struct kvb_tmp kvb_tmps[KVB_MAX_CLEANUP];
volatile sig_atomic_t kvb_stop;

static int cleanup_add(const char *path, bool dir)
{
	for (size_t i = 0; i < KVB_MAX_CLEANUP; i++) {
		struct kvb_tmp *t = &kvb_tmps[i];

		if (t->live)
			continue;
		snprintf(t->path, sizeof(t->path), "%s", path);
		t->dir = dir;
		t->live = true;
		return 0;
	}
	return -ENOMEM;
}

void kvb_cleanup_forget(const char *path)
{
	for (size_t i = 0; i < KVB_MAX_CLEANUP; i++)
		if (kvb_tmps[i].live && !strcmp(kvb_tmps[i].path, path))
			kvb_tmps[i].live = false;
}

void kvb_cleanup_run(void)
{
	for (size_t i = KVB_MAX_CLEANUP; i-- > 0;) {
		struct kvb_tmp *t = &kvb_tmps[i];

		if (!t->live)
			continue;
		t->live = false;
		if (t->dir)
			kvb_rmtree(t->path);
		else
			unlink(t->path);
	}
}

static int rmtree_one(const char *path, const struct stat *sb, int type,
		      struct FTW *ftw)
{
	return remove(path) ? -errno : 0;
}

int kvb_rmtree(const char *path)
{
	int rc = nftw(path, rmtree_one, 16, FTW_DEPTH | FTW_PHYS);

	if (rc < 0)
		return errno == ENOENT ? 0 : -errno;
	return rc;
}

/*
 * The first signal asks the running loop to stop so that the store is
 * closed and every temporary removed by the normal paths.  A second one
 * means the user will not wait: unlink the pool files (unlink is
 * async-signal-safe, a tree walk is not) and leave.
 */
static void on_signal(int sig)
{
	if (!kvb_stop) {
		kvb_stop = 1;
		return;
	}
	for (size_t i = 0; i < KVB_MAX_CLEANUP; i++)
		if (kvb_tmps[i].live && !kvb_tmps[i].dir)
			unlink(kvb_tmps[i].path);
	_exit(128 + sig);
}

void kvb_signals_init(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

int kvb_tmpdir(char *out, size_t cap)
{
	const char *base = getenv("TMPDIR");
	int n;

	if (!base || !*base)
		base = "/tmp";
	n = snprintf(out, cap, "%s/kvbench-XXXXXX", base);
	if (n < 0 || (size_t)n >= cap)
		return -ENAMETOOLONG;
	if (!mkdtemp(out))
		return -errno;
	if (cleanup_add(out, true)) {
		rmdir(out);
		return -ENOMEM;
	}
	return 0;
}

int kvb_shm_dir(char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s/kvbench-XXXXXX", KVB_SHM_DIR);

	if (n < 0 || (size_t)n >= cap)
		return -ENAMETOOLONG;
	if (!mkdtemp(out))
		return -errno;
	if (cleanup_add(out, true)) {
		rmdir(out);
		return -ENOMEM;
	}
	return 0;
}

static int pool_try(const char *dir, char *out, size_t cap)
{
	uint32_t r;
	int fd, n;

	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = (uint32_t)kvb_now();
	n = snprintf(out, cap, "%s/kvbench-%ld-%08x.pool", dir, (long)getpid(),
		     r);
	if (n < 0 || (size_t)n >= cap)
		return -ENAMETOOLONG;
	/* O_EXCL: the name is ours alone, so removing it later is safe */
	fd = open(out, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	close(fd);
	if (cleanup_add(out, false)) {
		unlink(out);
		return -ENOMEM;
	}
	return 0;
}

int kvb_pool_path(const char *fallback_dir, char *out, size_t cap)
{
	int rc;

	for (int tries = 0; tries < 8; tries++) {
		rc = pool_try(KVB_SHM_DIR, out, cap);
		if (rc == -ENOENT && fallback_dir)
			rc = pool_try(fallback_dir, out, cap);
		if (rc != -EEXIST)
			return rc;
	}
	return rc;
}

int kvb_pool_prefault(const char *path)
{
	struct stat sb;
	void *m;
	int fd, rc = 0;

	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb)) {
		rc = -errno;
		goto out_close;
	}
	if (!sb.st_size)
		goto out_close;
	/* a shared writable MAP_POPULATE faults each page in for writing,
	 * which allocates it; the contents are not touched */
	m = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_POPULATE, fd, 0);
	if (m == MAP_FAILED) {
		rc = -errno;
		goto out_close;
	}
	munmap(m, (size_t)sb.st_size);
out_close:
	close(fd);
	return rc;
}

int kvb_check_space(const char *cmd, const char *dir, uint64_t bytes)
{
	struct statvfs sv;
	uint64_t avail;
	char need[32], have[32];

	if (statvfs(dir, &sv))
		return 0; /* cannot tell; let the store find out */
	avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	if (avail >= bytes)
		return 0;
	cli_fail(cmd, 0, "%s has %s free, this run needs %s", dir,
		 kvb_fmt_bytes(have, sizeof(have), (double)avail),
		 kvb_fmt_bytes(need, sizeof(need), (double)bytes));
	return -ENOSPC;
}

/* ---- options -------------------------------------------------------- */

int kvb_getopt(const char *cmd, int argc, char **argv, const char *optstr,
	       const struct option *lo, void (*usage)(FILE *f),
	       int (*opt)(int c, void *o), void *o)
{
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, optstr, lo, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return -1;
		}
		if (c == '?' || c == ':')
			return cli_bad_option(cmd, c, argv);
		if (opt(c, o))
			return KVB_EXIT_USAGE;
	}
	return 0;
}

int kvb_mount_operand(const char *cmd, int argc, char **argv,
		      const char **mount, const char *ns)
{
	if (optind >= argc)
		return cli_usage_error(cmd, "MOUNT is missing");
	*mount = argv[optind++];
	if (optind < argc)
		return cli_usage_error(cmd, "unexpected argument '%s'",
				       argv[optind]);
	if (kvfs_ns_valid(ns))
		return cli_usage_error(cmd, "'%s' is no namespace name", ns);
	return 0;
}

/* ---- a kvfs mount ----------------------------------------------------- */

#define KVB_STATS_MAX (16u << 20) /* .kvfs/stats is a few kB a namespace */

static int read_file(const char *path, char **out, size_t *len)
{
	size_t cap = 65536, n = 0;
	char *buf = malloc(cap), *p;
	ssize_t r;
	int fd, rc = 0;

	if (!buf)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		goto out_free;
	}
	while ((r = read(fd, buf + n, cap - n - 1)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			goto out_close;
		}
		n += (size_t)r;
		if (n + 1 < cap)
			continue;
		if (cap >= KVB_STATS_MAX) {
			rc = -EFBIG;
			goto out_close;
		}
		p = realloc(buf, cap * 2);
		if (!p) {
			rc = -ENOMEM;
			goto out_close;
		}
		buf = p;
		cap *= 2;
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	close(fd);
	return 0;
out_close:
	close(fd);
out_free:
	free(buf);
	return rc;
}

static int json_u64_at(const struct kvfs_json *obj, const char *key,
		       uint64_t *v)
{
	return kvfs_json_u64(kvfs_json_get(obj, key), v);
}

/* the namespace named ns in "namespaces": its evictions */
static void stats_ns(const struct kvfs_json *j, const char *ns,
		     struct kvb_mount *m)
{
	const struct kvfs_json *a = kvfs_json_get(j, "namespaces");

	if (!a || a->type != KVFS_JSON_ARR || !ns)
		return;
	for (size_t i = 0; i < a->n; i++) {
		const char *name =
			kvfs_json_str(kvfs_json_get(&a->kid[i], "name"));

		if (!name || strcmp(name, ns))
			continue;
		m->ns_found =
			!json_u64_at(&a->kid[i], "evictions", &m->evictions);
		return;
	}
}

/* the stats object (MOUNT/.kvfs/stats, or "stats" of the control
 * socket's "status") into m: -EPROTO without the pool's geometry */
static int stats_parse(const struct kvfs_json *j, const char *ns,
		       struct kvb_mount *m)
{
	const struct kvfs_json *pool = kvfs_json_get(j, "pool");

	if (!pool || json_u64_at(pool, "slot_size", &m->slot_size) ||
	    json_u64_at(pool, "slots", &m->slots) ||
	    json_u64_at(pool, "slots_free", &m->slots_free))
		return -EPROTO;
	stats_ns(j, ns, m);
	return 0;
}

int kvb_mount_stats(const char *cmd, const char *mount, const char *ns,
		    struct kvb_mount *m)
{
	char path[PATH_MAX];
	struct kvfs_json *j = NULL;
	size_t len = 0;
	char *text = NULL;
	int rc;

	memset(m, 0, sizeof(*m));
	if (snprintf(path, sizeof(path), "%s/.kvfs/stats", mount) >=
	    (int)sizeof(path)) {
		kvb_fail(cmd, -ENAMETOOLONG, "%s", mount);
		return -ENAMETOOLONG;
	}
	rc = read_file(path, &text, &len);
	if (rc) {
		kvb_fail(cmd, rc, "%s is not a kvfs mount (reading %s)", mount,
			 path);
		return rc;
	}
	rc = kvfs_json_parse(text, len, &j);
	free(text);
	rc = rc ? -EPROTO : stats_parse(j, ns, m);
	kvfs_json_free(j);
	if (rc)
		kvb_fail(cmd, 0, "%s: no pool geometry in it", path);
	return rc;
}

int kvb_mount_ns(const char *cmd, const char *mount, const char *ns,
		 uint32_t *bt)
{
	char path[PATH_MAX], val[32];
	unsigned long long v;
	ssize_t n;
	char *end;
	int fd, rc;

	if (kvfs_ns_valid(ns)) {
		kvb_fail(cmd, 0, "'%s' is no namespace name", ns);
		return -EINVAL;
	}
	if (snprintf(path, sizeof(path), "%s/%s", mount, ns) >=
	    (int)sizeof(path)) {
		kvb_fail(cmd, -ENAMETOOLONG, "%s/%s", mount, ns);
		return -ENAMETOOLONG;
	}
	/* a racing kvbench may make it first: EEXIST is success */
	if (mkdir(path, 0755) && errno != EEXIST) {
		rc = -errno;
		kvb_fail(cmd, rc, "cannot make namespace %s", path);
		return rc;
	}
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		kvb_fail(cmd, rc, "cannot open namespace %s", path);
		return rc;
	}
	/* names here are chain hashes: a mount whose mkdir makes open
	 * namespaces (kvfsd -o layout=open) is told so while it is empty */
	if (fsetxattr(fd, "user.kvfs.layout", "chain", 5, 0)) {
		rc = -errno;
		kvb_fail(cmd, rc, "%s: user.kvfs.layout", path);
		close(fd);
		return rc;
	}
	n = fgetxattr(fd, "user.kvfs.block_tokens", val, sizeof(val) - 1);
	if (n <= 0) {
		rc = n < 0 ? -errno : -EPROTO;
		kvb_fail(cmd, rc, "%s: user.kvfs.block_tokens", path);
		close(fd);
		return rc;
	}
	val[n] = '\0';
	v = strtoull(val, &end, 10);
	if (*end || !v || v > UINT32_MAX) {
		kvb_fail(cmd, 0, "%s: bad user.kvfs.block_tokens '%s'", path,
			 val);
		close(fd);
		return -EPROTO;
	}
	*bt = (uint32_t)v;
	return fd;
}

/* ---- a kvfsd's control socket --------------------------------------- */

bool kvb_is_socket(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

int kvb_ctl_open(const char *cmd, const char *path, struct kvfs_ctl **c)
{
	char err[256];
	int rc;

	rc = kvfs_ctl_connect(path, c, err, sizeof(err));
	if (rc)
		kvb_fail(cmd, 0, "%s", err);
	return rc;
}

/* req on c: 0 with the answer in *j, or a negative errno with one line
 * printed (unless the errno is quiet, which is returned silently) */
static int ctl_ask(const char *cmd, struct kvfs_ctl *c, const char *req,
		   int quiet, struct kvfs_json **j)
{
	char err[256];
	int rc;

	rc = kvfs_ctl_request(c, req, j, NULL, err, sizeof(err));
	if (rc && rc != quiet)
		kvb_fail(cmd, 0, "%s: \"%s\": %s", kvfs_ctl_path(c), req, err);
	return rc;
}

/* "VERB NS [HASH]" as kvfs_ctl_prefix_req() makes it, then more; NULL
 * when out of memory (or for a bad name, checked before) */
static char *ctl_req_ns(const char *verb, const char *ns,
			const uint8_t (*h)[KVFS_HASH_LEN], const char *more)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	char *out;

	if (kvfs_ctl_prefix_req(&b, verb, ns, -1, h, h ? 1 : 0)) {
		kvfs_buf_release(&b);
		return NULL;
	}
	if (more)
		kvfs_buf_puts(&b, more);
	return kvfs_buf_finish(&b, &out, NULL) ? NULL : out;
}

int kvb_ctl_stats(const char *cmd, struct kvfs_ctl *c, const char *ns,
		  struct kvb_mount *m)
{
	struct kvfs_json *j = NULL;
	int rc;

	memset(m, 0, sizeof(*m));
	rc = ctl_ask(cmd, c, "status", 0, &j);
	if (rc)
		return rc;
	rc = stats_parse(kvfs_json_get(j, "stats"), ns, m);
	kvfs_json_free(j);
	if (rc)
		kvb_fail(cmd, 0, "%s: no pool geometry in \"status\"",
			 kvfs_ctl_path(c));
	return rc;
}

/* block_tokens of o, a namespace object, which must have the chain
 * layout (block names are chain hashes) */
static int ns_tokens(const char *cmd, const struct kvfs_json *o, const char *ns,
		     uint32_t *bt)
{
	const char *layout = kvfs_json_str(kvfs_json_get(o, "layout"));
	uint64_t v;

	if (json_u64_at(o, "block_tokens", &v) || !v || v > UINT32_MAX) {
		kvb_fail(cmd, 0, "namespace %s: no block_tokens in the answer",
			 ns);
		return -EPROTO;
	}
	if (layout && strcmp(layout, "chain")) {
		kvb_fail(cmd, 0,
			 "namespace %s has the %s layout; block names here "
			 "are chain hashes",
			 ns, layout);
		return -EINVAL;
	}
	*bt = (uint32_t)v;
	return 0;
}

int kvb_ctl_ns(const char *cmd, struct kvfs_ctl *c, const char *ns,
	       uint32_t *bt)
{
	const struct kvfs_json *a;
	struct kvfs_json *j = NULL;
	char *req;
	int rc;

	if (kvfs_ns_valid(ns)) {
		kvb_fail(cmd, 0, "'%s' is no namespace name", ns);
		return -EINVAL;
	}
	req = ctl_req_ns("ns create", ns, NULL,
			 " " KVB_NS_BLOCK_TOKENS " chain");
	if (!req) {
		kvb_fail(cmd, -ENOMEM, "ns create");
		return -ENOMEM;
	}
	/* a racing kvbench may make it first: EEXIST is success */
	rc = ctl_ask(cmd, c, req, -EEXIST, &j);
	free(req);
	if (!rc) {
		rc = ns_tokens(cmd, j, ns, bt);
		kvfs_json_free(j);
		return rc;
	}
	if (rc != -EEXIST)
		return rc;
	rc = ctl_ask(cmd, c, "ns list", 0, &j);
	if (rc)
		return rc;
	a = kvfs_json_get(j, "namespaces");
	rc = -ENOENT;
	for (size_t i = 0; a && a->type == KVFS_JSON_ARR && i < a->n; i++) {
		const char *name =
			kvfs_json_str(kvfs_json_get(&a->kid[i], "name"));

		if (name && !strcmp(name, ns)) {
			rc = ns_tokens(cmd, &a->kid[i], ns, bt);
			break;
		}
	}
	kvfs_json_free(j);
	if (rc == -ENOENT)
		kvb_fail(cmd, 0, "namespace %s exists but \"ns list\" lacks it",
			 ns);
	return rc;
}

int kvb_ctl_evict(struct kvfs_ctl *c, const char *ns,
		  const uint8_t h[KVFS_HASH_LEN])
{
	char *req = ctl_req_ns("evict", ns, (const uint8_t(*)[KVFS_HASH_LEN])h,
			       NULL);
	int rc;

	if (!req)
		return -ENOMEM;
	rc = kvfs_ctl_request(c, req, NULL, NULL, NULL, 0);
	free(req);
	return rc;
}

void kvb_cpu_model(char *buf, size_t cap)
{
	FILE *f = fopen("/proc/cpuinfo", "re");
	char line[512], *v;

	snprintf(buf, cap, "unknown");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "model name", 10) || !(v = strchr(line, ':')))
			continue;
		v += strspn(v + 1, " \t") + 1;
		v[strcspn(v, "\n")] = '\0';
		snprintf(buf, cap, "%s", v);
		break;
	}
	fclose(f);
}

/* ---- synthetic data ------------------------------------------------- */

static uint64_t kv_seed(const uint8_t hash[KVFS_HASH_LEN])
{
	uint64_t s;

	memcpy(&s, hash, sizeof(s)); /* SHA-256 output: already uniform */
	return s;
}

void kvb_kv_fill(const uint8_t hash[KVFS_HASH_LEN], void *buf, size_t len)
{
	uint64_t s = kv_seed(hash), w;
	unsigned char *p = buf;

	for (; len >= 8; len -= 8, p += 8) {
		w = kvb_rand(&s);
		memcpy(p, &w, 8);
	}
	if (len) {
		w = kvb_rand(&s);
		memcpy(p, &w, len);
	}
}

size_t kvb_kv_check(const uint8_t hash[KVFS_HASH_LEN], const void *buf,
		    size_t len)
{
	const unsigned char *p = buf;
	uint64_t s = kv_seed(hash), w;
	size_t off = 0;

	for (; off + 8 <= len; off += 8) {
		w = kvb_rand(&s);
		if (memcmp(p + off, &w, 8))
			break;
	}
	if (off < len) {
		/* the slow path only runs on a mismatch or a short tail */
		unsigned char b[8];

		w = kvb_rand(&s);
		memcpy(b, &w, 8);
		for (size_t k = 0; off < len && k < 8; k++, off++)
			if (p[off] != b[k])
				return off;
	}
	return off;
}

/* ---- output --------------------------------------------------------- */

void kvb_line(FILE *f, const char *key, const char *fmt, ...)
{
	va_list ap;

	fprintf(f, "  %-17s ", key);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
}

char *kvb_fmt_bytes(char *buf, size_t cap, double bytes)
{
	static const char *const unit[] = { "B", "kB", "MB", "GB", "TB" };
	unsigned u = 0;

	while (bytes >= 1000.0 && u < 4) {
		bytes /= 1000.0;
		u++;
	}
	snprintf(buf, cap, u ? "%.2f %s" : "%.0f %s", bytes, unit[u]);
	return buf;
}

char *kvb_fmt_size(char *buf, size_t cap, uint64_t bytes)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	unsigned u = 0;

	while (bytes && bytes % 1024 == 0 && u < 4) {
		bytes /= 1024;
		u++;
	}
	snprintf(buf, cap, "%llu %s", (unsigned long long)bytes, unit[u]);
	return buf;
}

void kvb_fail(const char *cmd, int err, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	/* where a signal stopped us is of no interest to anyone */
	if (err == -EINTR && kvb_stop) {
		cli_fail(cmd, 0, "interrupted");
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cli_fail(cmd, err, "%s", msg);
}

/* ---- main ----------------------------------------------------------- */

static void usage(FILE *f)
{
	fputs("usage: kvbench COMMAND [OPTIONS]\n"
	      "       kvbench help [COMMAND]\n"
	      "       kvbench -h | --help\n"
	      "       kvbench -V | --version\n"
	      "\n"
	      "Benchmarks of kvfs, each beside a baseline in the same run.\n"
	      "\n"
	      "commands:\n",
	      f);
	for (size_t i = 0; i < KVB_NCMDS; i++)
		fprintf(f, "  %-9s %s\n", kvb_cmds[i].name,
			kvb_cmds[i].summary);
	fputs("\n'kvbench COMMAND --help' shows a command's options; "
	      "see kvbench(1).\n",
	      f);
}

static const struct kvb_cmd *cmd_find(const char *name)
{
	for (size_t i = 0; i < KVB_NCMDS; i++)
		if (!strcmp(kvb_cmds[i].name, name))
			return &kvb_cmds[i];
	return NULL;
}

static int cmd_help(int argc, char **argv)
{
	const struct kvb_cmd *c;

	if (argc < 2 || cli_is_help(argv[1])) {
		usage(stdout);
		return KVB_EXIT_OK;
	}
	if (argc > 2)
		return cli_usage_error("help", "unexpected argument '%s'",
				       argv[2]);
	c = cmd_find(argv[1]);
	if (!c)
		return cli_usage_error("help", "no command '%s'", argv[1]);
	if (c->usage)
		c->usage(stdout);
	else
		usage(stdout);
	return KVB_EXIT_OK;
}

int main(int argc, char **argv)
{
	const struct kvb_cmd *c;
	int rc;

	cli_init("kvbench");
	kvfs_log_init("kvbench", KVFS_LOG_WARN);
	if (argc < 2) {
		usage(stderr);
		return KVB_EXIT_USAGE;
	}
	if (cli_is_help(argv[1])) {
		usage(stdout);
		return KVB_EXIT_OK;
	}
	if (cli_is_version(argv[1])) {
		cli_version(stdout);
		return KVB_EXIT_OK;
	}
	c = cmd_find(argv[1]);
	if (!c)
		return cli_usage_error(NULL, "no command '%s'", argv[1]);
	kvb_signals_init();
	/* also on exit() from deep inside a library */
	atexit(kvb_cleanup_run);
	rc = c->fn(argc - 1, argv + 1);
	kvb_cleanup_run();
	return rc;
}
