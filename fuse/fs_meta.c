/*
 * fs_meta.c - MOUNT/.kvfs: stats (JSON), metrics (Prometheus text) and
 * nodes (the cluster view; on a single node, this node alone).
 *
 * Each file is rendered when it is opened and read from that text, so one
 * open sees one consistent snapshot and every open sees the current state.
 * Their size is 0 and their reads are direct_io: the kernel neither
 * trusts the size nor caches the pages, and a reader reads until EOF, as
 * from /proc.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuse/fs_int.h"
#include "fuse/kvfsd_cluster.h"
#include "fuse/render.h"

struct meta_file {
	const char *name;
	fuse_ino_t ino;
};

static const struct meta_file meta_files[] = {
	{ "stats", INO_STATS },
	{ "metrics", INO_METRICS },
	{ "nodes", INO_NODES },
};

#define NMETA (sizeof(meta_files) / sizeof(meta_files[0]))

bool fs_is_meta(fuse_ino_t ino)
{
	return ino >= INO_META_DIR && ino <= INO_NODES;
}

void fs_lookup_meta(fuse_req_t req, const char *name)
{
	struct kvfs_fs *fs = fs_of(req);
	struct stat st;

	for (size_t i = 0; i < NMETA; i++) {
		if (strcmp(name, meta_files[i].name) == 0) {
			fs_getattr_meta(fs, meta_files[i].ino, &st);
			fs_reply_entry(req, fs, &st, TMO_META, TMO_META);
			return;
		}
	}
	/* the directory's content is fixed: a miss stays a miss */
	fs_reply_negative(req, TMO_META);
}

int fs_getattr_meta(struct kvfs_fs *fs, fuse_ino_t ino, struct stat *st)
{
	if (ino == INO_META_DIR) {
		fs_stat_dir(fs, ino, 2, 0555, st);
		return 0;
	}
	fs_stat_block(fs, ino, 0, fs->start_ns, false, st);
	st->st_blksize = 4096;
	return 0;
}

/* ---- .kvfs/nodes --------------------------------------------------- */

/*
 * {"nodes":[NODE,...], and in a cluster "replicas", "transport", "epoch",
 *  "queued"}: every live node by id, this one first with "self":true and
 * what only it knows (mountpoint, socket, pid, slots_free, blocks);
 * a single node lists itself alone, by its id.
 */
static int render_nodes(struct kvfs_fs *fs, char **out, size_t *len)
{
	struct kvfs_buf b = KVFS_BUF_INIT, self = KVFS_BUF_INIT;
	struct kv_store_stats s;
	int rc = kv_store_stats(fs->st, &s);

	if (rc < 0)
		return rc;
	kvfs_buf_puts(&self, ",\"mountpoint\":");
	kvfs_buf_json_str(&self, fs->mountpoint, strlen(fs->mountpoint));
	kvfs_buf_puts(&self, ",\"socket\":");
	kvfs_buf_json_str(&self, fs->socket, strlen(fs->socket));
	kvfs_buf_printf(&self,
			",\"pid\":%ld,\"slots\":%llu,\"slot_size\":%llu,"
			"\"slots_free\":%llu,\"blocks\":%llu",
			(long)getpid(), (unsigned long long)s.slots_total,
			(unsigned long long)s.slot_size,
			(unsigned long long)s.slots_free,
			(unsigned long long)s.total.blocks);
	if (self.err) {
		kvfs_buf_release(&self);
		return self.err;
	}
	kvfs_buf_puts(&b, "{");
	if (fs->cl) {
		rc = kvfsd_cluster_view_json(fs->cl, &b, self.p);
	} else {
		kvfs_buf_puts(&b, "\"nodes\":[{\"id\":");
		kvfs_buf_json_str(&b, fs->node, strlen(fs->node));
		kvfs_buf_puts(&b, ",\"self\":true,\"state\":\"up\"");
		kvfs_buf_puts(&b, self.p);
		kvfs_buf_puts(&b, "}]");
	}
	kvfs_buf_release(&self);
	if (rc < 0) {
		kvfs_buf_release(&b);
		return rc;
	}
	kvfs_buf_puts(&b, "}\n");
	return kvfs_buf_finish(&b, out, len);
}

/*
 * .kvfs/stats: the store's, and "replication":{"replicas":R,
 * "live_nodes":N,"queued":N,"pushing":N,"pushed":N,"gave_up":N}, as
 * kvfs(7) promises (a single node: R 1, itself, nothing to push), and
 * the handoff's "handoff":{...} (kvfsd_cluster.h; kvfsd(8))
 */
static int render_stats(struct kvfs_fs *fs, char **out, size_t *len)
{
	struct kvfsd_repl_stats r;
	struct kvfsd_handoff_stats h;
	char extra[640];
	uint64_t pt_opens;
	size_t n;

	kvfsd_cluster_repl_stats(fs->cl, &r);
	kvfsd_cluster_handoff_stats(fs->cl, &h);
	snprintf(extra, sizeof(extra),
		 ",\"replication\":{\"replicas\":%u,\"live_nodes\":%u,"
		 "\"queued\":%zu,\"pushing\":%u,\"pushed\":%llu,"
		 "\"gave_up\":%llu},\"handoff\":{\"enabled\":%s,"
		 "\"queued\":%zu,\"fetched\":%llu,\"already\":%llu,"
		 "\"failed\":%llu,\"dropped\":%llu,\"bad_frames\":%llu}",
		 r.replicas, r.live_nodes, r.queued, r.busy,
		 (unsigned long long)r.pushed, (unsigned long long)r.gave_up,
		 h.enabled ? "true" : "false", h.queued,
		 (unsigned long long)h.fetched, (unsigned long long)h.already,
		 (unsigned long long)h.failed, (unsigned long long)h.dropped,
		 (unsigned long long)h.bad_frames);
	pthread_mutex_lock(&fs->io.pt_lock);
	pt_opens = fs->io.pt_opens;
	pthread_mutex_unlock(&fs->io.pt_lock);
	/* how the kernel reaches the files (kvfsd(8), writethrough and
	 * passthrough) */
	n = strlen(extra);
	snprintf(extra + n, sizeof(extra) - n,
		 ",\"io\":{\"writeback\":%s,\"passthrough\":%s,"
		 "\"passthrough_opens\":%llu}",
		 fs->writeback ? "true" : "false",
		 fs_pt_on(fs) ? "true" : "false", (unsigned long long)pt_opens);
	return render_stats_json_extra(fs->st, extra, out, len);
}

