/*
 * kvbench_io.c - "kvbench io": block files on a mount against tmpfs.
 *
 * Each round writes N fresh blocks of BYTES each into a namespace of the
 * mount and the same bytes into N files of a directory in /dev/shm, then
 * times, on the same files in the same order:
 *
 *   operation    kvfs                                 baseline (tmpfs)
 *   write+seal   open(O_CREAT|O_EXCL), write, close   the same
 *   first read   open, read, close right after the    tmpfs read
 *                write, before any other read (what
 *                a decode or a next turn does)
 *   cold read    open, read, close, pages not cached  tmpfs read
 *   warm read    the same again: the page cache       tmpfs read
 *   mmap read    mmap, memcpy out, munmap             the same
 *
 * and libkvfs's zero-copy read, the blocks' bytes summed straight from
 * the pool mapping: kvfs_map_batch(3) of the round's blocks in one
 * request then kvfs_unmap_batch(3) (an engine reading a request's
 * prefix), and kvfs_map(3) / kvfs_unmap(3) block by block, beside a
 * memcpy of the same bytes from process memory (what reading them cannot
 * beat) and the warm read() through the mount above.
 *
 * Cold: a kvfs block just written is in the page cache already (FUSE
 * writes go through it, and sealed blocks are opened with keep_cache), so
 * before the cold read every block is dropped from the page cache with
 * posix_fadvise(POSIX_FADV_DONTNEED), which evicts the clean pages of one
 * file and nothing else on the machine (drop_caches would empty the whole
 * machine's cache and needs root).  mincore() on a mapping of each block
 * then counts the pages still resident, and the run reports that share:
 * a cold read is only cold if it is near 0.  tmpfs has no cold state (its
 * page cache is its storage), so both reads compare with its one read.
 *
 * Nothing but the system calls and the loop is timed: the bytes are made
 * before, and every block is compared with them after the timed reads.
 * Each figure is the median over the rounds.  Blocks and files are
 * removed at the end of each round, so a run leaves nothing behind.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "src/common/json.h"
#include "src/kvbench/kvbench.h"
#include "src/libkvfs/kvfs.h"

#define IO_CMD "io"
#define IO_NS "kvbench-io"
#define IO_BLOCKS 64
#define IO_ROUNDS 5
#define IO_MEM_MAX (1ull << 30) /* bytes of blocks a round holds in memory */
#define IO_MAP_MIN_RATIO 0.9	/* kvfs_map_batch + sum against memcpy */
#define IO_MAPV_MAX 16000	/* hashes in one kvfs_map_batch */
#define IO_MAP_REPS 3		/* map path passes per round, interleaved */

enum io_op { IO_WRITE, IO_FIRST, IO_COLD, IO_WARM, IO_MMAP, IO_NOPS };

struct io_row {
	const char *key;   /* JSON */
	const char *label; /* table */
	const char *base;  /* what the baseline is */
	double min_ratio;  /* 0: no target */
};

static const struct io_row io_rows[IO_NOPS] = {
	[IO_WRITE] = { "write_seal", "write+seal", "tmpfs write", 0.3 },
	[IO_FIRST] = { "first_read", "first read", "tmpfs read", 0 },
	[IO_COLD] = { "cold_read", "cold read", "tmpfs read", 0.3 },
	[IO_WARM] = { "warm_read", "warm read", "tmpfs read", 0.8 },
	[IO_MMAP] = { "mmap_read", "mmap read", "tmpfs mmap", 0 },
};

struct io_opts {
	const char *mount;
	const char *ns;
	uint64_t size;	 /* 0: the pool's slot size */
	uint64_t blocks; /* 0: IO_BLOCKS, or what fits */
	uint64_t rounds;
	bool json;
};

