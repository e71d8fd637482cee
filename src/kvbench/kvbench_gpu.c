/*
 * kvbench_gpu.c - "kvbench gpu": pool <-> GPU copies through libkvfs
 * against cudaMemcpy from pinned memory.  Built only with CUDA
 * (kvbench_gpu_none.c otherwise).
 *
 * For each block size (2 MiB, 32 MiB) and round, N fresh blocks are
 * written to the mount, then timed, in this order:
 *
 *   direction      libkvfs                          baseline
 *   pool->device   kvfs_copy_to_device_batch(N)     N cudaMemcpyAsync of
 *                  + kvfs_copy_wait                 the size from one
 *                                                   pinned buffer, sync
 *   device->pool   kvfs_copy_from_device_batch(N)   the same, device to
 *                  + kvfs_copy_wait (N new blocks,  the pinned buffer
 *                  sealed)
 *
 * libkvfs's time includes its requests to the daemon (a map and an unmap,
 * or an alloc and a commit, per block): what an engine pays.  The pool
 * is pinned (kvfs_gpu_register) before anything is timed, and its time
 * reported apart.  The first round checks every byte on both sides.
 * Figures are medians over the rounds; blocks are removed after each.
 *
 * MOUNT may also be the daemon's control socket (a kvfsd --no-mount, on a
 * machine without FUSE): the pool's geometry then comes from "status",
 * the namespace is made by "ns create", and the blocks (which
 * kvfs_write() writes through a slot of the pool there) are removed by
 * "evict", since there is no file to unlink.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <cuda_runtime_api.h>

#include "src/common/ctl_client.h"
#include "src/common/json.h"
#include "src/kvbench/kvbench.h"
#include "src/libkvfs/kvfs.h"

#define GPU_CMD "gpu"
#define GPU_NS "kvbench-gpu"
#define GPU_BLOCKS 8
#define GPU_ROUNDS 5

static const uint64_t gpu_sizes[] = { 2ull << 20, 32ull << 20 };
#define GPU_NSIZES (sizeof(gpu_sizes) / sizeof(gpu_sizes[0]))
#define GPU_SIZE_MAX (32ull << 20)

enum gpu_dir { TO_DEV, FROM_DEV, NDIRS };

static const char *const dir_label[NDIRS] = { "pool->device", "device->pool" };
static const char *const dir_key[NDIRS] = { "to_device", "from_device" };

struct gpu_opts {
	const char *mount;
	const char *ns;
	uint64_t blocks;
	uint64_t rounds;
	uint64_t device;
	bool json;
};

struct gpu_row {
	uint64_t size;
	const char *skipped;		 /* why, or NULL */
	double kvfs[NDIRS], base[NDIRS]; /* GB/s, medians */
};

struct gpu_ctx {
	struct gpu_opts o;
	struct kvb_mount m;
	struct kvfs *k;
	struct kvfs_ctl *ctl; /* MOUNT is a control socket; else NULL */
	int nsfd;	      /* MOUNT/NS; -1 on a control socket */
	cudaStream_t st;
	bool have_st;
	uint8_t *dev;	 /* blocks x GPU_SIZE_MAX of device memory */
	uint8_t *pinned; /* GPU_SIZE_MAX, cudaMallocHost */
	uint8_t *host;	 /* GPU_SIZE_MAX: block bytes to write, or check */
	uint8_t (*src)[KVFS_HASH_LEN], (*dst)[KVFS_HASH_LEN];
	struct kvfs_gpu_block *b;
	double *t[2][NDIRS]; /* GB/s per round: [libkvfs/base][dir] */
	double register_s;
	char device[256];
	struct gpu_row rows[GPU_NSIZES];
};

