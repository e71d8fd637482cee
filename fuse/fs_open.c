/*
 * fs_open.c - open namespaces (kvfs(7), "Layouts"): any names, any depth
 * of subdirectories, staging files, publication by close or rename.
 *
 * A file is a store block keyed by kvfs_path_key(path) (store.h, "open
 * namespaces"), where path is relative to the namespace directory; its
 * inode is keyed the same way, and a directory's inode by the key of its
 * own path (INODE_DIR).  Every inode of an open namespace remembers its
 * path, so a request naming (parent ino, name) becomes a path at once.
 *
 *   create   a staging slot with no name in the store: invisible to
 *            readdir, and its inode answers lookups of the name only so
 *            that the writer's own rename, unlink and stat work
 *   write    as in a chain namespace (fs_block.c)
 *   release  the last descriptor: published under the path it has then
 *            (a rename before that moved it), replacing what was there
 *   open     for writing (O_TRUNC or not) of a published file: a new
 *            staging version of the same path, on a private inode of
 *            its own (the redirects below), so that the kernel's
 *            truncation and size changes never reach the old version's
 *            readers and mappings.  At the publication the private
 *            inode takes the name's key, as a created file's does.
 *   rename   of a staging file: moves its path (waiting for a closed one
 *            to be published first); of a published file: kv_store_rename
 *   unlink   removes the published file, and makes staging files of the
 *            name never to be published
 *
 * Inode keys follow the store: the inode a key maps to always stands for
 * the bytes the store has under that key, so keep_cache stays safe.  A
 * replaced or moved-away file's inode is unhashed before the store moves,
 * and an open of an unhashed inode whose name now holds other bytes is
 * ESTALE, which makes the kernel look the name up again.
 *
 * Redirects.  An open for writing arrives on the inode the kernel found
 * for the name, which readers of the published version may hold and map;
 * the kernel cuts that inode's size at once on O_TRUNC (a mapping past
 * the cut is SIGBUS) and takes the writer's size from every attribute
 * reply.  So the open is answered ESTALE, and the thread is remembered
 * with the name for a moment: the kernel retries the open once, looking
 * the name up again from the same thread, and that lookup alone gets a
 * private inode (entry timeout 0, so no other walk keeps it), which the
 * retried open then writes.  A second ESTALE would reach the opener, so
 * every thread sent back is remembered until its retry, however many
 * open at once (redirect_add).  Should the retry come without the lookup,
 * the write shares the old inode as a last resort (f->shared): its
 * attributes then stay the old version's until publication.  Not under
 * the write-back cache, where the kernel keeps a shared inode's size
 * itself: that retry is ESTALE (fs_open_write).  Another
 * writer's staging inode is redirected the same way: it becomes the
 * published inode at that writer's close, with the size our O_TRUNC cut.
 *
 * A reader's open sent back with ESTALE (its inode was replaced) is
 * remembered too: should the name be replaced again between the retried
 * lookup and the retried open, a second ESTALE would reach the reader,
 * so that lookup gets a private inode holding a reference to the bytes
 * the name has then, which the retried open reads.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/clock.h"
#include "src/common/log.h"
#include "fuse/fs_int.h"
#include "fuse/kvfsd_cluster.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

struct opath {
	char p[KV_STORE_PATH_MAX + 1];
	size_t len;
	uint8_t key[KVFS_HASH_LEN];
};

int fs_layout_of(struct kvfs_fs *fs, fuse_ino_t ino, uint32_t *ns)
{
	struct inode_info in;

	if (ino < INODE_FIRST)
		return -ENOTDIR;
	if (inode_get(fs->it, ino, &in) < 0)
		return -ENOENT;
	if (in.kind == INODE_BLOCK)
		return -ENOTDIR;
	*ns = in.ns;
	if (in.kind == INODE_DIR)
		return in.hashed ? KV_LAYOUT_OPEN : -ENOENT; /* rmdir'd */
	return kv_store_ns_layout(fs->st, in.ns);
}

/* the path of name in directory parent, and its key */
static int child_path(struct kvfs_fs *fs, fuse_ino_t parent, const char *name,
		      struct opath *o)
{
	size_t nl = strlen(name);
	long pl = inode_path(fs->it, parent, o->p, sizeof(o->p));

	if (pl < 0)
		return pl == -ERANGE ? -ENAMETOOLONG : (int)pl;
	if (nl == 0 || nl > 255 || (size_t)pl + 1 + nl > KV_STORE_PATH_MAX)
		return -ENAMETOOLONG;
	if (pl)
		o->p[pl++] = '/';
	memcpy(o->p + pl, name, nl + 1);
	o->len = (size_t)pl + nl;
	return kvfs_path_key(o->p, o->len, o->key);
}

bool fs_open_dentry(struct kvfs_fs *fs, uint32_t ns, const char *path,
		    fuse_ino_t *parent, const char **name)
{
	const char *slash = strrchr(path, '/');
	uint8_t key[KVFS_HASH_LEN];

	if (!slash) {
		*parent = inode_find(fs->it, INODE_NS, ns, NULL);
		*name = path;
	} else {
		if (kvfs_path_key(path, (size_t)(slash - path), key) < 0)
			return false;
		*parent = inode_find(fs->it, INODE_DIR, ns, key);
		*name = slash + 1;
	}
	return *parent != 0;
}

