/*
 * kvfsd_opts.c - kvfsd's command line and its embedded defaults.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "src/common/cli.h"
#include "src/common/ctlproto.h"
#include "src/common/hash.h"
#include "fuse/kvfsd.h"
#include "kvstore/cluster.h"
#include "fuse/kvfsd_cluster.h"
#include "kvstore/pool.h"
#include "kvstore/xfer.h"

#define KOPT(t, m)                                                             \
	{                                                                      \
		t, offsetof(struct kvfsd_opts, m), 1                           \
	}

static const struct fuse_opt kvfsd_fuse_opts[] = {
	KOPT("state=%s", state_o),
	KOPT("pool=%s", pool_o),
	KOPT("ctl=%s", ctl_o),
	KOPT("slot_size=%s", slot_size_o),
	KOPT("capacity=%s", capacity_o),
	KOPT("slots=%s", slots_o),
	KOPT("block_tokens=%s", block_tokens_o),
	KOPT("layout=%s", layout_o),
	KOPT("ctl_mode=%s", ctl_mode_o),
	KOPT("lease_ms=%s", lease_ms_o),
	KOPT("ctl_idle=%s", ctl_idle_o),
	KOPT("ctl_uid_clients=%s", ctl_uid_clients_o),
	KOPT("ctl_leases=%s", ctl_leases_o),
	KOPT("ctl_uid_leases=%s", ctl_uid_leases_o),
	KOPT("ctl_maps=%s", ctl_maps_o),
	KOPT("lease_max_ms=%s", lease_max_ms_o),
	KOPT("reformat", reformat),
	KOPT("prealloc", prealloc),
	KOPT("passthrough", passthrough),
	KOPT("writethrough", writethrough),
	KOPT("--cluster %s", cluster_o),
	KOPT("--cluster=%s", cluster_o),
	KOPT("--node-id %s", node_id_o),
	KOPT("--node-id=%s", node_id_o),
	KOPT("--listen %s", listen_o),
	KOPT("--listen=%s", listen_o),
	KOPT("--secret-file %s", secret_file_o),
	KOPT("--secret-file=%s", secret_file_o),
	KOPT("--etcd-ca %s", etcd_ca_o),
	KOPT("--etcd-ca=%s", etcd_ca_o),
	KOPT("--etcd-cert %s", etcd_cert_o),
	KOPT("--etcd-cert=%s", etcd_cert_o),
	KOPT("--etcd-key %s", etcd_key_o),
	KOPT("--etcd-key=%s", etcd_key_o),
	KOPT("--etcd-user %s", etcd_user_o),
	KOPT("--etcd-user=%s", etcd_user_o),
	KOPT("--etcd-password-file %s", etcd_password_file_o),
	KOPT("--etcd-password-file=%s", etcd_password_file_o),
	KOPT("--replicas %s", replicas_o),
	KOPT("--replicas=%s", replicas_o),
	KOPT("--transport %s", transport_o),
	KOPT("--transport=%s", transport_o),
	KOPT("--conductor %s", conductor_o),
	KOPT("--conductor=%s", conductor_o),
	KOPT("--timeout-ms %s", timeout_ms_o),
	KOPT("--timeout-ms=%s", timeout_ms_o),
	KOPT("--discard", discard),
	KOPT("--no-mount", no_mount),
	FUSE_OPT_END
};

void kvfsd_usage(FILE *fp)
{
	fputs("usage: kvfsd [options] MOUNTPOINT\n"
	      "       kvfsd --discard [-o state=DIR,pool=PATH] MOUNTPOINT\n"
	      "       kvfsd --no-mount [options] MOUNTPOINT\n"
	      "\n"
	      "Mount the kvfs KV-cache namespace on MOUNTPOINT; see kvfsd(8).\n"
	      "\n"
	      "  -f                 stay in the foreground\n"
	      "  -d                 debug output (implies -f)\n"
	      "  -s                 single-threaded\n"
	      "  -h, --help         this help, then the FUSE options\n"
	      "  -V, --version      versions of kvfsd and libfuse\n"
	      "  --discard          remove the pool and the state (index,\n"
	      "                     socket) MOUNTPOINT's options name, and\n"
	      "                     exit; refused while a kvfsd uses them\n"
	      "  --no-mount         serve the control socket and the pool\n"
	      "                     (libkvfs) without mounting MOUNTPOINT,\n"
	      "                     which still names the defaults: for a\n"
	      "                     machine without FUSE\n"
	      "\n"
	      "kvfs options (-o name=value,...):\n"
	      "  state=DIR          state directory: RocksDB index, control\n"
	      "                     socket (default /var/lib/kvfs/MOUNT as\n"
	      "                     root, else $XDG_STATE_HOME/kvfs/MOUNT or\n"
	      "                     ~/.local/state/kvfs/MOUNT)\n"
	      "  pool=PATH          pool file (default\n"
	      "                     /dev/shm/kvfs-HASH.pool, HASH of DIR)\n"
	      "  slot_size=BYTES    bytes per slot; a bigger file spills\n"
	      "                     into a file of its own; a multiple of\n"
	      "                     4096, K/M/G suffixes (default the\n"
	      "                     existing pool's, else 2M)\n"
	      "  slots=N            blocks the pool holds (default the\n"
	      "                     existing pool's, else min(1024, half the\n"
	      "                     free space of /dev/shm / slot_size))\n"
	      "  capacity=BYTES     bytes all files may hold, slots and\n"
	      "                     spilled files (default slots * slot_size)\n"
	      "  block_tokens=N     tokens per block of a new namespace (512)\n"
	      "  layout=open|chain  layout of a namespace made by mkdir "
	      "(open)\n"
	      "  ctl=PATH           control socket (default DIR/ctl.sock)\n"
	      "  ctl_mode=MODE      its permissions, octal (default 0600)\n"
	      "  lease_ms=N         default prefix-match lease (10000)\n"
	      "  lease_max_ms=N     longest lease a client gets; longer\n"
	      "                     ones are cut to it (3600000; 0: 24 h)\n"
	      "  ctl_idle=S         close a control client that holds\n"
	      "                     nothing after S s without a request\n"
	      "                     (60; 0: never)\n"
	      "  ctl_uid_clients=N  control connections per uid (128)\n"
	      "  ctl_leases=N       live match leases per connection (4096)\n"
	      "  ctl_uid_leases=N   live leases per uid (32768)\n"
	      "  ctl_maps=N         blocks mapped per connection (65536)\n"
	      "                     (for the four caps, 0: no cap)\n"
	      "  reformat           format pool and index anew when their\n"
	      "                     geometry differs (drops every block)\n"
	      "  prealloc           take all of the pool's memory at start\n"
	      "                     (first writes run at full speed; a\n"
	      "                     full /dev/shm is found at start)\n"
	      "  writethrough       no write-back cache: every write(2)\n"
	      "                     reaches kvfsd before it returns\n"
	      "  passthrough        the kernel reads files bigger than a\n"
	      "                     slot straight from their own files\n"
	      "                     (root, Linux >= 6.9); implies\n"
	      "                     writethrough\n"
	      "\n"
	      "cluster options (kvfs(7), CLUSTER; without --cluster kvfsd is\n"
	      "a single node and needs no etcd):\n"
	      "  --cluster etcd://HOST:PORT[,HOST:PORT...]/NAME\n"
	      "                     join cluster NAME, whose membership is\n"
	      "                     kept in the etcd at HOST:PORT (several:\n"
	      "                     the next is tried when one is down);\n"
	      "                     etcds://...: to etcd over TLS\n"
	      "  --node-id ID       this node's id: 1..63 of [A-Za-z0-9._-]\n"
	      "                     (default without --cluster: 0)\n"
	      "  --listen HOST:PORT where peers reach this node (port 0:\n"
	      "                     any free one)\n"
	      "  --secret-file PATH the cluster secret peers authenticate\n"
	      "                     with (16..4096 bytes); it also signs\n"
	      "                     the records kvfsd keeps in etcd\n"
	      "  --etcd-ca PATH     CAs etcd's certificate must chain to\n"
	      "                     (etcds:// only; default the system's)\n"
	      "  --etcd-cert PATH --etcd-key PATH\n"
	      "                     client certificate for etcd and its\n"
	      "                     key (etcds:// only)\n"
	      "  --etcd-user NAME --etcd-password-file PATH\n"
	      "                     authenticate to etcd as NAME with the\n"
	      "                     password in PATH (not readable by\n"
	      "                     group or others)\n"
	      "  --replicas R       copies of each block (default 2)\n"
	      "  --transport auto|tcp|rdma\n"
	      "                     how blocks move (default auto: rdma when\n"
	      "                     a device is present, else tcp)\n"
	      "  --timeout-ms N     bound on each remote operation (5000)\n"
	      "  --conductor HOST:PORT\n"
	      "                     send block events to kvconductor there,\n"
	      "                     as node --node-id (a number < 65536);\n"
	      "                     also without --cluster\n"
	      "  --conductor etcd:NAME\n"
	      "  --conductor etcd[s]://HOST:PORT[,HOST:PORT...]/NAME\n"
	      "                     send them to the leader of conductor\n"
	      "                     election NAME, in the etcd of --cluster\n"
	      "                     or at HOST:PORT, and follow it\n"
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
		cli_version(stdout);
		fflush(stdout);
		fuse_lowlevel_version();
		return 1;
	}
	if (!o->cmd.mountpoint) {
		cli_usage_error(NULL, "no mountpoint");
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
	free(o->capacity_o);
	free(o->slots_o);
	free(o->block_tokens_o);
	free(o->layout_o);
	free(o->ctl_mode_o);
	free(o->lease_ms_o);
	free(o->ctl_idle_o);
	free(o->ctl_uid_clients_o);
	free(o->ctl_leases_o);
	free(o->ctl_uid_leases_o);
	free(o->ctl_maps_o);
	free(o->lease_max_ms_o);
	free(o->cluster_o);
	free(o->node_id_o);
	free(o->listen_o);
	free(o->secret_file_o);
	free(o->etcd_ca_o);
	free(o->etcd_cert_o);
	free(o->etcd_key_o);
	free(o->etcd_user_o);
	free(o->etcd_password_file_o);
	free(o->replicas_o);
	free(o->transport_o);
	free(o->conductor_o);
	free(o->timeout_ms_o);
	free(o->cmd.mountpoint);
	free(o->state_dir);
	free(o->index_dir);
	free(o->pool_path);
	free(o->ctl_path);
	free(o->made_dir);
	memset(o, 0, sizeof(*o));
}

/* ---- values -------------------------------------------------------- */