void kvb_gpu_usage(FILE *f)
{
	fputs("usage: kvbench gpu MOUNT [--blocks N] [--rounds N] "
	      "[--device N]\n"
	      "                   [--namespace NS] [--json]\n"
	      "\n"
	      "Copy blocks of 2 MiB and 32 MiB between the pool of the kvfs "
	      "mount MOUNT and\nGPU memory through libkvfs, beside "
	      "cudaMemcpyAsync of the same sizes from and\nto pinned memory, "
	      "and compare.  A size larger than the pool's slots is "
	      "skipped.\nMOUNT may also be the control socket of a kvfsd "
	      "run with --no-mount.\nExits 77 without a GPU, or when built "
	      "without CUDA.\n"
	      "\n"
	      "  -n, --blocks N        blocks per batch (default 8); the "
	      "pool needs twice\n"
	      "                        as many slots\n"
	      "  -r, --rounds N        rounds; figures are their median "
	      "(default 5)\n"
	      "  -d, --device N        CUDA device (default 0)\n"
	      "  -N, --namespace NS    namespace, made when absent "
	      "(default " GPU_NS ")\n"
	      "  -j, --json            print one JSON object instead of the "
	      "table\n"
	      "  -h, --help            print this help\n",
	      f);
}

/* ---- options -------------------------------------------------------- */

static int gpu_opt(int c, void *arg)
{
	struct gpu_opts *o = arg;

	switch (c) {
	case 'n':
		return cli_parse_u64(GPU_CMD, "--blocks", optarg, 1, 1024,
				     &o->blocks);
	case 'r':
		return cli_parse_u64(GPU_CMD, "--rounds", optarg, 1, 1000,
				     &o->rounds);
	case 'd':
		return cli_parse_u64(GPU_CMD, "--device", optarg, 0, 1023,
				     &o->device);
	case 'N':
		o->ns = optarg;
		return 0;
	case 'j':
		o->json = true;
		return 0;
	}
	return -EINVAL;
}

static int gpu_parse(int argc, char **argv, struct gpu_opts *o)
{
	static const struct option lo[] = {
		{ "blocks", required_argument, NULL, 'n' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "device", required_argument, NULL, 'd' },
		{ "namespace", required_argument, NULL, 'N' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int rc;

	memset(o, 0, sizeof(*o));
	o->ns = GPU_NS;
	o->blocks = GPU_BLOCKS;
	o->rounds = GPU_ROUNDS;
	rc = kvb_getopt(GPU_CMD, argc, argv, ":n:r:d:N:jh", lo, kvb_gpu_usage,
			gpu_opt, o);
	if (rc)
		return rc;
	rc = kvb_mount_operand(GPU_CMD, argc, argv, &o->mount, o->ns);
	if (rc)
		return rc;
	return 0;
}

/* ---- setup ---------------------------------------------------------- */

static int cuda_fail(const char *what, cudaError_t e)
{
	(void)cudaGetLastError();
	fprintf(stderr, "kvbench gpu: %s: %s\n", what, cudaGetErrorString(e));
	return -EIO;
}

/* the device, or KVB_EXIT_SKIP with one line when there is none */
static int gpu_device(struct gpu_ctx *c)
{
	struct cudaDeviceProp p;
	cudaError_t e;
	int n = 0;

	e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n == 0) {
		fprintf(stderr, "kvbench gpu: no GPU: %s\n",
			e != cudaSuccess ? cudaGetErrorString(e)
					 : "cudaGetDeviceCount counts 0");
		(void)cudaGetLastError();
		return KVB_EXIT_SKIP;
	}
	if (c->o.device >= (uint64_t)n) {
		fprintf(stderr, "kvbench gpu: no device %llu: there are %d\n",
			(unsigned long long)c->o.device, n);
		return KVB_EXIT_FAIL;
	}
	e = cudaSetDevice((int)c->o.device);
	if (e == cudaSuccess)
		e = cudaGetDeviceProperties(&p, (int)c->o.device);
	if (e != cudaSuccess) {
		cuda_fail("cudaSetDevice", e);
		return KVB_EXIT_FAIL;
	}
	snprintf(c->device, sizeof(c->device), "%s", p.name);
	return 0;
}

static int gpu_alloc(struct gpu_ctx *c)
{
	uint64_t n = c->o.blocks;
	cudaError_t e;

	e = cudaMalloc((void **)&c->dev, n * GPU_SIZE_MAX);
	if (e != cudaSuccess)
		return cuda_fail("cudaMalloc", e);
	e = cudaMallocHost((void **)&c->pinned, GPU_SIZE_MAX);
	if (e != cudaSuccess)
		return cuda_fail("cudaMallocHost", e);
	e = cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking);
	if (e != cudaSuccess)
		return cuda_fail("cudaStreamCreate", e);
	c->have_st = true;
	c->host = malloc(GPU_SIZE_MAX);
	c->src = calloc(n, KVFS_HASH_LEN);
	c->dst = calloc(n, KVFS_HASH_LEN);
	c->b = calloc(n, sizeof(*c->b));
	for (int w = 0; w < 2; w++)
		for (int d = 0; d < NDIRS; d++)
			if (!(c->t[w][d] = calloc(c->o.rounds, sizeof(double))))
				return -ENOMEM;
	if (!c->host || !c->src || !c->dst || !c->b)
		return -ENOMEM;
	memset(c->pinned, 0x5a, GPU_SIZE_MAX);
	return 0;
}

