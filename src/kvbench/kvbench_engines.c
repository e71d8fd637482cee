/*
 * kvbench_engines.c - "kvbench engines": engines' file backends on a
 * mount against tmpfs.
 *
 * Each backend below does, in C, the file operations its engine does in
 * Python or C++ (the same sequences as the programs of tests/engines/):
 *
 *   backend        store                                 load
 *   sglang         stat; tmp "wb", write; rename         open, read
 *   lmcache-disk   stat; open O_TRUNC, one write         open, read
 *   lmcache-fs     stat; tmp/ file, 28-byte header and   open, read loop
 *                  data (two writes); rename
 *   vllm-fs        stat; mkdir -p; dest_N.tmp O_EXCL|    O_DIRECT open,
 *                  O_DIRECT (if the probe passed), one   one readv
 *                  write; rename
 *   vllm-example   stat(dir); mkdir; per layer O_TRUNC,  open, mmap,
 *                  buffered writes, no rename            copy, munmap
 *   llamacpp       fopen "wb", many small fwrites        fopen, fread
 *   mooncake       mkdir -p; O_TRUNC, one write          open, pread
 *
 * and its existence check (stat, access(2), or for sglang one readdir of
 * the whole directory per batch, as batch_exists_v2 does).  For every
 * backend the same files are made on MOUNT (in a fresh directory, on
 * kvfs a namespace) and in a fresh directory of /dev/shm, and these
 * phases timed, each on the mount then on tmpfs:
 *
 *   store        N files written as above
 *   first read   each file read once, before any other read: what the
 *                page cache kept from the writes
 *   load         the same files read again
 *   load cold    read after posix_fadvise(POSIX_FADV_DONTNEED) of each
 *   exists hit 1st   the existence check of the N stored keys, first
 *   exists hit       then 10 more times (an engine checks a key at
 *                    every prompt that shares its prefix)
 *   exists miss 1st  the same, N keys never stored
 *   exists miss
 *
 * After the timed phases every file is read once more and compared with
 * its bytes; then both directories are removed.  Nothing but the system
 * calls and their loop is timed: the bytes are made before.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "src/kvbench/kvbench.h"

#define EN_CMD "engines"
#define EN_FILES 32
#define EN_SIZE (2ull << 20)
#define EN_MEM_MAX (1ull << 30) /* bytes of files a backend holds in memory */
#define EN_ALIGN 4096		/* O_DIRECT buffers */
#define EN_LAYERS 4		/* vllm-example: layer files per prompt */
#define EN_HDR 28		/* lmcache-fs: its header write */
#define EN_SMALL 1000		/* llamacpp: bytes per fwrite */

enum en_side { EN_KVFS, EN_TMPFS, EN_NSIDES };

enum en_phase {
	EN_STORE,
	EN_FIRST,
	EN_LOAD,
	EN_COLD,
	EN_HIT1,
	EN_HIT,
	EN_MISS1,
	EN_MISS,
	EN_NPHASES
};

static const char *const en_phase_name[EN_NPHASES] = {
	[EN_STORE] = "store",
	[EN_FIRST] = "first read",
	[EN_LOAD] = "load",
	[EN_COLD] = "load cold",
	[EN_HIT1] = "exists hit 1st",
	[EN_HIT] = "exists hit",
	[EN_MISS1] = "exists miss 1st",
	[EN_MISS] = "exists miss",
};

/* an engine checks a key again at every prompt that shares its prefix:
 * after the first check of each key (its own row), EN_EXISTS_PASSES */
#define EN_EXISTS_PASSES 10

static bool en_exists_phase(int ph)
{
	return ph == EN_HIT1 || ph == EN_HIT || ph == EN_MISS1 || ph == EN_MISS;
}

struct en_opts {
	const char *mount;
	const char *backend; /* NULL: all */
	uint64_t size;
	uint64_t files;
};

/* one backend on one side: its directory and its state */
struct en_dir {
	char root[PATH_MAX]; /* the backend's directory */
	bool direct;	     /* vllm-fs: the O_DIRECT probe passed */
	uint64_t tmpseq;     /* unique tmp names */
};

struct en_ctx {
	struct en_opts o;
	char work[EN_NSIDES][PATH_MAX]; /* MOUNT/kvbench-XXXXXX, shm dir */
	bool made_work;			/* work[EN_KVFS] to remove */
	uint8_t *data;			/* files x size: file i's bytes */
	uint8_t *buf;			/* size, EN_ALIGN-aligned */
	/* operations per second and bytes per second, [side][phase] */
	double ops[EN_NSIDES][EN_NPHASES], bps[EN_NSIDES][EN_NPHASES];
};

/*
 * A backend: its final path of key i (i >= files: a key never stored),
 * its store of file i, its load of file i into buf (-ENOENT: a miss,
 * -ENODATA: short), and its existence check of keys [from, from + n)
 * (returns the number present, or a negative errno); one key of the check
 * stands for files_per_key files (0: 1).
 */