/* one usage error; returns -EINVAL */
static __attribute__((format(printf, 1, 2))) int usage_error(const char *fmt,
							     ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cli_usage_error(NULL, "%s", msg);
	return -EINVAL;
}

static int parse_mode(const char *v, mode_t *out)
{
	unsigned long m;
	char *end;

	errno = 0;
	m = strtoul(v, &end, 8);
	if (end == v || *v < '0' || *v > '7' || *end || errno || m > 0777) {
		cli_usage_error(NULL,
				"-o ctl_mode: '%s' is not an octal mode "
				"0..0777",
				v);
		return -EINVAL;
	}
	*out = (mode_t)m;
	return 0;
}

/* -o NAME=N into *out when given: 0..max */
static int parse_uint(const char *name, const char *v, uint64_t max,
		      unsigned *out)
{
	char opt[32];
	uint64_t n;
	int rc;

	if (!v)
		return 0;
	snprintf(opt, sizeof(opt), "-o %s", name);
	rc = cli_parse_u64(NULL, opt, v, 0, max, &n);
	if (rc == 0)
		*out = (unsigned)n;
	return rc;
}

/* the control socket's limits: ctl.h's defaults, then -o */
static int parse_ctl_limits(struct kvfsd_opts *o)
{
	struct ctl_limits *l = &o->ctl_limits;
	unsigned ms = 0;
	int rc;

	ctl_limits_default(l);
	rc = parse_uint("ctl_idle", o->ctl_idle_o, 86400u * 365, &l->idle_s);
	if (!rc)
		rc = parse_uint("ctl_uid_clients", o->ctl_uid_clients_o,
				UINT32_MAX, &l->uid_clients);
	if (!rc)
		rc = parse_uint("ctl_leases", o->ctl_leases_o, UINT32_MAX,
				&l->conn_leases);
	if (!rc)
		rc = parse_uint("ctl_uid_leases", o->ctl_uid_leases_o,
				UINT32_MAX, &l->uid_leases);
	if (!rc)
		rc = parse_uint("ctl_maps", o->ctl_maps_o, UINT32_MAX,
				&l->conn_maps);
	if (!rc && o->lease_max_ms_o) {
		rc = parse_uint("lease_max_ms", o->lease_max_ms_o,
				CTLP_LEASE_MS_MAX, &ms);
		l->lease_max_ms = ms;
	}
	return rc;
}