static int gpu_setup(struct gpu_ctx *c)
{
	uint64_t t0;
	uint32_t bt;
	int rc;

	if (kvb_is_socket(c->o.mount)) {
		rc = kvb_ctl_open(GPU_CMD, c->o.mount, &c->ctl);
		if (!rc)
			rc = kvb_ctl_stats(GPU_CMD, c->ctl, c->o.ns, &c->m);
		if (!rc)
			rc = kvb_ctl_ns(GPU_CMD, c->ctl, c->o.ns, &bt);
		if (rc)
			return rc;
	} else {
		rc = kvb_mount_stats(GPU_CMD, c->o.mount, c->o.ns, &c->m);
		if (rc)
			return rc;
		c->nsfd = kvb_mount_ns(GPU_CMD, c->o.mount, c->o.ns, &bt);
		if (c->nsfd < 0)
			return c->nsfd;
	}
	rc = kvfs_connect(c->o.mount, &c->k);
	if (rc) {
		kvb_fail(GPU_CMD, rc, "libkvfs cannot connect to %s",
			 c->o.mount);
		return rc;
	}
	rc = gpu_alloc(c);
	if (rc) {
		if (rc == -ENOMEM)
			kvb_fail(GPU_CMD, rc, "allocating the buffers");
		return rc;
	}
	t0 = kvb_now();
	rc = kvfs_gpu_register(c->k);
	c->register_s = (double)(kvb_now() - t0) / 1e9;
	/* unpinned copies still work: a result, not a failure */
	if (rc && rc != -ENOTSUP) {
		kvb_fail(GPU_CMD, rc, "kvfs_gpu_register");
		return rc;
	}
	return 0;
}

/* ---- one round ------------------------------------------------------ */

static double gbs(uint64_t bytes, uint64_t t0)
{
	return kvb_rate(bytes, kvb_now() - t0) / 1e9;
}

static int gpu_names(struct gpu_ctx *c)
{
	size_t len = c->o.blocks * KVFS_HASH_LEN;

	if (getrandom(c->src, len, 0) != (ssize_t)len ||
	    getrandom(c->dst, len, 0) != (ssize_t)len)
		return -EIO;
	return 0;
}

static int gpu_write_src(struct gpu_ctx *c, uint64_t sz)
{
	int rc;

	for (uint64_t i = 0; i < c->o.blocks; i++) {
		kvb_kv_fill(c->src[i], c->host, sz);
		rc = kvfs_write(c->k, c->o.ns, c->src[i], c->host, sz);
		if (rc) {
			kvb_fail(GPU_CMD, rc, "writing block %llu",
				 (unsigned long long)i);
			return rc;
		}
	}
	return 0;
}

