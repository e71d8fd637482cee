/*
 * kvbench_engine.c - "kvbench engine": an LLM engine emulated on a mount,
 * driven by a Mooncake-format trace file (kvconductor gen-trace writes
 * one) or by a synthetic trace generated in the process.
 *
 * What a serving engine does with kvfs, request by request, for every
 * request of a Mooncake-format trace (trace.h):
 *
 *   1. tokens: block i of the prompt holds the 512 tokens of hash_ids[i]
 *      (kvfs_trace_tokens), so requests that share a prefix of ids share
 *      its tokens;
 *   2. names: kvfs_hash_chain over the tokens of the full blocks only, as
 *      kvfs(7) names them: a prompt of L tokens has floor(L / 512) named
 *      blocks, and its partial tail is never looked up, read or written;
 *   3. one round trip to the daemon: kvfs_ctl_match of all the names, with
 *      a lease, gives the longest cached prefix and pins it;
 *   4. every block of that prefix is opened and read through the mount and
 *      compared with the bytes its name implies (kvb_kv_fill: a splitmix64
 *      stream seeded by the first 8 bytes of the hash): a difference, a
 *      short block or a vanished one ends the run with exit 1;
 *   5. the lease is released; then each missing block is created
 *      (O_CREAT | O_EXCL), written and closed, which seals it.  EEXIST is
 *      another writer's block, counted and taken as done.
 *
 * The engine runs as fast as the mount lets it, one request after the
 * other: the trace's timestamps set the order, not the pace.  The hit rate
 * it reports is the daemon's answer to step 3, so on a pool that never
 * evicts it equals the infinite-cache prefix hit rate of the trace.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/common/ctl_client.h"
#include "src/common/ctlproto.h"
#include "src/common/json.h"
#include "src/kvbench/kvbench.h"
#include "src/common/trace.h"

#define EN_CMD "engine"
#define EN_NS "kvbench-engine"
#define EN_LEASE_MS 10000
#define EN_GEN_REQUESTS 1000

struct en_opts {
	const char *mount;
	const char *trace; /* NULL: generate one */
	const char *ns;
	uint64_t block_bytes; /* 0: the pool's slot size */
	uint64_t requests;    /* 0: the whole trace */
	uint64_t lease_ms;
	uint64_t seed;
	bool json;
};

struct en_count {
	uint64_t requests;
	uint64_t named;	   /* full blocks, looked up */
	uint64_t hits;	   /* in the matched prefix: read and verified */
	uint64_t written;  /* created, written, sealed */
	uint64_t raced;	   /* EEXIST: cached past a miss, or a racer's */
	uint64_t tokens;   /* prompt tokens, partial tails included */
	uint64_t matches;  /* round trips: requests with a full block */
	uint64_t hash_ns;  /* tokens + names */
	uint64_t match_ns; /* match + unpin round trips */
	uint64_t read_ns;  /* open + read + compare + close */
	uint64_t write_ns; /* create + write + close */
	uint64_t run_ns;
};

struct en_ctx {
	struct en_opts o;
	struct kvfs_ctl *ctl;
	int nsfd;
	struct kvb_mount before, after;
	struct kvfs_trace *tr;
	char *gen_text; /* the generated trace, in memory */
	size_t gen_len;
	FILE *gen_f;
	uint64_t total; /* records to serve; 0 when unknown */
	uint32_t *tok;
	size_t tok_cap;
	uint8_t (*hashes)[KVFS_HASH_LEN];
	size_t hash_cap;
	uint8_t *rbuf; /* block_bytes + 1: a long block shows */
	uint8_t *wbuf;
	struct en_count c;
};