static int parse_numbers(struct kvfsd_opts *o)
{
	uint64_t v;
	int rc;

	o->ctl_mode = KVFSD_CTL_MODE;
	o->block_tokens = KVFSD_BLOCK_TOKENS;
	if (o->slot_size_o) {
		rc = cli_parse_size(NULL, "-o slot_size", o->slot_size_o,
				    KV_POOL_SLOT_ALIGN, 1ull << 40,
				    &o->slot_size);
		if (rc < 0)
			return rc;
		if (o->slot_size % KV_POOL_SLOT_ALIGN) {
			cli_usage_error(NULL,
					"-o slot_size: '%s' is not a "
					"multiple of 4096",
					o->slot_size_o);
			return -EINVAL;
		}
	}
	if (o->capacity_o) {
		rc = cli_parse_size(NULL, "-o capacity", o->capacity_o,
				    KV_POOL_SLOT_ALIGN, 1ull << 50,
				    &o->capacity);
		if (rc < 0)
			return rc;
	}
	if (o->slots_o) {
		rc = cli_parse_size(NULL, "-o slots", o->slots_o, 1,
				    UINT32_MAX - 1, &v);
		if (rc < 0)
			return rc;
		o->slots = (uint32_t)v;
	}
	if (o->block_tokens_o) {
		rc = cli_parse_u64(NULL, "-o block_tokens", o->block_tokens_o,
				   1, KVFS_BLOCK_TOKENS_MAX, &v);
		if (rc < 0)
			return rc;
		o->block_tokens = (uint32_t)v;
	}
	o->layout = KV_LAYOUT_OPEN;
	if (o->layout_o && strcmp(o->layout_o, "chain") == 0) {
		o->layout = KV_LAYOUT_CHAIN;
	} else if (o->layout_o && strcmp(o->layout_o, "open") != 0) {
		cli_usage_error(NULL,
				"-o layout: '%s' is neither open nor chain",
				o->layout_o);
		return -EINVAL;
	}
	if (o->lease_ms_o) {
		rc = cli_parse_u64(NULL, "-o lease_ms", o->lease_ms_o, 1,
				   UINT32_MAX, &v);
		if (rc < 0)
			return rc;
		o->lease_ms = (uint32_t)v;
	}
	rc = parse_ctl_limits(o);
	if (rc < 0)
		return rc;
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
 * directories), 0700 otherwise (XDG); the leaf with leaf_mode.  *made:
 * the first directory created (malloc'd), which removes all it made */
static int mkdir_p(const char *path, mode_t leaf_mode, char **made)
{
	char *p = strdup(path);
	mode_t mid = geteuid() == 0 ? 0755 : 0700;
	int rc = 0;

	if (!p)
		return -ENOMEM;
	for (char *c = p + 1; rc == 0; c++) {
		bool leaf = *c == '\0';

		if (!leaf && *c != '/')
			continue;
		*c = '\0';
		if (mkdir(p, leaf ? leaf_mode : mid) == 0) {
			if (!*made)
				*made = strdup(p);
		} else if (errno != EEXIST) {
			rc = -errno;
		}
		if (leaf)
			break;
		*c = '/';
	}
	free(p);
	return rc;
}

/*
 * What realpath(3) will say of path once mkdir_p has made it, without
 * making it: the longest prefix that exists, resolved, and the rest
 * with "." and ".." taken lexically (none of it exists, so none of it is
 * a link).  The prefix must be a directory that we may write when
 * something is left to make.
 */
static int plan_path(const char *path, char **out)
{
	char real[PATH_MAX], cwd[PATH_MAX], *abs, *cut, *rest, *save, *c;
	size_t len;
	struct stat st;
	int rc = 0;

	if (path[0] == '/') {
		abs = strdup(path);
	} else {
		if (!getcwd(cwd, sizeof(cwd)))
			return -errno;
		abs = join(cwd, path);
	}
	if (!abs)
		return -ENOMEM;
	for (cut = abs + strlen(abs);;) {
		char keep = *cut;

		*cut = '\0';
		if (realpath(*abs ? abs : "/", real)) {
			*cut = keep;
			break;
		}
		*cut = keep;
		if (errno != ENOENT) {
			rc = -errno;
			goto out_free;
		}
		while (cut > abs && *--cut != '/')
			;
	}
	rest = cut;
	if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
		rc = -ENOTDIR;
		goto out_free;
	}
	if (*rest && access(real, W_OK | X_OK) < 0) {
		rc = -errno;
		goto out_free;
	}
	len = strlen(real);
	for (c = strtok_r(rest, "/", &save); c;
	     c = strtok_r(NULL, "/", &save)) {
		if (!strcmp(c, "."))
			continue;
		if (!strcmp(c, "..")) {
			while (len > 1 && real[--len] != '/')
				;
			real[len ? len : 1] = '\0';
			len = strlen(real);
			continue;
		}
		if (len + 1 + strlen(c) >= sizeof(real)) {
			rc = -ENAMETOOLONG;
			goto out_free;
		}
		if (real[len - 1] != '/')
			real[len++] = '/';
		strcpy(real + len, c);
		len += strlen(c);
	}
	*out = strdup(real);
	if (!*out)
		rc = -ENOMEM;
out_free:
	free(abs);
	return rc;
}