/*
 * .kvfs/metrics: the store's (render.c), then in a cluster with a
 * conductor the handoff's counters (kvfsd_cluster.h), in the same
 * exposition format and kvfs_ prefix
 */
static int render_metrics_all(struct kvfs_fs *fs, char **out, size_t *len)
{
	static const char *const name[] = { "fetched", "already", "failed",
					    "dropped", "bad_frames" };
	static const char *const help[] = {
		"Blocks FETCH frames named that were pulled from a peer.",
		"Blocks FETCH frames named that were local already.",
		"Blocks FETCH frames named that no peer could give.",
		"Blocks FETCH frames named that found the queue full.",
		"FETCH frames that failed their checks.",
	};
	struct kvfsd_handoff_stats h;
	struct kvfs_buf b = KVFS_BUF_INIT;
	uint64_t v[5];
	char *text = NULL;
	size_t n = 0;
	int rc = render_metrics(fs->st, &text, &n);

	if (rc < 0)
		return rc;
	kvfsd_cluster_handoff_stats(fs->cl, &h);
	if (!h.enabled) {
		*out = text;
		*len = n;
		return 0;
	}
	v[0] = h.fetched;
	v[1] = h.already;
	v[2] = h.failed;
	v[3] = h.dropped;
	v[4] = h.bad_frames;
	kvfs_buf_puts(&b, text);
	free(text);
	for (int i = 0; i < 5; i++)
		kvfs_buf_printf(&b,
				"# HELP kvfs_handoff_%s_total %s\n"
				"# TYPE kvfs_handoff_%s_total counter\n"
				"kvfs_handoff_%s_total %llu\n",
				name[i], help[i], name[i], name[i],
				(unsigned long long)v[i]);
	kvfs_buf_printf(&b,
			"# HELP kvfs_handoff_queued_blocks Blocks waiting to "
			"be pulled.\n"
			"# TYPE kvfs_handoff_queued_blocks gauge\n"
			"kvfs_handoff_queued_blocks %zu\n",
			h.queued);
	return kvfs_buf_finish(&b, out, len);
}

/* ---- open and readdir ---------------------------------------------- */

static int render(struct kvfs_fs *fs, fuse_ino_t ino, char **text, size_t *len)
{
	switch (ino) {
	case INO_STATS:
		return render_stats(fs, text, len);
	case INO_METRICS:
		return render_metrics_all(fs, text, len);
	case INO_NODES:
		return render_nodes(fs, text, len);
	default:
		return -EISDIR;
	}
}

int fs_open_meta(struct kvfs_fs *fs, fuse_ino_t ino, struct fuse_file_info *fi,
		 struct kvfs_file **out)
{
	struct kvfs_file *f;
	int rc;

	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC))
		return -EACCES;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->kind = FILE_TEXT;
	f->ino = ino;
	rc = render(fs, ino, &f->text, &f->len);
	if (rc < 0) {
		free(f);
		return rc;
	}
	fi->direct_io = 1;
	fi->keep_cache = 0;
	fi->noflush = 1;
	pthread_mutex_lock(&fs->text_lock);
	f->text_next = fs->texts;
	if (fs->texts)
		fs->texts->text_prev = f;
	fs->texts = f;
	pthread_mutex_unlock(&fs->text_lock);
	*out = f;
	return 0;
}

void fs_text_free(struct kvfs_fs *fs, struct kvfs_file *f)
{
	pthread_mutex_lock(&fs->text_lock);
	if (f->text_prev)
		f->text_prev->text_next = f->text_next;
	else
		fs->texts = f->text_next;
	if (f->text_next)
		f->text_next->text_prev = f->text_prev;
	pthread_mutex_unlock(&fs->text_lock);
	free(f->text);
	free(f);
}

void fs_readdir_meta(fuse_req_t req, size_t size, off_t off)
{
	char *buf = malloc(size ? size : 1);
	size_t len = 0;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* offsets: 1 ".", 2 "..", 3 + i after meta_files[i] */
	for (off_t i = off; i < (off_t)(2 + NMETA); i++) {
		struct stat st;
		const char *name = i == 0   ? "."
				   : i == 1 ? ".."
					    : meta_files[i - 2].name;
		size_t need;

		memset(&st, 0, sizeof(st));
		st.st_ino = i == 0   ? INO_META_DIR
			    : i == 1 ? INO_ROOT
				     : meta_files[i - 2].ino;
		st.st_mode = i < 2 ? S_IFDIR : S_IFREG;
		need = fuse_add_direntry(req, buf + len, size - len, name, &st,
					 i + 1);
		if (need > size - len)
			break;
		len += need;
	}
	fuse_reply_buf(req, buf, len);
	free(buf);
}
