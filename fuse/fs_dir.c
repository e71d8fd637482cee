/*
 * fs_dir.c - the root (namespaces) and the namespace directories.
 *
 * readdir never loads a directory: the root is walked in namespace id
 * order and a namespace with kv_store_ns_next, and the directory offset
 * is the walk's cursor, so a listing of a million blocks costs one reply
 * buffer at a time and a seekdir/telldir pair resumes where it left.
 *
 *   root offsets:       1 ".", 2 "..", 3 ".kvfs", 3 + id after namespace id
 *   namespace offsets:  1 ".", 2 "..", 2 + cursor after a block (the
 *                       cursor is the block's slot + 1, so >= 3)
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/fs_int.h"
#include "fuse/kvfsd_cluster.h"

#define ROOT_FIXED 3 /* ".", "..", ".kvfs" */
#define NS_FIXED 2   /* ".", ".." */

/* ---- lookup and attributes ----------------------------------------- */

void fs_lookup_root(fuse_req_t req, const char *name)
{
	struct kvfs_fs *fs = fs_of(req);
	struct stat st;
	uint64_t ino;
	uint32_t ns;
	int rc;

	if (strcmp(name, META_DIR_NAME) == 0) {
		fs_getattr_meta(fs, INO_META_DIR, &st);
		fs_reply_entry(req, fs, &st, TMO_META, TMO_META);
		return;
	}
	/* not a namespace name (a dot name, say): can never exist */
	if (kvfs_ns_valid(name) < 0) {
		fs_reply_negative(req, TMO_DIR);
		return;
	}
	rc = kv_store_ns_find(fs->st, name, &ns, NULL);
	/* in a cluster, a namespace made on another node is ours too */
	if (rc == -ENOENT && fs->cl &&
	    kvfsd_cluster_ns_import(fs->cl, name) == 0)
		rc = kv_store_ns_find(fs->st, name, &ns, NULL);
	if (rc == -ENOENT) {
		fs_reply_negative(req, TMO_DIR);
		return;
	}
	if (rc == 0)
		rc = inode_lookup(fs->it, INODE_NS, ns, NULL, &ino);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	fs_stat_dir(fs, ino, 2, 0755, &st);
	fs_reply_entry(req, fs, &st, TMO_DIR, TMO_DIR);
}

static int count_ns(const char *name, uint32_t id, uint32_t block_tokens,
		    const struct kv_stats *s, void *arg)
{
	(*(nlink_t *)arg)++;
	return 0;
}

/* nlink is 2 + subdirectories, exactly: tools may rely on it */
int fs_getattr_root(struct kvfs_fs *fs, struct stat *st)
{
	nlink_t nlink = 3; /* ".", the entry in the parent, .kvfs/.. */
	int rc = kv_store_ns_foreach(fs->st, count_ns, &nlink);

	if (rc < 0)
		return rc;
	fs_stat_dir(fs, INO_ROOT, nlink, 0755, st);
	return 0;
}

int fs_getattr_ns(struct kvfs_fs *fs, fuse_ino_t ino, uint32_t ns,
		  struct stat *st)
{
	struct kv_stats s;
	int rc = kv_store_ns_stats(fs->st, ns, &s);

	if (rc < 0)
		return rc;
	/* an open namespace has subdirectories: nlink 1 is "not counted" */
	fs_stat_dir(fs, ino,
		    kv_store_ns_layout(fs->st, ns) == KV_LAYOUT_OPEN ? 1 : 2,
		    0755, st);
	return 0;
}

int fs_getattr_odir(struct kvfs_fs *fs, fuse_ino_t ino,
		    const struct inode_info *in, struct stat *st)
{
	char path[KV_STORE_PATH_MAX + 1];
	long rc = inode_path(fs->it, ino, path, sizeof(path));

	if (rc < 0)
		return (int)rc;
	if (!in->hashed || !kv_store_dir_exists(fs->st, in->ns, path))
		return -ENOENT;
	fs_stat_dir(fs, ino, 1, 0755, st);
	return 0;
}

/* ---- mkdir and rmdir ----------------------------------------------- */

void fs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct kvfs_fs *fs = fs_of(req);
	struct stat st;
	uint64_t ino;
	uint32_t ns;
	int rc;

	/* every directory is 0755, whatever mode asks */
	if (fs_mode_ok(fs, mode, 0755) < 0) {
		fuse_reply_err(req, EPERM);
		return;
	}
	/* namespaces do not nest, and .kvfs is the daemon's; an open
	 * namespace has directories of its own */
	if (parent != INO_ROOT) {
		rc = parent < INODE_FIRST ? -EPERM
					  : fs_layout_of(fs, parent, &ns);
		if (rc == KV_LAYOUT_OPEN)
			fs_open_mkdir(req, parent, ns, name);
		else
			fuse_reply_err(req,
				       rc < 0 && rc != -ENOTDIR ? -rc : EPERM);
		return;
	}
	rc = kv_store_ns_create_layout(fs->st, name, fs->block_tokens,
				       fs->layout, &ns);
	if (rc == 0)
		kvfsd_cluster_ns_made(fs->cl);
	if (rc == 0)
		rc = inode_lookup(fs->it, INODE_NS, ns, NULL, &ino);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	fs_stat_dir(fs, ino, 2, 0755, &st);
	fs_reply_entry(req, fs, &st, TMO_DIR, TMO_DIR);
}