/* the state directory's path, resolved; nothing is created yet */
static int plan_state_dir(struct kvfsd_opts *o)
{
	char *want, *base, *leaf;
	struct stat st;
	int rc;

	if (o->state_o) {
		want = strdup(o->state_o);
	} else {
		base = state_base();
		leaf = escape_path(o->cmd.mountpoint);
		want = base && leaf ? join(base, leaf) : NULL;
		free(base);
		free(leaf);
	}
	if (!want) {
		cli_fail(NULL, 0, "no state directory (set HOME or -o state)");
		return -ENOMEM;
	}
	/* plan_path resolves links: refuse one here, while it is still seen
	 * (kvfsd_opts_create checks the directory itself) */
	if (lstat(want, &st) == 0 && S_ISLNK(st.st_mode)) {
		cli_fail(NULL, 0,
			 "state directory %s is a symbolic link; refusing it",
			 want);
		rc = -EPERM;
	} else {
		rc = plan_path(want, &o->state_dir);
		if (rc < 0)
			cli_fail(NULL, rc, "state directory %s", want);
	}
	free(want);
	return rc;
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
	if (o->pool_path[0] != '/' || o->ctl_path[0] != '/')
		return usage_error("-o pool and -o ctl must be absolute paths");
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
	/* no link followed, no FIFO waited on: the pool check proper is
	 * kv_pool_open's */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
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
static int pool_room(const char *path, uint64_t *room)
{
	char *dir = strdup(path), *slash;
	struct statvfs v;
	struct stat st;
	int rc = 0;

	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = '\0';
	else if (slash)
		*slash = '\0';
	*room = 0;
	if (statvfs(dir, &v) == 0)
		*room = (uint64_t)v.f_bavail * v.f_frsize;
	else
		rc = -errno;
	if (rc == 0 && stat(path, &st) == 0)
		*room += (uint64_t)st.st_blocks * 512;
	if (rc < 0)
		cli_fail(NULL, rc, "pool directory %s", dir);
	free(dir);
	return rc;
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
	int rc;

	if (!o->reformat && pool_geometry(o->pool_path, &ss, &n)) {
		if (!o->slot_size)
			o->slot_size = ss;
		if (!o->slots && o->slot_size == ss)
			o->slots = n;
	}
	if (!o->slot_size)
		o->slot_size = KVFSD_SLOT_SIZE;
	rc = pool_room(o->pool_path, &room);
	if (rc < 0)
		return rc;
	if (!o->slots) {
		uint64_t fit = room / 2 / o->slot_size;

		o->slots = fit < KVFSD_SLOTS_MAX_DEFAULT
				   ? (uint32_t)fit
				   : KVFSD_SLOTS_MAX_DEFAULT;
		if (o->slots == 0) {
			cli_fail(NULL, 0,
				 "too little free space for %s (%llu "
				 "bytes); give -o slots=N or -o pool=PATH",
				 o->pool_path, (unsigned long long)room);
			return -ENOSPC;
		}
	}
	/* a pool its file system cannot hold would crash the daemon once
	 * filled (SIGBUS): refused before anything is made */
	if ((uint64_t)o->slots * o->slot_size > room) {
		cli_fail(NULL, 0,
			 "a pool of %u slots of %llu bytes exceeds "
			 "the %llu bytes free for %s; give fewer -o slots",
			 o->slots, (unsigned long long)o->slot_size,
			 (unsigned long long)room, o->pool_path);
		return -ENOSPC;
	}
	if (o->capacity && o->capacity < o->slot_size) {
		cli_usage_error(NULL,
				"-o capacity: %llu is less than one slot "
				"(%llu bytes)",
				(unsigned long long)o->capacity,
				(unsigned long long)o->slot_size);
		return -EINVAL;
	}
	/* the same for files that spill: more than tmpfs holds would end
	 * in ENOSPC from tmpfs rather than an eviction */
	if (o->capacity > room) {
		cli_fail(NULL, 0,
			 "-o capacity=%llu exceeds the %llu bytes free for %s",
			 (unsigned long long)o->capacity,
			 (unsigned long long)room, o->pool_path);
		return -ENOSPC;
	}
	return 0;
}

/* the conductor's node number is the node id: a number below 65536 */
static bool node_number(const char *id)
{
	uint64_t n = 0;

	for (const char *c = id; *c; c++) {
		if (*c < '0' || *c > '9')
			return false;
		n = n * 10 + (uint64_t)(*c - '0');
		if (n > 65535)
			return false;
	}
	return *id != '\0';
}

/* --etcd-*: pairs given together, TLS files only with etcds:// */
static int parse_etcd_auth(const struct kvfsd_opts *o, bool tls)
{
	struct kv_etcd_auth a = { .ca_file = o->etcd_ca_o,
				  .cert_file = o->etcd_cert_o,
				  .key_file = o->etcd_key_o,
				  .user = o->etcd_user_o,
				  .password_file = o->etcd_password_file_o };
	const char *why;

	/* the same checks as kvconductor's (kvstore/etcd.h) */
	if (etcd_auth_check(&a, tls, &why) < 0)
		return usage_error("%s", why);
	return 0;
}

/* one of the --etcd-* options */
static bool etcd_opt(const struct kvfsd_opts *o, const char *opt)
{
	return opt == o->etcd_ca_o || opt == o->etcd_cert_o ||
	       opt == o->etcd_key_o || opt == o->etcd_user_o ||
	       opt == o->etcd_password_file_o;
}

/*
 * --conductor HOST:PORT, etcd:NAME (the election NAME in the etcd of
 * --cluster) or etcd[s]://HOST:PORT[,HOST:PORT...]/NAME, with the
 * --etcd-* options checked against that url when there is no --cluster
 */
static int parse_conductor(const struct kvfsd_opts *o)
{
	const char *c = o->conductor_o;
	char ep[KV_CLUSTER_EPS_MAX], name[256];

	if (!c)
		return 0;
	if (!strncmp(c, "etcd:", 5) && !strstr(c, "://")) {
		if (kv_node_id_valid(c + 5) < 0)
			return usage_error("bad --conductor '%s' (etcd:NAME, "
					   "NAME 1..63 of [A-Za-z0-9._-])",
					   c);
		if (!o->cluster_o)
			return usage_error("--conductor etcd:NAME needs "
					   "--cluster");
		return 0;
	}
	if (!strncmp(c, "etcd://", 7) || !strncmp(c, "etcds://", 8)) {
		if (etcd_url_parse(c, ep, sizeof(ep), name, sizeof(name),
				   NULL) < 0)
			return usage_error("bad --conductor '%s' (want "
					   "etcd[s]://HOST:PORT[,HOST:PORT...]"
					   "/NAME)",
					   c);
		return o->cluster_o ? 0
				    : parse_etcd_auth(
					      o, !strncmp(ep, "https://", 8));
	}
	if (!strrchr(c, ':') || c[0] == ':')
		return usage_error("bad --conductor '%s' (want HOST:PORT, "
				   "etcd:NAME or etcd[s]://HOST:PORT/NAME)",
				   c);
	return 0;
}

/*
 * The cluster options: all or nothing, checked before anything starts.
 * --node-id and --conductor stand alone too: a single node may feed a
 * conductor without etcd.
 */
static int parse_cluster(struct kvfsd_opts *o)
{
	const char *only[] = { o->listen_o,	o->secret_file_o,
			       o->replicas_o,	o->transport_o,
			       o->timeout_ms_o, o->etcd_ca_o,
			       o->etcd_cert_o,	o->etcd_key_o,
			       o->etcd_user_o,	o->etcd_password_file_o };
	char ep[KV_CLUSTER_EPS_MAX], name[256];
	enum kv_transport t = KV_TRANSPORT_AUTO;
	bool via_etcd = o->conductor_o && strstr(o->conductor_o, "://");
	uint64_t v;
	int rc;

	o->replicas = KVFSD_REPLICAS;
	o->timeout_ms = KV_XFER_TIMEOUT_MS;
	o->node_id = o->node_id_o ? o->node_id_o : KVFSD_NODE_ID;
	if (o->node_id_o && kv_node_id_valid(o->node_id_o) < 0)
		return usage_error("bad --node-id '%s' (1..63 of "
				   "[A-Za-z0-9._-])",
				   o->node_id_o);
	rc = parse_conductor(o);
	if (rc < 0)
		return rc;
	if (o->conductor_o && !node_number(o->node_id))
		return usage_error("--conductor needs a --node-id below "
				   "65536, not '%s'",
				   o->node_id);
	if (!o->cluster_o) {
		/* a lone node's event stream authenticates with it too, and
		 * finds its conductor through etcd with the --etcd-* ones */
		for (size_t i = 0; i < sizeof(only) / sizeof(only[0]); i++)
			if (only[i] &&
			    !(only[i] == o->secret_file_o && o->conductor_o) &&
			    !(via_etcd && etcd_opt(o, only[i])))
				return usage_error("cluster options need "
						   "--cluster");
		return 0;
	}
	if (kv_cluster_url_parse(o->cluster_o, ep, sizeof(ep), name,
				 sizeof(name)) < 0)
		return usage_error("bad --cluster '%s' (want "
				   "etcd[s]://HOST:PORT[,HOST:PORT...]/NAME)",
				   o->cluster_o);
	rc = parse_etcd_auth(o, strncmp(ep, "https://", 8) == 0);
	if (rc < 0)
		return rc;
	if (!o->node_id_o)
		return usage_error("--cluster needs --node-id");
	if (!o->listen_o)
		return usage_error("--cluster needs --listen HOST:PORT");
	if (!strrchr(o->listen_o, ':') || o->listen_o[0] == ':')
		return usage_error("bad --listen '%s' (want HOST:PORT)",
				   o->listen_o);
	if (!o->secret_file_o)
		return usage_error("--cluster needs --secret-file");
	if (o->transport_o && kv_transport_parse(o->transport_o, &t) < 0)
		return usage_error("bad --transport '%s' (auto, tcp or rdma)",
				   o->transport_o);
	o->transport = t;
	if (o->replicas_o) {
		rc = cli_parse_u64(NULL, "--replicas", o->replicas_o, 1, 16,
				   &v);
		if (rc < 0)
			return rc;
		o->replicas = (unsigned)v;
	}
	if (o->timeout_ms_o) {
		rc = cli_parse_u64(NULL, "--timeout-ms", o->timeout_ms_o, 10,
				   600000, &v);
		if (rc < 0)
			return rc;
		o->timeout_ms = (uint32_t)v;
	}
	return 0;
}

/* ---- FUSE options and the mountpoint ------------------------------- */

/* libfuse's line about a bad option, which it logs in pieces */
static char fuse_msg[512];

static void fuse_msg_flush(void)
{
	size_t n = strlen(fuse_msg);
	const char *m = fuse_msg;

	while (n && fuse_msg[n - 1] == '\n')
		fuse_msg[--n] = '\0';
	if (!strncmp(m, "fuse: ", 6))
		m += 6;
	if (*m)
		cli_usage_error(NULL, "%s", m);
	fuse_msg[0] = '\0';
}

/* the check runs before any thread exists: a static buffer will do */
static void fuse_opt_log(enum fuse_log_level level, const char *fmt, va_list ap)
{
	size_t n = strlen(fuse_msg);

	if (level > FUSE_LOG_ERR)
		return;
	vsnprintf(fuse_msg + n, sizeof(fuse_msg) - n, fmt, ap);
	n = strlen(fuse_msg);
	if (n && fuse_msg[n - 1] == '\n')
		fuse_msg_flush();
}

/*
 * The options left for FUSE are only parsed by fuse_session_new, after
 * the store exists; a session made and dropped here (it mounts nothing)
 * refuses a bad one before anything is created.
 */
static int check_fuse_args(const struct fuse_args *args)
{
	static const struct fuse_lowlevel_ops no_ops;
	struct fuse_args copy = FUSE_ARGS_INIT(0, NULL);
	struct fuse_session *se;
	int rc = 0;

	for (int i = 0; i < args->argc; i++)
		if (fuse_opt_add_arg(&copy, args->argv[i]) < 0) {
			fuse_opt_free_args(&copy);
			return -ENOMEM;
		}
	fuse_set_log_func(fuse_opt_log);
	se = fuse_session_new(&copy, &no_ops, sizeof(no_ops), NULL);
	fuse_set_log_func(NULL);
	fuse_msg_flush();
	if (se)
		fuse_session_destroy(se);
	else
		rc = -EINVAL;
	fuse_opt_free_args(&copy);
	return rc;
}

/* a /proc/mounts field: \040 and friends back to bytes */
static void unescape_octal(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
				      (s[3] - '0'));
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = '\0';
}

