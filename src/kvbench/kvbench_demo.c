/*
 * kvbench_demo.c - "kvbench demo": an LLM engine emulated on the store.
 *
 * What an engine does with kvfs, done directly on the store library with a
 * synthetic workload generated in-process from a seed:
 *
 *   - a few system prompts, picked with Zipf-like popularity (the first is
 *     the most shared), each opening a new session with random user text;
 *   - multi-turn sessions: a follow-up turn's prompt is the whole previous
 *     prompt, the model's answer, and new user text, so it extends a
 *     prompt whose blocks were written before.
 *
 * Per request: name the prompt's full blocks with kvfs_hash_chain, take the
 * longest cached prefix with kv_store_match under a lease, read every
 * matched block (kv_store_get/put) and compare it byte for byte with its
 * synthetic KV bytes (kvb_kv_fill of its name; a mismatch is a hard error),
 * release the lease, then create, write and seal the missing blocks, each
 * with the previous block as parent.  The default pool is small, so the
 * store really evicts.
 *
 * At the end the store is closed and reopened on the same pool and index,
 * as a restarted kvfsd would, and every block that was cached before is
 * read back and compared again.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "src/kvbench/kvbench.h"
#include "kvstore/store.h"

#define DM_CMD "demo"
#define DM_NS "demo-model"
#define DM_NSYS 6	   /* shared system prompts */
#define DM_NSESS 24	   /* sessions alive at once */
#define DM_MAX_TOKENS 8192 /* a session ends before its prompt passes it */
#define DM_FOLLOW_PCT 65   /* chance a request continues a session */
#define DM_VOCAB 128000u
#define DM_VERIFY_MAX 4096 /* blocks re-read after the restart, at most */

struct dm_opts {
	uint64_t requests;
	uint64_t slots;
	uint64_t slot_size;
	uint64_t block_tokens;
	uint64_t seed;
	const char *state; /* NULL: a temporary directory */
	bool keep;
};

struct dm_session {
	uint32_t *tok; /* DM_MAX_TOKENS */
	size_t n;
};

/* the synthetic engine's clients */
struct dm_work {
	uint64_t rng;
	uint32_t *sys[DM_NSYS];
	size_t nsys[DM_NSYS];
	struct dm_session sess[DM_NSESS]; /* [0, nlive) are alive */
	size_t nlive;
};

struct dm_count {
	uint64_t requests;
	uint64_t lookups; /* blocks named */
	uint64_t hits;	  /* blocks in a matched prefix */
};

struct dm_ctx {
	struct dm_opts o;
	struct dm_work w;
	char dir[PATH_MAX];
	char pool[PATH_MAX + 16];
	char index[PATH_MAX + 16];
	struct kv_store_config cfg;
	struct kv_store *st;
	uint32_t ns;
	uint8_t (*hashes)[KVFS_HASH_LEN]; /* one request's chain */
	size_t max_blocks;
	uint8_t (*sealed)[KVFS_HASH_LEN]; /* every block this run sealed */
	size_t nsealed, capsealed;
	struct dm_count all, follow, fresh;
	uint64_t written;    /* blocks sealed */
	uint64_t present;    /* missing from the prefix yet cached later */
	uint64_t recovered0; /* sealed blocks found at the first open */
	uint64_t read_ns;    /* in get + compare + put */
	uint64_t run_ns;
};

void kvb_demo_usage(FILE *f)
{
	fputs("usage: kvbench demo [--requests N] [--slots N] "
	      "[--slot-size BYTES]\n"
	      "                    [--block-tokens B] [--seed S] "
	      "[--state DIR] [--keep]\n"
	      "\n"
	      "Run a synthetic LLM engine workload on the store, verify "
	      "every reused block,\nthen restart the store and verify "
	      "what it recovered.\n"
	      "\n"
	      "  -r, --requests N       requests to serve (default 2000)\n"
	      "  -s, --slots N          blocks the pool holds (default 512)\n"
	      "  -z, --slot-size BYTES  bytes per block, a multiple of "
	      "4096; a K, M or G\n"
	      "                         suffix allowed (default 64K)\n"
	      "  -B, --block-tokens B   tokens per block, 1 to 4096 "
	      "(default 64)\n"
	      "  -S, --seed S           workload seed (default 1)\n"
	      "  -d, --state DIR        keep pool and index in DIR and "
	      "reuse them\n"
	      "  -k, --keep             keep the temporary pool and index\n"
	      "  -h, --help             print this help\n",
	      f);
}

