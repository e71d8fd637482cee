/*
 * kvfsd_opts.c - kvfsd's command line and its embedded defaults.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "src/common/hash.h"
#include "fuse/kvfsd.h"
#include "kvstore/cluster.h"
#include "fuse/kvfsd_cluster.h"
#include "kvstore/pool.h"
#include "kvstore/xfer.h"

#define KOPT(t, m) { t, offsetof(struct kvfsd_opts, m), 1 }

static const struct fuse_opt kvfsd_fuse_opts[] = {
	KOPT("state=%s", state_o),
	KOPT("pool=%s", pool_o),
	KOPT("ctl=%s", ctl_o),
	KOPT("slot_size=%s", slot_size_o),
	KOPT("slots=%s", slots_o),
	KOPT("block_tokens=%s", block_tokens_o),
	KOPT("ctl_mode=%s", ctl_mode_o),
	KOPT("lease_ms=%s", lease_ms_o),
	KOPT("reformat", reformat),
	KOPT("--cluster %s", cluster_o),
	KOPT("--cluster=%s", cluster_o),
	KOPT("--node-id %s", node_id_o),
	KOPT("--node-id=%s", node_id_o),
	KOPT("--listen %s", listen_o),
	KOPT("--listen=%s", listen_o),
	KOPT("--secret-file %s", secret_file_o),
	KOPT("--secret-file=%s", secret_file_o),
	KOPT("--replicas %s", replicas_o),
	KOPT("--replicas=%s", replicas_o),
	KOPT("--transport %s", transport_o),
	KOPT("--transport=%s", transport_o),
	KOPT("--conductor %s", conductor_o),
	KOPT("--conductor=%s", conductor_o),
	KOPT("--timeout-ms %s", timeout_ms_o),
	KOPT("--timeout-ms=%s", timeout_ms_o),
	FUSE_OPT_END
};

void kvfsd_usage(FILE *fp)
{
	fputs("usage: kvfsd [options] MOUNTPOINT\n"
	      "\n"
	      "Mount the kvfs KV-cache namespace on MOUNTPOINT; see kvfsd(8).\n"
	      "\n"
	      "  -f                 stay in the foreground\n"
	      "  -d                 debug output (implies -f)\n"
	      "  -s                 single-threaded\n"
	      "  -h, --help         this help, then the FUSE options\n"
	      "  -V, --version      versions of kvfsd and libfuse\n"
	      "\n"
	      "kvfs options (-o name=value,...):\n"
	      "  state=DIR          state directory: RocksDB index, control\n"
	      "                     socket (default /var/lib/kvfs/MOUNT as\n"
	      "                     root, else $XDG_STATE_HOME/kvfs/MOUNT or\n"
	      "                     ~/.local/state/kvfs/MOUNT)\n"
	      "  pool=PATH          pool file (default\n"
	      "                     /dev/shm/kvfs-HASH.pool, HASH of DIR)\n"
	      "  slot_size=BYTES    bytes per slot: the largest block; a\n"
	      "                     multiple of 4096, K/M/G suffixes (default\n"
	      "                     the existing pool's, else 2M)\n"
	      "  slots=N            blocks the pool holds (default the\n"
	      "                     existing pool's, else min(1024, half the\n"
	      "                     free space of /dev/shm / slot_size))\n"
	      "  block_tokens=N     tokens per block of a new namespace (512)\n"
	      "  ctl=PATH           control socket (default DIR/ctl.sock)\n"
	      "  ctl_mode=MODE      its permissions, octal (default 0600)\n"
	      "  lease_ms=N         default prefix-match lease (10000)\n"
	      "  reformat           format pool and index anew when their\n"
	      "                     geometry differs (drops every block)\n"
	      "\n"
	      "cluster options (kvfs(7), CLUSTER; without --cluster kvfsd is\n"
	      "a single node and needs no etcd):\n"
	      "  --cluster etcd://HOST:PORT[,HOST:PORT...]/NAME\n"
	      "                     join cluster NAME, whose membership is\n"
	      "                     kept in the etcd at HOST:PORT (several:\n"
	      "                     the next is tried when one is down)\n"
	      "  --node-id ID       this node's id: 1..63 of [A-Za-z0-9._-]\n"
	      "  --listen HOST:PORT where peers reach this node (port 0:\n"
	      "                     any free one)\n"
	      "  --secret-file PATH the cluster secret peers authenticate\n"
	      "                     with (16..4096 bytes)\n"
	      "  --replicas R       copies of each block (default 2)\n"
	      "  --transport auto|tcp|rdma\n"
	      "                     how blocks move (default auto: rdma when\n"
	      "                     a device is present, else tcp)\n"
	      "  --timeout-ms N     bound on each remote operation (5000)\n"
	      "  --conductor HOST:PORT\n"
	      "                     send block events to kvconductor there\n"
	      "                     (needs a numeric --node-id)\n"
	      "\n"
	      "Other -o options go to FUSE (allow_other, default_permissions,\n"
	      "max_threads=N, clone_fd, ...); mount-only options (defaults,\n"
	      "noauto, _netdev, ...) are for mount.kvfs(8).\n",
	      fp);
}

int kvfsd_opts_parse(struct fuse_args *args, struct kvfsd_opts *o)
{
	if (fuse_opt_parse(args, o, kvfsd_fuse_opts, NULL) < 0)
		return -EINVAL;
	/* the mount's source in /proc/mounts: kvfs, unless the user's -o
	 * fsname= (mount.kvfs passes the fstab source), which comes later */
	if (fuse_opt_insert_arg(args, 1, "-ofsname=kvfs") < 0)
		return -ENOMEM;
	if (fuse_parse_cmdline(args, &o->cmd) < 0)
		return -EINVAL;
	/* and its type: fuse.kvfs, the type fstab names; last, to override
	 * the subtype=kvfsd fuse_parse_cmdline adds */
	if (fuse_opt_add_arg(args, "-osubtype=kvfs") < 0)
		return -ENOMEM;
	if (o->cmd.show_help) {
		kvfsd_usage(stdout);
		fputs("\nFUSE options:\n", stdout);
		fflush(stdout);
		fuse_lowlevel_help();
		return 1;
	}
	if (o->cmd.show_version) {
		printf("kvfsd %s\n", PACKAGE_VERSION);
		fflush(stdout);
		fuse_lowlevel_version();
		return 1;
	}
	if (!o->cmd.mountpoint) {
		fputs("kvfsd: no mountpoint (see kvfsd --help)\n", stderr);
		return -EINVAL;
	}
	return 0;
}