/* every byte on the device is the block's */
static int gpu_check_dev(struct gpu_ctx *c, uint64_t sz)
{
	cudaError_t e;

	for (uint64_t i = 0; i < c->o.blocks; i++) {
		e = cudaMemcpy(c->host, c->dev + i * sz, sz,
			       cudaMemcpyDeviceToHost);
		if (e != cudaSuccess)
			return cuda_fail("cudaMemcpy", e);
		if (kvb_kv_check(c->src[i], c->host, sz) != sz) {
			kvb_fail(GPU_CMD, 0, "block %llu differs on the device",
				 (unsigned long long)i);
			return -EIO;
		}
	}
	return 0;
}

/* every new block holds the bytes of the one it was copied from */
static int gpu_check_pool(struct gpu_ctx *c, uint64_t sz)
{
	const void *p;
	size_t len;
	int rc;

	for (uint64_t i = 0; i < c->o.blocks; i++) {
		rc = kvfs_map(c->k, c->o.ns, c->dst[i], &p, &len);
		if (rc) {
			kvb_fail(GPU_CMD, rc, "mapping copied block %llu",
				 (unsigned long long)i);
			return rc;
		}
		rc = len == sz && kvb_kv_check(c->src[i], p, sz) == sz ? 0
								       : -EIO;
		kvfs_unmap(c->k, p);
		if (rc) {
			kvb_fail(GPU_CMD, 0, "copied block %llu differs",
				 (unsigned long long)i);
			return rc;
		}
	}
	return 0;
}

/* the baseline: N copies of sz bytes between the pinned buffer and the
 * device, on the same stream */
static int gpu_base(struct gpu_ctx *c, enum gpu_dir d, uint64_t sz, double *r)
{
	uint64_t t0 = kvb_now();
	cudaError_t e = cudaSuccess;

	for (uint64_t i = 0; i < c->o.blocks && e == cudaSuccess; i++)
		e = d == TO_DEV
			    ? cudaMemcpyAsync(c->dev + i * sz, c->pinned, sz,
					      cudaMemcpyHostToDevice, c->st)
			    : cudaMemcpyAsync(c->pinned, c->dev + i * sz, sz,
					      cudaMemcpyDeviceToHost, c->st);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(c->st);
	*r = gbs(c->o.blocks * sz, t0);
	return e == cudaSuccess ? 0 : cuda_fail("cudaMemcpyAsync", e);
}

/* the same through libkvfs, one batch */
static int gpu_kvfs(struct gpu_ctx *c, enum gpu_dir d, uint64_t sz, double *r)
{
	struct kvfs_copy *cp;
	uint64_t t0, n = c->o.blocks;
	int rc;

	for (uint64_t i = 0; i < n; i++)
		c->b[i] = (struct kvfs_gpu_block){
			.hash = d == TO_DEV ? c->src[i] : c->dst[i],
			.parent = d == TO_DEV || !i ? NULL : c->dst[i - 1],
			.dev = c->dev + i * sz,
			.len = sz,
		};
	t0 = kvb_now();
	rc = d == TO_DEV ? kvfs_copy_to_device_batch(c->k, c->o.ns, c->b, n,
						     c->st, &cp)
			 : kvfs_copy_from_device_batch(c->k, c->o.ns, c->b, n,
						       c->st, &cp);
	if (!rc)
		rc = kvfs_copy_wait(cp);
	*r = gbs(n * sz, t0);
	if (rc)
		kvb_fail(GPU_CMD, rc, "%s",
			 d == TO_DEV ? "kvfs_copy_to_device_batch"
				     : "kvfs_copy_from_device_batch");
	return rc;
}