struct io_ctx {
	struct io_opts o;
	struct kvb_mount m;
	int nsfd;
	int shmfd;
	char shm[PATH_MAX];
	uint8_t (*names)[KVFS_HASH_LEN];
	uint8_t *data; /* blocks x size: block i's bytes */
	uint8_t *buf;  /* size: what reads land in */
	/* GB/s per round: [op][round], kvfs and tmpfs */
	double *kv[IO_NOPS], *tf[IO_NOPS];
	double resident; /* pages cached before the cold reads, max */
	uint64_t rounds_done;
	struct kvfs *kvfs; /* libkvfs on the same mount, for the map path */
	/* GB/s, IO_MAP_REPS per round: kvfs_map_batch + sum, kvfs_map +
	 * sum, memcpy */
	double *mapv, *map, *cpy;
	const void **ptrs; /* kvfs_map_batch's answers */
	size_t *lens;
	uint64_t sum; /* of the mapped bytes, so none goes unread */
};

void kvb_io_usage(FILE *f)
{
	fputs("usage: kvbench io MOUNT [--size BYTES] [--blocks N] "
	      "[--rounds N]\n"
	      "                  [--namespace NS] [--json]\n"
	      "\n"
	      "Write and seal, cold-read, warm-read and mmap-read block files "
	      "on the kvfs\nmount MOUNT, beside the same on tmpfs "
	      "(/dev/shm), and compare; then read the\nblocks through "
	      "libkvfs (kvfs_map_batch or kvfs_map, sum the bytes in place, "
	      "unmap) beside\na memcpy of the same bytes.\n"
	      "\n"
	      "  -z, --size BYTES      bytes per block, a K, M or G suffix "
	      "allowed;\n"
	      "                        default the pool's slot size\n"
	      "  -n, --blocks N        blocks per round (default 64, or "
	      "what fits)\n"
	      "  -r, --rounds N        rounds; figures are their median "
	      "(default 5)\n"
	      "  -N, --namespace NS    namespace, made when absent "
	      "(default " IO_NS ")\n"
	      "  -j, --json            print one JSON object instead of the "
	      "table\n"
	      "  -h, --help            print this help\n",
	      f);
}

/* ---- options -------------------------------------------------------- */

static int io_opt(int c, void *arg)
{
	struct io_opts *o = arg;

	switch (c) {
	case 'z':
		return cli_parse_size(IO_CMD, "--size", optarg, 1, 1ull << 40,
				      &o->size);
	case 'n':
		return cli_parse_u64(IO_CMD, "--blocks", optarg, 1, 1u << 20,
				     &o->blocks);
	case 'r':
		return cli_parse_u64(IO_CMD, "--rounds", optarg, 1, 1000,
				     &o->rounds);
	case 'N':
		o->ns = optarg;
		return 0;
	case 'j':
		o->json = true;
		return 0;
	}
	return -EINVAL;
}