void fs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct kvfs_fs *fs = fs_of(req);
	uint64_t ino;
	uint32_t ns;
	int rc;

	if (parent != INO_ROOT && parent >= INODE_FIRST &&
	    fs_layout_of(fs, parent, &ns) == KV_LAYOUT_OPEN) {
		fs_open_rmdir(req, parent, ns, name);
		return;
	}
	if (parent != INO_ROOT || strcmp(name, META_DIR_NAME) == 0) {
		fuse_reply_err(req, EPERM);
		return;
	}
	rc = kv_store_ns_find(fs->st, name, &ns, NULL);
	if (rc == -EINVAL)
		rc = -ENOENT;
	if (rc == 0)
		rc = kv_store_ns_remove(fs->st, name);
	if (rc == 0) {
		/* ids are not reused, but a namespace made again under this
		 * name must not inherit the kernel's old inode */
		ino = inode_find(fs->it, INODE_NS, ns, NULL);
		if (ino)
			inode_unhash(fs->it, ino);
	}
	fuse_reply_err(req, -rc);
}

/* ---- readdir ------------------------------------------------------- */

struct dirbuf {
	fuse_req_t req;
	char *p;
	size_t size;
	size_t len;
};

/* false when the entry does not fit: the listing resumes there */
static bool dir_add(struct dirbuf *b, const char *name, fuse_ino_t ino,
		    mode_t type, off_t next)
{
	struct stat st;
	size_t need;

	memset(&st, 0, sizeof(st));
	st.st_ino = ino;
	st.st_mode = type;
	need = fuse_add_direntry(b->req, b->p + b->len, b->size - b->len, name,
				 &st, next);
	if (need > b->size - b->len)
		return false;
	b->len += need;
	return true;
}

struct root_walk {
	struct dirbuf *b;
	uint32_t after; /* list ids above this one */
};

/* runs under the store lock: fuse_add_direntry only fills memory */
static int root_entry(const char *name, uint32_t id, uint32_t block_tokens,
		      const struct kv_stats *s, void *arg)
{
	struct root_walk *w = arg;

	if (id <= w->after)
		return 0;
	return dir_add(w->b, name, FS_UNKNOWN_INO, S_IFDIR,
		       ROOT_FIXED + (off_t)id)
		       ? 0
		       : 1;
}

static int readdir_root(struct kvfs_fs *fs, struct dirbuf *b, off_t off)
{
	struct root_walk w = { .b = b };
	int rc;

	if (off < 1 && !dir_add(b, ".", INO_ROOT, S_IFDIR, 1))
		return 0;
	if (off < 2 && !dir_add(b, "..", INO_ROOT, S_IFDIR, 2))
		return 0;
	if (off < 3 && !dir_add(b, META_DIR_NAME, INO_META_DIR, S_IFDIR, 3))
		return 0;
	w.after = off > ROOT_FIXED ? (uint32_t)(off - ROOT_FIXED) : 0;
	rc = kv_store_ns_foreach(fs->st, root_entry, &w);
	return rc < 0 ? rc : 0;
}

static int readdir_ns(struct kvfs_fs *fs, fuse_ino_t ino, uint32_t ns,
		      struct dirbuf *b, off_t off)
{
	uint64_t cursor = off > NS_FIXED ? (uint64_t)(off - NS_FIXED) : 0;
	uint8_t hash[KVFS_HASH_LEN];
	char hex[KVFS_HASH_HEX_LEN + 1];
	int rc;

	if (off < 1 && !dir_add(b, ".", ino, S_IFDIR, 1))
		return 0;
	if (off < 2 && !dir_add(b, "..", INO_ROOT, S_IFDIR, 2))
		return 0;
	for (;;) {
		rc = kv_store_ns_next(fs->st, ns, &cursor, hash, NULL);
		if (rc <= 0)
			return rc;
		kvfs_hash_to_hex(hash, hex);
		/* the cursor is past this block now: an entry that does not
		 * fit is listed again from the previous entry's offset */
		if (!dir_add(b, hex, FS_UNKNOWN_INO, S_IFREG,
			     NS_FIXED + (off_t)cursor))
			return 0;
	}
}

void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi)
{
	struct kvfs_fs *fs = fs_of(req);
	struct dirbuf b = { .req = req, .size = size };
	uint32_t ns;
	int rc;

	if (ino == INO_META_DIR) {
		fs_readdir_meta(req, size, off);
		return;
	}
	rc = ino == INO_ROOT ? 0 : fs_layout_of(fs, ino, &ns);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	b.p = malloc(size ? size : 1);
	if (!b.p) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (ino == INO_ROOT)
		rc = readdir_root(fs, &b, off);
	else if (rc == KV_LAYOUT_OPEN)
		rc = fs_open_readdir(fs, ino, ns, req, b.p, size, off, &b.len);
	else
		rc = readdir_ns(fs, ino, ns, &b, off);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, b.p, b.len);
	free(b.p);
}
