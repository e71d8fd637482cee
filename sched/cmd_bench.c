/*
 * cmd_bench.c - `kvconductor bench`: scheduling decisions per second and
 * decision latency with a large index, beside the same decisions made by
 * a naive scan of every node's block list, in the same run.
 *
 * The cluster: P prefill instances (one per node) and 8 decode ones; N
 * blocks in chains of 256, each chain held whole by one node and as a
 * prefix of random length by up to three more.  A prompt is the first L
 * blocks of a random chain (L uniform in --min-blocks..--max-blocks);
 * half of them leave the chain at a random block for keys never seen.
 * Keys are random 64-bit values, as the first 8 bytes of SHA-256 names
 * are.  Every prompt is generated before timing.  A decision is committed
 * (the instance's queue grows) and completed 64 decisions later, outside
 * the timing, so queues hold work as in a live cluster.
 *
 * The naive decision finds each node's cached prefix by walking that
 * node's whole block list against a small hash set of the prompt's keys,
 * then decides with the same code (sched_schedule_lens); every naive
 * decision is compared with the index's.
 *
 * Only sched.h: the benchmark is a caller like the daemon, so it times
 * what a caller gets and cannot lean on the scheduler's internals.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "sched/cli.h"
#include "sched/sched.h"
#include "src/common/cli.h"
#include "src/common/clock.h"

#define CMD "bench"
#define CHAIN 256
#define NDECODE 8
#define WINDOW 64
#define STEP_S 0.01 /* simulated time between decisions */
#define TARGET_RATE 100000.0
#define TARGET_P99_US 50.0

struct bench_args {
	uint64_t blocks, nprefill, decisions, naive, min_blocks, max_blocks;
	uint64_t seed;
	bool json;
};

static const char bench_usage[] =
	"usage: kvconductor bench [--blocks N] [--prefill P] [--decisions D]\n"
	"         [--naive K] [--min-blocks A] [--max-blocks B] [--seed S]\n"
	"         [--json]\n"
	"\n"
	"Time scheduling decisions (kvcache-centric, lookahead, queue) with N\n"
	"indexed blocks and P prefill instances, beside the same decisions\n"
	"made by a naive scan of every node's block list.\n"
	"\n"
	"  -n, --blocks N      blocks in the index (default 1000000)\n"
	"  -p, --prefill P     prefill instances, one per node (default 32)\n"
	"  -d, --decisions D   timed decisions per policy (default 200000)\n"
	"  -k, --naive K       naive decisions, the first K (default 200)\n"
	"      --min-blocks A  shortest prompt, blocks (default 16)\n"
	"      --max-blocks B  longest prompt, blocks (default 256)\n"
	"      --seed S        workload seed (default 1)\n"
	"  -j, --json          one JSON object instead of the table\n";

void kvc_bench_usage(FILE *f)
{
	fputs(bench_usage, f);
}

enum { OPT_MIN = 256, OPT_MAX, OPT_SEED };

