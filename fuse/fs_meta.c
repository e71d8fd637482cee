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

/* s as a JSON string body: quotes, backslashes and controls escaped */
static void json_str(FILE *fp, const char *s)
{
	fputc('"', fp);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(fp, "\\%c", c);
		else if (c < 0x20)
			fprintf(fp, "\\u%04x", c);
		else
			fputc(c, fp);
	}
	fputc('"', fp);
}

static int render_nodes(struct kvfs_fs *fs, char **out, size_t *len)
{
	struct kv_store_stats s;
	FILE *fp;
	int rc = kv_store_stats(fs->st, &s);

	if (rc < 0)
		return rc;
	fp = open_memstream(out, len);
	if (!fp)
		return -ENOMEM;
	fputs("{\"nodes\":[{\"name\":", fp);
	json_str(fp, fs->node);
	fputs(",\"self\":true,\"state\":\"up\",\"mountpoint\":", fp);
	json_str(fp, fs->mountpoint);
	fputs(",\"socket\":", fp);
	json_str(fp, fs->socket);
	fprintf(fp,
		",\"pid\":%ld,\"slots\":%llu,\"slot_size\":%llu,"
		"\"slots_free\":%llu,\"blocks\":%llu}]}\n",
		(long)getpid(), (unsigned long long)s.slots_total,
		(unsigned long long)s.slot_size,
		(unsigned long long)s.slots_free,
		(unsigned long long)s.total.blocks);
	if (fclose(fp) != 0) {
		free(*out);
		return -ENOMEM;
	}
	return 0;
}

/* ---- open and readdir ---------------------------------------------- */

static int render(struct kvfs_fs *fs, fuse_ino_t ino, char **text,
		  size_t *len)
{
	switch (ino) {
	case INO_STATS:
		return render_stats_json(fs->st, text, len);
	case INO_METRICS:
		return render_metrics(fs->st, text, len);
	case INO_NODES:
		return render_nodes(fs, text, len);
	default:
		return -EISDIR;
	}
}

int fs_open_meta(struct kvfs_fs *fs, fuse_ino_t ino,
		 struct fuse_file_info *fi, struct kvfs_file **out)
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
	*out = f;
	return 0;
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
		const char *name = i == 0 ? "." : i == 1 ? ".." :
					   meta_files[i - 2].name;
		size_t need;

		memset(&st, 0, sizeof(st));
		st.st_ino = i == 0 ? INO_META_DIR : i == 1 ? INO_ROOT :
				     meta_files[i - 2].ino;
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
