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

void kvc_replay_usage(FILE *f);
void kvc_gen_usage(FILE *f);
void kvc_fit_usage(FILE *f);
void kvc_bench_usage(FILE *f);
void kvc_serve_usage(FILE *f);

#endif /* KVFS_SCHED_CLI_H */