struct en_ops {
	const char *name;
	int (*setup)(struct en_ctx *c, struct en_dir *d);
	int (*path)(const struct en_ctx *c, const struct en_dir *d, uint64_t i,
		    char *out, size_t cap);
	int (*store)(struct en_ctx *c, struct en_dir *d, uint64_t i);
	int (*load)(struct en_ctx *c, struct en_dir *d, uint64_t i);
	long (*exists)(struct en_ctx *c, struct en_dir *d,
		       const struct en_ops *ops, uint64_t from, uint64_t n);
	unsigned files_per_key; /* files behind one existence check */
};

void kvb_engines_usage(FILE *f)
{
	fputs("usage: kvbench engines MOUNT [--size BYTES] [--files N] "
	      "[--backend NAME]\n"
	      "\n"
	      "Run the file operations of each engine's file backend "
	      "(sglang, lmcache-disk,\nlmcache-fs, vllm-fs, vllm-example, "
	      "llamacpp, mooncake) on MOUNT and on tmpfs\n(/dev/shm) in the "
	      "same run: store N files, read them (first read after the\n"
	      "write, again, and after POSIX_FADV_DONTNEED), check "
	      "existence of stored and\nabsent keys; one row per backend "
	      "and phase with the ratio MOUNT/tmpfs.\n"
	      "\n"
	      "  -z, --size BYTES      bytes per file, a K, M or G suffix "
	      "allowed (default 2M)\n"
	      "  -n, --files N         files per backend (default 32)\n"
	      "  -b, --backend NAME    one backend only (default all)\n"
	      "  -h, --help            print this help\n",
	      f);
}

/* ---- small helpers -------------------------------------------------- */