void kvfsd_opts_free(struct kvfsd_opts *o)
{
	free(o->state_o);
	free(o->pool_o);
	free(o->ctl_o);
	free(o->slot_size_o);
	free(o->slots_o);
	free(o->block_tokens_o);
	free(o->ctl_mode_o);
	free(o->lease_ms_o);
	free(o->cluster_o);
	free(o->node_id_o);
	free(o->listen_o);
	free(o->secret_file_o);
	free(o->replicas_o);
	free(o->transport_o);
	free(o->conductor_o);
	free(o->timeout_ms_o);
	free(o->cmd.mountpoint);
	free(o->state_dir);
	free(o->index_dir);
	free(o->pool_path);
	free(o->ctl_path);
	memset(o, 0, sizeof(*o));
}

/* ---- values -------------------------------------------------------- */

static int bad_value(const char *opt, const char *v, const char *why)
{
	fprintf(stderr, "kvfsd: bad value '%s' for -o %s: %s\n", v, opt, why);
	return -EINVAL;
}

/* decimal, with an optional K, M or G suffix (powers of 1024) */
static int parse_num(const char *opt, const char *v, uint64_t min,
		     uint64_t max, bool suffix, uint64_t *out)
{
	unsigned long long n;
	unsigned shift = 0;
	char *end;

	errno = 0;
	n = strtoull(v, &end, 10);
	if (end == v || *v == '-' || errno)
		return bad_value(opt, v, "not a number");
	if (suffix && *end) {
		const char *units = "KMG";
		const char *u = strchr(units, *end & ~0x20);

		if (!u || !*u)
			return bad_value(opt, v, "unknown suffix");
		shift = 10 * (unsigned)(u - units + 1);
		end++;
	}
	if (*end)
		return bad_value(opt, v, "trailing characters");
	if (n > (max >> shift) || (n << shift) < min) {
		fprintf(stderr,
			"kvfsd: bad value '%s' for -o %s: outside %llu..%llu\n",
			v, opt, (unsigned long long)min,
			(unsigned long long)max);
		return -EINVAL;
	}
	*out = (uint64_t)n << shift;
	return 0;
}

