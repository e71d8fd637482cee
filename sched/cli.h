/*
 * cli.h - kvconductor's own command-line parts: the subcommands' entry
 * points and usage texts.  Messages, option values, progress lines and
 * exit codes are every kvfs program's (src/common/cli.h).
 *
 * Each subcommand is one file (cmd_*.c) with one entry point in the
 * command table of kvconductor.c; its usage text and kvconductor(8) list
 * the same options (tests/sched_cli.sh checks).
 *
 * Exit codes, the same for every subcommand (CLI_EXIT_*): 0 it ran, 1 it
 * failed (one line on stderr says why), 2 bad usage, or bad input (a
 * malformed trace line, CSV row or config line, named by its line
 * number, without the usage error's pointer to --help).
 */
#ifndef KVFS_SCHED_CLI_H
#define KVFS_SCHED_CLI_H

#include <stdio.h>

/* argv[0] is the subcommand's name; each returns a CLI_EXIT_* code */
int kvc_replay_main(int argc, char **argv);
int kvc_gen_main(int argc, char **argv);
int kvc_fit_main(int argc, char **argv);
int kvc_bench_main(int argc, char **argv);
int kvc_serve_main(int argc, char **argv);
int kvc_leader_main(int argc, char **argv);

void kvc_replay_usage(FILE *f);
void kvc_gen_usage(FILE *f);
void kvc_fit_usage(FILE *f);
void kvc_bench_usage(FILE *f);
void kvc_serve_usage(FILE *f);
void kvc_leader_usage(FILE *f);

/*
 * The etcd options of serve --election and leader, kvfsd's --etcd-*
 * (cmd_leader.c): KVC_ETCD_OPTS goes in a getopt_long table;
 * kvc_etcd_opt takes one (1), or says it is none of them (0);
 * kvc_etcd_check checks them against the url (etcd_auth_check) and
 * prints the usage error (-EINVAL).  kvc_etcd_usage: their --help lines.
 */
struct kv_etcd_auth;
enum {
	KVC_OPT_ETCD_CA = 0x400,
	KVC_OPT_ETCD_CERT,
	KVC_OPT_ETCD_KEY,
	KVC_OPT_ETCD_USER,
	KVC_OPT_ETCD_PASSWORD_FILE,
};
/* one option a line (clang-format would fold them) */
/* clang-format off */
#define KVC_ETCD_OPTS \
	{ "etcd-ca", required_argument, NULL, KVC_OPT_ETCD_CA }, \
	{ "etcd-cert", required_argument, NULL, KVC_OPT_ETCD_CERT }, \
	{ "etcd-key", required_argument, NULL, KVC_OPT_ETCD_KEY }, \
	{ "etcd-user", required_argument, NULL, KVC_OPT_ETCD_USER }, \
	{ "etcd-password-file", required_argument, NULL, \
	  KVC_OPT_ETCD_PASSWORD_FILE }
/* clang-format on */
int kvc_etcd_opt(struct kv_etcd_auth *a, int c, const char *arg);
int kvc_etcd_check(const char *cmd, const char *opt, const char *url,
		   const struct kv_etcd_auth *a);
extern const char kvc_etcd_usage[];

#endif /* KVFS_SCHED_CLI_H */
