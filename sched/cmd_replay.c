/*
 * cmd_replay.c - `kvconductor replay`: a trace through the scheduler and
 * a simulated cluster (replay.h), one policy or all side by side.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "sched/cli.h"
#include "src/common/cli.h"
#include "sched/replay.h"

#define CMD "replay"
#define DEF_INSTANCES 8
#define DEF_CACHE_BLOCKS 6144
#define DEF_POLICY "lookahead"
#define MAX_SPEEDS 16
#define MAX_SETS 32

struct replay_args {
	const char *trace;
	const char *policy;
	const char *config;
	uint64_t nprefill, ndecode, cache_blocks, seed;
	double slo_ttft, slo_tbt, speed, balance; /* < 0: not given */
	const char *reject;
	bool json, skip_bad, compare, speed_given;
	double speeds[MAX_SPEEDS];
	size_t nspeeds; /* 0: --speeds not given, the one --speed */
	const char *sets[MAX_SETS];
	size_t nsets;
};

static const char replay_usage[] =
	"usage: kvconductor replay --trace FILE [--prefill N] [--decode M]\n"
	"         [--policy P | --compare] [--cache-blocks C]\n"
	"         [--slo-ttft S] [--slo-tbt S] [--reject MODE]\n"
	"         [--balance R] [--speed X | --speeds X,Y,...] [--seed N]\n"
	"         [--config FILE] [--set KEY=VALUE]... [--skip-bad] [--json]\n"
	"\n"
	"Discrete-event replay of a Mooncake-format trace (JSON lines:\n"
	"timestamp ms, input_length, output_length, hash_ids of 512-token\n"
	"blocks) on N prefill and M decode instances.\n"
	"\n"
	"  -t, --trace FILE      the trace (\"-\": standard input)\n"
	"  -p, --prefill N       prefill instances, one per node (default 8)\n"
	"  -d, --decode M        decode instances (default 8)\n"
	"  -P, --policy P        routing policy (default lookahead)\n"
	"  -c, --compare         every policy on the same trace, side by side\n"
	"  -C, --cache-blocks C  blocks each node caches (default 6144)\n"
	"      --slo-ttft S      TTFT SLO, seconds (default 30)\n"
	"      --slo-tbt S       TBT SLO, seconds (default 0.1)\n"
	"  -r, --reject MODE     early rejection: off, early, predict\n"
	"                        (default off)\n"
	"      --balance R       kvcache-centric balancing threshold (default "
	"1)\n"
	"  -s, --speed X         arrivals X times faster (default 1)\n"
	"      --speeds LIST     one run per speed of the comma-separated\n"
	"                        LIST (at most 16), one table\n"
	"      --seed N          seed of the random policy (default 1)\n"
	"  -f, --config FILE     cost model and SLOs (kvconductor fit writes "
	"one)\n"
	"      --set KEY=VALUE   a config key over the config (repeatable)\n"
	"      --skip-bad        skip malformed lines, counting them\n"
	"  -j, --json            one JSON object instead of the table\n"
	"\n"
	"Policies:\n";

void kvc_replay_usage(FILE *f)
{
	fputs(replay_usage, f);
	for (size_t i = 0; i < sched_policy_count(); i++) {
		const struct sched_policy_ops *p = sched_policy_at(i);

		fprintf(f, "  %-16s %s\n", sched_policy_name(p),
			sched_policy_summary(p));
	}
}

enum {
	OPT_SLO_TTFT = 256,
	OPT_SLO_TBT,
	OPT_SKIP_BAD,
	OPT_BALANCE,
	OPT_SEED,
	OPT_SPEEDS,
	OPT_SET,
};