static void notify_path(struct kvfs_fs *fs, uint32_t ns, const char *path)
{
	const char *name;
	fuse_ino_t parent;

	if (fs_open_dentry(fs, ns, path, &parent, &name))
		fs_notify_entry(fs, parent, name);
}

/* ---- redirects (see the top) --------------------------------------- */

#define REDIRECT_NS 2000000000ull /* how long the retry has, generously */
/*
 * The table grows (doubling from REDIRECT_MIN) rather than let a live
 * entry go: each live one is an opener between its ESTALE and its retry,
 * and the kernel retries only once, so an entry lost before the retry is
 * an ESTALE the application sees (200 llama.cpp slot saves at once lost a
 * quarter of them to a table of 64).  REDIRECT_MAX, far above any number
 * of openers at once, only bounds what a flood of opens (each entry lives
 * REDIRECT_NS) could make it hold: about 100 bytes an entry.
 */
#define REDIRECT_MIN 64
#define REDIRECT_MAX 65536

/* now is read under stage_lock, after every at_ns set so far: one read
 * before the lock could be older than an entry added while it waited,
 * which then looked expired (now - at_ns wraps) and was dropped before
 * its retry */
static bool redirect_live(const struct fs_redirect *r, uint64_t now)
{
	return r->at_ns && now - r->at_ns < REDIRECT_NS;
}

static bool redirect_is(const struct fs_redirect *r, uint32_t ns,
			const uint8_t *key, pid_t tid)
{
	return r->ns == ns && r->tid == tid &&
	       memcmp(r->key, key, KVFS_HASH_LEN) == 0;
}

/* the live redirect of (ns, key) for tid (one at most: redirect_add);
 * stage_lock held */
static struct fs_redirect *redirect_find(struct kvfs_fs *fs, uint32_t ns,
					 const uint8_t *key, pid_t tid)
{
	uint64_t now = kvfs_mono_ns();

	for (size_t i = 0; i < fs->redirect_n; i++) {
		struct fs_redirect *r = &fs->redirect[i];

		if (redirect_live(r, now) && redirect_is(r, ns, key, tid))
			return r;
	}
	return NULL;
}

/* an entry done with, or expired: its reader's bytes go back */
static void redirect_drop(struct kvfs_fs *fs, struct fs_redirect *r)
{
	if (r->have_ref)
		kv_store_put(fs->st, &r->ref);
	r->have_ref = false;
	r->at_ns = 0;
}

/* the table at cap entries (entries past redirect_n are free); stage_lock */
static int redirect_resize(struct kvfs_fs *fs, size_t cap)
{
	struct fs_redirect *t = realloc(fs->redirect, cap * sizeof(*t));

	if (!t)
		return -ENOMEM;
	fs->redirect = t;
	fs->redirect_cap = cap;
	return 0;
}

/*
 * Remember (ns, key, tid), in place of an earlier entry of the same
 * (that opener has moved on to this open).  Only with REDIRECT_MAX
 * entries live, or no memory to grow, does the oldest give way: its
 * opener's retry then finds no redirect, which costs a reader a second
 * ESTALE, and a writer under the write-back cache one too, but never
 * makes a writer share an inode (fs_open_write).
 */
static void redirect_add(struct kvfs_fs *fs, uint32_t ns, const uint8_t *key,
			 pid_t tid, bool read)
{
	size_t i, free_at = SIZE_MAX, oldest = SIZE_MAX;
	struct fs_redirect *use;
	uint64_t now;

	pthread_mutex_lock(&fs->stage_lock);
	now = kvfs_mono_ns(); /* under the lock: see redirect_live */
	for (i = 0; i < fs->redirect_n; i++) {
		struct fs_redirect *r = &fs->redirect[i];

		if (redirect_live(r, now) && !redirect_is(r, ns, key, tid)) {
			if (oldest == SIZE_MAX ||
			    r->at_ns < fs->redirect[oldest].at_ns)
				oldest = i;
			continue;
		}
		redirect_drop(fs, r); /* every expired one, not only ours */
		if (free_at == SIZE_MAX)
			free_at = i;
	}
	while (fs->redirect_n && !fs->redirect[fs->redirect_n - 1].at_ns)
		fs->redirect_n--; /* the free tail */
	/* a burst gone: give back what it grew (oldest stays below n) */
	if (fs->redirect_cap > REDIRECT_MIN &&
	    fs->redirect_n < fs->redirect_cap / 4)
		redirect_resize(fs, fs->redirect_cap / 2);
	if (free_at < fs->redirect_n) {
		use = &fs->redirect[free_at];
	} else if (fs->redirect_n < fs->redirect_cap ||
		   (fs->redirect_cap < REDIRECT_MAX &&
		    redirect_resize(fs, fs->redirect_cap
						? 2 * fs->redirect_cap
						: REDIRECT_MIN) == 0)) {
		use = &fs->redirect[fs->redirect_n++];
	} else if (oldest != SIZE_MAX) {
		use = &fs->redirect[oldest];
		redirect_drop(fs, use);
	} else { /* no table at all (no memory): a second ESTALE, later */
		pthread_mutex_unlock(&fs->stage_lock);
		return;
	}
	memset(use, 0, sizeof(*use));
	use->ns = ns;
	use->tid = tid;
	memcpy(use->key, key, KVFS_HASH_LEN);
	use->read = read;
	use->at_ns = now ? now : 1;
	pthread_mutex_unlock(&fs->stage_lock);
}

