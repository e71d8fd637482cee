/*
 * cmd_leader.c - `kvconductor leader URL`: the elected conductor's
 * addresses, for engines and scripts; and the --etcd-* options that it
 * and `serve --election` share (sched/cli.h).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "kvstore/elect.h"
#include "sched/cli.h"
#include "src/common/cli.h"

#define CMD "leader"

const char kvc_etcd_usage[] =
	"      --etcd-ca PATH      CAs etcd's certificate must chain to\n"
	"                          (etcds:// only; default the system's)\n"
	"      --etcd-cert PATH --etcd-key PATH\n"
	"                          client certificate for etcd and its key\n"
	"                          (etcds:// only)\n"
	"      --etcd-user NAME --etcd-password-file PATH\n"
	"                          authenticate to etcd as NAME with the\n"
	"                          password in PATH (mode 0600)\n";

int kvc_etcd_opt(struct kv_etcd_auth *a, int c, const char *arg)
{
	switch (c) {
	case KVC_OPT_ETCD_CA:
		a->ca_file = arg;
		return 1;
	case KVC_OPT_ETCD_CERT:
		a->cert_file = arg;
		return 1;
	case KVC_OPT_ETCD_KEY:
		a->key_file = arg;
		return 1;
	case KVC_OPT_ETCD_USER:
		a->user = arg;
		return 1;
	case KVC_OPT_ETCD_PASSWORD_FILE:
		a->password_file = arg;
		return 1;
	}
	return 0;
}

int kvc_etcd_check(const char *cmd, const char *opt, const char *url,
		   const struct kv_etcd_auth *a)
{
	char ep[ETCD_URLS_MAX], name[128];
	const char *why;

	if (!url) {
		if (a->ca_file || a->cert_file || a->key_file || a->user ||
		    a->password_file) {
			cli_usage_error(cmd, "the --etcd-* options need %s",
					opt);
			return -EINVAL;
		}
		return 0;
	}
	if (etcd_url_parse(url, ep, sizeof(ep), name, sizeof(name), &why) < 0) {
		cli_usage_error(cmd,
				"%s '%s': %s (want "
				"etcd[s]://HOST:PORT[,HOST:PORT...]/NAME)",
				opt, url, why);
		return -EINVAL;
	}
	if (etcd_auth_check(a, strncmp(ep, "https://", 8) == 0, &why) < 0) {
		cli_usage_error(cmd, "%s", why);
		return -EINVAL;
	}
	return 0;
}

static const char leader_usage[] =
	"usage: kvconductor leader [ETCD OPTIONS] "
	"etcd[s]://HOST:PORT[,HOST:PORT...]/NAME\n"
	"\n"
	"Prints the addresses of the conductor that leads election NAME\n"
	"(kvconductor serve --election): \"http HOST:PORT\" and, when it "
	"takes\n"
	"block events, \"events HOST:PORT\".  Exits 1 when none leads.\n"
	"\n";

void kvc_leader_usage(FILE *f)
{
	fputs(leader_usage, f);
	fputs(kvc_etcd_usage, f);
}

static const struct option leader_opts[] = {
	KVC_ETCD_OPTS,
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

int kvc_leader_main(int argc, char **argv)
{
	struct kv_etcd_auth a = { 0 };
	char val[KV_ELECT_VALUE_MAX], addr[256], err[600];
	const char *url;
	int c, rc;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", leader_opts, NULL)) != -1) {
		if (c == 'h') {
			kvc_leader_usage(stdout);
			return CLI_EXIT_OK;
		}
		if (!kvc_etcd_opt(&a, c, optarg))
			return cli_bad_option(CMD, c, argv);
	}
	if (optind + 1 != argc)
		return cli_usage_error(CMD, optind < argc
						    ? "one election url only"
						    : "no election url");
	url = argv[optind];
	if (kvc_etcd_check(CMD, "the url", url, &a) < 0)
		return CLI_EXIT_USAGE;
	rc = kv_elect_get(url, &a, val, sizeof(val), err, sizeof(err));
	if (rc < 0) {
		cli_fail(CMD, 0, "%s", err);
		return CLI_EXIT_FAIL;
	}
	if (kv_elect_field(val, "http", addr, sizeof(addr)) < 0) {
		cli_fail(CMD, 0, "the leader's record has no address: %s", val);
		return CLI_EXIT_FAIL;
	}
	printf("http %s\n", addr);
	if (kv_elect_field(val, "events", addr, sizeof(addr)) == 0)
		printf("events %s\n", addr);
	return CLI_EXIT_OK;
}