static int en_path(char *out, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int en_path(char *out, size_t cap, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, cap, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* the 64 hex digits of key i of a backend: a splitmix64 stream of i */
static void en_hex(uint64_t i, char hex[65])
{
	uint64_t s = i * 0x2545f4914f6cdd1dull + 77;

	for (int k = 0; k < 4; k++)
		snprintf(hex + 16 * k, 17, "%016llx",
			 (unsigned long long)kvb_rand(&s));
}

static uint8_t *en_bytes(const struct en_ctx *c, uint64_t i)
{
	return c->data + i * c->o.size;
}

static int en_write_all(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		if (w == 0)
			return -EIO;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* read until len bytes or end of file; -ENODATA when short */
static int en_read_all(int fd, uint8_t *p, size_t len)
{
	while (len) {
		ssize_t r = read(fd, p, len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ENODATA;
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

static int en_close(int fd, int rc)
{
	if (close(fd) && !rc)
		rc = -errno;
	return rc;
}

/* open O_WRONLY|O_CREAT|flags, write all, close (the seal on kvfs) */
static int en_put(const char *path, int flags, const uint8_t *p, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);

	if (fd < 0)
		return -errno;
	return en_close(fd, en_write_all(fd, p, len));
}

static int en_get(const char *path, int flags, uint8_t *p, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | flags);

	if (fd < 0)
		return -errno;
	return en_close(fd, en_read_all(fd, p, len));
}

static int en_stat(const char *path)
{
	struct stat sb;

	return stat(path, &sb) ? -errno : 0;
}

/* mkdir -p of the directory part of path, below root (which exists) */
static int en_mkdirs(const char *root, const char *path)
{
	char dir[PATH_MAX];
	size_t skip = strlen(root);

	if (en_path(dir, sizeof(dir), "%s", path))
		return -ENAMETOOLONG;
	for (char *p = dir + skip + 1; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		if (mkdir(dir, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return 0;
}

/* existence by stat (Python's os.path.exists), or access(2), per key */
static long en_exists_by(struct en_ctx *c, struct en_dir *d,
			 const struct en_ops *ops, uint64_t from, uint64_t n,
			 bool access_f)
{
	char p[PATH_MAX];
	long hits = 0;
	int rc;

	for (uint64_t i = from; i < from + n; i++) {
		rc = ops->path(c, d, i, p, sizeof(p));
		if (rc)
			return rc;
		rc = access_f ? (access(p, F_OK) ? -errno : 0) : en_stat(p);
		if (rc && rc != -ENOENT)
			return rc;
		hits += !rc;
	}
	return hits;
}

static long en_exists_stat(struct en_ctx *c, struct en_dir *d,
			   const struct en_ops *ops, uint64_t from, uint64_t n)
{
	return en_exists_by(c, d, ops, from, n, false);
}

/* one faccessat per key (vLLM) */
static long en_exists_access(struct en_ctx *c, struct en_dir *d,
			     const struct en_ops *ops, uint64_t from,
			     uint64_t n)
{
	return en_exists_by(c, d, ops, from, n, true);
}

/* ---- sglang: HiCacheFile ------------------------------------------------ */

#define SG_SUFFIX "_meta-llama-Llama-3.1-8B-Instruct_0_1.bin"

static int sg_path(const struct en_ctx *c, const struct en_dir *d, uint64_t i,
		   char *out, size_t cap)
{
	char hex[65];

	en_hex(i, hex);
	return en_path(out, cap, "%s/%s" SG_SUFFIX, d->root, hex);
}

static int sg_store(struct en_ctx *c, struct en_dir *d, uint64_t i)
{
	char final[PATH_MAX], tmp[PATH_MAX + 64];
	int rc = sg_path(c, d, i, final, sizeof(final));

	if (rc)
		return rc;
	if (!en_stat(final))
		return 0; /* exists: skip */
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld.%ld.%llu", final, (long)getpid(),
		 (long)getpid(), (unsigned long long)d->tmpseq++);
	rc = en_put(tmp, O_TRUNC, en_bytes(c, i), c->o.size);
	if (!rc && rename(tmp, final))
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

static int sg_load(struct en_ctx *c, struct en_dir *d, uint64_t i)
{
	char p[PATH_MAX];
	int rc = sg_path(c, d, i, p, sizeof(p));

	return rc ? rc : en_get(p, 0, c->buf, c->o.size);
}

/* batch_exists_v2: one readdir of the whole directory per batch */
static long sg_exists(struct en_ctx *c, struct en_dir *d,
		      const struct en_ops *ops, uint64_t from, uint64_t n)
{
	char hex[65], want[128];
	uint8_t *seen = calloc(n, 1);
	struct dirent *e;
	long hits = 0;
	DIR *dir;

	if (!seen)
		return -ENOMEM;
	dir = opendir(d->root);
	if (!dir) {
		free(seen);
		return -errno;
	}
	/* the names of the batch are what a real index would look up in a
	 * hash set; here a linear match over the batch, n is small */
	while ((e = readdir(dir)) != NULL) {
		if (strlen(e->d_name) != 64 + strlen(SG_SUFFIX))
			continue;
		for (uint64_t k = 0; k < n; k++) {
			if (seen[k])
				continue;
			en_hex(from + k, hex);
			snprintf(want, sizeof(want), "%s" SG_SUFFIX, hex);
			if (!strcmp(want, e->d_name)) {
				seen[k] = 1;
				hits++;
				break;
			}
		}
	}
	closedir(dir);
	free(seen);
	return hits;
}

/* ---- lmcache-disk: LocalDiskBackend ------------------------------------- */

static int ld_path(const struct en_ctx *c, const struct en_dir *d, uint64_t i,
		   char *out, size_t cap)
{
	uint64_t s = i + 1;
	int64_t h = (int64_t)kvb_rand(&s);

	/* a signed 64-bit chunk hash, as Python's "%x" writes it */
	return en_path(
		out, cap, "%s/mistralai-Mistral-7B@1@0@%s%llx@bfloat16.pt",
		d->root, h < 0 ? "-" : "",
		(unsigned long long)(h < 0 ? -(uint64_t)h : (uint64_t)h));
}

static int ld_store(struct en_ctx *c, struct en_dir *d, uint64_t i)
{
	char p[PATH_MAX];
	int rc = ld_path(c, d, i, p, sizeof(p));

	if (rc)
		return rc;
	if (!en_stat(p))
		return 0;
	return en_put(p, O_TRUNC, en_bytes(c, i), c->o.size);
}

static int ld_load(struct en_ctx *c, struct en_dir *d, uint64_t i)
{
	char p[PATH_MAX];
	int rc = ld_path(c, d, i, p, sizeof(p));

	return rc ? rc : en_get(p, 0, c->buf, c->o.size);
}

/* ---- lmcache-fs: FS connector, MP-mode adapter --------------------------- */

static int lf_setup(struct en_ctx *c, struct en_dir *d)
{
	char p[PATH_MAX];

	if (en_path(p, sizeof(p), "%s/tmp", d->root))
		return -ENAMETOOLONG;
	return mkdir(p, 0755) && errno != EEXIST ? -errno : 0;
}

static int lf_path(const struct en_ctx *c, const struct en_dir *d, uint64_t i,
		   char *out, size_t cap)
{
	char hex[65];

	en_hex(i ^ 0x5a5a, hex);
	return en_path(out, cap, "%s/Qwen-Qwen3-8B@0x0@0@%s.data", d->root,
		       hex);
}

static int lf_store(struct en_ctx *c, struct en_dir *d, uint64_t i)
{
	char final[PATH_MAX], tmp[PATH_MAX];
	const uint8_t *p = en_bytes(c, i);
	size_t hdr = c->o.size < EN_HDR ? c->o.size : EN_HDR;
	int fd, rc = lf_path(c, d, i, final, sizeof(final));

	if (rc)
		return rc;
	if (!en_stat(final))
		return 0;
	rc = en_path(tmp, sizeof(tmp), "%s/tmp/%llu.tmp", d->root,
		     (unsigned long long)d->tmpseq++);
	if (rc)
		return rc;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	rc = en_write_all(fd, p, hdr);
	if (!rc)
		rc = en_write_all(fd, p + hdr, c->o.size - hdr);
	rc = en_close(fd, rc);
	if (!rc && rename(tmp, final))
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

static int lf_load(struct en_ctx *c, struct en_dir *d, uint64_t i)
{
	char p[PATH_MAX];
	int rc = lf_path(c, d, i, p, sizeof(p));

	if (rc)
		return rc;
	rc = en_stat(p); /* exists, then read */
	return rc ? rc : en_get(p, 0, c->buf, c->o.size);
}

/* ---- vllm-fs: OffloadingConnector file-system tier ------------------------
 */

#define VF_BASE "meta-llama_Llama-3.1-8B_4fc9adf7c19a_r0"

static int vf_setup(struct en_ctx *c, struct en_dir *d)
{
	static const char cfg[] = "{\"block_size\": 16}\n";
	char p[PATH_MAX];
	void *buf;
	int fd, rc;

	/* the start-up probe: O_DIRECT, or buffered from then on */
	if (en_path(p, sizeof(p), "%s/.o_direct_probe_%ld.tmp", d->root,
		    (long)getpid()))
		return -ENAMETOOLONG;
	d->direct = false;
	if (posix_memalign(&buf, EN_ALIGN, EN_ALIGN))
		return -ENOMEM;
	memset(buf, 0, EN_ALIGN);
	fd = open(p, O_CREAT | O_WRONLY | O_TRUNC | O_DIRECT | O_CLOEXEC, 0644);
	if (fd >= 0) {
		d->direct = write(fd, buf, EN_ALIGN) == EN_ALIGN;
		close(fd);
		unlink(p);
	}
	free(buf);
	if (en_path(p, sizeof(p), "%s/" VF_BASE, d->root))
		return -ENAMETOOLONG;
	if (mkdir(p, 0755) && errno != EEXIST)
		return -errno;
	if (en_path(p, sizeof(p), "%s/" VF_BASE "/config.json", d->root))
		return -ENAMETOOLONG;
	rc = en_stat(p);
	if (rc == -ENOENT)
		rc = en_put(p, O_TRUNC, (const uint8_t *)cfg, sizeof(cfg) - 1);
	return rc;
}

static int vf_path(const struct en_ctx *c, const struct en_dir *d, uint64_t i,
		   char *out, size_t cap)
{
	char h[65];

	en_hex(i ^ 0xa5a5, h);
	return en_path(out, cap, "%s/" VF_BASE "/%.3s/%.2s_g0/%s.bin", d->root,
		       h, h + 3, h);
}

static int vf_store(struct en_ctx *c, struct en_dir *d, uint64_t i)
{
	char final[PATH_MAX], tmp[PATH_MAX + 32];
	int rc = vf_path(c, d, i, final, sizeof(final)), fd;
	ssize_t w;

	if (rc)
		return rc;
	if (!en_stat(final))
		return 0;
	rc = en_mkdirs(d->root, final);
	if (rc)
		return rc;
	snprintf(tmp, sizeof(tmp), "%.*s/dest_%llu.tmp",
		 (int)(strrchr(final, '/') - final), final,
		 (unsigned long long)d->tmpseq++);
	/* one write from an aligned buffer: the bytes are copied in first,
	 * as vLLM's pinned staging buffer holds them */
	memcpy(c->buf, en_bytes(c, i), c->o.size);
	fd = open(tmp,
		  O_CREAT | O_EXCL | O_WRONLY | O_TRUNC | O_CLOEXEC |
			  (d->direct ? O_DIRECT : 0),
		  0644);
	if (fd < 0)
		return -errno;
	w = write(fd, c->buf, c->o.size);
	rc = w < 0 ? -errno : (size_t)w != c->o.size ? -EIO : 0;
	rc = en_close(fd, rc);
	if (!rc && rename(tmp, final))
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

static int vf_load(struct en_ctx *c, struct en_dir *d, uint64_t i)
{
	char p[PATH_MAX];
	struct iovec iov = { c->buf, c->o.size };
	int rc = vf_path(c, d, i, p, sizeof(p)), fd;
	ssize_t r;

	if (rc)
		return rc;
	if (access(p, F_OK))
		return -errno;
	fd = open(p, O_RDONLY | O_CLOEXEC | (d->direct ? O_DIRECT : 0));
	if (fd < 0)
		return -errno;
	r = readv(fd, &iov, 1);
	rc = r < 0 ? -errno : (size_t)r != c->o.size ? -ENODATA : 0;
	rc = en_close(fd, rc);
	if (rc && rc != -ENOENT)
		unlink(p); /* vLLM removes a file it could not load */
	return rc;
}

/* ---- vllm-example: ExampleConnector ----------------------------------------
 */

static int ve_dir(const struct en_dir *d, uint64_t prompt, char *out,
		  size_t cap)
{
	char h[65];

	en_hex(prompt ^ 0x1234, h);
	return en_path(out, cap, "%s/%.32s", d->root, h);
}

static int ve_path(const struct en_ctx *c, const struct en_dir *d, uint64_t i,
		   char *out, size_t cap)
{
	char dir[PATH_MAX];
	int rc = ve_dir(d, i / EN_LAYERS, dir, sizeof(dir));

	if (rc)
		return rc;
	return en_path(out, cap,
		       "%s/model.layers.%llu.self_attn.attn.safetensors", dir,
		       (unsigned long long)(i % EN_LAYERS));
}

static int ve_store(struct en_ctx *c, struct en_dir *d, uint64_t i)
{
	char dir[PATH_MAX], p[PATH_MAX];
	const uint8_t *b = en_bytes(c, i);
	size_t len = c->o.size, hdr = len < 128 ? len : 128, at;
	FILE *f;
	int rc;

	if (i % EN_LAYERS == 0) {
		/* the prompt's first layer: hit test, then its directory */
		rc = ve_dir(d, i / EN_LAYERS, dir, sizeof(dir));
		if (rc)
			return rc;
		if (!en_stat(dir))
			return 0;
		if (mkdir(dir, 0755) && errno != EEXIST)
			return -errno;
	}
	rc = ve_path(c, d, i, p, sizeof(p));
	if (rc)
		return rc;
	f = fopen(p, "wbe");
	if (!f)
		return -errno;
	/* safetensors: 8 bytes of header length, the header, the tensors */
	at = hdr < 8 ? hdr : 8;
	if (fwrite(b, 1, at, f) != at ||
	    fwrite(b + at, 1, hdr - at, f) != hdr - at ||
	    fwrite(b + hdr, 1, len - hdr, f) != len - hdr)
		rc = -EIO;
	if (fclose(f) && !rc)
		rc = -errno;
	return rc;
}

static int ve_load(struct en_ctx *c, struct en_dir *d, uint64_t i)
{
	char p[PATH_MAX];
	struct stat sb;
	void *m;
	int rc = ve_path(c, d, i, p, sizeof(p)), fd;

	if (rc)
		return rc;
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb))
		return en_close(fd, -errno);
	if ((uint64_t)sb.st_size != c->o.size)
		return en_close(fd, -ENODATA);
	m = mmap(NULL, c->o.size, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return en_close(fd, -errno);
	memcpy(c->buf, m, c->o.size);
	munmap(m, c->o.size);
	return en_close(fd, 0);
}

/* the hit test is per prompt: exists(dir) of each prompt of the keys */
static long ve_exists(struct en_ctx *c, struct en_dir *d,
		      const struct en_ops *ops, uint64_t from, uint64_t n)
{
	char dir[PATH_MAX];
	long hits = 0;
	int rc;

	for (uint64_t i = from; i < from + n; i++) {
		rc = ve_dir(d, i, dir, sizeof(dir));
		if (!rc)
			rc = en_stat(dir);
		if (rc && rc != -ENOENT)
			return rc;
		hits += !rc;
	}
	return hits;
}

/* ---- llamacpp: server slot save/restore ------------------------------------
 */

static int lc_path(const struct en_ctx *c, const struct en_dir *d, uint64_t i,
		   char *out, size_t cap)
{
	return en_path(out, cap, "%s/-slot_%llu@model%%3A:q4_k_m.bin", d->root,
		       (unsigned long long)i);
}

static int lc_store(struct en_ctx *c, struct en_dir *d, uint64_t i)
{
	char p[PATH_MAX];
	const uint8_t *b = en_bytes(c, i);
	int rc = lc_path(c, d, i, p, sizeof(p));
	FILE *f;

	if (rc)
		return rc;
	f = fopen(p, "wbe");
	if (!f)
		return -errno;
	for (size_t at = 0; at < c->o.size && !rc; at += EN_SMALL) {
		size_t n =
			c->o.size - at < EN_SMALL ? c->o.size - at : EN_SMALL;

		if (fwrite(b + at, 1, n, f) != n)
			rc = -EIO;
	}
	if (fclose(f) && !rc)
		rc = -errno;
	return rc;
}

static int lc_load(struct en_ctx *c, struct en_dir *d, uint64_t i)
{
	char p[PATH_MAX];
	int rc = lc_path(c, d, i, p, sizeof(p));
	FILE *f;

	if (rc)
		return rc;
	f = fopen(p, "rbe");
	if (!f)
		return -errno;
	if (fread(c->buf, 1, c->o.size, f) != c->o.size)
		rc = ferror(f) ? -EIO : -ENODATA;
	fclose(f);
	return rc;
}

/* ---- mooncake: FilePerKey -------------------------------------------------
 */

static int mc_path(const struct en_ctx *c, const struct en_dir *d, uint64_t i,
		   char *out, size_t cap)
{
	uint64_t s = i + 99, h = kvb_rand(&s);

	return en_path(out, cap, "%s/moon_default/%c/%c/vllm_req_%llu_tp0_kv",
		       d->root, 'a' + (int)(h & 15), 'a' + (int)(h >> 4 & 15),
		       (unsigned long long)i);
}

static int mc_store(struct en_ctx *c, struct en_dir *d, uint64_t i)
{
	char p[PATH_MAX];
	int rc = mc_path(c, d, i, p, sizeof(p));

	if (!rc)
		rc = en_mkdirs(d->root, p);
	if (!rc)
		rc = en_put(p, O_TRUNC, en_bytes(c, i), c->o.size);
	return rc;
}

static int mc_load(struct en_ctx *c, struct en_dir *d, uint64_t i)
{
	char p[PATH_MAX];
	size_t at = 0;
	int rc = mc_path(c, d, i, p, sizeof(p)), fd;

	if (rc)
		return rc;
	rc = en_stat(p); /* exists, then read */
	if (rc)
		return rc;
	fd = open(p, O_RDONLY | O_CLOEXEC | O_NOATIME);
	if (fd < 0 && errno == EPERM)
		fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (at < c->o.size && !rc) {
		ssize_t r = pread(fd, c->buf + at, c->o.size - at, (off_t)at);

		if (r < 0 && errno != EINTR)
			rc = -errno;
		else if (r == 0)
			rc = -ENODATA;
		else if (r > 0)
			at += (size_t)r;
	}
	return en_close(fd, rc);
}

/* ---- the table ----------------------------------------------------------- */

static const struct en_ops en_backends[] = {
	{
		.name = "sglang",
		.path = sg_path,
		.store = sg_store,
		.load = sg_load,
		.exists = sg_exists,
	},
	{
		.name = "lmcache-disk",
		.path = ld_path,
		.store = ld_store,
		.load = ld_load,
		.exists = en_exists_stat,
	},
	{
		.name = "lmcache-fs",
		.setup = lf_setup,
		.path = lf_path,
		.store = lf_store,
		.load = lf_load,
		.exists = en_exists_stat,
	},
	{
		.name = "vllm-fs",
		.setup = vf_setup,
		.path = vf_path,
		.store = vf_store,
		.load = vf_load,
		.exists = en_exists_access,
	},
	{
		.name = "vllm-example",
		.path = ve_path,
		.store = ve_store,
		.load = ve_load,
		.exists = ve_exists,
		.files_per_key = EN_LAYERS,
	},
	{
		.name = "llamacpp",
		.path = lc_path,
		.store = lc_store,
		.load = lc_load,
		.exists = en_exists_stat,
	},
	{
		.name = "mooncake",
		.path = mc_path,
		.store = mc_store,
		.load = mc_load,
		.exists = en_exists_stat,
	},
};

#define EN_NBACKENDS (sizeof(en_backends) / sizeof(en_backends[0]))

/* keys never stored, for the misses */
#define EN_MISS_BASE (1ull << 40)

/* ---- options -------------------------------------------------------- */

static const struct en_ops *en_find(const char *name)
{
	for (size_t b = 0; b < EN_NBACKENDS; b++)
		if (!strcmp(en_backends[b].name, name))
			return &en_backends[b];
	return NULL;
}

static int en_opt(int c, void *arg)
{
	struct en_opts *o = arg;

	switch (c) {
	case 'z':
		return cli_parse_size(EN_CMD, "--size", optarg, 1, 1ull << 30,
				      &o->size);
	case 'n':
		return cli_parse_u64(EN_CMD, "--files", optarg, 1, 1u << 20,
				     &o->files);
	case 'b':
		if (!en_find(optarg)) {
			cli_usage_error(EN_CMD, "no backend '%s'", optarg);
			return -EINVAL;
		}
		o->backend = optarg;
		return 0;
	}
	return -EINVAL;
}

static int en_parse(int argc, char **argv, struct en_opts *o)
{
	static const struct option lo[] = {
		{ "size", required_argument, NULL, 'z' },
		{ "files", required_argument, NULL, 'n' },
		{ "backend", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int rc;

	memset(o, 0, sizeof(*o));
	o->size = EN_SIZE;
	o->files = EN_FILES;
	rc = kvb_getopt(EN_CMD, argc, argv, ":z:n:b:h", lo, kvb_engines_usage,
			en_opt, o);
	if (rc)
		return rc;
	if (optind >= argc)
		return cli_usage_error(EN_CMD, "MOUNT is missing");
	o->mount = argv[optind++];
	if (optind < argc)
		return cli_usage_error(EN_CMD, "unexpected argument '%s'",
				       argv[optind]);
	if (o->files * o->size > EN_MEM_MAX)
		return cli_usage_error(EN_CMD,
				       "--files x --size is more than %llu "
				       "bytes",
				       EN_MEM_MAX);
	return 0;
}

/* ---- one backend ------------------------------------------------------ */

static const char *const en_side_name[EN_NSIDES] = { "mount", "tmpfs" };

/* one timed pass of phase ph over side s; rates into c->ops/bps */
static int en_pass(struct en_ctx *c, const struct en_ops *ops, struct en_dir *d,
		   enum en_side s, enum en_phase ph)
{
	uint64_t n = c->o.files, keys, t0, i = 0;
	unsigned fpk = ops->files_per_key ? ops->files_per_key : 1;
	unsigned passes = 1;
	bool hit = false;
	long got = 0;
	int rc = 0;

	keys = (n + fpk - 1) / fpk;
	t0 = kvb_now();
	switch (ph) {
	case EN_STORE:
		for (i = 0; i < n && !rc && !kvb_stop; i++)
			rc = ops->store(c, d, i);
		break;
	case EN_FIRST:
	case EN_LOAD:
	case EN_COLD:
		for (i = 0; i < n && !rc && !kvb_stop; i++)
			rc = ops->load(c, d, i);
		break;
	case EN_HIT1:
	case EN_HIT:
	case EN_MISS1:
	case EN_MISS:
		hit = ph == EN_HIT1 || ph == EN_HIT;
		passes = ph == EN_HIT1 || ph == EN_MISS1 ? 1 : EN_EXISTS_PASSES;
		for (unsigned p = 0; p < passes && !rc; p++) {
			got = ops->exists(c, d, ops, hit ? 0 : EN_MISS_BASE,
					  keys);
			rc = got < 0 ? (int)got : 0;
			if (!rc && (uint64_t)got != (hit ? keys : 0))
				break;
		}
		break;
	default:
		break;
	}
	t0 = kvb_now() - t0;
	if (!rc && kvb_stop)
		rc = -EINTR;
	if (rc) {
		kvb_fail(EN_CMD, rc, "%s %s of file %llu on the %s", ops->name,
			 en_phase_name[ph], (unsigned long long)(i ? i - 1 : 0),
			 en_side_name[s]);
		if (rc == -ENOENT && s == EN_KVFS)
			kvb_fail(EN_CMD, 0,
				 "a file went: evicted? give the mount a pool "
				 "larger than --files x --size");
		return rc;
	}
	if (en_exists_phase(ph)) {
		if ((uint64_t)got != (hit ? keys : 0)) {
			kvb_fail(EN_CMD, 0,
				 "%s %s on the %s: %ld of %llu keys found",
				 ops->name, en_phase_name[ph], en_side_name[s],
				 got, (unsigned long long)keys);
			return -EPROTO;
		}
		c->ops[s][ph] = kvb_rate(keys * passes, t0);
		c->bps[s][ph] = 0;
		return 0;
	}
	c->ops[s][ph] = kvb_rate(n, t0);
	c->bps[s][ph] = kvb_rate(n * c->o.size, t0);
	return 0;
}

/* drop each file's clean pages from the page cache (nothing else's) */
static int en_drop(struct en_ctx *c, const struct en_ops *ops, struct en_dir *d)
{
	char p[PATH_MAX];
	int fd, rc;

	for (uint64_t i = 0; i < c->o.files; i++) {
		rc = ops->path(c, d, i, p, sizeof(p));
		if (rc)
			return rc;
		fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		rc = -posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
		if (rc)
			return rc;
	}
	return 0;
}

/* every file read once more and compared with its bytes: untimed */
static int en_verify(struct en_ctx *c, const struct en_ops *ops,
		     struct en_dir *d, enum en_side s)
{
	int rc;

	for (uint64_t i = 0; i < c->o.files; i++) {
		rc = ops->load(c, d, i);
		if (!rc && memcmp(c->buf, en_bytes(c, i), c->o.size))
			rc = -EILSEQ;
		if (rc) {
			kvb_fail(EN_CMD, rc == -EILSEQ ? 0 : rc,
				 "%s: file %llu on the %s %s", ops->name,
				 (unsigned long long)i, en_side_name[s],
				 rc == -EILSEQ ? "holds other bytes"
					       : "cannot be read back");
			return rc;
		}
	}
	return 0;
}

static void en_fill(struct en_ctx *c, const struct en_ops *ops)
{
	uint8_t name[KVFS_HASH_LEN];
	uint64_t s = (uint64_t)(ops - en_backends) * 1000003 + 1;

	for (uint64_t i = 0; i < c->o.files; i++) {
		for (size_t k = 0; k < sizeof(name); k += 8) {
			uint64_t w = kvb_rand(&s);

			memcpy(name + k, &w, 8);
		}
		kvb_kv_fill(name, en_bytes(c, i), c->o.size);
	}
}

static int en_backend(struct en_ctx *c, const struct en_ops *ops,
		      double ops_out[EN_NSIDES][EN_NPHASES],
		      double bps_out[EN_NSIDES][EN_NPHASES])
{
	struct en_dir d[EN_NSIDES];
	int rc = 0;

	memset(d, 0, sizeof(d));
	en_fill(c, ops);
	for (int s = 0; s < EN_NSIDES && !rc; s++) {
		rc = en_path(d[s].root, sizeof(d[s].root), "%s/%s", c->work[s],
			     ops->name);
		if (!rc && mkdir(d[s].root, 0755))
			rc = -errno;
		if (!rc && ops->setup)
			rc = ops->setup(c, &d[s]);
		if (rc)
			kvb_fail(EN_CMD, rc, "%s: setting up %s", ops->name,
				 d[s].root);
	}
	/* the mount then tmpfs at every step: both meet the same state */
	for (int ph = 0; ph < EN_NPHASES && !rc; ph++) {
		for (int s = 0; s < EN_NSIDES && !rc; s++) {
			if (ph == EN_COLD) {
				rc = en_drop(c, ops, &d[s]);
				if (rc) {
					kvb_fail(EN_CMD, rc,
						 "%s: posix_fadvise on the %s",
						 ops->name, en_side_name[s]);
					break;
				}
			}
			rc = en_pass(c, ops, &d[s], s, ph);
		}
	}
	for (int s = 0; s < EN_NSIDES && !rc; s++)
		rc = en_verify(c, ops, &d[s], s);
	memcpy(ops_out, c->ops, sizeof(c->ops));
	memcpy(bps_out, c->bps, sizeof(c->bps));
	/* whatever happened, nothing of the backend stays */
	for (int s = 0; s < EN_NSIDES; s++)
		if (d[s].root[0])
			kvb_rmtree(d[s].root);
	return rc;
}

/* ---- report ------------------------------------------------------------ */

static void en_rate(char *buf, size_t cap, double v, bool bytes)
{
	if (bytes)
		snprintf(buf, cap, "%.2f", v / 1e9);
	else
		snprintf(buf, cap, "%.0f", v);
}

static void en_row(const char *backend, enum en_phase ph,
		   double ops[EN_NSIDES][EN_NPHASES],
		   double bps[EN_NSIDES][EN_NPHASES])
{
	bool ex = en_exists_phase(ph);
	char ko[32], kb[32], to[32], tb[32], r[32];

	en_rate(ko, sizeof(ko), ops[EN_KVFS][ph], false);
	en_rate(to, sizeof(to), ops[EN_TMPFS][ph], false);
	en_rate(kb, sizeof(kb), bps[EN_KVFS][ph], true);
	en_rate(tb, sizeof(tb), bps[EN_TMPFS][ph], true);
	snprintf(r, sizeof(r), "%.2fx",
		 ops[EN_TMPFS][ph] > 0 ? ops[EN_KVFS][ph] / ops[EN_TMPFS][ph]
				       : 0.0);
	printf("%-13s %-15s %12s %9s %12s %9s %8s\n", backend,
	       en_phase_name[ph], ko, ex ? "-" : kb, to, ex ? "-" : tb, r);
}

/* ---- main ----------------------------------------------------------- */

int kvb_engines_main(int argc, char **argv)
{
	static double ops[EN_NBACKENDS][EN_NSIDES][EN_NPHASES];
	static double bps[EN_NBACKENDS][EN_NSIDES][EN_NPHASES];
	struct cli_progress p;
	struct en_ctx c;
	char cpu[128], sz[32];
	bool ran[EN_NBACKENDS] = { false };
	int rc;

	memset(&c, 0, sizeof(c));
	rc = en_parse(argc, argv, &c.o);
	if (rc)
		return rc < 0 ? KVB_EXIT_OK : rc;
	rc = en_path(c.work[EN_KVFS], sizeof(c.work[EN_KVFS]),
		     "%s/kvbench-XXXXXX", c.o.mount);
	if (!rc && !mkdtemp(c.work[EN_KVFS]))
		rc = -errno;
	if (rc) {
		kvb_fail(EN_CMD, rc, "cannot make a directory in %s",
			 c.o.mount);
		return KVB_EXIT_FAIL;
	}
	c.made_work = true;
	rc = kvb_shm_dir(c.work[EN_TMPFS], sizeof(c.work[EN_TMPFS]));
	if (rc)
		kvb_fail(EN_CMD, rc, "cannot make a directory in /dev/shm");
	if (!rc)
		rc = kvb_check_space(EN_CMD, c.work[EN_TMPFS],
				     c.o.files * c.o.size + (1u << 20));
	c.data = malloc(c.o.files * c.o.size);
	if (!rc &&
	    (!c.data || posix_memalign((void **)&c.buf, EN_ALIGN, c.o.size))) {
		rc = -ENOMEM;
		kvb_fail(EN_CMD, rc, "allocating %llu files",
			 (unsigned long long)c.o.files);
	}
	cli_progress_start(&p, EN_CMD, EN_NBACKENDS);
	for (size_t b = 0; b < EN_NBACKENDS && !rc; b++) {
		const struct en_ops *e = &en_backends[b];

		if (c.o.backend && strcmp(c.o.backend, e->name))
			continue;
		if (cli_progress_due(&p))
			cli_progress_say(&p, false, "engines: %s", e->name);
		rc = en_backend(&c, e, ops[b], bps[b]);
		ran[b] = !rc;
	}
	cli_progress_end(&p);
	if (!rc) {
		kvb_cpu_model(cpu, sizeof(cpu));
		printf("kvbench engines: %llu files of %s a backend on %s, "
		       "beside tmpfs (/dev/shm)\ncpu: %s (%ld online)\n\n",
		       (unsigned long long)c.o.files,
		       kvb_fmt_size(sz, sizeof(sz), c.o.size), c.o.mount, cpu,
		       sysconf(_SC_NPROCESSORS_ONLN));
		printf("%-13s %-15s %12s %9s %12s %9s %8s\n", "backend",
		       "phase", "mount ops/s", "GB/s", "tmpfs ops/s", "GB/s",
		       "ratio");
		for (size_t b = 0; b < EN_NBACKENDS; b++)
			for (int ph = 0; ph < EN_NPHASES && ran[b]; ph++)
				en_row(en_backends[b].name, ph, ops[b], bps[b]);
		printf("\nops/s: files a second (exists: keys checked a "
		       "second).  ratio = mount / tmpfs.\nfirst read: right "
		       "after the store, before any other read; load cold: "
		       "after\nposix_fadvise(DONTNEED) of each file.  Every "
		       "file was compared with its bytes\nafter the timed "
		       "passes.\n");
	}
	if (c.made_work)
		kvb_rmtree(c.work[EN_KVFS]);
	free(c.data);
	free(c.buf);
	return rc ? KVB_EXIT_FAIL : KVB_EXIT_OK;
}