static int io_parse(int argc, char **argv, struct io_opts *o)
{
	static const struct option lo[] = {
		{ "size", required_argument, NULL, 'z' },
		{ "blocks", required_argument, NULL, 'n' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "namespace", required_argument, NULL, 'N' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int rc;

	memset(o, 0, sizeof(*o));
	o->ns = IO_NS;
	o->rounds = IO_ROUNDS;
	rc = kvb_getopt(IO_CMD, argc, argv, ":z:n:r:N:jh", lo, kvb_io_usage,
			io_opt, o);
	if (rc)
		return rc;
	rc = kvb_mount_operand(IO_CMD, argc, argv, &o->mount, o->ns);
	if (rc)
		return rc;
	return 0;
}

/* ---- setup ---------------------------------------------------------- */

/* size and count from the pool: every block of a round must fit at once */
static int io_geometry(struct io_ctx *c)
{
	struct io_opts *o = &c->o;
	uint64_t fit;

	if (!o->size)
		o->size = c->m.slot_size;
	if (o->size > c->m.slot_size) {
		kvb_fail(IO_CMD, 0,
			 "--size %llu is more than the pool's slot "
			 "size, %llu",
			 (unsigned long long)o->size,
			 (unsigned long long)c->m.slot_size);
		return -EFBIG;
	}
	fit = IO_MEM_MAX / o->size;
	if (c->m.slots_free < fit)
		fit = c->m.slots_free;
	if (!o->blocks)
		o->blocks = fit < IO_BLOCKS ? fit : IO_BLOCKS;
	if (!o->blocks || o->blocks > fit) {
		kvb_fail(IO_CMD, 0,
			 "%llu blocks of %llu bytes do not fit: the pool has "
			 "%llu free slots, and a round holds at most %llu "
			 "bytes in memory",
			 (unsigned long long)(o->blocks ? o->blocks : 1),
			 (unsigned long long)o->size,
			 (unsigned long long)c->m.slots_free, IO_MEM_MAX);
		return -ENOSPC;
	}
	return 0;
}

static int io_setup(struct io_ctx *c)
{
	uint32_t bt;
	int rc;

	rc = kvb_mount_stats(IO_CMD, c->o.mount, c->o.ns, &c->m);
	if (rc)
		return rc;
	rc = io_geometry(c);
	if (rc)
		return rc;
	c->nsfd = kvb_mount_ns(IO_CMD, c->o.mount, c->o.ns, &bt);
	if (c->nsfd < 0)
		return c->nsfd;
	rc = kvb_shm_dir(c->shm, sizeof(c->shm));
	if (rc) {
		kvb_fail(IO_CMD, rc, "cannot make a directory in /dev/shm");
		return rc;
	}
	rc = kvb_check_space(IO_CMD, c->shm, c->o.blocks * c->o.size + 65536);
	if (rc)
		return rc;
	c->shmfd = open(c->shm, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c->shmfd < 0)
		return -errno;
	c->names = calloc(c->o.blocks, KVFS_HASH_LEN);
	c->data = malloc(c->o.blocks * c->o.size);
	c->buf = malloc(c->o.size);
	for (int op = 0; op < IO_NOPS; op++) {
		c->kv[op] = calloc(c->o.rounds, sizeof(double));
		c->tf[op] = calloc(c->o.rounds, sizeof(double));
		if (!c->kv[op] || !c->tf[op])
			return -ENOMEM;
	}
	c->mapv = calloc(c->o.rounds * IO_MAP_REPS, sizeof(double));
	c->map = calloc(c->o.rounds * IO_MAP_REPS, sizeof(double));
	c->cpy = calloc(c->o.rounds * IO_MAP_REPS, sizeof(double));
	c->ptrs = calloc(IO_MAPV_MAX, sizeof(*c->ptrs));
	c->lens = calloc(IO_MAPV_MAX, sizeof(*c->lens));
	if (!c->names || !c->data || !c->buf || !c->mapv || !c->map ||
	    !c->cpy || !c->ptrs || !c->lens)
		return -ENOMEM;
	rc = kvfs_connect(c->o.mount, &c->kvfs);
	if (rc)
		kvb_fail(IO_CMD, rc, "libkvfs cannot connect to %s",
			 c->o.mount);
	return rc;
}

/* fresh random names (a run never meets an old block) and their bytes */
static int io_make_blocks(struct io_ctx *c)
{
	size_t len = c->o.blocks * KVFS_HASH_LEN;

	if (getrandom(c->names, len, 0) != (ssize_t)len)
		return -EIO;
	for (uint64_t i = 0; i < c->o.blocks; i++)
		kvb_kv_fill(c->names[i], c->data + i * c->o.size, c->o.size);
	return 0;
}

static const char *io_hex(const struct io_ctx *c, uint64_t i,
			  char hex[KVFS_HASH_HEX_LEN + 1])
{
	kvfs_hash_to_hex(c->names[i], hex);
	return hex;
}

/* ---- the timed loops ------------------------------------------------ */

static int io_write_one(int dirfd, const char *name, const uint8_t *p,
			size_t len)
{
	int fd = openat(dirfd, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC,
			0444);
	int rc = 0;

	if (fd < 0)
		return -errno;
	while (len && !rc) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno != EINTR)
			rc = -errno;
		if (w > 0) {
			p += w;
			len -= (size_t)w;
		}
	}
	/* on kvfs the close is the seal: part of what is timed */
	if (close(fd) && !rc)
		rc = -errno;
	return rc;
}

static int io_read_one(int dirfd, const char *name, uint8_t *buf, size_t len)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	size_t n = 0;
	int rc = 0;

	if (fd < 0)
		return -errno;
	while (n < len && !rc) {
		ssize_t r = read(fd, buf + n, len - n);

		if (r < 0 && errno != EINTR)
			rc = -errno;
		if (r == 0)
			rc = -ENODATA; /* short: not the block written */
		if (r > 0)
			n += (size_t)r;
	}
	close(fd);
	return rc;
}