void fs_open_free(struct kvfs_fs *fs)
{
	for (size_t i = 0; i < fs->redirect_n; i++)
		redirect_drop(fs, &fs->redirect[i]);
	free(fs->redirect);
	fs->redirect = NULL;
	fs->redirect_n = fs->redirect_cap = 0;
}

int fs_open_redirected(struct kvfs_fs *fs, fuse_ino_t ino, struct kv_ref *ref,
		       bool *have_ref)
{
	uint64_t now;
	int found = 0;

	*have_ref = false;
	pthread_mutex_lock(&fs->stage_lock);
	now = kvfs_mono_ns(); /* under the lock: see redirect_live */
	for (size_t i = 0; i < fs->redirect_n; i++) {
		struct fs_redirect *r = &fs->redirect[i];

		if (!redirect_live(r, now) || r->ino != ino)
			continue;
		if (r->have_ref && !*have_ref) {
			*ref = r->ref;
			*have_ref = true;
			r->have_ref = false;
		}
		redirect_drop(fs, r);
		found = 1;
	}
	pthread_mutex_unlock(&fs->stage_lock);
	return found;
}

int fs_open_stale(struct kvfs_fs *fs, uint32_t ns, const uint8_t *key,
		  pid_t tid)
{
	bool again;

	pthread_mutex_lock(&fs->stage_lock);
	again = redirect_find(fs, ns, key, tid) != NULL;
	pthread_mutex_unlock(&fs->stage_lock);
	/* a live entry: this open came without the lookup it was for */
	if (!again)
		redirect_add(fs, ns, key, tid, true);
	return -ESTALE;
}

/* the newest staging file of path still to be published; stage_lock */
static struct kvfs_file *stage_find(struct kvfs_fs *fs, uint32_t ns,
				    const char *path)
{
	for (struct kvfs_file *f = fs->staging; f; f = f->stage_next)
		if (f->ns == ns && !f->unlinked && strcmp(f->path, path) == 0)
			return f;
	/* published or thrown away files leave the list under stage_lock
	 * (fs_open_release_locked) */
	return NULL;
}

/* a lookup by a thread whose write open was sent back: 1 when answered
 * with its private inode, 0 when there is none to answer (go on) */
static int lookup_redirected(fuse_req_t req, struct kvfs_fs *fs, uint32_t ns,
			     const struct opath *o)
{
	struct kv_block_info bi;
	struct fs_redirect *r;
	struct stat st;
	uint64_t ino = 0;
	bool writer = false;
	int rc = 0;

	pthread_mutex_lock(&fs->stage_lock);
	r = redirect_find(fs, ns, o->key, fuse_req_ctx(req)->pid);
	/* the name holds a published file, or only another writer's
	 * staging file (an empty private inode then) */
	if (r && kv_store_stat(fs->st, ns, o->key, &bi) < 0) {
		memset(&bi, 0, sizeof(bi));
		if (r->read || !stage_find(fs, ns, o->p))
			redirect_drop(fs, r); /* gone: an ordinary miss */
	}
	/* a reader's private inode stands for the bytes the name holds
	 * now, whatever it holds by the open */
	if (r && r->at_ns && r->read && !r->have_ref) {
		if (kv_store_get(fs->st, ns, o->key, &r->ref) == 0)
			r->have_ref = true;
		else
			redirect_drop(fs, r);
	}
	if (r && r->at_ns && r->have_ref)
		bi.size = r->ref.size;
	if (r && r->at_ns) {
		/* the kernel may look up twice (a revalidation, then the
		 * lookup proper) and forget the first */
		if (r->ino && inode_lookup_ino(fs->it, r->ino) == 0)
			ino = r->ino;
		else
			rc = inode_lookup_private(fs->it, INODE_BLOCK, ns,
						  o->key, &ino);
		if (rc == 0) {
			r->ino = ino;
			writer = !r->read;
			rc = inode_set_path(fs->it, ino, o->p);
		}
		if (rc == 0)
			inode_set_attr(fs->it, ino, bi.size, bi.seal_ns);
	}
	pthread_mutex_unlock(&fs->stage_lock);
	if (!ino)
		return 0;
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return 1;
	}
	fs_stat_block(fs, ino, bi.size, bi.seal_ns, false, &st);
	fs_open_mode(&st);
	/* a writer's: written through the cache next (fs_open_write) */
	fs_reply_entry(req, fs, &st, 0, writer ? fs_writing_attr_tmo(fs) : 0);
	return 1;
}

/* ---- lookup -------------------------------------------------------- */