static int parse_mode(const char *v, mode_t *out)
{
	unsigned long m;
	char *end;

	errno = 0;
	m = strtoul(v, &end, 8);
	if (end == v || *end || errno || m > 0777)
		return bad_value("ctl_mode", v, "not an octal mode 0..0777");
	*out = (mode_t)m;
	return 0;
}

static int parse_numbers(struct kvfsd_opts *o)
{
	uint64_t v;
	int rc;

	o->ctl_mode = KVFSD_CTL_MODE;
	o->block_tokens = KVFSD_BLOCK_TOKENS;
	if (o->slot_size_o) {
		rc = parse_num("slot_size", o->slot_size_o, KV_POOL_SLOT_ALIGN,
			       1ull << 40, true, &o->slot_size);
		if (rc < 0)
			return rc;
		if (o->slot_size % KV_POOL_SLOT_ALIGN)
			return bad_value("slot_size", o->slot_size_o,
					 "not a multiple of 4096");
	}
	if (o->slots_o) {
		rc = parse_num("slots", o->slots_o, 1, UINT32_MAX - 1, true,
			       &v);
		if (rc < 0)
			return rc;
		o->slots = (uint32_t)v;
	}
	if (o->block_tokens_o) {
		rc = parse_num("block_tokens", o->block_tokens_o, 1,
			       KVFS_BLOCK_TOKENS_MAX, false, &v);
		if (rc < 0)
			return rc;
		o->block_tokens = (uint32_t)v;
	}
	if (o->lease_ms_o) {
		rc = parse_num("lease_ms", o->lease_ms_o, 1, UINT32_MAX, false,
			       &v);
		if (rc < 0)
			return rc;
		o->lease_ms = (uint32_t)v;
	}
	return o->ctl_mode_o ? parse_mode(o->ctl_mode_o, &o->ctl_mode) : 0;
}

/* ---- paths --------------------------------------------------------- */

static char *join(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *s = malloc(la + lb + 2);

	if (!s)
		return NULL;
	memcpy(s, a, la);
	s[la] = '/';
	memcpy(s + la + 1, b, lb + 1);
	return s;
}

/* the mountpoint as one path component, as `systemd-escape --path`:
 * /mnt/kvfs -> mnt-kvfs, "-" and other bytes -> \xNN, / -> "-" */
static char *escape_path(const char *path)
{
	char *s = malloc(strlen(path) * 4 + 2), *p = s;

	if (!s)
		return NULL;
	while (*path == '/')
		path++;
	if (!*path)
		return strcpy(s, "-");
	for (const char *c = path; *c; c++) {
		unsigned char ch = (unsigned char)*c;
		bool plain = (ch >= 'a' && ch <= 'z') ||
			     (ch >= 'A' && ch <= 'Z') ||
			     (ch >= '0' && ch <= '9') || ch == '_' ||
			     ch == ':' || (ch == '.' && c != path);

		if (ch == '/' && c[1] == '\0')
			break;
		if (ch == '/')
			*p++ = '-';
		else if (plain)
			*p++ = (char)ch;
		else
			p += sprintf(p, "\\x%02x", ch);
	}
	*p = '\0';
	return s;
}

/* where states live when -o state is not given */
static char *state_base(void)
{
	const char *xdg = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");
	struct passwd *pw;

	if (geteuid() == 0)
		return strdup("/var/lib/kvfs");
	if (xdg && xdg[0] == '/')
		return join(xdg, "kvfs");
	if (!home || home[0] != '/') {
		pw = getpwuid(geteuid());
		home = pw ? pw->pw_dir : NULL;
	}
	return home ? join(home, ".local/state/kvfs") : NULL;
}

/* mkdir -p: missing parents 0755 as root (they hold only per-mount
 * directories), 0700 otherwise (XDG); the leaf with leaf_mode */
static int mkdir_p(const char *path, mode_t leaf_mode)
{
	char *p = strdup(path);
	mode_t mid = geteuid() == 0 ? 0755 : 0700;
	int rc = 0;

	if (!p)
		return -ENOMEM;
	for (char *c = p + 1; *c && rc == 0; c++) {
		if (*c != '/')
			continue;
		*c = '\0';
		if (mkdir(p, mid) < 0 && errno != EEXIST)
			rc = -errno;
		*c = '/';
	}
	if (rc == 0 && mkdir(p, leaf_mode) < 0 && errno != EEXIST)
		rc = -errno;
	free(p);
	return rc;
}