/* is a kvfs mounted on dir (absolute, resolved)? */
static bool kvfs_mounted_on(const char *dir)
{
	FILE *fp = fopen("/proc/self/mounts", "re");
	char line[PATH_MAX * 2], *save, *mnt, *type;
	bool found = false;

	if (!fp)
		return false;
	while (!found && fgets(line, sizeof(line), fp)) {
		if (!strtok_r(line, " ", &save))
			continue;
		mnt = strtok_r(NULL, " ", &save);
		type = strtok_r(NULL, " ", &save);
		if (!mnt || !type || strcmp(type, "fuse.kvfs") != 0)
			continue;
		unescape_octal(mnt);
		found = strcmp(mnt, dir) == 0;
	}
	fclose(fp);
	return found;
}

/*
 * A regular file is a valid FUSE mountpoint, but the kernel then asks
 * for a file's attributes of our root, a directory, and every access
 * fails; a second kvfs over the first hides it.  Both are refused.
 */
static int check_mountpoint(struct kvfsd_opts *o)
{
	const char *mnt = o->cmd.mountpoint;
	struct stat st;

	if (kvfs_mounted_on(mnt)) {
		if (o->discard)
			cli_fail(NULL, 0,
				 "%s: a kvfs is mounted there; "
				 "unmount it first",
				 mnt);
		else
			cli_fail(NULL, 0,
				 "%s: a kvfs is mounted there "
				 "already",
				 mnt);
		return -EBUSY;
	}
	if (o->discard)
		return 0; /* names the defaults only */
	if (stat(mnt, &st) < 0) {
		cli_fail(NULL, errno, "mountpoint %s", mnt);
		return -errno;
	}
	if (!S_ISDIR(st.st_mode)) {
		cli_fail(NULL, 0, "mountpoint %s: not a directory", mnt);
		return -ENOTDIR;
	}
	return 0;
}