static int io_mmap_one(int dirfd, const char *name, uint8_t *buf, size_t len)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	void *m;

	if (fd < 0)
		return -errno;
	m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	close(fd); /* the mapping keeps the file */
	if (m == MAP_FAILED)
		return -errno;
	memcpy(buf, m, len);
	munmap(m, len);
	return 0;
}

/* one pass of op over every block on dirfd; GB/s in *gbs */
static int io_pass(struct io_ctx *c, enum io_op op, int dirfd, double *gbs)
{
	char hex[KVFS_HASH_HEX_LEN + 1];
	size_t sz = c->o.size;
	uint64_t t0 = kvb_now(), i;
	int rc = 0;

	for (i = 0; i < c->o.blocks && !rc; i++) {
		io_hex(c, i, hex);
		if (op == IO_WRITE)
			rc = io_write_one(dirfd, hex, c->data + i * sz, sz);
		else if (op == IO_MMAP)
			rc = io_mmap_one(dirfd, hex, c->buf, sz);
		else
			rc = io_read_one(dirfd, hex, c->buf, sz);
	}
	*gbs = kvb_rate(c->o.blocks * sz, kvb_now() - t0) / 1e9;
	if (rc)
		kvb_fail(IO_CMD, rc, "%s of block %llu on %s",
			 io_rows[op].label, (unsigned long long)(i - 1),
			 dirfd == c->nsfd ? "kvfs" : "tmpfs");
	return rc;
}

/* ---- the libkvfs map path ------------------------------------------- */

/* every byte of [p, p + len), as 64-bit words, summed: four sums side
 * by side, so the adds keep up with the loads (as memcpy's wide moves do) */
static uint64_t io_sum(const uint8_t *p, size_t len)
{
	uint64_t s[4] = { 0, 0, 0, 0 }, w;
	size_t i;

	for (i = 0; i + 32 <= len; i += 32)
		for (int k = 0; k < 4; k++) {
			memcpy(&w, p + i + 8 * k, 8); /* any alignment */
			s[k] += w;
		}
	for (; i + 8 <= len; i += 8) {
		memcpy(&w, p + i, 8);
		s[0] += w;
	}
	for (; i < len; i++)
		s[0] += p[i];
	return s[0] + s[1] + s[2] + s[3];
}

/* kvfs_map each block, sum its bytes in place, kvfs_unmap */
static int io_map_pass(struct io_ctx *c, double *gbs)
{
	char hex[KVFS_HASH_HEX_LEN + 1];
	uint64_t t0 = kvb_now(), s = 0, i;
	const void *p;
	size_t len;
	int rc = 0;

	for (i = 0; i < c->o.blocks && !rc; i++) {
		rc = kvfs_map(c->kvfs, c->o.ns, c->names[i], &p, &len);
		if (rc)
			break;
		if (len != c->o.size)
			rc = -EPROTO;
		s += io_sum(p, len);
		__asm__ volatile("" : : "r"(s)); /* the sum is needed now */
		if (kvfs_unmap(c->kvfs, p) && !rc)
			rc = -EPROTO;
	}
	*gbs = kvb_rate(c->o.blocks * c->o.size, kvb_now() - t0) / 1e9;
	c->sum += s;
	if (rc)
		kvb_fail(IO_CMD, rc, "kvfs_map of block %s", io_hex(c, i, hex));
	return rc;
}

/* kvfs_map_batch the round's blocks (IO_MAPV_MAX a request), sum each
 * in place, kvfs_unmap_batch them */
