/*
 * fs.h - the kvfs namespace as a libfuse low-level filesystem.
 *
 *   MOUNT/.kvfs/{stats,metrics,nodes}   read-only, rendered at open
 *   MOUNT/<namespace>/                  mkdir/rmdir
 *   MOUNT/<namespace>/<64 hex>          one block: create, write, close
 *                                       seals; then read-only for good
 *
 * kvfs(7) is the user's contract and kvfsd(8) lists every error; the
 * caching policy (timeouts, keep_cache) is explained in fs_int.h.
 *
 * Use: kvfs_fs_new, then fuse_session_new(..., kvfs_fs_ops(), ..., fs),
 * mount, kvfs_fs_attach_io(fs, se), kvfs_fs_start(fs, se) (the thread that
 * invalidates kernel dentries needs the session), the session loop,
 * kvfs_fs_stop(fs) while the session still answers requests, then unmount,
 * destroy the session and kvfs_fs_free.  Calls return 0 or a negative errno.
 */
#ifndef KVFS_FS_H
#define KVFS_FS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kvstore/store.h"

struct fuse_lowlevel_ops;
struct fuse_session;
struct kvfs_fs;
struct kvfsd_cluster;

struct kvfs_fs_config {
	struct kv_store *store; /* open; outlives the fs */
	uint32_t block_tokens;	/* for namespaces made by mkdir */
	unsigned layout;	/* of namespaces made by mkdir (kv_layout) */
	const char *mountpoint; /* absolute; shown in .kvfs/nodes */
	const char *socket;	/* control socket path: user.kvfs.socket */
	const char *node;	/* this node's name in .kvfs/nodes */
	uid_t uid;		/* owner shown on every inode */
	gid_t gid;
	struct kvfsd_cluster *cluster; /* NULL: a single node */
	bool writeback;	  /* the kernel's write-back cache (kvfsd(8)) */
	bool allow_other; /* mounted for every user (fs_int.h fs_mode_ok) */
	bool passthrough; /* FUSE passthrough of spilled files (fs_io.c);
			   * the caller turns the write-back cache off */
};

/* copies the strings in cfg */
int kvfs_fs_new(const struct kvfs_fs_config *cfg, struct kvfs_fs **out);
void kvfs_fs_free(struct kvfs_fs *fs);

const struct fuse_lowlevel_ops *kvfs_fs_ops(void);

/* right after mount, before the session loop: /dev/fuse through fs_io.c,
 * which takes over what libfuse 3.14 cannot ask the kernel for */
int kvfs_fs_attach_io(struct kvfs_fs *fs, struct fuse_session *se);

/* before the session loop: no write-back cache after all (kvfsd.c) */
void kvfs_fs_set_writeback(struct kvfs_fs *fs, bool on);

/* start / stop the invalidation thread (fs_notify.c); stop is idempotent */
int kvfs_fs_start(struct kvfs_fs *fs, struct fuse_session *se);
void kvfs_fs_stop(struct kvfs_fs *fs);

/* a peer put (ns, hash) in the store: drop any "no such block" the
 * kernel cached for it */
void kvfs_fs_block_arrived(struct kvfs_fs *fs, const char *ns,
			   const uint8_t *hash);

#endif /* KVFS_FS_H */
