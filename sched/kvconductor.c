/*
 * kvconductor.c - the kvconductor program: the subcommand table.
 *
 * kvconductor(8) documents the interface; sched/cli.h the subcommands,
 * src/common/cli.h the message style and exit codes.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "sched/cli.h"
#include "src/common/cli.h"
#include "src/common/log.h"

struct kvc_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	void (*usage)(FILE *f);
	const char *summary;
};

static int cmd_help(int argc, char **argv);

static const struct kvc_cmd kvc_cmds[] = {
	{
		.name = "replay",
		.fn = kvc_replay_main,
		.usage = kvc_replay_usage,
		.summary = "replay a trace through the scheduler, per policy",
	},
	{
		.name = "gen-trace",
		.fn = kvc_gen_main,
		.usage = kvc_gen_usage,
		.summary = "write a synthetic Mooncake-format trace",
	},
	{
		.name = "fit",
		.fn = kvc_fit_main,
		.usage = kvc_fit_usage,
		.summary = "fit the prefill cost model to measured times",
	},
	{
		.name = "bench",
		.fn = kvc_bench_main,
		.usage = kvc_bench_usage,
		.summary = "scheduling decisions/s beside a naive scan",
	},
	{
		.name = "serve",
		.fn = kvc_serve_main,
		.usage = kvc_serve_usage,
		.summary =
			"the conductor daemon: HTTP scheduling, block events",
	},
	{
		.name = "leader",
		.fn = kvc_leader_main,
		.usage = kvc_leader_usage,
		.summary = "print the elected conductor's addresses",
	},
	{
		.name = "help",
		.fn = cmd_help,
		.usage = NULL,
		.summary = "this text, or a subcommand's (help CMD)",
	},
};

#define KVC_NCMDS (sizeof(kvc_cmds) / sizeof(kvc_cmds[0]))

static const struct kvc_cmd *find_cmd(const char *name)
{
	for (size_t i = 0; i < KVC_NCMDS; i++)
		if (!strcmp(kvc_cmds[i].name, name))
			return &kvc_cmds[i];
	return NULL;
}

static void usage(FILE *f)
{
	fputs("usage: kvconductor COMMAND [OPTIONS]\n"
	      "       kvconductor COMMAND --help\n"
	      "       kvconductor -h | --help | -V | --version\n"
	      "\n"
	      "The kvfs conductor: KVCache-centric scheduling of prefill and\n"
	      "decode instances.  Commands:\n",
	      f);
	for (size_t i = 0; i < KVC_NCMDS; i++)
		fprintf(f, "  %-10s %s\n", kvc_cmds[i].name,
			kvc_cmds[i].summary);
	fputs("\nSee kvconductor(8).\n", f);
}

static int cmd_help(int argc, char **argv)
{
	const struct kvc_cmd *c;

	if (argc < 2 || cli_is_help(argv[1])) {
		usage(stdout);
		return CLI_EXIT_OK;
	}
	if (argc > 2)
		return cli_usage_error("help", "one command at most");
	c = find_cmd(argv[1]);
	if (!c || !c->usage)
		return cli_usage_error("help", "no command '%s'", argv[1]);
	c->usage(stdout);
	return CLI_EXIT_OK;
}

int main(int argc, char **argv)
{
	const struct kvc_cmd *c;

	cli_init("kvconductor");
	kvfs_log_init("kvconductor", KVFS_LOG_WARN);
	if (argc < 2)
		return cli_usage_error(NULL, "no command given");
	if (cli_is_help(argv[1])) {
		usage(stdout);
		return CLI_EXIT_OK;
	}
	if (cli_is_version(argv[1])) {
		cli_version(stdout);
		return CLI_EXIT_OK;
	}
	if (argv[1][0] == '-')
		return cli_usage_error(NULL, "unknown option '%s'", argv[1]);
	c = find_cmd(argv[1]);
	if (!c)
		return cli_usage_error(NULL, "no command '%s'", argv[1]);
	return c->fn(argc - 1, argv + 1);
}