static void reply_dir(fuse_req_t req, struct kvfs_fs *fs, uint32_t ns,
		      const struct opath *o)
{
	struct stat st;
	uint64_t ino;
	int rc = inode_lookup(fs->it, INODE_DIR, ns, o->key, &ino);

	if (rc == 0)
		rc = inode_set_path(fs->it, ino, o->p);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	/* nlink 1: "unknown", so find(1) does not count on it */
	fs_stat_dir(fs, ino, 1, 0755, &st);
	fs_reply_entry(req, fs, &st, TMO_DIR, TMO_DIR);
}

/*
 * ino, just looked up by o's key, stands for the bytes *bi describes (a
 * stat before that lookup).  Publishers move the key's inode first and
 * the store after (the top), so: an ino still being written is a new
 * version on its way; one that is not, with the store still holding the
 * same bytes after it was found, stands for them.
 */
static bool lookup_current(struct kvfs_fs *fs, fuse_ino_t ino, uint32_t ns,
			   const struct opath *o,
			   const struct kv_block_info *bi)
{
	struct kv_block_info now;
	struct inode_info in;

	if (inode_get(fs->it, ino, &in) < 0 || in.writing)
		return false;
	return kv_store_stat(fs->st, ns, o->key, &now) == 0 &&
	       now.slot == bi->slot && now.gen == bi->gen;
}

/* a lookup racing that many publications of its name gives up (EAGAIN):
 * each try is a few table probes, and a name is replaced far less often */
#define LOOKUP_TRIES 1000

void fs_open_lookup(fuse_req_t req, fuse_ino_t parent, uint32_t ns,
		    const char *name)
{
	struct kvfs_fs *fs = fs_of(req);
	unsigned tries = 0;
	struct kv_block_info bi;
	struct inode_info in;
	struct opath o;
	struct stat st;
	uint64_t ino;
	int rc = child_path(fs, parent, name, &o);

	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	if (kv_store_dir_exists(fs->st, ns, o.p)) {
		reply_dir(req, fs, ns, &o);
		return;
	}
	if (lookup_redirected(req, fs, ns, &o))
		return;
again:
	ino = inode_find(fs->it, INODE_BLOCK, ns, o.key);
	if (ino && fs_wait_closing(fs, ino))
		ino = inode_find(fs->it, INODE_BLOCK, ns, o.key);
	if (ino && inode_get(fs->it, ino, &in) == 0 && in.writing) {
		/* a staging file: its writer's own rename and unlink need it */
		rc = inode_lookup(fs->it, INODE_BLOCK, ns, o.key, &ino);
		if (rc < 0) {
			fuse_reply_err(req, -rc);
			return;
		}
		fs_stat_block(fs, ino, in.size, 0, true, &st);
		fs_open_mode(&st);
		fs_reply_entry(req, fs, &st, TMO_WRITING,
			       fs_writing_attr_tmo(fs));
		return;
	}
	inode_note_miss(fs->it, ns, o.key); /* before the store: fs_block.c */
	rc = kv_store_stat(fs->st, ns, o.key, &bi);
	if (rc == -ENOENT && fs->cl && fs_remote_read(fs, ns, o.key) == 0) {
		/* a copy came by key: it learns its name here */
		kv_store_set_path(fs->st, ns, o.p);
		rc = kv_store_stat(fs->st, ns, o.key, &bi);
	}
	if (rc == -ENOENT) {
		kv_store_lookup(fs->st, ns, o.key); /* counts the miss */
		fs_reply_negative(req, TMO_NEGATIVE);
		return;
	}
	if (rc == 0)
		rc = inode_lookup(fs->it, INODE_BLOCK, ns, o.key, &ino);
	if (rc == 0 && !lookup_current(fs, ino, ns, &o, &bi)) {
		/* replaced meanwhile: the ino and the attributes would
		 * stand for two versions */
		inode_unlookup(fs->it, ino);
		if (++tries < LOOKUP_TRIES)
			goto again;
		rc = -EAGAIN;
	}
	if (rc == 0)
		rc = inode_set_path(fs->it, ino, o.p);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	inode_set_attr(fs->it, ino, bi.size, bi.seal_ns);
	fs_stat_block(fs, ino, bi.size, bi.seal_ns, false, &st);
	fs_open_mode(&st);
	fs_reply_entry(req, fs, &st, TMO_SEALED, TMO_SEALED);
}

/* ---- staging files ------------------------------------------------- */

static struct kvfs_file *new_stager(struct kvfs_fs *fs, uint32_t ns,
				    const struct opath *o, int *rc)
{
	struct kvfs_file *f = calloc(1, sizeof(*f));

	*rc = -ENOMEM;
	if (!f)
		return NULL;
	f->path = strdup(o->p);
	if (!f->path || pthread_mutex_init(&f->lock, NULL)) {
		free(f->path);
		free(f);
		return NULL;
	}
	if (pthread_cond_init(&f->checked, NULL)) {
		pthread_mutex_destroy(&f->lock);
		free(f->path);
		free(f);
		return NULL;
	}
	f->kind = FILE_WRITE;
	f->open = true;
	f->ns = ns;
	memcpy(f->hash, o->key, KVFS_HASH_LEN);
	*rc = kv_store_create_staging(fs->st, ns, &f->wh);
	if (*rc < 0) {
		fs_file_free(f);
		return NULL;
	}
	return f;
}