int kvfsd_opts_check(struct kvfsd_opts *o, struct fuse_args *args)
{
	int rc = parse_numbers(o);

	if (rc == 0)
		rc = parse_cluster(o);
	if (rc == 0 && args && !o->discard)
		rc = check_fuse_args(args);
	if (rc == 0 && o->cmd.mountpoint)
		rc = check_mountpoint(o);
	if (rc == 0)
		rc = plan_state_dir(o);
	if (rc == 0)
		rc = make_paths(o);
	if (rc == 0 && !o->discard)
		rc = pool_size(o);
	return rc;
}

/*
 * The state directory holds the index and the control socket: whoever
 * else may write it could swap either under the daemon.  So it must be a
 * directory, not a link, ours, and not group or other writable, as seen
 * on an fd opened without following a link (no check-then-use race).
 */
static int check_state_dir(const char *dir)
{
	struct stat st;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int rc = 0;

	if (fd < 0) {
		rc = -errno;
		if (errno == ELOOP || errno == ENOTDIR)
			cli_fail(NULL, 0,
				 "state directory %s is a symbolic link or "
				 "not a directory; refusing it",
				 dir);
		else
			cli_fail(NULL, rc, "state directory %s", dir);
		return rc == -ENOENT ? rc : -EPERM;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		cli_fail(NULL, rc, "state directory %s", dir);
	} else if (st.st_uid != geteuid()) {
		cli_fail(NULL, 0,
			 "state directory %s is owned by uid %u, not by "
			 "kvfsd's uid %u; refusing it",
			 dir, (unsigned)st.st_uid, (unsigned)geteuid());
		rc = -EPERM;
	} else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		cli_fail(NULL, 0,
			 "state directory %s is writable by group or others "
			 "(mode %04o); refusing it",
			 dir, (unsigned)(st.st_mode & 07777));
		rc = -EPERM;
	}
	close(fd);
	return rc;
}