void kvb_engine_usage(FILE *f)
{
	fputs("usage: kvbench engine MOUNT [--trace FILE] [--namespace NS]\n"
	      "                      [--block-bytes BYTES] [--requests N] "
	      "[--lease-ms N]\n"
	      "                      [--seed S] [--json]\n"
	      "\n"
	      "Serve a Mooncake-format trace as an LLM engine would on the "
	      "kvfs mount\nMOUNT: name each request's full 512-token "
	      "blocks, match the longest cached\nprefix in one round trip, "
	      "read and verify it through the file system, then\nwrite the "
	      "missing blocks.\n"
	      "\n"
	      "  -t, --trace FILE       trace to serve ('-': standard input);"
	      " default a\n"
	      "                         generated one (as kvconductor gen-trace"
	      "\n"
	      "                         writes)\n"
	      "  -n, --namespace NS     namespace, made when absent "
	      "(default " EN_NS ")\n"
	      "  -b, --block-bytes BYTES  bytes per block, a K, M or G suffix "
	      "allowed;\n"
	      "                         default the pool's slot size\n"
	      "  -r, --requests N       serve the first N requests (default "
	      "all; 1000\n"
	      "                         for a generated trace)\n"
	      "  -l, --lease-ms N       lease on a matched prefix, 0 for none\n"
	      "                         (default 10000)\n"
	      "  -S, --seed S           seed of the generated trace (default "
	      "1)\n"
	      "  -j, --json             print one JSON object instead of the "
	      "summary\n"
	      "  -h, --help             print this help\n",
	      f);
}

/* ---- options -------------------------------------------------------- */

static int en_opt(int c, void *arg)
{
	struct en_opts *o = arg;

	switch (c) {
	case 't':
		o->trace = optarg;
		return 0;
	case 'n':
		o->ns = optarg;
		return 0;
	case 'b':
		return cli_parse_size(EN_CMD, "--block-bytes", optarg, 1,
				      1ull << 40, &o->block_bytes);
	case 'r':
		return cli_parse_u64(EN_CMD, "--requests", optarg, 1,
				     UINT64_MAX, &o->requests);
	case 'l':
		return cli_parse_u64(EN_CMD, "--lease-ms", optarg, 0,
				     CTLP_LEASE_MS_MAX, &o->lease_ms);
	case 'S':
		return cli_parse_u64(EN_CMD, "--seed", optarg, 0, UINT64_MAX,
				     &o->seed);
	case 'j':
		o->json = true;
		return 0;
	}
	return -EINVAL;
}