static int io_mapv_pass(struct io_ctx *c, double *gbs)
{
	char hex[KVFS_HASH_HEX_LEN + 1];
	uint64_t t0 = kvb_now(), s = 0, at;
	size_t n = 0;
	long got = 0;
	int rc = 0;

	for (at = 0; at < c->o.blocks && !rc; at += n) {
		n = c->o.blocks - at < IO_MAPV_MAX ? c->o.blocks - at
						   : IO_MAPV_MAX;
		got = kvfs_map_batch(c->kvfs, c->o.ns,
				     (const uint8_t(*)[KVFS_HASH_LEN])c->names +
					     at,
				     n, c->ptrs, c->lens);
		if (got < 0) {
			rc = (int)got;
			break;
		}
		if ((size_t)got < n)
			rc = -ENOENT;
		for (long i = 0; i < got; i++) {
			if (c->lens[i] != c->o.size)
				rc = -EPROTO;
			s += io_sum(c->ptrs[i], c->lens[i]);
			__asm__ volatile("" : : "r"(s));
		}
		if (got && kvfs_unmap_batch(c->kvfs, c->ptrs, (size_t)got) &&
		    !rc)
			rc = -EPROTO;
	}
	*gbs = kvb_rate(c->o.blocks * c->o.size, kvb_now() - t0) / 1e9;
	c->sum += s;
	if (rc)
		kvb_fail(IO_CMD, rc, "kvfs_map_batch of block %s",
			 io_hex(c, at + (got > 0 ? (uint64_t)got : 0), hex));
	return rc;
}

/* the baseline: a memcpy of the same bytes, out of process memory */
static void io_memcpy_pass(struct io_ctx *c, double *gbs)
{
	size_t sz = c->o.size;
	uint64_t t0 = kvb_now();

	for (uint64_t i = 0; i < c->o.blocks; i++) {
		memcpy(c->buf, c->data + i * sz, sz);
		/* a copy whose result is never read may be dropped */
		__asm__ volatile("" : : "r"(c->buf) : "memory");
	}
	*gbs = kvb_rate(c->o.blocks * sz, kvb_now() - t0) / 1e9;
}

/* ---- cold ------------------------------------------------------------ */

/* pages of the block cached now, through mincore() of a fresh mapping */
static int io_resident(int dirfd, const char *name, size_t len, uint64_t *in,
		       uint64_t *all)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t np = (len + page - 1) / page;
	unsigned char *vec = malloc(np);
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC), rc = 0;
	void *m = MAP_FAILED;

	if (fd < 0 || !vec) {
		rc = fd < 0 ? -errno : -ENOMEM;
		goto out;
	}
	m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED || mincore(m, len, vec)) {
		rc = -errno;
		goto out;
	}
	for (size_t k = 0; k < np; k++)
		*in += vec[k] & 1;
	*all += np;
out:
	if (m != MAP_FAILED)
		munmap(m, len);
	if (fd >= 0)
		close(fd);
	free(vec);
	return rc;
}

