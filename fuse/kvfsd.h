/*
 * kvfsd.h - the daemon's configuration: its options, and the embedded
 * defaults that let `kvfsd MOUNTPOINT` run with no configuration at all.
 * kvfsd(8) documents every option and justifies every default; --help
 * (kvfsd_usage) lists the same.
 *
 * Defaults (kvfsd_opts_resolve), each overridable with -o:
 *
 *   state      STATE_BASE/<mountpoint, escaped as systemd-escape --path>,
 *              STATE_BASE = /var/lib/kvfs for root, else
 *              $XDG_STATE_HOME/kvfs or ~/.local/state/kvfs
 *   index      <state>/index (RocksDB)
 *   ctl        <state>/ctl.sock, mode 0600
 *   pool       /dev/shm/kvfs-<FNV-1a 64 of the state path, hex>.pool
 *   slot_size  the existing pool's, else 2 MiB
 *   slots      the existing pool's, else min(1024, half the free space of
 *              the pool's file system / slot_size)
 *   block_tokens  512
 *   layout        open
 */
#ifndef KVFS_KVFSD_H
#define KVFS_KVFSD_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "fuse/ctl.h"

#define KVFSD_SLOT_SIZE (2u << 20)
#define KVFSD_SLOTS_MAX_DEFAULT 1024u
#define KVFSD_BLOCK_TOKENS 512u
#define KVFSD_CTL_MODE 0600
#define KVFSD_SHM_DIR "/dev/shm"
/* a node's id without --node-id: a single node, the conductor's node 0 */
#define KVFSD_NODE_ID "0"

/* exit statuses (kvfsd(8) EXIT STATUS) */
#define KVFSD_EXIT_OK 0
#define KVFSD_EXIT_FAIL 1  /* a failure at start or while running */
#define KVFSD_EXIT_USAGE 2 /* bad option or value */

struct kvfsd_opts {
	/* -o values as given, fuse_opt strings (NULL: not given) */
	char *state_o;
	char *pool_o;
	char *ctl_o;
	char *slot_size_o;
	char *capacity_o;
	char *slots_o;
	char *block_tokens_o;
	char *layout_o;
	char *ctl_mode_o;
	char *lease_ms_o;
	/* the control socket's limits (struct ctl_limits) */
	char *ctl_idle_o;
	char *ctl_uid_clients_o;
	char *ctl_leases_o;
	char *ctl_uid_leases_o;
	char *ctl_maps_o;
	char *lease_max_ms_o;
	int reformat;
	int prealloc;
	int writethrough;
	int passthrough; /* FUSE passthrough of spilled files (fs_io.c) */
	/* cluster options (--name VALUE or --name=VALUE) */
	char *cluster_o;
	char *node_id_o;
	char *listen_o;
	char *secret_file_o;
	/* etcd TLS and authentication (kvfsd(8), ETCD SECURITY) */
	char *etcd_ca_o;
	char *etcd_cert_o;
	char *etcd_key_o;
	char *etcd_user_o;
	char *etcd_password_file_o;
	char *replicas_o;
	char *transport_o;
	char *conductor_o;
	char *timeout_ms_o;
	int discard;  /* --discard: remove pool and state, exit */
	int no_mount; /* --no-mount: control socket and pool only */

	/* -f, -d, -s, clone_fd, max_threads, the mountpoint (realpath'd) */
	struct fuse_cmdline_opts cmd;

	/* resolved by kvfsd_opts_resolve: absolute, malloc'd */
	char *state_dir;
	char *index_dir;
	char *pool_path;
	char *ctl_path;
	uint64_t slot_size;
	uint64_t capacity; /* 0: slots * slot_size (store.h) */
	uint32_t slots;
	uint32_t block_tokens;
	unsigned layout; /* of namespaces made by mkdir (enum kv_layout) */
	uint32_t lease_ms;
	mode_t ctl_mode;
	struct ctl_limits ctl_limits; /* ctl_limits_default's, then -o */
	unsigned replicas;
	uint32_t timeout_ms;
	int transport;	     /* enum kv_transport */
	const char *node_id; /* --node-id, else KVFSD_NODE_ID */

	/* what kvfsd_opts_create made, for kvfsd_opts_undo */
	bool created;	    /* kvfsd_opts_create ran */
	char *made_dir;	    /* the topmost directory created, or NULL */
	bool pool_existed;  /* the pool file was there before us */
	bool index_existed; /* and the index */
};

/*
 * Parse argv (kvfs -o options out of args, the rest through
 * fuse_parse_cmdline; args keeps what fuse_session_new takes).  Returns 0,
 * 1 when --help or --version was printed, or -EINVAL after printing one
 * line on stderr.
 */
int kvfsd_opts_parse(struct fuse_args *args, struct kvfsd_opts *o);
/*
 * Everything a start can know before it touches anything: defaults,
 * numbers, the cluster options, the FUSE options in args (through a
 * throw-away session), the mountpoint (a directory that is not a kvfs
 * mount already), the paths and the pool's size.  Creates nothing.
 * 0, -EINVAL for a bad value (a usage error), another negative errno
 * otherwise; prints why.  args may be NULL (no FUSE options to check).
 */
int kvfsd_opts_check(struct kvfsd_opts *o, struct fuse_args *args);
/* the state directory (created, with its missing parents) */
int kvfsd_opts_create(struct kvfsd_opts *o);
/* kvfsd_opts_check, then kvfsd_opts_create */
int kvfsd_opts_resolve(struct kvfsd_opts *o);
/* after a failed start: remove the pool and the directories this start
 * created, so that it leaves nothing behind */
void kvfsd_opts_undo(struct kvfsd_opts *o);
/*
 * --discard: remove the pool and the state directory's index and socket
 * (the directory too, when that empties it).  -EBUSY, and nothing
 * removed, while a daemon holds the pool or the index.
 */
int kvfsd_discard(struct kvfsd_opts *o);
void kvfsd_opts_free(struct kvfsd_opts *o);
void kvfsd_usage(FILE *fp);

/*
 * The mount's bdi in sysfs (kvfsd_bdi.c), root's to tune; 0 or -errno.
 * kvfsd_bdi_of: "MAJOR:MINOR" of the last mount on mnt (absolute), from
 * /proc/self/mountinfo, so without a request to the mount.
 * kvfsd_bdi_set: write val to /sys/class/bdi/BDI/KNOB.
 * kvfsd_bdi_lift: the dirty-page limit the write-back cache needs lifted.
 */
int kvfsd_bdi_of(const char *mnt, char *bdi, size_t len);
int kvfsd_bdi_set(const char *bdi, const char *knob, const char *val);
int kvfsd_bdi_lift(const char *bdi);

#endif /* KVFS_KVFSD_H */