static const struct option bench_opts[] = {
	{ "blocks", required_argument, NULL, 'n' },
	{ "prefill", required_argument, NULL, 'p' },
	{ "decisions", required_argument, NULL, 'd' },
	{ "naive", required_argument, NULL, 'k' },
	{ "min-blocks", required_argument, NULL, OPT_MIN },
	{ "max-blocks", required_argument, NULL, OPT_MAX },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "json", no_argument, NULL, 'j' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* ---- the workload ------------------------------------------------------- */

struct workload {
	uint64_t *chain; /* nchains * CHAIN keys */
	uint64_t nchains;
	uint64_t **list; /* [nodes]: each node's blocks (naive view) */
	uint64_t *nlist, *caplist;
	uint64_t *prompt; /* decisions * max_blocks keys */
	uint32_t *plen;
	uint64_t inserts;
	uint32_t nodes_bytes; /* of a block's seen-by bitmap */
};

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int list_add(struct workload *w, uint32_t node, uint64_t key)
{
	if (w->nlist[node] == w->caplist[node]) {
		uint64_t cap = w->caplist[node] ? w->caplist[node] * 2 : 4096;
		uint64_t *v = realloc(w->list[node], cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		w->list[node] = v;
		w->caplist[node] = cap;
	}
	w->list[node][w->nlist[node]++] = key;
	return 0;
}

/* node holds the first len blocks of chain c; its list has each once */
static int hold(struct workload *w, uint8_t *seen, uint32_t node, uint64_t c,
		uint64_t len)
{
	for (uint64_t b = 0; b < len; b++) {
		uint64_t i = c * CHAIN + b;
		int rc;

		if (seen[i * w->nodes_bytes + node / 8] & (1u << (node % 8)))
			continue;
		seen[i * w->nodes_bytes + node / 8] |= 1u << (node % 8);
		rc = list_add(w, node, w->chain[i]);
		if (rc < 0)
			return rc;
		w->inserts++;
	}
	return 0;
}

/* the chains and which node holds what: the node lists, nothing indexed */
static int populate(const struct bench_args *a, struct workload *w,
		    uint64_t *seed)
{
	uint32_t np = (uint32_t)a->nprefill;
	uint8_t *seen;
	int rc = 0;

	w->nchains = (a->blocks + CHAIN - 1) / CHAIN;
	w->nodes_bytes = (np + 7) / 8;
	w->chain = malloc(w->nchains * CHAIN * sizeof(*w->chain));
	w->list = calloc(np, sizeof(*w->list));
	w->nlist = calloc(np, sizeof(*w->nlist));
	w->caplist = calloc(np, sizeof(*w->caplist));
	seen = calloc(w->nchains * CHAIN, w->nodes_bytes);
	if (!w->chain || !w->list || !w->nlist || !w->caplist || !seen) {
		free(seen);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < w->nchains * CHAIN; i++)
		w->chain[i] = rnd(seed);
	for (uint64_t c = 0; c < w->nchains && rc == 0; c++) {
		uint64_t len = c == w->nchains - 1 && a->blocks % CHAIN
				       ? a->blocks % CHAIN
				       : CHAIN;
		uint64_t extra = rnd(seed) % 4;

		rc = hold(w, seen, (uint32_t)(rnd(seed) % np), c, len);
		for (uint64_t k = 0; rc == 0 && k < extra; k++)
			rc = hold(w, seen, (uint32_t)(rnd(seed) % np), c,
				  1 + rnd(seed) % len);
	}
	free(seen);
	return rc;
}

/* every node's list into s as insert events, as kvfsd would send them */
static int index_lists(const struct workload *w, uint32_t np, struct sched *s)
{
	for (uint32_t n = 0; n < np; n++)
		for (uint64_t i = 0; i < w->nlist[n]; i++) {
			int rc = sched_block_insert(s, n, w->list[n][i]);

			if (rc < 0)
				return rc;
		}
	return 0;
}

static int make_prompts(const struct bench_args *a, struct workload *w,
			uint64_t *seed)
{
	uint64_t span = a->max_blocks - a->min_blocks + 1;

	w->prompt = malloc(a->decisions * a->max_blocks * sizeof(*w->prompt));
	w->plen = malloc(a->decisions * sizeof(*w->plen));
	if (!w->prompt || !w->plen)
		return -ENOMEM;
	for (uint64_t d = 0; d < a->decisions; d++) {
		uint64_t *p = w->prompt + d * a->max_blocks;
		uint64_t c = rnd(seed) % w->nchains;
		uint32_t len = (uint32_t)(a->min_blocks + rnd(seed) % span);
		uint32_t leave =
			rnd(seed) & 1 ? (uint32_t)(rnd(seed) % len) : len;

		for (uint32_t b = 0; b < len; b++)
			p[b] = b < leave && b < CHAIN ? w->chain[c * CHAIN + b]
						      : rnd(seed);
		w->plen[d] = len;
	}
	return 0;
}

static void workload_free(struct workload *w, uint32_t np)
{
	for (uint32_t n = 0; w->list && n < np; n++)
		free(w->list[n]);
	free(w->list);
	free(w->nlist);
	free(w->caplist);
	free(w->chain);
	free(w->prompt);
	free(w->plen);
}

/* ---- the naive scan ----------------------------------------------------- */

#define PSET 1024 /* > 2 * the longest prompt */

/* splitmix64's finalizer: spreads random and sequential keys alike */
static uint64_t mix(uint64_t k)
{
	k ^= k >> 30;
	k *= 0xbf58476d1ce4e5b9ull;
	k ^= k >> 27;
	k *= 0x94d049bb133111ebull;
	return k ^ (k >> 31);
}

struct pset {
	uint64_t key[PSET];
	uint16_t pos[PSET];
	uint8_t used[PSET];
};

static void pset_build(struct pset *ps, const uint64_t *keys, uint32_t n)
{
	memset(ps->used, 0, sizeof(ps->used));
	for (uint32_t i = 0; i < n; i++) {
		uint32_t h = (uint32_t)mix(keys[i]) & (PSET - 1);

		while (ps->used[h])
			h = (h + 1) & (PSET - 1);
		ps->used[h] = 1;
		ps->key[h] = keys[i];
		ps->pos[h] = (uint16_t)i;
	}
}

static int pset_pos(const struct pset *ps, uint64_t key)
{
	uint32_t h = (uint32_t)mix(key) & (PSET - 1);

	while (ps->used[h]) {
		if (ps->key[h] == key)
			return ps->pos[h];
		h = (h + 1) & (PSET - 1);
	}
	return -1;
}

/* every node's list, all of it: which prompt blocks does it hold? */
static void naive_lens(const struct workload *w, uint32_t nnodes, uint32_t np,
		       const uint64_t *keys, uint32_t n, struct pset *ps,
		       uint32_t *lens)
{
	uint64_t held[(PSET / 2 + 63) / 64];

	pset_build(ps, keys, n);
	for (uint32_t node = 0; node < nnodes; node++) {
		uint32_t len = 0;

		lens[node] = 0;
		if (node >= np)
			continue; /* decode nodes hold nothing here */
		memset(held, 0, sizeof(held));
		for (uint64_t i = 0; i < w->nlist[node]; i++) {
			int pos = pset_pos(ps, w->list[node][i]);

			if (pos >= 0)
				held[pos / 64] |= 1ull << (pos % 64);
		}
		while (len < n && held[len / 64] >> (len % 64) & 1)
			len++;
		lens[node] = len;
	}
}

/* ---- timing ------------------------------------------------------------- */

struct timing {
	const char *name;
	uint64_t n;
	double seconds;
	double p50_us, p99_us, max_us;
	uint64_t mismatches;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static void timing_finish(struct timing *t, uint64_t *lat, uint64_t n,
			  uint64_t total_ns)
{
	t->n = n;
	t->seconds = (double)total_ns / 1e9;
	if (!n)
		return;
	qsort(lat, n, sizeof(*lat), cmp_u64);
	t->p50_us = (double)lat[(n - 1) / 2] / 1e3;
	t->p99_us = (double)lat[(n * 99 + 99) / 100 - 1] / 1e3;
	t->max_us = (double)lat[n - 1] / 1e3;
}

static struct sched_req prompt_req(const struct bench_args *a,
				   const struct workload *w, uint64_t d)
{
	struct sched_req r = {
		.keys = w->prompt + d * a->max_blocks,
		.nkeys = w->plen[d],
		.input_tokens = (uint64_t)w->plen[d] * SCHED_DEF_BLOCK_TOKENS,
		.output_tokens = 128,
	};

	return r;
}

/* complete what was decided WINDOW decisions ago */
static void retire(struct sched *s, uint64_t *ids, uint64_t d, double now)
{
	uint64_t *slot = &ids[d % WINDOW];

	if (*slot)
		sched_complete(s, *slot, now);
	*slot = 0;
}

static int time_index(const struct bench_args *a, const struct workload *w,
		      struct sched *s, struct timing *t, uint64_t *lat)
{
	uint64_t ids[WINDOW] = { 0 }, total = 0;
	struct sched_decision dec;

	for (uint64_t d = 0; d < a->decisions; d++) {
		struct sched_req r = prompt_req(a, w, d);
		double now = (double)d * STEP_S;
		uint64_t t0, t1;
		int rc;

		retire(s, ids, d, now);
		t0 = kvfs_mono_ns();
		rc = sched_schedule(s, &r, now, &dec);
		t1 = kvfs_mono_ns();
		if (rc < 0)
			return rc;
		lat[d] = t1 - t0;
		total += t1 - t0;
		ids[d % WINDOW] = dec.id;
	}
	timing_finish(t, lat, a->decisions, total);
	return 0;
}

/* the first K decisions again, on a scheduler with the same history, the
 * prefix found by scanning; each compared with the index's decision */
static int time_naive(const struct bench_args *a, const struct workload *w,
		      struct sched *idx, struct sched *nv, struct timing *t,
		      uint64_t *lat)
{
	uint64_t ids_i[WINDOW] = { 0 }, ids_n[WINDOW] = { 0 }, total = 0;
	uint64_t k = a->naive < a->decisions ? a->naive : a->decisions;
	uint32_t nnodes = sched_nnodes(nv);
	uint32_t *lens = calloc(nnodes, sizeof(*lens));
	struct pset *ps = malloc(sizeof(*ps));
	struct sched_decision di, dn;
	int rc = -ENOMEM;

	if (!lens || !ps)
		goto out_free;
	for (uint64_t d = 0; d < k; d++) {
		struct sched_req r = prompt_req(a, w, d);
		double now = (double)d * STEP_S;
		uint64_t t0, t1;

		retire(idx, ids_i, d, now);
		retire(nv, ids_n, d, now);
		rc = sched_schedule(idx, &r, now, &di);
		if (rc < 0)
			goto out_free;
		t0 = kvfs_mono_ns();
		naive_lens(w, nnodes, (uint32_t)a->nprefill, r.keys, r.nkeys,
			   ps, lens);
		rc = sched_schedule_lens(nv, &r, lens, now, &dn);
		t1 = kvfs_mono_ns();
		if (rc < 0)
			goto out_free;
		lat[d] = t1 - t0;
		total += t1 - t0;
		t->mismatches += di.prefill != dn.prefill ||
				 di.reuse_blocks != dn.reuse_blocks ||
				 di.local_blocks != dn.local_blocks;
		ids_i[d % WINDOW] = di.id;
		ids_n[d % WINDOW] = dn.id;
	}
	timing_finish(t, lat, k, total);
	rc = 0;
out_free:
	free(lens);
	free(ps);
	return rc;
}

/* ---- output ------------------------------------------------------------- */

static double rate(const struct timing *t)
{
	return t->seconds > 0 ? (double)t->n / t->seconds : 0;
}

static bool pass(const struct timing *t)
{
	return rate(t) >= TARGET_RATE && t->p99_us <= TARGET_P99_US;
}

static void print_table(const struct bench_args *a, const struct workload *w,
			double build_s, const struct timing *t, int nt)
{
	char b1[32], b2[32];

	printf("kvconductor bench: %s blocks in the index (%s node copies), "
	       "%llu prefill instances, prompts of %llu..%llu blocks\n",
	       cli_fmt_count(b1, sizeof(b1), (double)a->blocks),
	       cli_fmt_count(b2, sizeof(b2), (double)w->inserts),
	       (unsigned long long)a->nprefill,
	       (unsigned long long)a->min_blocks,
	       (unsigned long long)a->max_blocks);
	printf("index built from %s insert events in %.2f s (%s events/s)\n\n",
	       cli_fmt_count(b1, sizeof(b1), (double)w->inserts), build_s,
	       cli_fmt_count(b2, sizeof(b2),
			     build_s > 0 ? (double)w->inserts / build_s : 0));
	printf("%-22s %10s %14s %9s %9s %9s  %s\n", "decision", "n",
	       "decisions/s", "p50 us", "p99 us", "max us", "result");
	for (int i = 0; i < nt; i++)
		printf("%-22s %10llu %14s %9.2f %9.2f %9.1f  %s\n", t[i].name,
		       (unsigned long long)t[i].n,
		       cli_fmt_count(b1, sizeof(b1), rate(&t[i])), t[i].p50_us,
		       t[i].p99_us, t[i].max_us,
		       i == nt - 1   ? (t[i].mismatches ? "MISMATCH" : "-")
		       : pass(&t[i]) ? "PASS"
				     : "MISS");
	printf("\ntargets: >= %s decisions/s on one core and p99 <= %.0f us.\n",
	       cli_fmt_count(b1, sizeof(b1), TARGET_RATE), TARGET_P99_US);
	printf("index / naive scan: %.0fx decisions/s; %llu of %llu naive "
	       "decisions differ from the index's.\n",
	       rate(&t[nt - 1]) > 0 ? rate(&t[0]) / rate(&t[nt - 1]) : 0,
	       (unsigned long long)t[nt - 1].mismatches,
	       (unsigned long long)t[nt - 1].n);
}

static void print_json(const struct bench_args *a, const struct workload *w,
		       double build_s, const struct timing *t, int nt)
{
	bool ok = true;

	printf("{\"blocks\":%llu,\"copies\":%llu,\"prefill\":%llu,"
	       "\"min_blocks\":%llu,\"max_blocks\":%llu,\"build_s\":%.6f,"
	       "\"runs\":{",
	       (unsigned long long)a->blocks, (unsigned long long)w->inserts,
	       (unsigned long long)a->nprefill,
	       (unsigned long long)a->min_blocks,
	       (unsigned long long)a->max_blocks, build_s);
	for (int i = 0; i < nt; i++)
		printf("%s\"%s\":{\"n\":%llu,\"per_s\":%.1f,\"p50_us\":%.3f,"
		       "\"p99_us\":%.3f,\"max_us\":%.3f,\"mismatches\":%llu}",
		       i ? "," : "", t[i].name, (unsigned long long)t[i].n,
		       rate(&t[i]), t[i].p50_us, t[i].p99_us, t[i].max_us,
		       (unsigned long long)t[i].mismatches);
	for (int i = 0; i < nt - 1; i++)
		ok = ok && pass(&t[i]);
	printf("},\"pass\":%s}\n", ok ? "true" : "false");
}

/* ---- running ------------------------------------------------------------ */

/*
 * s[0], s[1] and s[2]: the timed index runs; s[3]: the index side of
 * the comparison, with the same fresh history as s[4], the naive one,
 * whose own index stays empty.  The queue policy's decision is its
 * placement onto the held queues (its dispatch, sched_next, is another
 * call, made when an instance is free).
 */
#define NSCHED 5

static int make_scheds(const struct bench_args *a, struct sched **s)
{
	static const char *names[NSCHED] = { "kvcache-centric", "lookahead",
					     "queue", "kvcache-centric",
					     "kvcache-centric" };
	struct sched_config cfg;
	struct sched_setup su = {
		.nprefill = (uint32_t)a->nprefill,
		.ndecode = NDECODE,
		.seed = a->seed,
	};
	int rc;

	sched_config_default(&cfg);
	for (int i = 0; i < NSCHED; i++) {
		su.expect_blocks = i < NSCHED - 1 ? a->blocks : 16;
		rc = sched_create(&cfg, &su, sched_policy_find(names[i]),
				  &s[i]);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int build(const struct bench_args *a, struct workload *w,
		 struct sched **s, double *build_s)
{
	uint64_t seed = a->seed, t0;
	int rc;

	rc = populate(a, w, &seed);
	if (rc == 0)
		rc = make_prompts(a, w, &seed);
	t0 = kvfs_mono_ns();
	if (rc == 0)
		rc = index_lists(w, (uint32_t)a->nprefill, s[0]);
	*build_s = (double)(kvfs_mono_ns() - t0) / 1e9;
	for (int i = 1; rc == 0 && i < NSCHED - 1; i++)
		rc = index_lists(w, (uint32_t)a->nprefill, s[i]);
	return rc;
}

static int bench(const struct bench_args *a)
{
	struct timing t[4] = { { .name = "index kvcache-centric" },
			       { .name = "index lookahead" },
			       { .name = "index queue" },
			       { .name = "naive scan" } };
	struct sched *s[NSCHED] = { NULL };
	struct workload w = { 0 };
	double build_s = 0;
	uint64_t *lat;
	int rc;

	lat = malloc(a->decisions * sizeof(*lat));
	rc = lat ? make_scheds(a, s) : -ENOMEM;
	if (rc == 0)
		rc = build(a, &w, s, &build_s);
	if (rc == 0)
		rc = time_index(a, &w, s[0], &t[0], lat);
	if (rc == 0)
		rc = time_index(a, &w, s[1], &t[1], lat);
	if (rc == 0)
		rc = time_index(a, &w, s[2], &t[2], lat);
	if (rc == 0)
		rc = time_naive(a, &w, s[3], s[4], &t[3], lat);
	if (rc == 0 && a->json)
		print_json(a, &w, build_s, t, 4);
	else if (rc == 0)
		print_table(a, &w, build_s, t, 4);
	if (rc < 0)
		cli_fail(CMD, rc, "bench");
	for (int i = 0; i < NSCHED; i++)
		sched_destroy(s[i]);
	workload_free(&w, (uint32_t)a->nprefill);
	free(lat);
	return rc < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

static int parse_opt(struct bench_args *a, int c, char **argv)
{
	switch (c) {
	case 'n':
		return cli_parse_u64(CMD, "--blocks", optarg, CHAIN,
				     UINT64_C(1) << 28, &a->blocks);
	case 'p':
		return cli_parse_u64(CMD, "--prefill", optarg, 1,
				     SCHED_MAX_INSTANCES - NDECODE,
				     &a->nprefill);
	case 'd':
		return cli_parse_u64(CMD, "--decisions", optarg, 1,
				     UINT64_C(1) << 26, &a->decisions);
	case 'k':
		return cli_parse_u64(CMD, "--naive", optarg, 0,
				     UINT64_C(1) << 26, &a->naive);
	case OPT_MIN:
		return cli_parse_u64(CMD, "--min-blocks", optarg, 1, CHAIN,
				     &a->min_blocks);
	case OPT_MAX:
		return cli_parse_u64(CMD, "--max-blocks", optarg, 1, CHAIN,
				     &a->max_blocks);
	case OPT_SEED:
		return cli_parse_u64(CMD, "--seed", optarg, 0, UINT64_MAX,
				     &a->seed);
	case 'j':
		a->json = true;
		return 0;
	}
	cli_bad_option(CMD, c, argv);
	return -EINVAL;
}

int kvc_bench_main(int argc, char **argv)
{
	struct bench_args a = {
		.blocks = 1000000,
		.nprefill = 32,
		.decisions = 200000,
		.naive = 200,
		.min_blocks = 16,
		.max_blocks = 256,
		.seed = 1,
	};
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":n:p:d:k:jh", bench_opts, NULL)) !=
	       -1) {
		if (c == 'h') {
			kvc_bench_usage(stdout);
			return CLI_EXIT_OK;
		}
		if (parse_opt(&a, c, argv) < 0)
			return CLI_EXIT_USAGE;
	}
	if (optind < argc)
		return cli_usage_error(CMD, "unexpected argument '%s'",
				       argv[optind]);
	if (a.min_blocks > a.max_blocks)
		return cli_usage_error(CMD, "--min-blocks exceeds "
					    "--max-blocks");
	return bench(&a);
}