static const struct option replay_opts[] = {
	{ "trace", required_argument, NULL, 't' },
	{ "prefill", required_argument, NULL, 'p' },
	{ "decode", required_argument, NULL, 'd' },
	{ "policy", required_argument, NULL, 'P' },
	{ "compare", no_argument, NULL, 'c' },
	{ "cache-blocks", required_argument, NULL, 'C' },
	{ "slo-ttft", required_argument, NULL, OPT_SLO_TTFT },
	{ "slo-tbt", required_argument, NULL, OPT_SLO_TBT },
	{ "reject", required_argument, NULL, 'r' },
	{ "balance", required_argument, NULL, OPT_BALANCE },
	{ "speed", required_argument, NULL, 's' },
	{ "speeds", required_argument, NULL, OPT_SPEEDS },
	{ "set", required_argument, NULL, OPT_SET },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "config", required_argument, NULL, 'f' },
	{ "skip-bad", no_argument, NULL, OPT_SKIP_BAD },
	{ "json", no_argument, NULL, 'j' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* "1,1.25,1.5,2" */
static int parse_speeds(struct replay_args *a, const char *arg)
{
	char buf[256], *save = NULL, *tok;
	int rc;

	if (strlen(arg) >= sizeof(buf)) {
		cli_usage_error(CMD, "--speeds: list too long");
		return -EINVAL;
	}
	snprintf(buf, sizeof(buf), "%s", arg);
	a->nspeeds = 0;
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (a->nspeeds == MAX_SPEEDS) {
			cli_usage_error(CMD, "--speeds: at most %d speeds",
					MAX_SPEEDS);
			return -EINVAL;
		}
		rc = cli_parse_double(CMD, "--speeds", tok, 0, false, 1e6,
				      &a->speeds[a->nspeeds]);
		if (rc < 0)
			return rc;
		a->nspeeds++;
	}
	if (!a->nspeeds) {
		cli_usage_error(CMD, "--speeds: no speed in '%s'", arg);
		return -EINVAL;
	}
	return 0;
}

static int parse_opt(struct replay_args *a, int c, char **argv)
{
	switch (c) {
	case 't':
		a->trace = optarg;
		return 0;
	case 'P':
		a->policy = optarg;
		return 0;
	case 'f':
		a->config = optarg;
		return 0;
	case 'r':
		a->reject = optarg;
		return 0;
	case 'c':
		a->compare = true;
		return 0;
	case 'j':
		a->json = true;
		return 0;
	case OPT_SKIP_BAD:
		a->skip_bad = true;
		return 0;
	case 'p':
		return cli_parse_u64(CMD, "--prefill", optarg, 1,
				     SCHED_MAX_INSTANCES, &a->nprefill);
	case 'd':
		return cli_parse_u64(CMD, "--decode", optarg, 1,
				     SCHED_MAX_INSTANCES, &a->ndecode);
	case 'C':
		return cli_parse_u64(CMD, "--cache-blocks", optarg, 1, 1u << 30,
				     &a->cache_blocks);
	case OPT_SEED:
		return cli_parse_u64(CMD, "--seed", optarg, 0, UINT64_MAX,
				     &a->seed);
	case OPT_SLO_TTFT:
		return cli_parse_double(CMD, "--slo-ttft", optarg, 0, false,
					1e9, &a->slo_ttft);
	case OPT_SLO_TBT:
		return cli_parse_double(CMD, "--slo-tbt", optarg, 0, false, 1e9,
					&a->slo_tbt);
	case OPT_BALANCE:
		return cli_parse_double(CMD, "--balance", optarg, 1, true, 1e9,
					&a->balance);
	case 's':
		a->speed_given = true;
		return cli_parse_double(CMD, "--speed", optarg, 0, false, 1e6,
					&a->speed);
	case OPT_SPEEDS:
		return parse_speeds(a, optarg);
	case OPT_SET:
		if (a->nsets == MAX_SETS) {
			cli_usage_error(CMD, "--set: at most %d", MAX_SETS);
			return -EINVAL;
		}
		a->sets[a->nsets++] = optarg;
		return 0;
	}
	return cli_bad_option(CMD, c, argv) ? -EINVAL : 0;
}

/* 1: --help was asked for; 0: parsed; -EINVAL: one line printed */
static int parse_args(struct replay_args *a, int argc, char **argv)
{
	int c;

	*a = (struct replay_args){
		.nprefill = DEF_INSTANCES,
		.ndecode = DEF_INSTANCES,
		.cache_blocks = DEF_CACHE_BLOCKS,
		.seed = 1,
		.slo_ttft = -1,
		.slo_tbt = -1,
		.speed = 1,
		.balance = -1,
	};
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":t:p:d:P:cC:r:s:f:jh", replay_opts,
				NULL)) != -1) {
		if (c == 'h')
			return 1;
		if (parse_opt(a, c, argv) < 0)
			return -EINVAL;
	}
	if (optind < argc) {
		cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
		return -EINVAL;
	}
	if (!a->trace) {
		cli_usage_error(CMD, "--trace FILE is required");
		return -EINVAL;
	}
	/* every instance is a node of the index */
	if (a->nprefill + a->ndecode > SCHED_MAX_INSTANCES) {
		cli_usage_error(CMD,
				"--prefill + --decode: at most %d "
				"instances in all",
				SCHED_MAX_INSTANCES);
		return -EINVAL;
	}
	if (a->nspeeds && a->speed_given) {
		cli_usage_error(CMD, "--speed and --speeds: one of them");
		return -EINVAL;
	}
	if (a->compare && a->policy) {
		cli_usage_error(CMD, "--compare runs every policy: no "
				     "--policy");
		return -EINVAL;
	}
	return 0;
}

