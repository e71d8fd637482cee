/*
 * fs_xattr.c - user.kvfs.* extended attributes, all read-only.
 *
 *   root        user.kvfs.socket        the control socket's path: how
 *                                       kvctl and libkvfs find the daemon
 *   namespace   user.kvfs.block_tokens  tokens per block (B of kvfs(7));
 *                                       settable while it holds no block
 *               user.kvfs.layout        "chain" or "open" (kvfs(7),
 *                                       Layouts); settable while empty
 *   directory   user.kvfs.layout        "open": in an open namespace
 *   block       user.kvfs.size          bytes
 *               user.kvfs.checksum      CRC-32C of the bytes, 8 hex digits
 *               user.kvfs.refs          references held now (open files,
 *                                       maps, pins, leases)
 *               user.kvfs.ntokens       tokens it covers (= block_tokens)
 *               user.kvfs.parent        the previous block's name, when
 *                                       its writer gave one
 *
 * Values are text without a trailing newline.  Only block_tokens and a
 * namespace's layout can be set, and only while the namespace holds
 * nothing, since every name depends on them (mkdir, then setfattr, then
 * write); the others follow from the bytes or the daemon and are
 * read-only.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "fuse/fs_int.h"

#define XA(n) "user.kvfs." n

#define VALUE_MAX 256

enum xa_id {
	XA_SOCKET,
	XA_BLOCK_TOKENS,
	XA_SIZE,
	XA_CHECKSUM,
	XA_REFS,
	XA_NTOKENS,
	XA_PARENT,
	XA_LAYOUT,
	XA_NONE,
};

static const char *const xa_names[] = {
	[XA_SOCKET] = XA("socket"), [XA_BLOCK_TOKENS] = XA("block_tokens"),
	[XA_SIZE] = XA("size"),	    [XA_CHECKSUM] = XA("checksum"),
	[XA_REFS] = XA("refs"),	    [XA_NTOKENS] = XA("ntokens"),
	[XA_PARENT] = XA("parent"), [XA_LAYOUT] = XA("layout"),
};

static enum xa_id xa_lookup(const char *name)
{
	for (int i = 0; i < XA_NONE; i++)
		if (strcmp(name, xa_names[i]) == 0)
			return (enum xa_id)i;
	return XA_NONE;
}

/* what an ino is, for attribute purposes */
struct xa_target {
	enum { T_ROOT, T_NS, T_DIR, T_BLOCK, T_OTHER } type;
	struct inode_info in;
	bool sealed;
	struct kv_block_info bi;
	uint32_t block_tokens;
};

static int target_of(struct kvfs_fs *fs, fuse_ino_t ino, struct xa_target *t)
{
	int rc;

	memset(t, 0, sizeof(*t));
	if (ino == INO_ROOT) {
		t->type = T_ROOT;
		return 0;
	}
	if (ino < INODE_FIRST) {
		t->type = T_OTHER;
		return 0;
	}
	rc = inode_get(fs->it, ino, &t->in);
	if (rc < 0)
		return rc;
	rc = fs_ns_info(fs, t->in.ns, NULL, &t->block_tokens);
	if (rc < 0)
		return rc;
	if (t->in.kind == INODE_NS) {
		t->type = T_NS;
		return 0;
	}
	if (t->in.kind == INODE_DIR) {
		t->type = T_DIR;
		return 0;
	}
	t->type = T_BLOCK;
	/* right after its writer's close the kernel's RELEASE may still be
	 * on its way: the attributes are the published block's */
	if (t->in.closing_ns && fs_wait_closing(fs, ino)) {
		rc = inode_get(fs->it, ino, &t->in);
		if (rc < 0)
			return rc;
	}
	if (!t->in.writing && t->in.hashed)
		t->sealed = kv_store_stat(fs->st, t->in.ns, t->in.hash,
					  &t->bi) == 0;
	return 0;
}

/* the value of attribute id on t into buf; its length or -ENODATA */
static int xa_value(struct kvfs_fs *fs, const struct xa_target *t,
		    enum xa_id id, char *buf, size_t len)
{
	char hex[KVFS_HASH_HEX_LEN + 1];
	int n = -ENODATA;

	if (t->type == T_ROOT && id == XA_SOCKET)
		n = snprintf(buf, len, "%s", fs->socket);
	if (t->type == T_NS && id == XA_BLOCK_TOKENS)
		n = snprintf(buf, len, "%" PRIu32, t->block_tokens);
	if ((t->type == T_NS || t->type == T_DIR) && id == XA_LAYOUT)
		n = snprintf(buf, len, "%s",
			     kv_store_ns_layout(fs->st, t->in.ns) ==
					     KV_LAYOUT_OPEN
				     ? "open"
				     : "chain");
	if (t->type != T_BLOCK)
		return n >= (int)len ? -ERANGE : n;
	switch (id) {
	case XA_SIZE:
		n = snprintf(buf, len, "%" PRIu64,
			     t->sealed ? t->bi.size : t->in.size);
		break;
	case XA_NTOKENS:
		n = snprintf(buf, len, "%" PRIu32, t->block_tokens);
		break;
	case XA_CHECKSUM:
		if (t->sealed)
			n = snprintf(buf, len, "%08" PRIx32, t->bi.checksum);
		break;
	case XA_REFS:
		if (t->sealed)
			n = snprintf(buf, len, "%" PRIu32, t->bi.refs);
		break;
	case XA_PARENT:
		if (t->sealed && t->bi.has_parent) {
			kvfs_hash_to_hex(t->bi.parent, hex);
			n = snprintf(buf, len, "%s", hex);
		}
		break;
	default:
		break;
	}
	return n >= (int)len ? -ERANGE : n;
}