static int en_parse(int argc, char **argv, struct en_opts *o)
{
	static const struct option lo[] = {
		{ "trace", required_argument, NULL, 't' },
		{ "namespace", required_argument, NULL, 'n' },
		{ "block-bytes", required_argument, NULL, 'b' },
		{ "requests", required_argument, NULL, 'r' },
		{ "lease-ms", required_argument, NULL, 'l' },
		{ "seed", required_argument, NULL, 'S' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int rc;

	memset(o, 0, sizeof(*o));
	o->ns = EN_NS;
	o->lease_ms = EN_LEASE_MS;
	o->seed = 1;
	rc = kvb_getopt(EN_CMD, argc, argv, ":t:n:b:r:l:S:jh", lo,
			kvb_engine_usage, en_opt, o);
	if (rc)
		return rc;
	rc = kvb_mount_operand(EN_CMD, argc, argv, &o->mount, o->ns);
	if (rc)
		return rc;
	if (o->trace && !*o->trace)
		return cli_usage_error(EN_CMD, "--trace needs a file");
	return 0;
}

/* ---- the trace ------------------------------------------------------ */

/* a bad trace is bad input, like a bad option: exit 2, naming the line */
static int en_trace_error(struct en_ctx *c, int rc)
{
	if (rc == -EINVAL) {
		fprintf(stderr, "kvbench %s: %s\n", EN_CMD,
			kvfs_trace_error(c->tr));
		return KVB_EXIT_USAGE;
	}
	kvb_fail(EN_CMD, rc, "reading the trace %s",
		 c->o.trace ? c->o.trace : "(generated)");
	return KVB_EXIT_FAIL;
}

/*
 * A file is read twice: first to count its requests (for the progress
 * line) and to refuse a bad line before anything touches the mount, then
 * to serve them.  Standard input can be read once only: served as it
 * comes, with no total.
 */
static int en_trace_count(struct en_ctx *c)
{
	struct kvfs_trace_rec r;
	struct stat sb;
	int rc;

	if (!strcmp(c->o.trace, "-") || stat(c->o.trace, &sb) ||
	    !S_ISREG(sb.st_mode))
		return 0;
	rc = kvfs_trace_open(c->o.trace, 0, &c->tr);
	if (rc) {
		kvb_fail(EN_CMD, rc, "cannot open the trace %s", c->o.trace);
		return KVB_EXIT_FAIL;
	}
	while ((!c->o.requests || c->total < c->o.requests) &&
	       (rc = kvfs_trace_next(c->tr, &r)) == 1)
		c->total++;
	rc = rc < 0 ? en_trace_error(c, rc) : 0;
	kvfs_trace_close(c->tr);
	c->tr = NULL;
	return rc;
}

/* the default trace: kvfs_trace_gen into memory, read back as a file */
static int en_trace_generate(struct en_ctx *c)
{
	struct kvfs_trace_gen_params p;
	FILE *w;
	int rc;

	kvfs_trace_gen_defaults(&p);
	p.seed = c->o.seed;
	p.requests = c->o.requests ? c->o.requests : EN_GEN_REQUESTS;
	w = open_memstream(&c->gen_text, &c->gen_len);
	if (!w)
		return -errno;
	rc = kvfs_trace_gen(w, &p);
	if (fclose(w) && !rc)
		rc = -ENOMEM;
	if (rc)
		return rc;
	c->total = p.requests;
	c->gen_f = fmemopen(c->gen_text, c->gen_len ? c->gen_len : 1, "r");
	if (!c->gen_f)
		return -errno;
	return kvfs_trace_fopen(c->gen_f, "generated trace", 0, &c->tr);
}

static int en_trace_open(struct en_ctx *c)
{
	int rc;

	if (!c->o.trace) {
		rc = en_trace_generate(c);
		if (rc)
			kvb_fail(EN_CMD, rc, "generating the trace");
		return rc ? KVB_EXIT_FAIL : 0;
	}
	rc = en_trace_count(c);
	if (rc)
		return rc;
	rc = kvfs_trace_open(c->o.trace, 0, &c->tr);
	if (rc) {
		kvb_fail(EN_CMD, rc, "cannot open the trace %s", c->o.trace);
		return KVB_EXIT_FAIL;
	}
	return 0;
}

/* ---- the mount ------------------------------------------------------ */

static int en_mount(struct en_ctx *c)
{
	char err[256];
	uint32_t bt;
	int rc;

	/* the socket first: it says best when MOUNT is no kvfs mount */
	rc = kvfs_ctl_connect(c->o.mount, &c->ctl, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "kvbench %s: %s\n", EN_CMD, err);
		return rc;
	}
	rc = kvb_mount_stats(EN_CMD, c->o.mount, c->o.ns, &c->before);
	if (rc)
		return rc;
	if (!c->o.block_bytes)
		c->o.block_bytes = c->before.slot_size;
	if (c->o.block_bytes > c->before.slot_size) {
		kvb_fail(EN_CMD, 0,
			 "--block-bytes %llu is more than the pool's slot "
			 "size, %llu",
			 (unsigned long long)c->o.block_bytes,
			 (unsigned long long)c->before.slot_size);
		return -EFBIG;
	}
	c->nsfd = kvb_mount_ns(EN_CMD, c->o.mount, c->o.ns, &bt);
	if (c->nsfd < 0)
		return c->nsfd;
	if (bt != KVFS_TRACE_BLOCK_TOKENS) {
		kvb_fail(EN_CMD, 0,
			 "namespace %s has %u tokens per block, a trace's "
			 "blocks have %u: use another --namespace, or a "
			 "kvfsd with -o block_tokens=%u",
			 c->o.ns, bt, KVFS_TRACE_BLOCK_TOKENS,
			 KVFS_TRACE_BLOCK_TOKENS);
		return -EINVAL;
	}
	c->rbuf = malloc(c->o.block_bytes + 1);
	c->wbuf = malloc(c->o.block_bytes);
	return c->rbuf && c->wbuf ? 0 : -ENOMEM;
}

/* ---- one request ---------------------------------------------------- */

static int en_grow(struct en_ctx *c, size_t nblk)
{
	size_t ntok = nblk * KVFS_TRACE_BLOCK_TOKENS;
	void *p;

	if (ntok > c->tok_cap) {
		p = realloc(c->tok, ntok * sizeof(*c->tok));
		if (!p)
			return -ENOMEM;
		c->tok = p;
		c->tok_cap = ntok;
	}
	if (nblk > c->hash_cap) {
		p = realloc(c->hashes, nblk * KVFS_HASH_LEN);
		if (!p)
			return -ENOMEM;
		c->hashes = p;
		c->hash_cap = nblk;
	}
	return 0;
}

/* the names of the request's full blocks into c->hashes */
static int en_name(struct en_ctx *c, const struct kvfs_trace_rec *r,
		   size_t nblk)
{
	size_t ntok = nblk * KVFS_TRACE_BLOCK_TOKENS;
	long n;
	int rc;

	rc = en_grow(c, nblk);
	if (!rc)
		rc = kvfs_trace_tokens(r, c->tok, ntok);
	if (rc)
		return rc;
	n = kvfs_hash_chain(c->o.ns, KVFS_TRACE_BLOCK_TOKENS, c->tok, ntok,
			    c->hashes, nblk);
	return n == (long)nblk ? 0 : n < 0 ? (int)n : -EIO;
}

static ssize_t en_read_all(int fd, uint8_t *buf, size_t cap)
{
	size_t n = 0;

	while (n < cap) {
		ssize_t r = read(fd, buf + n, cap - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		n += (size_t)r;
	}
	return (ssize_t)n;
}

/* read a matched block through the mount and check every byte */
static int en_read(struct en_ctx *c, const uint8_t h[KVFS_HASH_LEN])
{
	char hex[KVFS_HASH_HEX_LEN + 1];
	size_t want = c->o.block_bytes, off;
	ssize_t n;
	int fd;

	kvfs_hash_to_hex(h, hex);
	fd = openat(c->nsfd, hex, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		kvb_fail(EN_CMD, -errno, "matched block %s/%s", c->o.ns, hex);
		return -EIO;
	}
	n = en_read_all(fd, c->rbuf, want + 1);
	close(fd);
	if (n < 0) {
		kvb_fail(EN_CMD, (int)n, "reading block %s/%s", c->o.ns, hex);
		return (int)n;
	}
	if ((size_t)n != want) {
		kvb_fail(EN_CMD, 0,
			 "block %s/%s has %s%zd bytes, not %zu (written "
			 "with another --block-bytes?)",
			 c->o.ns, hex, (size_t)n > want ? "more than " : "",
			 (size_t)n > want ? (ssize_t)want : n, want);
		return -EIO;
	}
	off = kvb_kv_check(h, c->rbuf, want);
	if (off != want) {
		kvb_fail(EN_CMD, 0,
			 "block %s/%s differs from its KV bytes at offset %zu",
			 c->o.ns, hex, off);
		return -EIO;
	}
	return 0;
}

static int en_write_all(int fd, const uint8_t *buf, size_t len)
{
	while (len) {
		ssize_t w = write(fd, buf, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		buf += w;
		len -= (size_t)w;
	}
	return 0;
}

/* the engine computed a missing block: create, write, close = seal */
static int en_write(struct en_ctx *c, const uint8_t h[KVFS_HASH_LEN])
{
	char hex[KVFS_HASH_HEX_LEN + 1];
	uint64_t t0;
	int fd, rc;

	kvfs_hash_to_hex(h, hex);
	/* making the bytes is the model's work, not the store's */
	kvb_kv_fill(h, c->wbuf, c->o.block_bytes);
	t0 = kvb_now();
	fd = openat(c->nsfd, hex, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC,
		    0444);
	if (fd < 0 && errno == EEXIST) {
		c->c.raced++;
		c->c.write_ns += kvb_now() - t0;
		return 0;
	}
	if (fd < 0) {
		rc = -errno;
		kvb_fail(EN_CMD, rc, "creating block %s/%s", c->o.ns, hex);
		return rc;
	}
	rc = en_write_all(fd, c->wbuf, c->o.block_bytes);
	/* close() seals: its error is the seal's */
	if (close(fd) && !rc)
		rc = -errno;
	c->c.write_ns += kvb_now() - t0;
	if (rc) {
		kvb_fail(EN_CMD, rc, "writing block %s/%s", c->o.ns, hex);
		return rc;
	}
	c->c.written++;
	return 0;
}

static int en_match(struct en_ctx *c, size_t nblk, uint64_t *lease)
{
	long hits;

	hits = kvfs_ctl_match(c->ctl, c->o.ns,
			      (const uint8_t(*)[KVFS_HASH_LEN])c->hashes, nblk,
			      (uint32_t)c->o.lease_ms, lease);
	if (hits < 0)
		kvb_fail(EN_CMD, (int)hits, "prefix match at line %llu",
			 (unsigned long long)kvfs_trace_lineno(c->tr));
	return (int)hits;
}

static int en_unpin(struct en_ctx *c, uint64_t lease)
{
	int rc = kvfs_ctl_unpin(c->ctl, lease);

	/* gone already: it expired while we read, and the blocks were not
	 * held for part of the time; the bytes were checked regardless */
	if (rc == -ENOENT)
		kvb_fail(EN_CMD, 0,
			 "the lease expired before the reads were done; "
			 "give a longer --lease-ms");
	else if (rc)
		kvb_fail(EN_CMD, rc, "releasing the lease");
	return rc;
}

static int en_serve(struct en_ctx *c, const struct kvfs_trace_rec *r)
{
	size_t nblk = kvfs_trace_full_blocks(r);
	uint64_t lease = 0, t0;
	int rc, hits;

	c->c.requests++;
	c->c.tokens += r->input_length;
	if (!nblk)
		return 0; /* nothing to name: no round trip */
	if (nblk > CTLP_HASHES_MAX) {
		kvb_fail(EN_CMD, 0,
			 "line %llu: %zu blocks, more than one match takes "
			 "(%u)",
			 (unsigned long long)kvfs_trace_lineno(c->tr), nblk,
			 CTLP_HASHES_MAX);
		return -E2BIG;
	}
	t0 = kvb_now();
	rc = en_name(c, r, nblk);
	c->c.hash_ns += kvb_now() - t0;
	if (rc) {
		kvb_fail(EN_CMD, rc, "naming the blocks of line %llu",
			 (unsigned long long)kvfs_trace_lineno(c->tr));
		return rc;
	}
	t0 = kvb_now();
	hits = en_match(c, nblk, &lease);
	c->c.match_ns += kvb_now() - t0;
	if (hits < 0)
		return hits;
	c->c.matches++;
	c->c.named += nblk;
	c->c.hits += (uint64_t)hits;
	t0 = kvb_now();
	rc = 0;
	for (int i = 0; i < hits && !rc; i++)
		rc = en_read(c, c->hashes[i]);
	c->c.read_ns += kvb_now() - t0;
	if (lease) {
		int rel;

		t0 = kvb_now();
		rel = en_unpin(c, lease);
		c->c.match_ns += kvb_now() - t0;
		rc = rc ? rc : rel;
	}
	for (size_t i = (size_t)hits; i < nblk && !rc; i++)
		rc = en_write(c, c->hashes[i]);
	return rc;
}

/* ---- the run -------------------------------------------------------- */

static double en_pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static void en_progress(struct en_ctx *c, struct cli_progress *p, bool final)
{
	char tot[32] = "", rd[32], wr[32];
	double bytes = (double)c->o.block_bytes;

	if (!final && !cli_progress_due(p))
		return;
	if (c->total)
		snprintf(tot, sizeof(tot), "/%llu",
			 (unsigned long long)c->total);
	cli_progress_say(p, final,
			 "engine: %llu%s requests, %.1f%% block hits, %s read, "
			 "%s written",
			 (unsigned long long)c->c.requests, tot,
			 en_pct(c->c.hits, c->c.named),
			 kvb_fmt_bytes(rd, sizeof(rd), bytes * c->c.hits),
			 kvb_fmt_bytes(wr, sizeof(wr), bytes * c->c.written));
}

/* 0, or the exit code */
static int en_run(struct en_ctx *c)
{
	struct kvfs_trace_rec r;
	struct cli_progress p;
	uint64_t t0 = kvb_now();
	int rc = 0, got;

	cli_progress_start(&p, "engine", c->total);
	while (!c->o.requests || c->c.requests < c->o.requests) {
		if (kvb_stop) {
			rc = -EINTR;
			kvb_fail(EN_CMD, rc, "request %llu",
				 (unsigned long long)c->c.requests);
			break;
		}
		got = kvfs_trace_next(c->tr, &r);
		if (got <= 0) {
			c->c.run_ns = kvb_now() - t0;
			en_progress(c, &p, true);
			return got ? en_trace_error(c, got) : 0;
		}
		rc = en_serve(c, &r);
		if (rc)
			break;
		en_progress(c, &p, false);
	}
	c->c.run_ns = kvb_now() - t0;
	en_progress(c, &p, true);
	return rc ? KVB_EXIT_FAIL : 0;
}

/* ---- report --------------------------------------------------------- */

static double en_mbs(uint64_t bytes, uint64_t ns)
{
	return kvb_rate(bytes, ns) / 1e6;
}

/* mean time of a request's match and release, in us */
static double en_match_us(const struct en_count *k)
{
	return k->matches ? (double)k->match_ns / 1e3 / (double)k->matches
			  : 0.0;
}

static uint64_t en_evictions(const struct en_ctx *c)
{
	return c->after.evictions >= c->before.evictions
		       ? c->after.evictions - c->before.evictions
		       : 0;
}

/* what ran: the mount, the trace and the block geometry */
static void en_json_setup(struct kvfs_buf *b, const struct en_ctx *c)
{
	kvfs_buf_printf(b,
			"{\"benchmark\":\"kvbench engine\",\"version\":"
			"\"%s\",\"mount\":",
			PACKAGE_VERSION);
	kvfs_buf_json_str(b, c->o.mount, strlen(c->o.mount));
	kvfs_buf_puts(b, ",\"namespace\":");
	kvfs_buf_json_str(b, c->o.ns, strlen(c->o.ns));
	kvfs_buf_puts(b, ",\"trace\":");
	if (c->o.trace)
		kvfs_buf_json_str(b, c->o.trace, strlen(c->o.trace));
	else
		kvfs_buf_printf(b, "null,\"seed\":%llu",
				(unsigned long long)c->o.seed);
	kvfs_buf_printf(b,
			",\"block_tokens\":%u,\"block_bytes\":%llu,"
			"\"slot_size\":%llu,\"lease_ms\":%llu",
			KVFS_TRACE_BLOCK_TOKENS,
			(unsigned long long)c->o.block_bytes,
			(unsigned long long)c->before.slot_size,
			(unsigned long long)c->o.lease_ms);
}

static void en_json_counts(struct kvfs_buf *b, const struct en_ctx *c)
{
	const struct en_count *k = &c->c;
	uint64_t bb = c->o.block_bytes;

	kvfs_buf_printf(
		b,
		",\"requests\":%llu,\"tokens\":%llu,"
		"\"blocks_named\":%llu,\"blocks_hit\":%llu,"
		"\"hit_rate\":%.6f,\"blocks_written\":%llu,"
		"\"blocks_raced\":%llu,\"bytes_read\":%llu,"
		"\"bytes_written\":%llu,\"evictions\":%llu,"
		"\"matches\":%llu",
		(unsigned long long)k->requests, (unsigned long long)k->tokens,
		(unsigned long long)k->named, (unsigned long long)k->hits,
		k->named ? (double)k->hits / (double)k->named : 0.0,
		(unsigned long long)k->written, (unsigned long long)k->raced,
		(unsigned long long)(k->hits * bb),
		(unsigned long long)(k->written * bb),
		(unsigned long long)en_evictions(c),
		(unsigned long long)k->matches);
}

static void en_json_times(struct kvfs_buf *b, const struct en_ctx *c)
{
	const struct en_count *k = &c->c;
	uint64_t bb = c->o.block_bytes;

	kvfs_buf_printf(b,
			",\"elapsed_s\":%.6f,\"requests_per_s\":%.1f,"
			"\"read_mb_s\":%.1f,\"write_mb_s\":%.1f,"
			"\"match_us\":%.1f,\"time_s\":{\"name\":%.6f,"
			"\"match\":%.6f,\"read\":%.6f,\"write\":%.6f}}\n",
			(double)k->run_ns / 1e9,
			kvb_rate(k->requests, k->run_ns),
			en_mbs(k->hits * bb, k->read_ns),
			en_mbs(k->written * bb, k->write_ns), en_match_us(k),
			(double)k->hash_ns / 1e9, (double)k->match_ns / 1e9,
			(double)k->read_ns / 1e9, (double)k->write_ns / 1e9);
}

static void en_report_json(const struct en_ctx *c)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	char *text;
	size_t len;

	en_json_setup(&b, c);
	en_json_counts(&b, c);
	en_json_times(&b, c);
	if (kvfs_buf_finish(&b, &text, &len) == 0) {
		fwrite(text, 1, len, stdout);
		free(text);
	}
}

static void en_report_table(const struct en_ctx *c)
{
	const struct en_count *k = &c->c;
	uint64_t bb = c->o.block_bytes;
	double secs = (double)k->run_ns / 1e9;
	char a[32], b[32], d[32];

	printf("kvbench engine: %s on %s, namespace %s\n",
	       c->o.trace ? c->o.trace : "generated trace", c->o.mount,
	       c->o.ns);
	printf("blocks: %u tokens, %s each (slot %s); lease %llu ms\n\n",
	       KVFS_TRACE_BLOCK_TOKENS, kvb_fmt_size(a, sizeof(a), bb),
	       kvb_fmt_size(b, sizeof(b), c->before.slot_size),
	       (unsigned long long)c->o.lease_ms);
	kvb_line(stdout, "requests", "%s in %.2f s, %s tokens",
		 cli_fmt_count(a, sizeof(a), (double)k->requests), secs,
		 cli_fmt_count(b, sizeof(b), (double)k->tokens));
	kvb_line(stdout, "blocks named", "%s (full blocks only)",
		 cli_fmt_count(a, sizeof(a), (double)k->named));
	kvb_line(stdout, "block hit rate",
		 "%.2f%% (%s of %s in a matched "
		 "prefix)",
		 en_pct(k->hits, k->named),
		 cli_fmt_count(a, sizeof(a), (double)k->hits),
		 cli_fmt_count(b, sizeof(b), (double)k->named));
	kvb_line(stdout, "bytes reused", "%s read and verified",
		 kvb_fmt_bytes(a, sizeof(a), (double)(k->hits * bb)));
	kvb_line(stdout, "bytes written", "%s in %s new blocks",
		 kvb_fmt_bytes(a, sizeof(a), (double)(k->written * bb)),
		 cli_fmt_count(b, sizeof(b), (double)k->written));
	if (k->raced)
		kvb_line(stdout, "",
			 "%s found cached already (past a miss, "
			 "or made by another writer)",
			 cli_fmt_count(b, sizeof(b), (double)k->raced));
	kvb_line(stdout, "evictions", "%s in this namespace",
		 cli_fmt_count(a, sizeof(a), (double)en_evictions(c)));
	kvb_fmt_bytes(a, sizeof(a), kvb_rate(k->hits * bb, k->read_ns));
	kvb_fmt_bytes(b, sizeof(b), kvb_rate(k->written * bb, k->write_ns));
	cli_fmt_count(d, sizeof(d), kvb_rate(k->requests, k->run_ns));
	kvb_line(stdout, "throughput",
		 "%s requests/s; %s/s read+verified, %s/s written", d, a, b);
	kvb_line(stdout, "match",
		 "%s round trips, %.0f us each with the "
		 "release",
		 cli_fmt_count(a, sizeof(a), (double)k->matches),
		 en_match_us(k));
	kvb_line(stdout, "elapsed",
		 "%.2f s: naming %.2f, match %.2f, read %.2f, write %.2f", secs,
		 (double)k->hash_ns / 1e9, (double)k->match_ns / 1e9,
		 (double)k->read_ns / 1e9, (double)k->write_ns / 1e9);
}

/* ---- main ----------------------------------------------------------- */

static void en_teardown(struct en_ctx *c)
{
	kvfs_trace_close(c->tr);
	if (c->gen_f)
		fclose(c->gen_f);
	free(c->gen_text);
	kvfs_ctl_close(c->ctl);
	if (c->nsfd >= 0)
		close(c->nsfd);
	free(c->tok);
	free(c->hashes);
	free(c->rbuf);
	free(c->wbuf);
}

int kvb_engine_main(int argc, char **argv)
{
	struct en_ctx c;
	int rc;

	memset(&c, 0, sizeof(c));
	c.nsfd = -1;
	rc = en_parse(argc, argv, &c.o);
	if (rc)
		return rc < 0 ? KVB_EXIT_OK : rc;
	/* the trace before the mount: a bad one changes nothing there */
	rc = en_trace_open(&c);
	if (rc)
		goto out_teardown;
	rc = en_mount(&c);
	if (rc) {
		rc = KVB_EXIT_FAIL;
		goto out_teardown;
	}
	rc = en_run(&c);
	if (rc)
		goto out_teardown;
	if (kvb_mount_stats(EN_CMD, c.o.mount, c.o.ns, &c.after))
		c.after = c.before;
	if (c.o.json)
		en_report_json(&c);
	else
		en_report_table(&c);
out_teardown:
	en_teardown(&c);
	return rc;
}