static void stage_add(struct kvfs_fs *fs, struct kvfs_file *f)
{
	pthread_mutex_lock(&fs->stage_lock);
	f->stage_next = fs->staging;
	fs->staging = f;
	pthread_mutex_unlock(&fs->stage_lock);
}

void fs_open_create(fuse_req_t req, fuse_ino_t parent, uint32_t ns,
		    const char *name, struct fuse_file_info *fi)
{
	struct kvfs_fs *fs = fs_of(req);
	struct fuse_entry_param e;
	struct kv_block_info bi;
	struct kvfs_file *f = NULL;
	struct inode_info in;
	struct opath o;
	uint64_t ino = 0;
	int rc = child_path(fs, parent, name, &o);

	if (rc == 0 && (fi->flags & O_ACCMODE) == O_RDONLY)
		rc = -EINVAL;
	if (rc == 0 && kv_store_dir_exists(fs->st, ns, o.p))
		rc = -EISDIR;
	if (rc == 0 && (fi->flags & O_EXCL)) {
		ino = inode_find(fs->it, INODE_BLOCK, ns, o.key);
		if (kv_store_stat(fs->st, ns, o.key, &bi) == 0 ||
		    (ino && inode_get(fs->it, ino, &in) == 0 && in.writing))
			rc = -EEXIST;
	}
	if (rc == 0)
		f = new_stager(fs, ns, &o, &rc);
	if (rc == 0)
		f->opener = fuse_req_ctx(req)->pid;
	if (rc == 0) {
		/* the name's key goes to the staging inode unless a file
		 * holds it; the store decides which is published last */
		if (inode_find(fs->it, INODE_BLOCK, ns, o.key))
			rc = inode_lookup_private(fs->it, INODE_BLOCK, ns,
						  o.key, &ino);
		else
			rc = inode_lookup(fs->it, INODE_BLOCK, ns, o.key, &ino);
		if (rc < 0) {
			kv_store_abort(fs->st, f->wh);
			fs_file_free(f);
		}
	}
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	f->ino = ino;
	inode_set_path(fs->it, ino, o.p);
	inode_set_writing(fs->it, ino, true);
	inode_set_attr(fs->it, ino, 0, 0);
	inode_open(fs->it, ino, 1);
	stage_add(fs, f);
	memset(&e, 0, sizeof(e));
	e.ino = ino;
	fs_stat_block(fs, ino, 0, 0, true, &e.attr);
	fs_open_mode(&e.attr);
	e.attr_timeout = fs_writing_attr_tmo(fs);
	fi->fh = (uintptr_t)f;
	fi->keep_cache = 0;
	if (fuse_reply_create(req, &e, fi) != 0) {
		/* interrupted: the kernel has neither the entry nor the file */
		f->err = -EINTR;
		fs_release_block(fs, f);
		inode_unlookup(fs->it, ino);
	}
}

/*
 * A new version of a published (or staging) file, opened for writing: on
 * a private inode (redirected), or sharing the inode of the old version
 * or of the staging file the writer had.
 */
int fs_open_write(struct kvfs_fs *fs, fuse_ino_t ino,
		  const struct inode_info *in, bool redirected, pid_t tid,
		  struct fuse_file_info *fi, struct kvfs_file **out)
{
	struct kvfs_file *f;
	struct kv_ref ref;
	struct opath o;
	long pl = inode_path(fs->it, ino, o.p, sizeof(o.p));
	bool retried;
	int rc;

	if (pl <= 0)
		return pl < 0 ? (int)pl : -ENOENT;
	o.len = (size_t)pl;
	memcpy(o.key, in->hash, KVFS_HASH_LEN);
	/* another writer's staging inode is redirected too: it becomes
	 * the published inode at that writer's close, and our O_TRUNC
	 * would have cut its size in the kernel under its readers */
	if (!redirected) {
		pthread_mutex_lock(&fs->stage_lock);
		struct fs_redirect *r = redirect_find(fs, in->ns, o.key, tid);

		retried = r != NULL;
		if (r) /* the retry came without its lookup */
			redirect_drop(fs, r);
		pthread_mutex_unlock(&fs->stage_lock);
		/* under the write-back cache the kernel keeps the size an
		 * O_TRUNC or a write gives a shared inode for good, and an
		 * O_TRUNC drops the pages another writer of it cached:
		 * never share then; nor where the mount passes files
		 * through, since the kernel fails an open of an inode that
		 * mixes passthrough and not (fs_io.c); a retry without its
		 * lookup gets ESTALE */
		if (!retried || fs->writeback || fs_pt_on(fs)) {
			redirect_add(fs, in->ns, o.key, tid, false);
			return -ESTALE;
		}
	}
	f = new_stager(fs, in->ns, &o, &rc);
	if (!f)
		return rc;
	f->opener = tid;
	f->ino = ino;
	f->reopen = true;
	f->shared = !redirected;
	if (redirected) {
		inode_set_writing(fs->it, ino, true);
		inode_set_attr(fs->it, ino, 0, 0);
	}
	/* without O_TRUNC it starts as a copy of what the name holds */
	if (!(fi->flags & O_TRUNC) &&
	    kv_store_get(fs->st, in->ns, in->hash, &ref) == 0) {
		pthread_mutex_lock(&f->lock);
		rc = fs_resize_locked(fs, f, ref.size, false);
		if (rc == 0)
			rc = kv_store_write(fs->st, f->wh, 0, ref.data,
					    ref.size);
		pthread_mutex_unlock(&f->lock);
		kv_store_put(fs->st, &ref);
		if (rc < 0) {
			kv_store_abort(fs->st, f->wh);
			fs_file_free(f);
			return rc;
		}
	}
	inode_open(fs->it, ino, 1);
	stage_add(fs, f);
	/* a shared inode's cache holds the old version: keep ours out */
	fi->direct_io = f->shared;
	fi->keep_cache = 0;
	*out = f;
	return 0;
}

