/*
 * fs_int.h - private to fuse/fs*.c: the filesystem's state, its open
 * files, and the caching policy.
 *
 * Files: fs.c (ops table, lookup, getattr, statfs), fs_dir.c (root and
 * namespace directories), fs_block.c (a block's life: create, write,
 * publication, read, unlink), fs_open.c (open namespaces: paths,
 * subdirectories, staging, rename), fs_meta.c (.kvfs/), fs_xattr.c
 * (user.kvfs.*), fs_notify.c (kernel dentry invalidation), fs_io.c
 * (/dev/fuse through libfuse's custom io, for one INIT flag).
 *
 * Handlers return 0 or a negative errno internally; each converts once at
 * the boundary (fuse_reply_err(req, -rc)).
 */
#ifndef KVFS_FS_INT_H
#define KVFS_FS_INT_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/stat.h>

#include "fuse/fs.h"
#include "src/common/hash.h"
#include "fuse/inode.h"
#include "kvstore/store.h"

/* fixed inos, all below INODE_FIRST (inode.h) */
enum {
	INO_ROOT = FUSE_ROOT_ID,
	INO_META_DIR, /* .kvfs */
	INO_STATS,    /* .kvfs/stats */
	INO_METRICS,  /* .kvfs/metrics */
	INO_NODES,    /* .kvfs/nodes */
};

#define META_DIR_NAME ".kvfs"

/*
 * Cache timeouts, in seconds.
 *
 * A sealed block never changes and its name is its content address, so
 * the kernel may keep its dentry, attributes and pages as long as it
 * likes.  The one way a cached entry goes stale is the block leaving the
 * store (eviction, kvctl evict, unlink elsewhere); fs_notify.c then
 * invalidates the dentry, so the hour only bounds staleness that sweep
 * might miss, at the cost of one lookup per block per hour.
 */
#define TMO_SEALED 3600.0
/*
 * A miss: blocks appear at any time (another engine seals one, a peer
 * pushes a replica).  A local seal invalidates the negative dentry at once
 * (fs_notify.c); the second bounds the rest and still absorbs the burst
 * of probes an engine makes for a prefix that is not there.
 */
#define TMO_NEGATIVE 1.0
/*
 * Namespaces (and the root's link count) change through the control
 * socket too, without the kernel seeing it: a second of staleness.
 */
#define TMO_DIR 1.0
/*
 * A block being written: 0.  Its size moves with every write, and the
 * first lookup after the seal must see the sealed, read-only block with
 * its long timeouts; other openers must not see it at all until then.
 */
#define TMO_WRITING 0.0
/*
 * The attributes of a file being written, under the write-back cache:
 * the kernel keeps its size and times itself, and would ask for the rest
 * before every write(2) were they never valid.  Its entry stays at
 * TMO_WRITING, so every path walk to the name still asks kvfsd, and after
 * the publication gets the published file's attributes.
 */
#define TMO_WRITING_ATTR 1.0
/*
 * The most one FUSE write carries (fs_init's max_write): 1 MiB less a
 * page. libfuse splices a request from /dev/fuse into a
 * pipe (and kvfsd copies a write's payload once, pipe to slot) only when
 * its whole buffer, max_write and a 4 KiB header, fits one pipe, and a
 * pipe grows to pipe-max-size (1 MiB by default) without
 * CAP_SYS_RESOURCE.  At 1 MiB libfuse silently read(2) every request into
 * its own buffer instead: one more copy of every byte written, which
 * cost 10-20% of the store rate in kvbench engines, against one more
 * request per 2 MiB block.
 */
#define FS_MAX_WRITE ((1u << 20) - 4096)
/*
 * The st_blksize of a file open for writing: stdio and Python size their
 * write buffers by it, and without write-back caching each buffer flush
 * is one request, so a 4 KiB buffer would make a 2 MiB file of small
 * writes 512 round trips.  The kernel keeps a power of two of it, so the
 * largest below FS_MAX_WRITE.  Published files keep 4096 (kvfs(7)).
 */