/*
 * The state directory holds the control socket, so clients must be able
 * to search it: a new one gets search permission for each class ctl_mode
 * lets connect (0600 -> 0700, 0660 -> 0710, 0666 -> 0711).
 */
static int make_state_dir(struct kvfsd_opts *o)
{
	mode_t mode = 0700 | ((o->ctl_mode & 0060) ? 0010 : 0) |
		      ((o->ctl_mode & 0006) ? 0001 : 0);
	char *base, *leaf, real[PATH_MAX];
	int rc;

	if (o->state_o) {
		o->state_dir = strdup(o->state_o);
	} else {
		base = state_base();
		leaf = escape_path(o->cmd.mountpoint);
		o->state_dir = base && leaf ? join(base, leaf) : NULL;
		free(base);
		free(leaf);
	}
	if (!o->state_dir) {
		fputs("kvfsd: no state directory (set HOME or -o state)\n",
		      stderr);
		return -ENOMEM;
	}
	rc = mkdir_p(o->state_dir, mode);
	if (rc == 0 && !realpath(o->state_dir, real))
		rc = -errno;
	if (rc < 0) {
		fprintf(stderr, "kvfsd: state directory %s: %s\n",
			o->state_dir, strerror(-rc));
		return rc;
	}
	free(o->state_dir);
	o->state_dir = strdup(real);
	return o->state_dir ? 0 : -ENOMEM;
}

/* FNV-1a 64: names the pool after the state; no secret, just distinct */
static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}

static int make_paths(struct kvfsd_opts *o)
{
	char name[64];

	o->index_dir = join(o->state_dir, "index");
	if (o->ctl_o)
		o->ctl_path = strdup(o->ctl_o);
	else
		o->ctl_path = join(o->state_dir, "ctl.sock");
	if (o->pool_o) {
		o->pool_path = strdup(o->pool_o);
	} else {
		snprintf(name, sizeof(name), "kvfs-%016llx.pool",
			 (unsigned long long)fnv1a(o->state_dir));
		o->pool_path = join(KVFSD_SHM_DIR, name);
	}
	if (!o->index_dir || !o->ctl_path || !o->pool_path)
		return -ENOMEM;
	if (o->pool_path[0] != '/' || o->ctl_path[0] != '/') {
		fputs("kvfsd: -o pool and -o ctl must be absolute paths\n",
		      stderr);
		return -EINVAL;
	}
	return 0;
}

/* ---- pool geometry ------------------------------------------------- */

/* the geometry of an existing pool, from its header (pool.h layout) */
static bool pool_geometry(const char *path, uint64_t *slot_size,
			  uint32_t *nslots)
{
	unsigned char h[32];
	uint64_t ss;
	uint32_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t got;

	if (fd < 0)
		return false;
	got = pread(fd, h, sizeof(h), 0);
	close(fd);
	if (got != (ssize_t)sizeof(h) || memcmp(h, "KVFSPOOL", 8) != 0)
		return false;
	memcpy(&ss, h + 16, sizeof(ss));
	memcpy(&n, h + 24, sizeof(n));
	*slot_size = le64toh(ss);
	*nslots = le32toh(n);
	return *slot_size && *nslots;
}

/* bytes free for the pool: its file system's, plus what it already has */
static uint64_t pool_room(const char *path)
{
	char *dir = strdup(path), *slash;
	struct statvfs v;
	struct stat st;
	uint64_t room = 0;

	if (!dir)
		return 0;
	slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = '\0';
	else if (slash)
		*slash = '\0';
	if (statvfs(dir, &v) == 0)
		room = (uint64_t)v.f_bavail * v.f_frsize;
	if (stat(path, &st) == 0)
		room += (uint64_t)st.st_blocks * 512;
	free(dir);
	return room;
}

/*
 * The pool is a sparse file in tmpfs: its pages are taken as blocks are
 * written, and a write that finds tmpfs full kills the daemon (SIGBUS).
 * So the default takes at most half of the free space, which also leaves
 * room for the other tenants of /dev/shm (NCCL, data loaders, engines),
 * and is capped at 1024 slots (2 GiB of 2 MiB slots).
 */