void fs_open_read_staging(fuse_req_t req, struct kvfs_fs *fs,
			  struct kvfs_file *f, size_t size, off_t off)
{
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(0);
	void *p = NULL;
	size_t n = 0;
	int fd = -1;

	pthread_mutex_lock(&f->lock);
	if (!f->done && kv_store_wtarget(fs->st, f->wh, &p, &fd) == 0 &&
	    off >= 0 && (uint64_t)off < f->size) {
		n = f->size - (uint64_t)off;
		if (n > size)
			n = size;
	}
	/* under the lock: the writer's next write must not race the copy */
	bv.buf[0].size = n;
	if (p) {
		bv.buf[0].mem = (uint8_t *)p + off;
	} else if (n) {
		bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
		bv.buf[0].fd = fd;
		bv.buf[0].pos = off;
	}
	fuse_reply_data(req, &bv, 0);
	pthread_mutex_unlock(&f->lock);
}

/* publish f under path: stage_lock and f->lock held */
static int publish_locked(struct kvfs_fs *fs, struct kvfs_file *f,
			  const char *path)
{
	uint8_t key[KVFS_HASH_LEN];
	struct kv_block_info bi;
	bool stager = !f->shared, displaced = false;
	uint64_t other;
	int rc = kvfs_path_key(path, strlen(path), key);

	if (rc < 0)
		return rc;
	/* inodes first: from here an open of the old version's inode is
	 * ESTALE, and a lookup of the name waits for us */
	if (stager) {
		inode_set_attr(fs->it, f->ino, f->size, 0);
		displaced = inode_rekey(fs->it, f->ino, key) > 0;
	} else {
		/* the old version's inode, and any other the name got
		 * since (they stand for the bytes being replaced) */
		inode_unhash(fs->it, f->ino);
		other = inode_find(fs->it, INODE_BLOCK, f->ns, key);
		if (other)
			inode_unhash(fs->it, other);
	}
	rc = kv_store_publish(fs->st, f->wh, path, false);
	if (rc < 0) {
		kvfs_warn("publishing %s failed: %s", path, strerror(-rc));
		if (rc != -EIO) /* -EIO: the store aborted it already */
			kv_store_abort(fs->st, f->wh);
		f->err = rc;
		f->done = true;
		if (stager) {
			inode_unhash(fs->it, f->ino);
			inode_set_writing(fs->it, f->ino, false);
		} else {
			inode_set_closing(fs->it, f->ino, false);
		}
		return rc;
	}
	f->done = true;
	if (stager) {
		if (kv_store_stat(fs->st, f->ns, key, &bi) < 0)
			bi.seal_ns = kvfs_wall_ns();
		inode_set_attr(fs->it, f->ino, f->size, bi.seal_ns);
		inode_set_writing(fs->it, f->ino, false);
	} else {
		/* a lookup that raced us hands out an inode for the old
		 * bytes: take the name from it too */
		other = inode_find(fs->it, INODE_BLOCK, f->ns, key);
		if (other)
			inode_unhash(fs->it, other);
		inode_set_closing(fs->it, f->ino, false);
	}
	/* other openers' dentries: a miss, or the old version.  Not the
	 * writer's own (seal_locked in fs_block.c says why) */
	if (!stager || displaced || inode_take_missed(fs->it, f->ino))
		notify_path(fs, f->ns, path);
	if (fs->cl) {
		char name[KVFS_NS_MAX + 1];

		if (fs_ns_info(fs, f->ns, name, NULL) == 0)
			kvfsd_cluster_sealed(fs->cl, name, key);
	}
	return 0;
}

/*
 * The last descriptor is gone (f->lock held): off the staging list and
 * published (or thrown away) in one step under stage_lock, so that a
 * rename or an unlink of the name comes wholly before (and moves or
 * cancels it) or wholly after (and finds the published file).
 */
void fs_open_release_locked(struct kvfs_fs *fs, struct kvfs_file *f)
{
	struct kvfs_file **p;

	pthread_mutex_lock(&fs->stage_lock);
	for (p = &fs->staging; *p; p = &(*p)->stage_next)
		if (*p == f) {
			*p = f->stage_next;
			break;
		}
	if (!f->done) {
		if (f->err || f->dying || f->unlinked)
			fs_abort_locked(fs, f);
		else
			publish_locked(fs, f, f->path);
	}
	pthread_mutex_unlock(&fs->stage_lock);
}

/* ---- names --------------------------------------------------------- */