/* the config: defaults, then --config, then the options that override */
static int build_config(const struct replay_args *a, struct sched_config *c)
{
	char err[512];
	int rc;

	sched_config_default(c);
	if (a->config) {
		rc = sched_config_load(c, a->config, err, sizeof(err));
		if (rc < 0) {
			cli_fail(CMD, 0, "%s", err);
			return rc;
		}
	}
	if (a->slo_ttft > 0)
		c->slo_ttft = a->slo_ttft;
	if (a->slo_tbt > 0)
		c->slo_tbt = a->slo_tbt;
	if (a->balance >= 1)
		c->balance = a->balance;
	if (a->reject && sched_reject_parse(a->reject, &c->reject) < 0) {
		cli_usage_error(CMD,
				"--reject: '%s' is not off, early or "
				"predict",
				a->reject);
		return -EINVAL;
	}
	for (size_t i = 0; i < a->nsets; i++)
		if (sched_config_set(c, a->sets[i], err, sizeof(err)) < 0) {
			cli_usage_error(CMD, "%s", err);
			return -EINVAL;
		}
	return 0;
}

/* ---- output ------------------------------------------------------------- */

static void print_header(FILE *f, const struct replay_args *a,
			 const struct sched_config *c,
			 const struct sched_trace *t)
{
	fprintf(f, "kvconductor replay: %s, %zu requests", a->trace, t->n);
	if (t->skipped)
		fprintf(f, " (%llu bad lines skipped)",
			(unsigned long long)t->skipped);
	fprintf(f, ", %llu prefill + %llu decode instances\n",
		(unsigned long long)a->nprefill,
		(unsigned long long)a->ndecode);
	fprintf(f,
		"cache %llu blocks a node; SLO TTFT %g s, TBT %g s; "
		"reject %s; speed ",
		(unsigned long long)a->cache_blocks, c->slo_ttft, c->slo_tbt,
		sched_reject_name(c->reject));
	if (!a->nspeeds)
		fprintf(f, "%g", a->speed);
	for (size_t i = 0; i < a->nspeeds; i++)
		fprintf(f, "%s%g", i ? "," : "", a->speeds[i]);
	fputs("\n\n", f);
}

static void print_one(FILE *f, const struct sched_replay_result *r)
{
	double pct = r->blocks ? 100.0 / (double)r->blocks : 0;
	char ev[32];

	fprintf(f, "  policy            %s\n", r->policy);
	fprintf(f,
		"  requests          %llu (%llu rejected: %llu TTFT, "
		"%llu TBT)\n",
		(unsigned long long)r->requests,
		(unsigned long long)r->rejected,
		(unsigned long long)r->rejected_ttft,
		(unsigned long long)r->rejected_tbt);
	fprintf(f,
		"  block hit rate    %.1f%% (%.1f%% local, %.1f%% fetched); "
		"%s evictions\n",
		100 * r->hit_rate, pct * (double)r->hit_local,
		pct * (double)r->hit_remote,
		cli_fmt_count(ev, sizeof(ev), (double)r->evictions));
	fprintf(f,
		"  TTFT              mean %.2f s, p50 %.2f s, p90 %.2f s, "
		"p99 %.2f s\n",
		r->ttft_mean, r->ttft_p50, r->ttft_p90, r->ttft_p99);
	fprintf(f,
		"  TBT               p50 %.1f ms, p90 %.1f ms, "
		"p99 %.1f ms\n",
		1e3 * r->tbt_p50, 1e3 * r->tbt_p90, 1e3 * r->tbt_p99);
	fprintf(f, "  SLO attainment    %.1f%% (%llu of %llu met both)\n",
		100 * r->attainment, (unsigned long long)r->slo_met,
		(unsigned long long)r->requests);
	fprintf(f,
		"  capacity          %.3f req/s met both SLOs, over %.1f s "
		"of arrivals\n",
		r->capacity, r->arrival_span);
	fprintf(f,
		"  replay            %.1f s simulated in %.3f s CPU "
		"(%.3f s wall)\n",
		r->span, r->cpu_s, r->wall_s);
}