int kvfsd_opts_create(struct kvfsd_opts *o)
{
	mode_t mode = 0700 | ((o->ctl_mode & 0060) ? 0010 : 0) |
		      ((o->ctl_mode & 0006) ? 0001 : 0);
	struct stat st;
	int rc;

	o->created = true;
	/* lstat: a link planted at the pool path is not ours to remove */
	o->pool_existed = lstat(o->pool_path, &st) == 0;
	o->index_existed = stat(o->index_dir, &st) == 0;
	rc = mkdir_p(o->state_dir, mode, &o->made_dir);
	if (rc < 0) {
		cli_fail(NULL, rc, "state directory %s", o->state_dir);
		return rc;
	}
	rc = check_state_dir(o->state_dir);
	/* refused and not made by us: undoing must leave it all be */
	if (rc < 0 && !o->made_dir)
		o->created = false;
	return rc;
}

int kvfsd_opts_resolve(struct kvfsd_opts *o)
{
	int rc = kvfsd_opts_check(o, NULL);

	return rc < 0 ? rc : kvfsd_opts_create(o);
}

/* ---- undoing a start, discarding a node ---------------------------- */

static void warn_remove(const char *path)
{
	cli_fail(NULL, errno, "warning: cannot remove %s", path);
}

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if ((flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 &&
	    errno != ENOENT)
		warn_remove(path);
	return 0;
}