#define FS_WRITE_BLKSIZE (1u << 19)
/* .kvfs and its files exist for the life of the mount and report size 0
 * (their reads are direct_io): nothing about them goes stale */
#define TMO_META 3600.0

/*
 * How long a lookup, open or rename waits for the publication of a file
 * whose writer has closed it (kvfs(7), "Publication"): the kernel sends
 * RELEASE after close(2) returns, so a reader that opens right after the
 * writer's close would otherwise miss it.  A writer that still holds a
 * descriptor (a dup, a child) publishes later; the wait ends then.
 */
#define PUBLISH_WAIT_MS 1000u

/* readdir d_ino for entries the kernel has not looked up */
#define FS_UNKNOWN_INO 0xffffffffu

struct notify;

/* the INIT exchange, as fs_io.c sees it go by, and FUSE passthrough */
struct fs_io {
	uint64_t init_unique;
	bool init_seen;	 /* the INIT request was read */
	bool offered;	 /* the kernel offers FUSE_HANDLE_KILLPRIV_V2 */
	bool pt_offered; /* ... and FUSE_PASSTHROUGH */
	bool pt_want;	 /* -o passthrough */
	atomic_bool replied;
	atomic_bool pt_on; /* the INIT reply asked for passthrough, and no
			    * registration has failed for lack of rights */
	int dev_fd;	   /* /dev/fuse, for the backing ioctls */
	/* open replies to mark FOPEN_PASSTHROUGH: by the fh they carry,
	 * added before fuse_reply_open, taken by io_writev; pt_lock */
	pthread_mutex_t pt_lock;
	struct fs_pt_pending {
		uint64_t fh;
		int32_t id;
	} pt_pending[256];
	uint64_t pt_opens; /* opens passed through, pt_lock */
};

struct kvfs_fs {
	struct kv_store *st;
	struct inode_table *it;
	struct notify *nt;	  /* fs_notify.c */
	struct kvfsd_cluster *cl; /* NULL: a single node */
	uint32_t block_tokens;
	char *mountpoint;
	char *socket;
	char *node;
	uid_t uid;
	gid_t gid;
	uint64_t start_ns; /* wall clock: the times of the directories */
	unsigned layout;   /* of namespaces made by mkdir (enum kv_layout) */
	bool writeback;	   /* the kernel caches writes (fs_init) */
	bool allow_other;  /* every local user reads the mount (fs_mode_ok) */

	/* open namespaces: files being written, by ino (fs_open.c) */
	pthread_mutex_t stage_lock;
	struct kvfs_file *staging; /* list through kvfs_file.stage_next */
	/* write opens of published names, and read opens of replaced
	 * ones, sent back for a private inode (fs_open.c, "redirects"),
	 * under stage_lock: as many as are sent back at once */
	struct fs_redirect {
		uint32_t ns;
		pid_t tid;
		uint8_t key[KVFS_HASH_LEN];
		uint64_t ino;	/* the private inode, once looked up */
		uint64_t at_ns; /* monotonic; 0: a free entry */
		bool read;	/* a reader's: ref holds what ino stands for */
		bool have_ref;
		struct kv_ref ref;
	} * redirect;
	size_t redirect_n;   /* entries below the last one in use */
	size_t redirect_cap; /* entries allocated */
	struct fs_io io;     /* fs_io.c */
	/* .kvfs files open now (text_lock): freed at unmount if their
	 * RELEASE never comes (a reader's close racing the daemon's exit) */
	pthread_mutex_t text_lock;
	struct kvfs_file *texts;
};

enum file_kind {
	FILE_READ = 1, /* a sealed block, open for reading */
	FILE_WRITE,    /* a block its creator is writing */
	FILE_TEXT,     /* a .kvfs file, rendered at open */
};

/* the attribute timeout of a file being written (TMO_WRITING_ATTR) */
static inline double fs_writing_attr_tmo(const struct kvfs_fs *fs)
{
	return fs->writeback ? TMO_WRITING_ATTR : TMO_WRITING;
}