static void print_table(FILE *f, const struct sched_replay_result *r, size_t n)
{
	fprintf(f, "%-16s %8s %6s %9s %7s %7s %7s %7s %7s %7s %6s %8s %6s\n",
		"policy", "rejected", "hit%", "TTFT mean", "p50", "p90", "p99",
		"TBT p50", "p90", "p99", "SLO%", "req/s", "cpu s");
	for (size_t i = 0; i < n; i++)
		fprintf(f,
			"%-16s %8llu %6.1f %8.2fs %6.2fs %6.2fs %6.2fs "
			"%5.1fms %5.1fms %5.1fms %6.1f %8.3f %6.3f\n",
			r[i].policy, (unsigned long long)r[i].rejected,
			100 * r[i].hit_rate, r[i].ttft_mean, r[i].ttft_p50,
			r[i].ttft_p90, r[i].ttft_p99, 1e3 * r[i].tbt_p50,
			1e3 * r[i].tbt_p90, 1e3 * r[i].tbt_p99,
			100 * r[i].attainment, r[i].capacity, r[i].cpu_s);
}

/*
 * The sweep: one row per speed and policy, every policy under the same
 * admission mode; "vs k-c" is the mean TTFT against kvcache-centric's at
 * that speed, when it ran.
 */
static void print_sweep(FILE *f, const struct sched_replay_result *r, size_t n,
			size_t per)
{
	fprintf(f, "%-6s %-16s %8s %6s %9s %7s %7s %7s %7s %7s %7s %6s\n",
		"speed", "policy", "rejected", "SLO%", "TTFT mean", "p50",
		"p90", "p99", "max", "vs k-c", "TBT p99", "hit%");
	for (size_t i = 0; i < n; i++) {
		const struct sched_replay_result *x = &r[i], *k = NULL;
		char vs[16] = "-";

		for (size_t j = i - i % per; j < i - i % per + per; j++)
			if (!strcmp(r[j].policy, "kvcache-centric"))
				k = &r[j];
		if (k && k->ttft_mean > 0)
			snprintf(vs, sizeof(vs), "%+.0f%%",
				 100 * (x->ttft_mean / k->ttft_mean - 1));
		if (i && i % per == 0)
			fputc('\n', f);
		fprintf(f,
			"%-6g %-16s %8llu %6.1f %8.2fs %6.2fs %6.2fs %6.2fs "
			"%6.1fs %7s %5.1fms %6.1f\n",
			x->speed, x->policy, (unsigned long long)x->rejected,
			100 * x->attainment, x->ttft_mean, x->ttft_p50,
			x->ttft_p90, x->ttft_p99, x->ttft_max, vs,
			1e3 * x->tbt_p99, 100 * x->hit_rate);
	}
}

static void json_result(FILE *f, const struct sched_replay_result *r)
{
	fprintf(f,
		"{\"policy\":\"%s\",\"requests\":%llu,\"served\":%llu,"
		"\"rejected\":%llu,\"rejected_ttft\":%llu,"
		"\"rejected_tbt\":%llu,\"blocks\":%llu,\"hit_local\":%llu,"
		"\"hit_remote\":%llu,\"hit_rate\":%.6f,\"evictions\":%llu,",
		r->policy, (unsigned long long)r->requests,
		(unsigned long long)r->served, (unsigned long long)r->rejected,
		(unsigned long long)r->rejected_ttft,
		(unsigned long long)r->rejected_tbt,
		(unsigned long long)r->blocks, (unsigned long long)r->hit_local,
		(unsigned long long)r->hit_remote, r->hit_rate,
		(unsigned long long)r->evictions);
	fprintf(f,
		"\"ttft_mean\":%.6f,\"ttft_p50\":%.6f,\"ttft_p90\":%.6f,"
		"\"ttft_p99\":%.6f,\"ttft_max\":%.6f,\"speed\":%g,"
		"\"tbt_p50\":%.6f,\"tbt_p90\":%.6f,"
		"\"tbt_p99\":%.6f,\"slo_met\":%llu,\"attainment\":%.6f,"
		"\"capacity_rps\":%.6f,\"span_s\":%.3f,"
		"\"arrival_span_s\":%.3f,\"cpu_s\":%.6f,\"wall_s\":%.6f}",
		r->ttft_mean, r->ttft_p50, r->ttft_p90, r->ttft_p99,
		r->ttft_max, r->speed, r->tbt_p50, r->tbt_p90, r->tbt_p99,
		(unsigned long long)r->slo_met, r->attainment, r->capacity,
		r->span, r->arrival_span, r->cpu_s, r->wall_s);
}