/* drop every block from the page cache; the share still resident */
static int io_evict(struct io_ctx *c)
{
	char hex[KVFS_HASH_HEX_LEN + 1];
	uint64_t in = 0, all = 0;
	int fd, rc = 0;

	for (uint64_t i = 0; i < c->o.blocks && !rc; i++) {
		fd = openat(c->nsfd, io_hex(c, i, hex), O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		rc = -posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
	}
	for (uint64_t i = 0; i < c->o.blocks && !rc; i++)
		rc = io_resident(c->nsfd, io_hex(c, i, hex), c->o.size, &in,
				 &all);
	if (rc) {
		kvb_fail(IO_CMD, rc, "dropping the blocks from the page cache");
		return rc;
	}
	if (all && (double)in / (double)all > c->resident)
		c->resident = (double)in / (double)all;
	return 0;
}

/* ---- a round ---------------------------------------------------------- */

static int io_verify(struct io_ctx *c)
{
	char hex[KVFS_HASH_HEX_LEN + 1];
	size_t sz = c->o.size;
	int rc;

	for (uint64_t i = 0; i < c->o.blocks; i++) {
		rc = io_read_one(c->nsfd, io_hex(c, i, hex), c->buf, sz);
		if (rc) {
			kvb_fail(IO_CMD, rc, "re-reading block %s", hex);
			return rc;
		}
		if (memcmp(c->buf, c->data + i * sz, sz)) {
			kvb_fail(IO_CMD, 0, "block %s: bytes differ", hex);
			return -EIO;
		}
	}
	return 0;
}

/* every file of the round goes, on either side, whatever happened */
static void io_remove(struct io_ctx *c)
{
	char hex[KVFS_HASH_HEX_LEN + 1];

	for (uint64_t i = 0; i < c->o.blocks; i++) {
		io_hex(c, i, hex);
		unlinkat(c->nsfd, hex, 0);
		unlinkat(c->shmfd, hex, 0);
	}
}

static int io_round(struct io_ctx *c, uint64_t r)
{
	int rc;

	rc = io_make_blocks(c);
	if (rc) {
		kvb_fail(IO_CMD, rc, "making the blocks");
		return rc;
	}
	/* kvfs then tmpfs at every step: both meet the same cache state */
	rc = io_pass(c, IO_WRITE, c->nsfd, &c->kv[IO_WRITE][r]);
	if (!rc)
		rc = io_pass(c, IO_WRITE, c->shmfd, &c->tf[IO_WRITE][r]);
	if (!rc)
		rc = io_pass(c, IO_FIRST, c->nsfd, &c->kv[IO_FIRST][r]);
	if (!rc)
		rc = io_pass(c, IO_FIRST, c->shmfd, &c->tf[IO_FIRST][r]);
	if (!rc)
		rc = io_evict(c);
	if (!rc)
		rc = io_pass(c, IO_COLD, c->nsfd, &c->kv[IO_COLD][r]);
	if (!rc)
		rc = io_pass(c, IO_WARM, c->nsfd, &c->kv[IO_WARM][r]);
	if (!rc)
		rc = io_pass(c, IO_WARM, c->shmfd, &c->tf[IO_WARM][r]);
	if (!rc)
		rc = io_pass(c, IO_MMAP, c->nsfd, &c->kv[IO_MMAP][r]);
	if (!rc)
		rc = io_pass(c, IO_MMAP, c->shmfd, &c->tf[IO_MMAP][r]);
	if (!rc)
		rc = io_verify(c);
	/* the three by turns, so that a slower or faster spell of a shared
	 * machine falls on all of them */
	for (uint64_t i = r * IO_MAP_REPS; i < (r + 1) * IO_MAP_REPS && !rc;
	     i++) {
		rc = io_mapv_pass(c, &c->mapv[i]);
		if (!rc)
			rc = io_map_pass(c, &c->map[i]);
		if (!rc)
			io_memcpy_pass(c, &c->cpy[i]);
	}
	/* one tmpfs read is the baseline of both kvfs reads */
	c->tf[IO_COLD][r] = c->tf[IO_WARM][r];
	io_remove(c);
	return rc;
}

static int io_run(struct io_ctx *c)
{
	struct cli_progress p;
	int rc = 0;

	cli_progress_start(&p, "io", c->o.rounds);
	for (uint64_t r = 0; r < c->o.rounds && !rc; r++) {
		if (kvb_stop) {
			rc = -EINTR;
			kvb_fail(IO_CMD, rc, "round %llu",
				 (unsigned long long)r);
			break;
		}
		rc = io_round(c, r);
		if (!rc)
			c->rounds_done++;
		if (cli_progress_due(&p))
			cli_progress_say(&p, false, "io: round %llu/%llu",
					 (unsigned long long)r + 1,
					 (unsigned long long)c->o.rounds);
	}
	cli_progress_end(&p);
	return rc;
}

/* ---- report --------------------------------------------------------- */

static int io_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* the median of n values (sorts them) */
static double io_median(double *v, uint64_t n)
{
	qsort(v, n, sizeof(*v), io_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct io_result {
	double kvfs, tmpfs, ratio;
	bool pass;
};

/* the map path: kvfs_map_batch + sum (the target's), kvfs_map + sum,
 * memcpy, warm read() through the mount */
struct io_map_result {
	double mapv, map, cpy, read, ratio, ratio_map;
	bool pass;
};

static void io_map_results(struct io_ctx *c, struct io_map_result *m)
{
	uint64_t n = c->rounds_done * IO_MAP_REPS;

	m->mapv = io_median(c->mapv, n);
	m->map = io_median(c->map, n);
	m->cpy = io_median(c->cpy, n);
	m->read = io_median(c->kv[IO_WARM], c->rounds_done);
	m->ratio = m->cpy > 0 ? m->mapv / m->cpy : 0;
	m->ratio_map = m->cpy > 0 ? m->map / m->cpy : 0;
	m->pass = m->ratio >= IO_MAP_MIN_RATIO;
}

static void io_results(struct io_ctx *c, struct io_result *res)
{
	for (int op = 0; op < IO_NOPS; op++) {
		struct io_result *r = &res[op];

		r->kvfs = io_median(c->kv[op], c->rounds_done);
		r->tmpfs = io_median(c->tf[op], c->rounds_done);
		r->ratio = r->tmpfs > 0 ? r->kvfs / r->tmpfs : 0;
		r->pass = r->ratio >= io_rows[op].min_ratio;
	}
}

static void io_report_json(const struct io_ctx *c, const struct io_result *res,
			   const struct io_map_result *m, const char *cpu)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	bool all = m->pass;
	size_t len;
	char *text;

	kvfs_buf_printf(&b,
			"{\"benchmark\":\"kvbench io\",\"version\":\"%s\","
			"\"mount\":",
			PACKAGE_VERSION);
	kvfs_buf_json_str(&b, c->o.mount, strlen(c->o.mount));
	kvfs_buf_puts(&b, ",\"namespace\":");
	kvfs_buf_json_str(&b, c->o.ns, strlen(c->o.ns));
	kvfs_buf_printf(&b,
			",\"block_bytes\":%llu,\"blocks\":%llu,"
			"\"rounds\":%llu,\"cold_resident\":%.4f,\"cpu\":",
			(unsigned long long)c->o.size,
			(unsigned long long)c->o.blocks,
			(unsigned long long)c->rounds_done, c->resident);
	kvfs_buf_json_str(&b, cpu, strlen(cpu));
	kvfs_buf_printf(&b, ",\"nproc\":%ld,\"ops\":{",
			sysconf(_SC_NPROCESSORS_ONLN));
	for (int op = 0; op < IO_NOPS; op++) {
		const struct io_row *w = &io_rows[op];
		const struct io_result *r = &res[op];

		kvfs_buf_printf(&b,
				"%s\"%s\":{\"kvfs_gb_s\":%.3f,"
				"\"tmpfs_gb_s\":%.3f,\"baseline\":\"%s\","
				"\"ratio\":%.3f,",
				op ? "," : "", w->key, r->kvfs, r->tmpfs,
				w->base, r->ratio);
		if (w->min_ratio) {
			kvfs_buf_printf(&b, "\"target\":%.2f,\"pass\":%s}",
					w->min_ratio,
					r->pass ? "true" : "false");
			all = all && r->pass;
		} else {
			kvfs_buf_puts(&b, "\"target\":null,\"pass\":null}");
		}
	}
	kvfs_buf_printf(&b,
			"},\"map\":{\"map_batch_gb_s\":%.3f,"
			"\"map_gb_s\":%.3f,\"memcpy_gb_s\":%.3f,"
			"\"read_gb_s\":%.3f,\"baseline\":\"memcpy\","
			"\"ratio\":%.3f,\"ratio_map\":%.3f,\"target\":%.2f,"
			"\"pass\":%s}",
			m->mapv, m->map, m->cpy, m->read, m->ratio,
			m->ratio_map, IO_MAP_MIN_RATIO,
			m->pass ? "true" : "false");
	kvfs_buf_printf(&b, ",\"pass\":%s}\n", all ? "true" : "false");
	if (kvfs_buf_finish(&b, &text, &len) == 0) {
		fwrite(text, 1, len, stdout);
		free(text);
	}
}

static void io_report_table(const struct io_ctx *c, const struct io_result *res,
			    const struct io_map_result *m, const char *cpu)
{
	char a[32], target[16], ratio[16];
	int met = 0, targets = 0;

	printf("kvbench io: %llu blocks of %s on %s (namespace %s), median "
	       "of %llu rounds\ncpu: %s (%ld online)\n\n",
	       (unsigned long long)c->o.blocks,
	       kvb_fmt_size(a, sizeof(a), c->o.size), c->o.mount, c->o.ns,
	       (unsigned long long)c->rounds_done, cpu,
	       sysconf(_SC_NPROCESSORS_ONLN));
	printf("%-12s %10s %11s  %-12s %7s  %-8s %s\n", "operation",
	       "kvfs GB/s", "tmpfs GB/s", "baseline", "ratio", "target",
	       "result");
	for (int op = 0; op < IO_NOPS; op++) {
		const struct io_row *w = &io_rows[op];
		const struct io_result *r = &res[op];

		snprintf(ratio, sizeof(ratio), "%.2fx", r->ratio);
		snprintf(target, sizeof(target), ">= %.1fx", w->min_ratio);
		printf("%-12s %10.2f %11.2f  %-12s %7s  %-8s %s\n", w->label,
		       r->kvfs, r->tmpfs, w->base, ratio,
		       w->min_ratio ? target : "-",
		       w->min_ratio ? (r->pass ? "PASS" : "MISS") : "-");
		targets += w->min_ratio > 0;
		met += w->min_ratio > 0 && r->pass;
	}
	printf("\nlibkvfs map path, the same blocks:\n");
	printf("%-15s %7s %7s  %s\n", "read by", "GB/s", "ratio", "how");
	printf("%-15s %7.2f %6.2fx  %s\n", "kvfs_map_batch", m->mapv, m->ratio,
	       "kvfs_map_batch of the round, sum in place, "
	       "kvfs_unmap_batch");
	printf("%-15s %7.2f %6.2fx  %s\n", "kvfs_map", m->map, m->ratio_map,
	       "kvfs_map, sum in place, kvfs_unmap, block by block");
	printf("%-15s %7.2f %7s  %s\n", "memcpy", m->cpy, "1.00x",
	       "memcpy of the same bytes (baseline)");
	printf("%-15s %7.2f %7s  %s\n", "read()", m->read, "-",
	       "open, read, close on the mount (warm read)");
	snprintf(ratio, sizeof(ratio), "%.2fx", m->ratio);
	snprintf(target, sizeof(target), ">= %.1fx", IO_MAP_MIN_RATIO);
	printf("ratio map_batch/memcpy %s, target %s: %s\n", ratio, target,
	       m->pass ? "PASS" : "MISS");
	targets++;
	met += m->pass;
	printf("\n%d of %d targets met.\n", met, targets);
	printf("ratio = kvfs / tmpfs.  cold: each block dropped from the "
	       "page cache with\nposix_fadvise(DONTNEED) first; %.1f%% of "
	       "its pages were still cached after that\n(mincore), at "
	       "most.  warm: the same blocks read again.  Every block was\n"
	       "compared with its bytes after the timed reads.\n",
	       100.0 * c->resident);
}

/* ---- main ----------------------------------------------------------- */

static void io_teardown(struct io_ctx *c)
{
	if (c->nsfd >= 0)
		close(c->nsfd);
	if (c->shmfd >= 0)
		close(c->shmfd);
	kvfs_disconnect(c->kvfs);
	free(c->mapv);
	free(c->map);
	free(c->cpy);
	free(c->ptrs);
	free(c->lens);
	free(c->names);
	free(c->data);
	free(c->buf);
	for (int op = 0; op < IO_NOPS; op++) {
		free(c->kv[op]);
		free(c->tf[op]);
	}
}

int kvb_io_main(int argc, char **argv)
{
	struct io_result res[IO_NOPS];
	struct io_map_result mres;
	struct io_ctx c;
	char cpu[128];
	int rc;

	memset(&c, 0, sizeof(c));
	c.nsfd = c.shmfd = -1;
	rc = io_parse(argc, argv, &c.o);
	if (rc)
		return rc < 0 ? KVB_EXIT_OK : rc;
	rc = io_setup(&c);
	if (rc == -ENOMEM)
		kvb_fail(IO_CMD, rc, "allocating %llu blocks",
			 (unsigned long long)c.o.blocks);
	if (!rc)
		rc = io_run(&c);
	if (!rc) {
		kvb_cpu_model(cpu, sizeof(cpu));
		io_results(&c, res);
		io_map_results(&c, &mres);
		if (c.o.json)
			io_report_json(&c, res, &mres, cpu);
		else
			io_report_table(&c, res, &mres, cpu);
	}
	io_teardown(&c);
	return rc ? KVB_EXIT_FAIL : KVB_EXIT_OK;
}