void fs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct kvfs_fs *fs = fs_of(req);
	char buf[VALUE_MAX];
	struct xa_target t;
	enum xa_id id = xa_lookup(name);
	int n = id == XA_NONE ? -ENODATA : target_of(fs, ino, &t);

	if (n == 0)
		n = xa_value(fs, &t, id, buf, sizeof(buf));
	if (n < 0)
		fuse_reply_err(req, -n);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else if (size < (size_t)n)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

void fs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct kvfs_fs *fs = fs_of(req);
	char list[VALUE_MAX * 2], val[VALUE_MAX];
	struct xa_target t;
	size_t len = 0;
	int rc = target_of(fs, ino, &t);

	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	/* every name that has a value now, each NUL-terminated */
	for (int i = 0; i < XA_NONE; i++) {
		size_t n = strlen(xa_names[i]) + 1;

		if (xa_value(fs, &t, (enum xa_id)i, val, sizeof(val)) < 0)
			continue;
		memcpy(list + len, xa_names[i], n);
		len += n;
	}
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, list, len);
}

/*
 * Exactly decimal digits, the value's whole length: no sign, space,
 * newline or NUL.  strtoul would stop at the first of those and accept
 * "64\0junk"; a value must mean one thing, as every block name derives
 * from it.
 */
static int parse_tokens(const char *value, size_t size, uint32_t *out)
{
	uint64_t v = 0;

	if (size == 0 || size > 10)
		return -EINVAL;
	for (size_t i = 0; i < size; i++) {
		if (value[i] < '0' || value[i] > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(value[i] - '0');
	}
	if (v == 0 || v > KVFS_BLOCK_TOKENS_MAX)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

/* block_tokens of an empty namespace: -ENOTEMPTY once it holds blocks */
static int set_block_tokens(struct kvfs_fs *fs, fuse_ino_t ino,
			    const char *value, size_t size, int flags)
{
	char name[KVFS_NS_MAX + 1];
	uint32_t ns, bt;
	int rc = fs_ns_of(fs, ino, &ns);

	if (rc < 0)
		return rc == -ENOTDIR ? -ENOTSUP : rc;
	if (flags & XATTR_CREATE)
		return -EEXIST; /* it always exists */
	rc = parse_tokens(value, size, &bt);
	if (rc == 0)
		rc = fs_ns_info(fs, ns, name, NULL);
	if (rc == 0)
		rc = kv_store_ns_set_block_tokens(fs->st, name, bt);
	return rc;
}

/* the layout of an empty namespace: -ENOTEMPTY once it holds anything */
static int set_layout(struct kvfs_fs *fs, fuse_ino_t ino, const char *value,
		      size_t size, int flags)
{
	char name[KVFS_NS_MAX + 1];
	unsigned layout;
	uint32_t ns;
	int rc = fs_ns_of(fs, ino, &ns);

	if (rc < 0)
		return rc == -ENOTDIR ? -ENOTSUP : rc;
	if (flags & XATTR_CREATE)
		return -EEXIST;
	if (size == 4 && memcmp(value, "open", 4) == 0)
		layout = KV_LAYOUT_OPEN;
	else if (size == 5 && memcmp(value, "chain", 5) == 0)
		layout = KV_LAYOUT_CHAIN;
	else
		return -EINVAL;
	rc = fs_ns_info(fs, ns, name, NULL);
	if (rc == 0)
		rc = kv_store_ns_set_layout(fs->st, name, layout);
	return rc;
}

/* the others are read-only (EPERM); names not ours are not stored at all
 * (ENOTSUP, which cp -a and tar expect) */
void fs_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		 const char *value, size_t size, int flags)
{
	enum xa_id id = xa_lookup(name);
	int rc = -ENOTSUP;

	if (id == XA_BLOCK_TOKENS)
		rc = set_block_tokens(fs_of(req), ino, value, size, flags);
	else if (id == XA_LAYOUT)
		rc = set_layout(fs_of(req), ino, value, size, flags);
	else if (id != XA_NONE)
		rc = -EPERM;
	fuse_reply_err(req, -rc);
}

void fs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fuse_reply_err(req, xa_lookup(name) != XA_NONE ? EPERM : ENODATA);
}