void fs_open_unlink(fuse_req_t req, fuse_ino_t parent, uint32_t ns,
		    const char *name)
{
	struct kvfs_fs *fs = fs_of(req);
	struct kvfs_file *f;
	struct opath o;
	bool staged = false;
	uint64_t ino;
	int rc = child_path(fs, parent, name, &o);

	if (rc == 0 && kv_store_dir_exists(fs->st, ns, o.p))
		rc = -EISDIR;
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	/* staging files of the name are never published */
	pthread_mutex_lock(&fs->stage_lock);
	while ((f = stage_find(fs, ns, o.p))) {
		f->unlinked = true;
		/* nor at the recovery after a crash (fs_closed_locked) */
		kv_store_reopened(fs->st, f->wh);
		staged = true;
	}
	pthread_mutex_unlock(&fs->stage_lock);
	ino = inode_find(fs->it, INODE_BLOCK, ns, o.key);
	if (ino)
		inode_unhash(fs->it, ino);
	rc = kv_store_remove(fs->st, ns, o.key);
	if (rc == -ENOENT && staged)
		rc = 0;
	fuse_reply_err(req, -rc);
}

void fs_open_mkdir(fuse_req_t req, fuse_ino_t parent, uint32_t ns,
		   const char *name)
{
	struct kvfs_fs *fs = fs_of(req);
	struct inode_info in;
	struct opath o;
	uint64_t ino;
	int rc = child_path(fs, parent, name, &o);

	if (rc == 0) {
		/* a staging file holds the name too */
		ino = inode_find(fs->it, INODE_BLOCK, ns, o.key);
		if (ino && inode_get(fs->it, ino, &in) == 0 && in.writing)
			rc = -EEXIST;
	}
	if (rc == 0)
		rc = kv_store_dir_create(fs->st, ns, o.p);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	reply_dir(req, fs, ns, &o);
}

void fs_open_rmdir(fuse_req_t req, fuse_ino_t parent, uint32_t ns,
		   const char *name)
{
	struct kvfs_fs *fs = fs_of(req);
	struct opath o;
	uint64_t ino;
	int rc = child_path(fs, parent, name, &o);

	/* a file still being written inside is an entry too */
	if (rc == 0) {
		pthread_mutex_lock(&fs->stage_lock);
		for (struct kvfs_file *f = fs->staging; f; f = f->stage_next)
			if (f->ns == ns && !f->unlinked &&
			    strncmp(f->path, o.p, o.len) == 0 &&
			    f->path[o.len] == '/')
				rc = -ENOTEMPTY;
		pthread_mutex_unlock(&fs->stage_lock);
	}
	if (rc == 0)
		rc = kv_store_dir_remove(fs->st, ns, o.p);
	if (rc == -ENOENT &&
	    kv_store_stat(fs->st, ns, o.key, &(struct kv_block_info){ 0 }) == 0)
		rc = -ENOTDIR;
	if (rc == 0) {
		ino = inode_find(fs->it, INODE_DIR, ns, o.key);
		if (ino)
			inode_unhash(fs->it, ino);
	}
	fuse_reply_err(req, -rc);
}

/*
 * rename of a file being written: 1 done, 0 nothing staged to move (the
 * caller renames the published file), < 0 an error.  A file its writer
 * has closed is first let be published (os.replace right after close),
 * so that the rename then moves the published file.  A new version of a
 * published name (reopen) moves with it: its path changes here, and the
 * caller renames the published version too.
 */
static int rename_staging(struct kvfs_fs *fs, uint32_t ns,
			  const struct opath *from, const struct opath *to,
			  bool noreplace)
{
	struct kv_block_info bi;
	struct kvfs_file *f;
	uint64_t ino = 0;
	bool reopen = false;
	char *p;
	int rc = 1;

	pthread_mutex_lock(&fs->stage_lock);
	f = stage_find(fs, ns, from->p);
	ino = f ? f->ino : 0;
	pthread_mutex_unlock(&fs->stage_lock);
	if (ino && fs_wait_closing(fs, ino)) {
		/* published (or thrown away) meanwhile: look again */
		pthread_mutex_lock(&fs->stage_lock);
		f = stage_find(fs, ns, from->p);
		ino = f ? f->ino : 0;
		pthread_mutex_unlock(&fs->stage_lock);
	}
	if (!ino)
		return 0;
	if (noreplace && kv_store_stat(fs->st, ns, to->key, &bi) == 0)
		return -EEXIST;
	p = strdup(to->p);
	if (!p)
		return -ENOMEM;
	pthread_mutex_lock(&fs->stage_lock);
	/* stage_find skips files already published: under stage_lock the
	 * file is either still to be published, or gone from the list */
	f = stage_find(fs, ns, from->p);
	if (f) {
		free(f->path);
		f->path = p;
		p = NULL;
		ino = f->ino;
		reopen = f->reopen;
		/* a new version's private inode keeps out of the name's key
		 * until publication, as the published version moves too */
		if (!reopen)
			inode_rekey(fs->it, ino, to->key);
		if (!f->shared)
			inode_set_path(fs->it, ino, to->p);
	} else {
		rc = 0; /* published meanwhile: the caller renames that */
	}
	pthread_mutex_unlock(&fs->stage_lock);
	free(p);
	return rc == 1 && reopen ? 0 : rc;
}