static void gpu_remove(struct gpu_ctx *c)
{
	char hex[KVFS_HASH_HEX_LEN + 1];

	if (c->ctl) {
		/* a lookup of nothing on libkvfs's own connection: when it
		 * is answered, the daemon has served the unmaps libkvfs
		 * posted there, so no block is referenced by us any more
		 * and "evict" can remove each (it refuses referenced ones) */
		(void)kvfs_match(c->k, c->o.ns, NULL, 0, 0, NULL);
		for (uint64_t i = 0; i < c->o.blocks; i++) {
			kvb_ctl_evict(c->ctl, c->o.ns, c->src[i]);
			kvb_ctl_evict(c->ctl, c->o.ns, c->dst[i]);
		}
		return;
	}
	for (uint64_t i = 0; i < c->o.blocks; i++) {
		kvfs_hash_to_hex(c->src[i], hex);
		unlinkat(c->nsfd, hex, 0);
		kvfs_hash_to_hex(c->dst[i], hex);
		unlinkat(c->nsfd, hex, 0);
	}
}

static int gpu_round(struct gpu_ctx *c, uint64_t sz, uint64_t r)
{
	int rc;

	rc = gpu_names(c);
	if (!rc)
		rc = gpu_write_src(c, sz);
	if (!rc)
		rc = gpu_kvfs(c, TO_DEV, sz, &c->t[0][TO_DEV][r]);
	if (!rc && r == 0)
		rc = gpu_check_dev(c, sz);
	if (!rc)
		rc = gpu_kvfs(c, FROM_DEV, sz, &c->t[0][FROM_DEV][r]);
	if (!rc && r == 0)
		rc = gpu_check_pool(c, sz);
	/* after the checks: the baseline overwrites the device copy */
	if (!rc)
		rc = gpu_base(c, TO_DEV, sz, &c->t[1][TO_DEV][r]);
	if (!rc)
		rc = gpu_base(c, FROM_DEV, sz, &c->t[1][FROM_DEV][r]);
	gpu_remove(c);
	return rc;
}