/* fi->fh of every open regular file */
struct kvfs_file {
	enum file_kind kind;
	uint64_t ino;
	uint32_t ns;
	uint8_t hash[KVFS_HASH_LEN];

	/* FILE_READ: the store reference, held until release, is what
	 * keeps the block from being evicted under a reader (and under a
	 * mapping: the kernel releases a mapped file only at munmap) */
	struct kv_ref ref;
	bool passthrough; /* FILE_READ served by the kernel (fs_pt_open) */

	/* FILE_WRITE: the kernel may send one file's requests from several
	 * threads (a write racing the flush of a dup'd descriptor), so
	 * lock guards the fields below */
	pthread_mutex_t lock;
	uint32_t wh;	 /* store write handle */
	uint64_t size;	 /* bytes written: highest offset */
	int err;	 /* first write error: never published */
	bool done;	 /* published or aborted */
	bool dying;	 /* a descriptor was closed by a task being killed:
			  * never published */
	bool flushed;	 /* a descriptor was closed since the last write */
	bool recorded;	 /* a close record since the last write
			  * (fs_closed_locked) */
	pid_t opener;	 /* the thread whose create or open made it */
	unsigned checks; /* dying checks of closes still running */
	pthread_cond_t checked; /* signalled as each one ends */
	bool released;		/* the last check frees it (fs_block.c) */
	/* open namespaces: where it is published, under fs->stage_lock
	 * (a rename of the staging file moves it) */
	bool open;
	bool reopen;   /* a new version of a published name */
	bool shared;   /* on the old version's inode (fs_open.c) */
	bool unlinked; /* its name was unlinked before publication */
	char *path;
	struct kvfs_file *stage_next;

	/* FILE_TEXT */
	char *text;
	size_t len;
	struct kvfs_file *text_prev, *text_next; /* fs->texts */
};

static inline struct kvfs_fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static inline struct kvfs_file *file_of(const struct fuse_file_info *fi)
{
	return (struct kvfs_file *)(uintptr_t)fi->fh;
}

/* fs.c */
void fs_stat_dir(const struct kvfs_fs *fs, fuse_ino_t ino, nlink_t nlink,
		 mode_t perm, struct stat *st);
void fs_stat_block(const struct kvfs_fs *fs, fuse_ino_t ino, uint64_t size,
		   uint64_t seal_ns, bool writing, struct stat *st);
int fs_reply_entry(fuse_req_t req, struct kvfs_fs *fs, const struct stat *st,
		   double entry_tmo, double attr_tmo);
void fs_reply_negative(fuse_req_t req, double tmo);
/* the ns id of a namespace directory ino; -ENOTDIR for any other ino */
int fs_ns_of(struct kvfs_fs *fs, fuse_ino_t ino, uint32_t *ns);
/* name (KVFS_NS_MAX + 1 bytes, may be NULL) and block_tokens (may be
 * NULL) of namespace id ns; -ENOENT */
int fs_ns_info(struct kvfs_fs *fs, uint32_t ns, char *name,
	       uint32_t *block_tokens);

/* fs_dir.c */
void fs_lookup_root(fuse_req_t req, const char *name);
int fs_getattr_ns(struct kvfs_fs *fs, fuse_ino_t ino, uint32_t ns,
		  struct stat *st);
int fs_getattr_root(struct kvfs_fs *fs, struct stat *st);
int fs_getattr_odir(struct kvfs_fs *fs, fuse_ino_t ino,
		    const struct inode_info *in, struct stat *st);
void fs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void fs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi);

/* fs_block.c */
/* ino's writer has closed it: wait (PUBLISH_WAIT_MS) for the publication;
 * true when it is no longer being written */
bool fs_wait_closing(struct kvfs_fs *fs, fuse_ino_t ino);
/* fetch (ns, hash) from a peer into the store (kvfsd_cluster.h) */
int fs_remote_read(struct kvfs_fs *fs, uint32_t ns,
		   const uint8_t hash[KVFS_HASH_LEN]);