static int pool_size(struct kvfsd_opts *o)
{
	uint64_t ss = 0, room;
	uint32_t n = 0;

	if (!o->reformat && pool_geometry(o->pool_path, &ss, &n)) {
		if (!o->slot_size)
			o->slot_size = ss;
		if (!o->slots && o->slot_size == ss)
			o->slots = n;
	}
	if (!o->slot_size)
		o->slot_size = KVFSD_SLOT_SIZE;
	room = pool_room(o->pool_path);
	if (!o->slots) {
		uint64_t fit = room / 2 / o->slot_size;

		o->slots = fit < KVFSD_SLOTS_MAX_DEFAULT
				   ? (uint32_t)fit
				   : KVFSD_SLOTS_MAX_DEFAULT;
		if (o->slots == 0) {
			fprintf(stderr,
				"kvfsd: too little free space for %s (%llu "
				"bytes); give -o slots=N or -o pool=PATH\n",
				o->pool_path, (unsigned long long)room);
			return -ENOSPC;
		}
	}
	if ((uint64_t)o->slots * o->slot_size > room)
		fprintf(stderr,
			"kvfsd: warning: a pool of %u x %llu bytes exceeds the "
			"%llu bytes free for %s; filling it would crash the "
			"daemon\n",
			o->slots, (unsigned long long)o->slot_size,
			(unsigned long long)room, o->pool_path);
	return 0;
}

static int usage_error(const char *msg, const char *arg)
{
	fprintf(stderr, "kvfsd: %s%s\n", msg, arg ? arg : "");
	return -EINVAL;
}

/* the cluster options: all or nothing, checked before anything starts */
static int parse_cluster(struct kvfsd_opts *o)
{
	const char *only[] = { o->node_id_o, o->listen_o, o->secret_file_o,
			       o->replicas_o, o->transport_o, o->conductor_o,
			       o->timeout_ms_o };
	char ep[KV_CLUSTER_EPS_MAX], name[256];
	enum kv_transport t = KV_TRANSPORT_AUTO;
	uint64_t v;
	int rc;

	o->replicas = KVFSD_REPLICAS;
	o->timeout_ms = KV_XFER_TIMEOUT_MS;
	if (!o->cluster_o) {
		for (size_t i = 0; i < sizeof(only) / sizeof(only[0]); i++)
			if (only[i])
				return usage_error("cluster options need "
						   "--cluster", NULL);
		return 0;
	}
	if (kv_cluster_url_parse(o->cluster_o, ep, sizeof(ep), name,
				 sizeof(name)) < 0)
		return usage_error("bad --cluster (want "
				   "etcd://HOST:PORT[,HOST:PORT...]/NAME): ",
				   o->cluster_o);
	if (!o->node_id_o)
		return usage_error("--cluster needs --node-id", NULL);
	if (kv_node_id_valid(o->node_id_o) < 0)
		return usage_error("bad --node-id (1..63 of [A-Za-z0-9._-]): ",
				   o->node_id_o);
	if (!o->listen_o)
		return usage_error("--cluster needs --listen HOST:PORT", NULL);
	if (!strrchr(o->listen_o, ':') || o->listen_o[0] == ':')
		return usage_error("bad --listen (want HOST:PORT): ",
				   o->listen_o);
	if (!o->secret_file_o)
		return usage_error("--cluster needs --secret-file", NULL);
	if (o->transport_o && kv_transport_parse(o->transport_o, &t) < 0)
		return usage_error("bad --transport (auto, tcp or rdma): ",
				   o->transport_o);
	o->transport = t;
	if (o->replicas_o) {
		rc = parse_num("--replicas", o->replicas_o, 1, 16, false, &v);
		if (rc < 0)
			return rc;
		o->replicas = (unsigned)v;
	}
	if (o->timeout_ms_o) {
		rc = parse_num("--timeout-ms", o->timeout_ms_o, 10, 600000,
			       false, &v);
		if (rc < 0)
			return rc;
		o->timeout_ms = (uint32_t)v;
	}
	return 0;
}

int kvfsd_opts_resolve(struct kvfsd_opts *o)
{
	int rc = parse_numbers(o);

	if (rc == 0)
		rc = parse_cluster(o);

	if (rc == 0)
		rc = make_state_dir(o);
	if (rc == 0)
		rc = make_paths(o);
	if (rc == 0)
		rc = pool_size(o);
	return rc;
}