/* ---- the run -------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, uint64_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int gpu_size(struct gpu_ctx *c, struct gpu_row *row)
{
	int rc;

	if (row->size > c->m.slot_size) {
		row->skipped = "larger than the pool's slots";
		return 0;
	}
	if (c->m.slots < 2 * c->o.blocks) {
		row->skipped = "the pool has fewer than 2 x --blocks slots";
		return 0;
	}
	for (uint64_t r = 0; r < c->o.rounds; r++) {
		if (kvb_stop) {
			kvb_fail(GPU_CMD, -EINTR, "round %llu",
				 (unsigned long long)r);
			return -EINTR;
		}
		rc = gpu_round(c, row->size, r);
		if (rc)
			return rc;
	}
	for (int d = 0; d < NDIRS; d++) {
		row->kvfs[d] = median(c->t[0][d], c->o.rounds);
		row->base[d] = median(c->t[1][d], c->o.rounds);
	}
	return 0;
}

static double ratio(double a, double b)
{
	return b > 0 ? a / b : 0;
}

static void gpu_report_table(const struct gpu_ctx *c)
{
	char a[32], r[16];

	printf("kvbench gpu: %llu blocks a batch on %s (namespace %s), "
	       "median of %llu rounds\n"
	       "device: %s (%llu); pool pinned in %.3f s\n\n",
	       (unsigned long long)c->o.blocks, c->o.mount, c->o.ns,
	       (unsigned long long)c->o.rounds, c->device,
	       (unsigned long long)c->o.device, c->register_s);
	printf("%-8s %-13s %12s %15s %7s\n", "size", "direction",
	       "libkvfs GB/s", "cudaMemcpy GB/s", "ratio");
	for (size_t s = 0; s < GPU_NSIZES; s++) {
		const struct gpu_row *w = &c->rows[s];

		kvb_fmt_size(a, sizeof(a), w->size);
		if (w->skipped) {
			printf("%-8s skipped: %s\n", a, w->skipped);
			continue;
		}
		for (int d = 0; d < NDIRS; d++) {
			snprintf(r, sizeof(r), "%.2fx",
				 ratio(w->kvfs[d], w->base[d]));
			printf("%-8s %-13s %12.2f %15.2f %7s\n", a,
			       dir_label[d], w->kvfs[d], w->base[d], r);
		}
	}
	printf("\nratio = libkvfs / cudaMemcpyAsync between pinned memory of "
	       "the same size and\nthe device.  libkvfs: one batch "
	       "(kvfs_copy_*_batch + kvfs_copy_wait), its\nrequests to the "
	       "daemon included.  Every byte was checked in the first "
	       "round.\n");
}

static void gpu_report_json(const struct gpu_ctx *c)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	size_t len;
	char *text;

	kvfs_buf_printf(&b,
			"{\"benchmark\":\"kvbench gpu\",\"version\":\"%s\","
			"\"mount\":",
			PACKAGE_VERSION);
	kvfs_buf_json_str(&b, c->o.mount, strlen(c->o.mount));
	kvfs_buf_puts(&b, ",\"namespace\":");
	kvfs_buf_json_str(&b, c->o.ns, strlen(c->o.ns));
	kvfs_buf_puts(&b, ",\"device\":");
	kvfs_buf_json_str(&b, c->device, strlen(c->device));
	kvfs_buf_printf(&b,
			",\"blocks\":%llu,\"rounds\":%llu,"
			"\"register_s\":%.4f,\"sizes\":[",
			(unsigned long long)c->o.blocks,
			(unsigned long long)c->o.rounds, c->register_s);
	for (size_t s = 0; s < GPU_NSIZES; s++) {
		const struct gpu_row *w = &c->rows[s];

		kvfs_buf_printf(&b, "%s{\"block_bytes\":%llu", s ? "," : "",
				(unsigned long long)w->size);
		if (w->skipped) {
			kvfs_buf_puts(&b, ",\"skipped\":");
			kvfs_buf_json_str(&b, w->skipped, strlen(w->skipped));
			kvfs_buf_puts(&b, "}");
			continue;
		}
		for (int d = 0; d < NDIRS; d++)
			kvfs_buf_printf(&b,
					",\"%s\":{\"kvfs_gb_s\":%.3f,"
					"\"cudamemcpy_gb_s\":%.3f,"
					"\"ratio\":%.3f}",
					dir_key[d], w->kvfs[d], w->base[d],
					ratio(w->kvfs[d], w->base[d]));
		kvfs_buf_puts(&b, "}");
	}
	kvfs_buf_puts(&b, "]}\n");
	if (kvfs_buf_finish(&b, &text, &len) == 0) {
		fwrite(text, 1, len, stdout);
		free(text);
	}
}

static void gpu_teardown(struct gpu_ctx *c)
{
	if (c->have_st)
		cudaStreamDestroy(c->st);
	cudaFree(c->dev);
	cudaFreeHost(c->pinned);
	kvfs_disconnect(c->k);
	kvfs_ctl_close(c->ctl);
	if (c->nsfd >= 0)
		close(c->nsfd);
	free(c->host);
	free(c->src);
	free(c->dst);
	free(c->b);
	for (int w = 0; w < 2; w++)
		for (int d = 0; d < NDIRS; d++)
			free(c->t[w][d]);
}

int kvb_gpu_main(int argc, char **argv)
{
	struct gpu_ctx c;
	int rc;

	memset(&c, 0, sizeof(c));
	c.nsfd = -1;
	rc = gpu_parse(argc, argv, &c.o);
	if (rc)
		return rc < 0 ? KVB_EXIT_OK : rc;
	rc = gpu_device(&c);
	if (rc)
		return rc;
	rc = gpu_setup(&c);
	for (size_t s = 0; s < GPU_NSIZES && !rc; s++) {
		c.rows[s].size = gpu_sizes[s];
		rc = gpu_size(&c, &c.rows[s]);
	}
	if (!rc) {
		if (c.o.json)
			gpu_report_json(&c);
		else
			gpu_report_table(&c);
	}
	gpu_teardown(&c);
	return rc ? KVB_EXIT_FAIL : KVB_EXIT_OK;
}