void fs_lookup_block(fuse_req_t req, fuse_ino_t parent, uint32_t ns,
		     const char *name);
int fs_getattr_block(struct kvfs_fs *fs, fuse_ino_t ino,
		     const struct inode_info *in, struct stat *st, double *tmo);
/*
 * FUSE passthrough (fs_io.c): f, a reader of a spilled file whose inode is
 * ino, is served by the kernel straight from that file when the mount
 * runs with passthrough; its open reply is then marked (fi->keep_cache
 * cleared here).  0 when it is, or when it stays on the copy path (the
 * reason logged once); fs_pt_release at its release.
 */
int fs_pt_open(struct kvfs_fs *fs, fuse_ino_t ino, struct kvfs_file *f,
	       struct fuse_file_info *fi);
void fs_pt_release(struct kvfs_fs *fs, struct kvfs_file *f);
/* does the mount pass spilled files through (for stats) */
bool fs_pt_on(struct kvfs_fs *fs);
/* a .kvfs file is gone: off fs->texts, and freed (fs_meta.c) */
void fs_text_free(struct kvfs_fs *fs, struct kvfs_file *f);
/* a writer's close (by task pid) or fsync (pid 0): its file as it is now
 * survives a crash of kvfsd (fs_block.c); the file's error, f->lock held */
int fs_closed_locked(struct kvfs_fs *fs, struct kvfs_file *f, pid_t pid);
/*
 * ino, of which was is an earlier snapshot, still stands for the bytes
 * its key has in the store: hashed to the same key, and published.  A
 * caller that read the store by key after the snapshot checks this after
 * that read, since publishers unhash an inode before the store moves.
 */
bool fs_ino_current(struct kvfs_fs *fs, fuse_ino_t ino,
		    const struct inode_info *was);
void fs_setattr_block(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		      int to_set, struct fuse_file_info *fi);
void fs_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
	       struct fuse_file_info *fi);
/* an open by thread tid (fs_open_write needs it) */
int fs_open_block(struct kvfs_fs *fs, fuse_ino_t ino, pid_t tid,
		  struct fuse_file_info *fi, struct kvfs_file **out);
void fs_read_block(fuse_req_t req, struct kvfs_file *f, size_t size, off_t off);
void fs_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in,
		  off_t off, struct fuse_file_info *fi);
void fs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_release_block(struct kvfs_fs *fs, struct kvfs_file *f);
/* a writer's file, its lock and condition initialized, nothing else held */
void fs_file_free(struct kvfs_file *f);
/* a write error or a dying writer: nothing is published (f->lock held) */
void fs_abort_locked(struct kvfs_fs *fs, struct kvfs_file *f);
int fs_resize_locked(struct kvfs_fs *fs, struct kvfs_file *f, uint64_t size,
		     bool zero);
void fs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
	      struct fuse_file_info *fi);
void fs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);

/*
 * On an allow_other mount every local user reads what kvfs serves, with
 * the modes it reports, not the ones asked for: a create or mkdir whose
 * mode would hide the entry from group or others (0600, 0700), or a
 * chmod or chown to anything else than what it shows, would return 0 and
 * leave the entry readable by all.  They are refused (EPERM) instead.
 * gives: the mode kvfs reports for such an entry.
 */
static inline int fs_mode_ok(const struct kvfs_fs *fs, mode_t asked,
			     mode_t gives)
{
	return fs->allow_other && (gives & ~asked & 0077) ? -EPERM : 0;
}

/* a file of an open namespace: writable, since a write makes a new
 * version (a chain block is 0444: immutable) */
static inline void fs_open_mode(struct stat *st)
{
	st->st_mode = S_IFREG | 0644;
}

/* fs_open.c: open namespaces.  parent is a namespace directory or a
 * directory in one, of an open namespace (fs_layout_of) */