/* rm -r, without following symbolic links; a missing tree is fine */
static void rm_tree(const char *path)
{
	if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
		warn_remove(path);
}

void kvfsd_opts_undo(struct kvfsd_opts *o)
{
	if (!o->created)
		return;
	if (o->pool_path && !o->pool_existed)
		unlink(o->pool_path);
	if (o->made_dir) {
		rm_tree(o->made_dir);
	} else if (o->index_dir && !o->index_existed) {
		rm_tree(o->index_dir);
	}
}

/* held by a running daemon? RocksDB keeps a POSIX lock on index/LOCK */
static bool index_locked(const char *index_dir)
{
	char *lk = join(index_dir, "LOCK");
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	bool locked = false;
	int fd;

	if (!lk)
		return false;
	fd = open(lk, O_RDWR | O_CLOEXEC);
	free(lk);
	if (fd < 0)
		return false;
	if (fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK)
		locked = true;
	close(fd);
	return locked;
}

int kvfsd_discard(struct kvfsd_opts *o)
{
	struct stat st;
	int fd = -1, n = 0;

	/* the pool's owner holds its flock (pool.h): hold it ourselves
	 * while removing, so no daemon attaches it meanwhile */
	fd = open(o->pool_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 && errno != ENOENT) {
		cli_fail(NULL, errno, "pool %s", o->pool_path);
		return -errno;
	}
	if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0) {
		cli_fail(NULL, 0,
			 "pool %s is in use by a running kvfsd; "
			 "stop it first",
			 o->pool_path);
		close(fd);
		return -EBUSY;
	}
	if (index_locked(o->index_dir)) {
		cli_fail(NULL, 0,
			 "index %s is in use by a running kvfsd; "
			 "stop it first",
			 o->index_dir);
		if (fd >= 0)
			close(fd);
		return -EBUSY;
	}
	if (fd >= 0) {
		char *spill = malloc(strlen(o->pool_path) + 3);

		/* its spill files (pool.h): a directory of ours, or nothing */
		if (spill) {
			sprintf(spill, "%s.d", o->pool_path);
			if (lstat(spill, &st) == 0 && S_ISDIR(st.st_mode) &&
			    st.st_uid == geteuid()) {
				rm_tree(spill);
				printf("removed %s\n", spill);
				n++;
			}
			free(spill);
		}
		if (unlink(o->pool_path) == 0) {
			printf("removed %s\n", o->pool_path);
			n++;
		}
		close(fd);
	}
	if (lstat(o->index_dir, &st) == 0) {
		rm_tree(o->index_dir);
		printf("removed %s\n", o->index_dir);
		n++;
	}
	if (lstat(o->ctl_path, &st) == 0 && S_ISSOCK(st.st_mode) &&
	    unlink(o->ctl_path) == 0)
		n++;
	/* only the directory kvfsd made: anything else in it stays */
	if (rmdir(o->state_dir) == 0) {
		printf("removed %s\n", o->state_dir);
		n++;
	}
	if (n == 0)
		printf("nothing to discard for %s\n", o->cmd.mountpoint);
	fflush(stdout);
	return 0;
}
