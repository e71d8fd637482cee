/*
 * cli.h - what the kvconductor subcommands share: entry points, usage
 * texts, option parsing, progress and failure lines.
 *
 * Each subcommand is one file (cmd_*.c) with one entry point in the
 * command table of kvconductor.c; its usage text and kvconductor(8) list
 * the same options (tests/sched_cli.sh checks).
 *
 * Exit codes, the same for every subcommand: 0 it ran, 1 it failed (one
 * line on stderr says why), 2 bad usage or bad input (a malformed trace
 * line, CSV row or config line, named by its line number).
 */
#ifndef KVFS_SCHED_CLI_H
#define KVFS_SCHED_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define KVC_EXIT_OK 0
#define KVC_EXIT_FAIL 1
#define KVC_EXIT_USAGE 2

/* argv[0] is the subcommand's name; each returns a KVC_EXIT_* code */
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

/* "kvconductor CMD: MSG" on stderr, one line; returns KVC_EXIT_USAGE */
int kvc_usage_error(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* a getopt_long() '?' or ':' (opterr 0, optstring starting ':') as one
 * line; returns KVC_EXIT_USAGE */
int kvc_bad_option(const char *cmd, int c, char **argv);

/* decimal in min..max for option opt; one line and -EINVAL if not */
int kvc_parse_u64(const char *cmd, const char *opt, const char *arg,
		  uint64_t min, uint64_t max, uint64_t *out);
/* a finite number > min (or >= min when min_ok) and <= max */
int kvc_parse_double(const char *cmd, const char *opt, const char *arg,
		     double min, bool min_ok, double max, double *out);

/* negative errno -> "kvconductor CMD: MSG: strerror" on stderr */
void kvc_fail(const char *cmd, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * A progress line on stderr, redrawn with '\r' at most four times a
 * second and erased at the end; only when stderr is a terminal, so logs
 * and pipes stay clean.
 */
struct kvc_progress {
	const char *what;
	uint64_t next_ns;
	bool tty;
	bool drawn;
};

void kvc_progress_start(struct kvc_progress *p, const char *what);
void kvc_progress_draw(struct kvc_progress *p, uint64_t done, uint64_t total);
void kvc_progress_end(struct kvc_progress *p);

/* "1,234,567" of v rounded; returns buf */
char *kvc_fmt_count(char *buf, size_t cap, double v);

#endif /* KVFS_SCHED_CLI_H */