static void print_json(FILE *f, const struct replay_args *a,
		       const struct sched_config *c,
		       const struct sched_trace *t,
		       const struct sched_replay_result *r, size_t n)
{
	fputs("{\"trace\":", f);
	/* a path is bytes; only escape what JSON requires */
	fputc('"', f);
	for (const char *p = a->trace; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if ((unsigned char)*p < 0x20)
			fprintf(f, "\\u%04x", (unsigned char)*p);
		else
			fputc(*p, f);
	}
	fprintf(f,
		"\",\"requests\":%zu,\"skipped\":%llu,\"prefill\":%llu,"
		"\"decode\":%llu,\"cache_blocks\":%llu,\"slo_ttft\":%g,"
		"\"slo_tbt\":%g,\"reject\":\"%s\",\"speed\":%g,"
		"\"results\":[",
		t->n, (unsigned long long)t->skipped,
		(unsigned long long)a->nprefill, (unsigned long long)a->ndecode,
		(unsigned long long)a->cache_blocks, c->slo_ttft, c->slo_tbt,
		sched_reject_name(c->reject),
		a->nspeeds ? a->speeds[0] : a->speed);
	for (size_t i = 0; i < n; i++) {
		if (i)
			fputc(',', f);
		json_result(f, &r[i]);
	}
	fputs("]}\n", f);
}

/* ---- running ------------------------------------------------------------ */

static void on_progress(void *arg, size_t done, size_t total)
{
	struct cli_progress *p = arg;

	p->total = total;
	cli_progress_draw(p, done);
}

static int run_one(const struct replay_args *a, const struct sched_config *c,
		   const struct sched_trace *t,
		   const struct sched_policy_ops *p, double speed,
		   struct sched_replay_result *r)
{
	struct cli_progress prog;
	struct sched_replay_opts o = {
		.cfg = c,
		.policy = p,
		.nprefill = (uint32_t)a->nprefill,
		.ndecode = (uint32_t)a->ndecode,
		.cache_blocks = a->cache_blocks,
		.speed = speed,
		.seed = a->seed,
		.progress = on_progress,
		.progress_arg = &prog,
	};
	int rc;

	cli_progress_start(&prog, sched_policy_name(p), t->n);
	rc = sched_replay_run(t, &o, r);
	cli_progress_end(&prog);
	if (rc < 0)
		cli_fail(CMD, rc, "replay with %s", sched_policy_name(p));
	return rc;
}

static int run_all(const struct replay_args *a, const struct sched_config *c,
		   const struct sched_trace *t)
{
	size_t per = a->compare ? sched_policy_count() : 1;
	size_t ns = a->nspeeds ? a->nspeeds : 1, n = per * ns;
	struct sched_replay_result *r = calloc(n, sizeof(*r));
	int rc = 0;

	if (!r) {
		cli_fail(CMD, -ENOMEM, "results");
		return CLI_EXIT_FAIL;
	}
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = run_one(a, c, t,
			     a->compare ? sched_policy_at(i % per)
					: sched_policy_find(a->policy),
			     a->nspeeds ? a->speeds[i / per] : a->speed, &r[i]);
	if (rc == 0 && a->json)
		print_json(stdout, a, c, t, r, n);
	else if (rc == 0) {
		print_header(stdout, a, c, t);
		if (a->nspeeds)
			print_sweep(stdout, r, n, per);
		else if (a->compare)
			print_table(stdout, r, n);
		else
			print_one(stdout, r);
	}
	free(r);
	return rc < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

int kvc_replay_main(int argc, char **argv)
{
	struct replay_args a;
	struct sched_config cfg;
	struct sched_trace t;
	char err[512];
	int rc;

	rc = parse_args(&a, argc, argv);
	if (rc)
		return rc > 0 ? (kvc_replay_usage(stdout), CLI_EXIT_OK)
			      : CLI_EXIT_USAGE;
	if (!a.policy)
		a.policy = DEF_POLICY;
	if (!a.compare && !sched_policy_find(a.policy))
		return cli_usage_error(CMD, "--policy: no policy '%s'",
				       a.policy);
	rc = build_config(&a, &cfg);
	if (rc < 0)
		return rc == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
	rc = sched_trace_load(a.trace, a.skip_bad, &t, err, sizeof(err));
	if (rc < 0) {
		/* a malformed line is bad input, exit 2, but no usage error:
		 * the message names the line, not the options */
		cli_fail(CMD, 0, "%s", err);
		return rc == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
	}
	rc = run_all(&a, &cfg, &t);
	sched_trace_free(&t);
	return rc;
}