/* ---- options -------------------------------------------------------- */

static int dm_opt(int c, void *arg)
{
	struct dm_opts *o = arg;

	switch (c) {
	case 'r':
		return cli_parse_u64(DM_CMD, "--requests", optarg, 1,
				     1000000000, &o->requests);
	case 's':
		return cli_parse_u64(DM_CMD, "--slots", optarg, 1, 1u << 24,
				     &o->slots);
	case 'z':
		return cli_parse_size(DM_CMD, "--slot-size", optarg, 4096,
				      1u << 30, &o->slot_size);
	case 'B':
		return cli_parse_u64(DM_CMD, "--block-tokens", optarg, 1, 4096,
				     &o->block_tokens);
	case 'S':
		return cli_parse_u64(DM_CMD, "--seed", optarg, 0, UINT64_MAX,
				     &o->seed);
	case 'd':
		o->state = optarg;
		return 0;
	case 'k':
		o->keep = true;
		return 0;
	}
	return -EINVAL;
}

static int dm_parse(int argc, char **argv, struct dm_opts *o)
{
	static const struct option lo[] = {
		{ "requests", required_argument, NULL, 'r' },
		{ "slots", required_argument, NULL, 's' },
		{ "slot-size", required_argument, NULL, 'z' },
		{ "block-tokens", required_argument, NULL, 'B' },
		{ "seed", required_argument, NULL, 'S' },
		{ "state", required_argument, NULL, 'd' },
		{ "keep", no_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int rc;

	memset(o, 0, sizeof(*o));
	o->requests = 2000;
	o->slots = 512;
	o->slot_size = 64 << 10;
	o->block_tokens = 64;
	o->seed = 1;
	rc = kvb_getopt(DM_CMD, argc, argv, ":r:s:z:B:S:d:kh", lo,
			kvb_demo_usage, dm_opt, o);
	if (rc)
		return rc;
	if (optind < argc)
		return cli_usage_error(DM_CMD, "unexpected argument '%s'",
				       argv[optind]);
	if (o->slot_size % 4096)
		return cli_usage_error(DM_CMD,
				       "--slot-size must be a "
				       "multiple of 4096, not %llu",
				       (unsigned long long)o->slot_size);
	if (o->state && (!*o->state || strlen(o->state) >= PATH_MAX))
		return cli_usage_error(DM_CMD, "--state needs a directory");
	return 0;
}

/* ---- the synthetic workload ---------------------------------------- */

static void dm_text(struct dm_work *w, uint32_t *tok, size_t n)
{
	for (size_t i = 0; i < n; i++)
		tok[i] = (uint32_t)kvb_rand_below(&w->rng, DM_VOCAB);
}

static uint64_t dm_range(struct dm_work *w, uint64_t lo, uint64_t hi)
{
	return lo + kvb_rand_below(&w->rng, hi - lo + 1);
}

static int dm_work_init(struct dm_work *w, uint64_t seed)
{
	memset(w, 0, sizeof(*w));
	w->rng = seed;
	for (int i = 0; i < DM_NSYS; i++) {
		w->nsys[i] = dm_range(w, 512, 2048);
		w->sys[i] = malloc(w->nsys[i] * sizeof(uint32_t));
		if (!w->sys[i])
			return -ENOMEM;
		dm_text(w, w->sys[i], w->nsys[i]);
	}
	for (int i = 0; i < DM_NSESS; i++) {
		w->sess[i].tok = malloc(DM_MAX_TOKENS * sizeof(uint32_t));
		if (!w->sess[i].tok)
			return -ENOMEM;
	}
	return 0;
}

static void dm_work_free(struct dm_work *w)
{
	for (int i = 0; i < DM_NSYS; i++)
		free(w->sys[i]);
	for (int i = 0; i < DM_NSESS; i++)
		free(w->sess[i].tok);
}

/* Zipf-like: system prompt k is picked with weight 1/(k+1) */
static int dm_pick_sys(struct dm_work *w)
{
	double total = 0, u;
	int k;

	for (k = 0; k < DM_NSYS; k++)
		total += 1.0 / (k + 1);
	u = (double)(kvb_rand(&w->rng) >> 11) / 9007199254740992.0 * total;
	for (k = 0; k < DM_NSYS - 1; k++) {
		u -= 1.0 / (k + 1);
		if (u < 0)
			break;
	}
	return k;
}

/* session i ends: the last live one takes its place */
static void dm_end(struct dm_work *w, size_t i)
{
	struct dm_session t = w->sess[i];

	w->nlive--;
	w->sess[i] = w->sess[w->nlive];
	w->sess[w->nlive] = t;
}

static struct dm_session *dm_open_session(struct dm_work *w)
{
	struct dm_session *s;
	int k = dm_pick_sys(w);
	size_t user = dm_range(w, 32, 512);

	if (w->nlive == DM_NSESS) /* full: a random client leaves */
		dm_end(w, kvb_rand_below(&w->rng, w->nlive));
	s = &w->sess[w->nlive++];
	memcpy(s->tok, w->sys[k], w->nsys[k] * sizeof(uint32_t));
	s->n = w->nsys[k];
	dm_text(w, s->tok + s->n, user);
	s->n += user;
	return s;
}

/* the answer to the last turn and the next user text, if they fit */
static struct dm_session *dm_follow(struct dm_work *w)
{
	size_t i = kvb_rand_below(&w->rng, w->nlive);
	struct dm_session *s = &w->sess[i];
	size_t add = dm_range(w, 16, 256) + dm_range(w, 32, 512);

	if (s->n + add > DM_MAX_TOKENS) {
		dm_end(w, i);
		return NULL;
	}
	dm_text(w, s->tok + s->n, add);
	s->n += add;
	return s;
}

/* the next request's prompt; *follow tells a follow-up turn */
static const struct dm_session *dm_next(struct dm_work *w, bool *follow)
{
	struct dm_session *s = NULL;

	*follow = w->nlive && kvb_rand_below(&w->rng, 100) < DM_FOLLOW_PCT;
	if (*follow)
		s = dm_follow(w);
	if (!s) {
		*follow = false;
		s = dm_open_session(w);
	}
	return s;
}

/* ---- serving a request --------------------------------------------- */

/* read a cached block and compare it with the bytes its name implies */
static int dm_read(struct dm_ctx *c, const uint8_t h[KVFS_HASH_LEN])
{
	char hex[KVFS_HASH_HEX_LEN + 1];
	struct kv_ref ref;
	size_t off;
	int rc;

	rc = kv_store_get(c->st, c->ns, h, &ref);
	if (rc) {
		kvfs_hash_to_hex(h, hex);
		kvb_fail(DM_CMD, rc,
			 "matched block %s vanished under its lease", hex);
		return rc;
	}
	off = ref.size == c->o.slot_size ? kvb_kv_check(h, ref.data, ref.size)
					 : 0;
	rc = kv_store_put(c->st, &ref);
	if (off != c->o.slot_size) {
		kvfs_hash_to_hex(h, hex);
		kvb_fail(DM_CMD, 0,
			 "block %s: %llu bytes, differs from its "
			 "KV bytes at offset %zu",
			 hex, (unsigned long long)ref.size, off);
		return -EIO;
	}
	if (rc)
		kvb_fail(DM_CMD, rc, "kv_store_put");
	return rc;
}

static int dm_remember(struct dm_ctx *c, const uint8_t h[KVFS_HASH_LEN])
{
	if (c->nsealed == c->capsealed) {
		size_t cap = c->capsealed ? 2 * c->capsealed : 4096;
		void *p = realloc(c->sealed, cap * KVFS_HASH_LEN);

		if (!p)
			return -ENOMEM;
		c->sealed = p;
		c->capsealed = cap;
	}
	memcpy(c->sealed[c->nsealed++], h, KVFS_HASH_LEN);
	return 0;
}

/* the engine computed block i: write its KV bytes straight into the slot */
static int dm_write(struct dm_ctx *c, size_t i)
{
	const uint8_t *parent = i ? c->hashes[i - 1] : NULL;
	uint32_t wh;
	void *slot;
	int rc;

	rc = kv_store_create(c->st, c->ns, c->hashes[i], parent, &wh);
	if (rc == -EEXIST) {
		/* cached past the first miss: its parent was evicted */
		c->present++;
		return 0;
	}
	if (rc)
		goto out_fail;
	slot = kv_store_wptr(c->st, wh);
	rc = -EIO;
	if (!slot)
		goto out_abort;
	kvb_kv_fill(c->hashes[i], slot, c->o.slot_size);
	rc = kv_store_set_size(c->st, wh, c->o.slot_size);
	if (rc)
		goto out_abort;
	rc = kv_store_seal(c->st, wh);
	if (rc)
		goto out_fail;
	c->written++;
	return dm_remember(c, c->hashes[i]);
out_abort:
	kv_store_abort(c->st, wh);
out_fail:
	kvb_fail(DM_CMD, rc, "writing block %zu of a request", i);
	return rc;
}

static void dm_count(struct dm_count *k, size_t nblk, long hits)
{
	k->requests++;
	k->lookups += nblk;
	k->hits += (uint64_t)hits;
}

static int dm_serve(struct dm_ctx *c, const struct dm_session *s, bool follow)
{
	uint64_t lease = 0, t0;
	long nblk, hits;
	int rc = 0;

	nblk = kvfs_hash_chain(DM_NS, c->o.block_tokens, s->tok, s->n,
			       c->hashes, c->max_blocks);
	if (nblk < 0) {
		kvb_fail(DM_CMD, (int)nblk, "kvfs_hash_chain");
		return (int)nblk;
	}
	hits = kv_store_match(c->st, c->ns,
			      (const uint8_t(*)[KVFS_HASH_LEN])c->hashes,
			      (size_t)nblk, 0, &lease);
	if (hits < 0) {
		kvb_fail(DM_CMD, (int)hits, "kv_store_match");
		return (int)hits;
	}
	t0 = kvb_now();
	for (long i = 0; i < hits && !rc; i++)
		rc = dm_read(c, c->hashes[i]);
	c->read_ns += kvb_now() - t0;
	if (lease) {
		int rel = kv_store_lease_release(c->st, lease);

		if (rel && !rc) {
			kvb_fail(DM_CMD, rel, "kv_store_lease_release");
			rc = rel;
		}
	}
	for (long i = hits; i < nblk && !rc; i++)
		rc = dm_write(c, (size_t)i);
	dm_count(&c->all, (size_t)nblk, hits);
	dm_count(follow ? &c->follow : &c->fresh, (size_t)nblk, hits);
	return rc;
}

static int dm_run(struct dm_ctx *c)
{
	struct cli_progress p;
	uint64_t t0 = kvb_now();
	int rc = 0;

	cli_progress_start(&p, "request", c->o.requests);
	for (uint64_t r = 0; r < c->o.requests && !rc; r++) {
		const struct dm_session *s;
		bool follow;

		if (kvb_stop) {
			kvb_fail(DM_CMD, -EINTR, "request %llu",
				 (unsigned long long)r);
			rc = -EINTR;
			break;
		}
		s = dm_next(&c->w, &follow);
		rc = dm_serve(c, s, follow);
		cli_progress_draw(&p, r + 1);
	}
	cli_progress_end(&p);
	c->run_ns = kvb_now() - t0;
	return rc;
}

/* ---- the store's life ---------------------------------------------- */

static int dm_paths(struct dm_ctx *c)
{
	int rc;

	if (!c->o.state) {
		rc = kvb_tmpdir(c->dir, sizeof(c->dir));
		if (rc) {
			kvb_fail(DM_CMD, rc,
				 "cannot make a temporary directory");
			return rc;
		}
		rc = kvb_pool_path(c->dir, c->pool, sizeof(c->pool));
		if (rc)
			kvb_fail(DM_CMD, rc, "cannot create a pool file");
		snprintf(c->index, sizeof(c->index), "%s/index", c->dir);
		return rc;
	}
	snprintf(c->dir, sizeof(c->dir), "%s", c->o.state);
	if (mkdir(c->dir, 0700) && errno != EEXIST) {
		rc = -errno;
		kvb_fail(DM_CMD, rc, "cannot make %s", c->dir);
		return rc;
	}
	snprintf(c->pool, sizeof(c->pool), "%s/demo.pool", c->dir);
	snprintf(c->index, sizeof(c->index), "%s/index", c->dir);
	return 0;
}

static int dm_ns(struct dm_ctx *c)
{
	uint32_t bt;
	int rc;

	rc = kv_store_ns_create(c->st, DM_NS, c->o.block_tokens, &c->ns);
	if (rc != -EEXIST)
		goto out;
	rc = kv_store_ns_find(c->st, DM_NS, &c->ns, &bt);
	if (!rc && bt != c->o.block_tokens) {
		kvb_fail(DM_CMD, 0,
			 "%s in %s has %u tokens per block, not %llu", DM_NS,
			 c->dir, bt, (unsigned long long)c->o.block_tokens);
		return -EINVAL;
	}
out:
	if (rc)
		kvb_fail(DM_CMD, rc, "namespace %s", DM_NS);
	return rc;
}

static int dm_open(struct dm_ctx *c)
{
	struct kv_store_stats ss;
	char *slash;
	int rc;

	slash = strrchr(c->pool, '/');
	*slash = '\0';
	rc = kvb_check_space(DM_CMD, c->pool,
			     c->o.slots * c->o.slot_size + 4096);
	*slash = '/';
	if (rc)
		return rc;
	memset(&c->cfg, 0, sizeof(c->cfg));
	c->cfg.pool_path = c->pool;
	c->cfg.index_dir = c->index;
	c->cfg.slot_size = c->o.slot_size;
	c->cfg.nslots = (uint32_t)c->o.slots;
	/* a temporary pool starts as an empty file, which is no pool; state
	 * the user keeps must never be formatted away */
	c->cfg.reformat = !c->o.state;
	rc = kv_store_open(&c->cfg, &c->st);
	if (rc) {
		kvb_fail(
			DM_CMD, rc, "cannot open the store on %s%s", c->pool,
			c->o.state && rc == -EINVAL
				? " (made with another --slots or --slot-size?)"
				: "");
		return rc;
	}
	if (!kv_store_stats(c->st, &ss))
		c->recovered0 = ss.recovered;
	return dm_ns(c);
}

static int dm_cmp_hash(const void *a, const void *b)
{
	return memcmp(a, b, KVFS_HASH_LEN);
}

/* the blocks this run sealed that are still cached, each once */
static size_t dm_cached(struct dm_ctx *c)
{
	struct kv_block_info bi;
	size_t n = 0;

	qsort(c->sealed, c->nsealed, KVFS_HASH_LEN, dm_cmp_hash);
	for (size_t i = 0; i < c->nsealed; i++) {
		if (n && !memcmp(c->sealed[n - 1], c->sealed[i], KVFS_HASH_LEN))
			continue;
		if (kv_store_stat(c->st, c->ns, c->sealed[i], &bi))
			continue;
		memmove(c->sealed[n++], c->sealed[i], KVFS_HASH_LEN);
	}
	c->nsealed = n;
	return n;
}

/* ---- summary -------------------------------------------------------- */

static double dm_pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static void dm_summary(const struct dm_ctx *c, const struct kv_store_stats *ss)
{
	char a[32], b[32], d[32];
	uint64_t bytes = c->o.slot_size;
	double secs = (double)c->run_ns / 1e9;

	printf("kvbench demo: %llu requests, seed %llu, %llu tokens per "
	       "block\npool: %llu slots x %llu KiB = %s\n\n",
	       (unsigned long long)c->o.requests, (unsigned long long)c->o.seed,
	       (unsigned long long)c->o.block_tokens,
	       (unsigned long long)c->o.slots,
	       (unsigned long long)(bytes >> 10),
	       kvb_fmt_bytes(a, sizeof(a), (double)(c->o.slots * bytes)));
	kvb_line(stdout, "requests",
		 "%llu in %.2f s: %llu new sessions, %llu follow-up turns",
		 (unsigned long long)c->all.requests, secs,
		 (unsigned long long)c->fresh.requests,
		 (unsigned long long)c->follow.requests);
	kvb_line(stdout, "blocks looked up", "%s",
		 cli_fmt_count(a, sizeof(a), (double)c->all.lookups));
	kvb_line(stdout, "block hit rate",
		 "%.1f%% (%s hit); follow-ups %.1f%%, new sessions %.1f%%",
		 dm_pct(c->all.hits, c->all.lookups),
		 cli_fmt_count(a, sizeof(a), (double)c->all.hits),
		 dm_pct(c->follow.hits, c->follow.lookups),
		 dm_pct(c->fresh.hits, c->fresh.lookups));
	kvb_line(stdout, "bytes reused",
		 "%s read from the store, every byte verified",
		 kvb_fmt_bytes(a, sizeof(a), (double)(c->all.hits * bytes)));
	kvb_line(stdout, "bytes written", "%s in %s new blocks",
		 kvb_fmt_bytes(a, sizeof(a), (double)(c->written * bytes)),
		 cli_fmt_count(b, sizeof(b), (double)c->written));
	if (c->present)
		kvb_line(stdout, "",
			 "%s more found cached past a miss (parent evicted)",
			 cli_fmt_count(b, sizeof(b), (double)c->present));
	kvb_line(stdout, "evictions", "%s",
		 cli_fmt_count(a, sizeof(a), (double)ss->total.evictions));
	cli_fmt_count(a, sizeof(a), kvb_rate(c->all.requests, c->run_ns));
	kvb_fmt_bytes(d, sizeof(d), kvb_rate(c->all.hits * bytes, c->read_ns));
	kvb_line(stdout, "throughput",
		 "%s requests/s; %s/s verified (get+compare+put)", a, d);
}

/* ---- restart -------------------------------------------------------- */

static int dm_verify_after(struct dm_ctx *c, size_t *checked)
{
	uint64_t rng = c->o.seed ^ 0x7265737461727421ull;
	size_t n = c->nsealed;

	/* a random sample when the pool is big; all of it when not */
	for (size_t i = 0; i < n && i < DM_VERIFY_MAX; i++) {
		size_t j = i + kvb_rand_below(&rng, n - i);
		uint8_t t[KVFS_HASH_LEN];
		int rc;

		memcpy(t, c->sealed[i], KVFS_HASH_LEN);
		memcpy(c->sealed[i], c->sealed[j], KVFS_HASH_LEN);
		memcpy(c->sealed[j], t, KVFS_HASH_LEN);
		rc = dm_read(c, c->sealed[i]);
		if (rc)
			return rc;
		*checked = i + 1;
	}
	return 0;
}

static int dm_restart(struct dm_ctx *c)
{
	struct kv_store_stats before, after;
	size_t known, checked = 0;
	uint32_t bt;
	uint64_t t0;
	int rc;

	rc = kv_store_stats(c->st, &before);
	if (rc)
		goto out_fail;
	known = dm_cached(c);
	kv_store_close(c->st);
	c->st = NULL;
	t0 = kvb_now();
	c->cfg.reformat = false; /* the point: keep what is there */
	rc = kv_store_open(&c->cfg, &c->st);
	if (rc)
		goto out_fail;
	t0 = kvb_now() - t0;
	rc = kv_store_ns_find(c->st, DM_NS, &c->ns, &bt);
	if (!rc)
		rc = kv_store_stats(c->st, &after);
	if (rc)
		goto out_fail;
	if (after.recovered != before.total.blocks) {
		kvb_fail(DM_CMD, 0,
			 "restart: %llu sealed blocks before, "
			 "%llu recovered (%llu dropped)",
			 (unsigned long long)before.total.blocks,
			 (unsigned long long)after.recovered,
			 (unsigned long long)after.recovery_dropped);
		return -EIO;
	}
	rc = dm_verify_after(c, &checked);
	if (rc)
		return rc;
	kvb_line(stdout, "restart",
		 "closed, reopened on the same pool and index in %.0f ms",
		 (double)t0 / 1e6);
	kvb_line(stdout, "", "recovered %llu sealed blocks, dropped %llu",
		 (unsigned long long)after.recovered,
		 (unsigned long long)after.recovery_dropped);
	kvb_line(stdout, "", "verified %zu of %zu byte-for-byte", checked,
		 known);
	return 0;
out_fail:
	kvb_fail(DM_CMD, rc, "restart");
	return rc;
}

/* ---- main ----------------------------------------------------------- */

static int dm_setup(struct dm_ctx *c)
{
	int rc;

	c->max_blocks = DM_MAX_TOKENS / c->o.block_tokens + 1;
	c->hashes = calloc(c->max_blocks, KVFS_HASH_LEN);
	rc = c->hashes ? dm_work_init(&c->w, c->o.seed) : -ENOMEM;
	if (rc) {
		kvb_fail(DM_CMD, rc, "allocating the workload");
		return rc;
	}
	rc = dm_paths(c);
	return rc ? rc : dm_open(c);
}

static void dm_teardown(struct dm_ctx *c, int rc)
{
	if (c->st)
		kv_store_close(c->st);
	free(c->sealed);
	free(c->hashes);
	dm_work_free(&c->w);
	if (rc || c->o.state || !c->o.keep)
		return;
	/* --keep: hand the temporary state to the user */
	kvb_cleanup_forget(c->dir);
	kvb_cleanup_forget(c->pool);
	printf("\nkept: pool %s, index %s\n", c->pool, c->index);
}

int kvb_demo_main(int argc, char **argv)
{
	struct kv_store_stats ss;
	struct dm_ctx c;
	int rc;

	memset(&c, 0, sizeof(c));
	rc = dm_parse(argc, argv, &c.o);
	if (rc)
		return rc < 0 ? KVB_EXIT_OK : rc;
	rc = dm_setup(&c);
	if (rc)
		goto out_teardown;
	if (c.recovered0)
		printf("state %s: %llu sealed blocks recovered at open\n\n",
		       c.dir, (unsigned long long)c.recovered0);
	rc = dm_run(&c);
	if (rc)
		goto out_teardown;
	rc = kv_store_stats(c.st, &ss);
	if (rc) {
		kvb_fail(DM_CMD, rc, "kv_store_stats");
		goto out_teardown;
	}
	dm_summary(&c, &ss);
	rc = dm_restart(&c);
out_teardown:
	dm_teardown(&c, rc);
	return rc ? KVB_EXIT_FAIL : KVB_EXIT_OK;
}