int fs_layout_of(struct kvfs_fs *fs, fuse_ino_t ino, uint32_t *ns);
void fs_open_lookup(fuse_req_t req, fuse_ino_t parent, uint32_t ns,
		    const char *name);
void fs_open_create(fuse_req_t req, fuse_ino_t parent, uint32_t ns,
		    const char *name, struct fuse_file_info *fi);
/* an open of a file in an open namespace, before fs_open_block's checks:
 * 1 when ino was looked up for the opener as a private inode (the open
 * consumes that, and takes *ref, the bytes a reader's private inode
 * stands for, when *have_ref), 0 when not */
int fs_open_redirected(struct kvfs_fs *fs, fuse_ino_t ino, struct kv_ref *ref,
		       bool *have_ref);
/* a read open of an inode whose name now holds other bytes, by thread
 * tid: -ESTALE, after which the kernel's lookup again from tid gets a
 * private inode for the bytes the name holds then */
int fs_open_stale(struct kvfs_fs *fs, uint32_t ns, const uint8_t *key,
		  pid_t tid);
/* an open for writing of a file in an open namespace, by thread tid */
int fs_open_write(struct kvfs_fs *fs, fuse_ino_t ino,
		  const struct inode_info *in, bool redirected, pid_t tid,
		  struct fuse_file_info *fi, struct kvfs_file **out);
void fs_open_read_staging(fuse_req_t req, struct kvfs_fs *fs,
			  struct kvfs_file *f, size_t size, off_t off);
void fs_open_release_locked(struct kvfs_fs *fs, struct kvfs_file *f);
/* the redirects' references and table, at the end */
void fs_open_free(struct kvfs_fs *fs);
void fs_open_unlink(fuse_req_t req, fuse_ino_t parent, uint32_t ns,
		    const char *name);
void fs_open_mkdir(fuse_req_t req, fuse_ino_t parent, uint32_t ns,
		   const char *name);
void fs_open_rmdir(fuse_req_t req, fuse_ino_t parent, uint32_t ns,
		   const char *name);
void fs_open_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		    fuse_ino_t newparent, const char *newname,
		    unsigned int flags);
int fs_open_readdir(struct kvfs_fs *fs, fuse_ino_t ino, uint32_t ns,
		    fuse_req_t req, char *buf, size_t size, off_t off,
		    size_t *len);
/* the parent directory's ino and the name of an open file's path, for
 * invalidations; false when the kernel holds no such directory */
bool fs_open_dentry(struct kvfs_fs *fs, uint32_t ns, const char *path,
		    fuse_ino_t *parent, const char **name);

/* fs_meta.c */
void fs_lookup_meta(fuse_req_t req, const char *name);
int fs_getattr_meta(struct kvfs_fs *fs, fuse_ino_t ino, struct stat *st);
int fs_open_meta(struct kvfs_fs *fs, fuse_ino_t ino, struct fuse_file_info *fi,
		 struct kvfs_file **out);
void fs_readdir_meta(fuse_req_t req, size_t size, off_t off);
bool fs_is_meta(fuse_ino_t ino);

/* fs_xattr.c */
void fs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void fs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void fs_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		 const char *value, size_t size, int flags);
void fs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

/* fs_notify.c: queue an invalidation of the kernel's dentry parent/name
 * (positive or negative); never blocks, may drop when the queue is full */
void fs_notify_entry(struct kvfs_fs *fs, fuse_ino_t parent, const char *name);
/* invalidate the dentry of the block (ns, hash), when the kernel has its
 * namespace directory */
void fs_notify_block(struct kvfs_fs *fs, uint32_t ns,
		     const uint8_t hash[KVFS_HASH_LEN]);
/* the same for the file of inode ino, in either layout */
void fs_notify_ino(struct kvfs_fs *fs, fuse_ino_t ino, uint32_t ns,
		   const uint8_t hash[KVFS_HASH_LEN]);
void fs_notify_free(struct kvfs_fs *fs);

#endif /* KVFS_FS_INT_H */
