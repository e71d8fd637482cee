/*
 * cmd_gen.c - `kvconductor gen-trace`: a synthetic Mooncake-format trace
 * from the shared generator (src/trace.h: kvfs_trace_gen).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "sched/cli.h"
#include "src/common/cli.h"
#include "src/common/trace.h"

#define CMD "gen-trace"

static const char gen_usage[] =
	"usage: kvconductor gen-trace [--requests N] [--rate R] [--seed N]\n"
	"         [--sys-prompts N] [--skew S] [--sys-min T] [--sys-max T]\n"
	"         [--user-min T] [--user-max T] [--out-min T] [--out-max T]\n"
	"         [--sessions N] [--follow P] [--max-input T] [--burst X]\n"
	"         [--burst-window S] [--long-frac P] [--long-min T]\n"
	"         [--long-max T] [--output FILE]\n"
	"\n"
	"Write a Mooncake-format trace: Poisson arrivals (or bursts),\n"
	"multi-turn sessions, shared system prompts with Zipf popularity,\n"
	"an optional tail of long documents.\n"
	"\n"
	"  -n, --requests N   lines (default 1000)\n"
	"  -r, --rate R       mean arrivals per second (default 10)\n"
	"      --seed N       the same seed gives the same trace (default 1)\n"
	"      --sys-prompts N  shared system prompts; 0: none (default 16)\n"
	"      --skew S       Zipf exponent of their popularity (default 1)\n"
	"      --sys-min T    system prompt tokens, least (default 1024)\n"
	"      --sys-max T    and most (default 8192)\n"
	"      --user-min T   user tokens per turn, least (default 64)\n"
	"      --user-max T   and most (default 2048)\n"
	"      --out-min T    output tokens, least (default 16)\n"
	"      --out-max T    and most (default 512)\n"
	"      --sessions N   live sessions at most (default 64)\n"
	"      --follow P     chance a request is a session's next turn\n"
	"                     (default 0.6)\n"
	"      --max-input T  prompt tokens at most; a longer session ends\n"
	"                     (default 65536)\n"
	"      --burst X      bursty arrivals: each window is busy with\n"
	"                     chance 1/X, at X times the rate (default 1)\n"
	"      --burst-window S  seconds a window lasts (default 10)\n"
	"      --long-frac P  chance a request opens a session with a long\n"
	"                     document (default 0)\n"
	"      --long-min T   document tokens, least (default 32768)\n"
	"      --long-max T   and most (default 131072)\n"
	"  -o, --output FILE  write there instead of standard output\n";

void kvc_gen_usage(FILE *f)
{
	fputs(gen_usage, f);
}

enum {
	OPT_SEED = 256,
	OPT_SYS,
	OPT_SKEW,
	OPT_SYS_MIN,
	OPT_SYS_MAX,
	OPT_USER_MIN,
	OPT_USER_MAX,
	OPT_OUT_MIN,
	OPT_OUT_MAX,
	OPT_SESSIONS,
	OPT_FOLLOW,
	OPT_MAX_INPUT,
	OPT_BURST,
	OPT_BURST_S,
	OPT_LONG_FRAC,
	OPT_LONG_MIN,
	OPT_LONG_MAX,
};

static const struct option gen_opts[] = {
	{ "requests", required_argument, NULL, 'n' },
	{ "rate", required_argument, NULL, 'r' },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "sys-prompts", required_argument, NULL, OPT_SYS },
	{ "skew", required_argument, NULL, OPT_SKEW },
	{ "sys-min", required_argument, NULL, OPT_SYS_MIN },
	{ "sys-max", required_argument, NULL, OPT_SYS_MAX },
	{ "user-min", required_argument, NULL, OPT_USER_MIN },
	{ "user-max", required_argument, NULL, OPT_USER_MAX },
	{ "out-min", required_argument, NULL, OPT_OUT_MIN },
	{ "out-max", required_argument, NULL, OPT_OUT_MAX },
	{ "sessions", required_argument, NULL, OPT_SESSIONS },
	{ "follow", required_argument, NULL, OPT_FOLLOW },
	{ "max-input", required_argument, NULL, OPT_MAX_INPUT },
	{ "burst", required_argument, NULL, OPT_BURST },
	{ "burst-window", required_argument, NULL, OPT_BURST_S },
	{ "long-frac", required_argument, NULL, OPT_LONG_FRAC },
	{ "long-min", required_argument, NULL, OPT_LONG_MIN },
	{ "long-max", required_argument, NULL, OPT_LONG_MAX },
	{ "output", required_argument, NULL, 'o' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int parse_u32(const char *opt, uint32_t *out)
{
	uint64_t v;
	int rc = cli_parse_u64(CMD, opt, optarg, 0, UINT32_MAX, &v);

	if (rc == 0)
		*out = (uint32_t)v;
	return rc;
}

static int parse_opt(struct kvfs_trace_gen_params *p, const char **out, int c,
		     char **argv)
{
	switch (c) {
	case 'n':
		return cli_parse_u64(CMD, "--requests", optarg, 0, UINT64_MAX,
				     &p->requests);
	case 'r':
		return cli_parse_double(CMD, "--rate", optarg, 0, false, 1e9,
					&p->rate);
	case OPT_SEED:
		return cli_parse_u64(CMD, "--seed", optarg, 0, UINT64_MAX,
				     &p->seed);
	case OPT_SYS:
		return parse_u32("--sys-prompts", &p->sys_prompts);
	case OPT_SKEW:
		return cli_parse_double(CMD, "--skew", optarg, 0, true, 100,
					&p->skew);
	case OPT_SYS_MIN:
		return parse_u32("--sys-min", &p->sys_min);
	case OPT_SYS_MAX:
		return parse_u32("--sys-max", &p->sys_max);
	case OPT_USER_MIN:
		return parse_u32("--user-min", &p->user_min);
	case OPT_USER_MAX:
		return parse_u32("--user-max", &p->user_max);
	case OPT_OUT_MIN:
		return parse_u32("--out-min", &p->out_min);
	case OPT_OUT_MAX:
		return parse_u32("--out-max", &p->out_max);
	case OPT_SESSIONS:
		return parse_u32("--sessions", &p->sessions);
	case OPT_FOLLOW:
		return cli_parse_double(CMD, "--follow", optarg, 0, true, 1,
					&p->follow);
	case OPT_MAX_INPUT:
		return cli_parse_u64(CMD, "--max-input", optarg, 1, UINT64_MAX,
				     &p->max_input);
	case OPT_BURST:
		return cli_parse_double(CMD, "--burst", optarg, 1, true, 1e6,
					&p->burst);
	case OPT_BURST_S:
		return cli_parse_double(CMD, "--burst-window", optarg, 0, false,
					1e6, &p->burst_s);
	case OPT_LONG_FRAC:
		return cli_parse_double(CMD, "--long-frac", optarg, 0, true, 1,
					&p->long_frac);
	case OPT_LONG_MIN:
		return parse_u32("--long-min", &p->long_min);
	case OPT_LONG_MAX:
		return parse_u32("--long-max", &p->long_max);
	case 'o':
		*out = optarg;
		return 0;
	}
	cli_bad_option(CMD, c, argv);
	return -EINVAL;
}

static int write_trace(const char *out, const struct kvfs_trace_gen_params *p)
{
	FILE *f = out ? fopen(out, "we") : stdout;
	int rc;

	if (!f) {
		cli_fail(CMD, -errno, "%s", out);
		return CLI_EXIT_FAIL;
	}
	rc = kvfs_trace_gen(f, p);
	if (out && fclose(f) && rc == 0)
		rc = -errno;
	else if (!out && fflush(f) && rc == 0)
		rc = -EIO;
	if (rc < 0) {
		cli_fail(CMD, rc, "writing %s", out ? out : "standard output");
		return CLI_EXIT_FAIL;
	}
	return CLI_EXIT_OK;
}

int kvc_gen_main(int argc, char **argv)
{
	struct kvfs_trace_gen_params p;
	const char *out = NULL, *why;
	int c;

	kvfs_trace_gen_defaults(&p);
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":n:r:o:h", gen_opts, NULL)) !=
	       -1) {
		if (c == 'h') {
			kvc_gen_usage(stdout);
			return CLI_EXIT_OK;
		}
		if (parse_opt(&p, &out, c, argv) < 0)
			return CLI_EXIT_USAGE;
	}
	if (optind < argc)
		return cli_usage_error(CMD, "unexpected argument '%s'",
				       argv[optind]);
	why = kvfs_trace_gen_check(&p);
	if (why)
		return cli_usage_error(CMD, "%s", why);
	return write_trace(out, &p);
}