void fs_open_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		    fuse_ino_t newparent, const char *newname,
		    unsigned int flags)
{
	struct kvfs_fs *fs = fs_of(req);
	struct opath from, to;
	uint32_t ns, ns2;
	uint64_t ino, old;
	int rc, l1 = fs_layout_of(fs, parent, &ns);
	int l2 = fs_layout_of(fs, newparent, &ns2);

	if (l1 < 0 || l2 < 0)
		rc = l1 < 0 ? l1 : l2;
	else if (l1 != KV_LAYOUT_OPEN || l2 != KV_LAYOUT_OPEN)
		rc = -EPERM; /* a chain name is its content's address */
	else if (ns != ns2)
		rc = -EXDEV;
	else if (flags & ~(unsigned)RENAME_NOREPLACE)
		rc = -EINVAL; /* RENAME_EXCHANGE, RENAME_WHITEOUT */
	else
		rc = child_path(fs, parent, name, &from);
	if (rc == 0)
		rc = child_path(fs, newparent, newname, &to);
	/* directories stay where they are made: mv(1) copies on EXDEV */
	if (rc == 0 && kv_store_dir_exists(fs->st, ns, from.p))
		rc = -EXDEV;
	if (rc == 0 && kv_store_dir_exists(fs->st, ns, to.p))
		rc = -EISDIR;
	if (rc == 0)
		rc = rename_staging(fs, ns, &from, &to,
				    flags & RENAME_NOREPLACE);
	if (rc == 0) {
		/* inodes before the store moves (see the top): the target's
		 * loses the name, the moved file's takes it after */
		ino = inode_find(fs->it, INODE_BLOCK, ns, from.key);
		old = inode_find(fs->it, INODE_BLOCK, ns, to.key);
		if (old && old != ino)
			inode_unhash(fs->it, old);
		rc = kv_store_rename(fs->st, ns, from.p, to.p,
				     flags & RENAME_NOREPLACE);
		if (rc == 0 && ino) {
			inode_rekey(fs->it, ino, to.key);
			inode_set_path(fs->it, ino, to.p);
		}
		if (rc == 0 && fs->cl) {
			/* its copies are under the old key: push the new one */
			char nsname[KVFS_NS_MAX + 1];

			if (fs_ns_info(fs, ns, nsname, NULL) == 0)
				kvfsd_cluster_sealed(fs->cl, nsname, to.key);
		}
	}
	fuse_reply_err(req, rc > 0 ? 0 : -rc);
}

/* ---- readdir ------------------------------------------------------- */

/* files of directory dir whose writer has closed them: let them be
 * published before a listing starts (ls right after a close) */
static void wait_closed_in(struct kvfs_fs *fs, uint32_t ns, const char *dir)
{
	size_t dl = strlen(dir);
	uint64_t inos[16];
	int n = 0;

	pthread_mutex_lock(&fs->stage_lock);
	for (struct kvfs_file *f = fs->staging; f && n < 16;
	     f = f->stage_next) {
		const char *slash = strrchr(f->path, '/');
		size_t pl = slash ? (size_t)(slash - f->path) : 0;

		if (f->ns == ns && f->flushed && pl == dl &&
		    strncmp(f->path, dir, dl) == 0)
			inos[n++] = f->ino;
	}
	pthread_mutex_unlock(&fs->stage_lock);
	for (int i = 0; i < n; i++)
		fs_wait_closing(fs, inos[i]);
}

int fs_open_readdir(struct kvfs_fs *fs, fuse_ino_t ino, uint32_t ns,
		    fuse_req_t req, char *buf, size_t size, off_t off,
		    size_t *len)
{
	char dir[KV_STORE_PATH_MAX + 1], name[256];
	uint64_t cursor = off > 2 ? (uint64_t)off - 2 : 0;
	struct stat st;
	bool is_dir;
	long dl = inode_path(fs->it, ino, dir, sizeof(dir));
	int rc;

	if (dl < 0)
		return (int)dl;
	if (off == 0)
		wait_closed_in(fs, ns, dir);
	*len = 0;
	memset(&st, 0, sizeof(st));
	for (int i = (int)off; i < 2; i++) {
		size_t need;

		st.st_ino = i == 0 ? ino : FS_UNKNOWN_INO;
		st.st_mode = S_IFDIR;
		need = fuse_add_direntry(req, buf + *len, size - *len,
					 i == 0 ? "." : "..", &st, i + 1);
		if (need > size - *len)
			return 0;
		*len += need;
	}
	for (;;) {
		size_t need;

		rc = kv_store_dir_next(fs->st, ns, dir, &cursor, name,
				       sizeof(name), &is_dir);
		if (rc <= 0)
			return rc;
		st.st_ino = FS_UNKNOWN_INO;
		st.st_mode = is_dir ? S_IFDIR : S_IFREG;
		/* the cursor is past this entry: one that does not fit is
		 * listed again from the previous entry's offset */
		need = fuse_add_direntry(req, buf + *len, size - *len, name,
					 &st, (off_t)(cursor + 2));
		if (need > size - *len)
			return 0;
		*len += need;
	}
}
