/*
 * cli.h - what every kvfs program's command line shares: kvctl, kvbench,
 * kvconductor and kvfsd's option parser.
 *
 * One message style for all of them, on stderr, one line each:
 *
 *   PROG[ CMD]: MESSAGE                       a failure (exit 1)
 *   PROG[ CMD]: MESSAGE (see 'PROG[ CMD] --help')   a usage error (exit 2)
 *
 * PROG is the name given to cli_init() ("kvctl"), CMD the subcommand, or
 * NULL for the program itself.  Every program answers -h/--help with its
 * usage on stdout (exit 0) and -V/--version with cli_version() (exit 0).
 *
 * Numbers are strict: decimal digits only (no sign, no blanks, no 0x),
 * within the bounds the caller gives; where a size is taken, one suffix
 * K, M or G (powers of 1024, either case) may follow.  A bad number is a
 * usage error naming the option and the value.
 *
 * Progress lines: on a terminal, one line redrawn in place with '\r' at
 * most four times a second and erased at the end; anywhere else (a log, a
 * pipe) whole lines, at most one every five seconds, with no '\r' and no
 * escape sequences.
 */
#ifndef KVFS_COMMON_CLI_H
#define KVFS_COMMON_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

/* the program's name in every message; call first (not thread-safe) */
void cli_init(const char *prog);
const char *cli_prog(void);

/* "PROG[ CMD]: MSG (see 'PROG[ CMD] --help')"; returns CLI_EXIT_USAGE */
int cli_usage_error(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* "PROG[ CMD]: MSG[: strerror(-err)]" (err 0: no errno part) */
void cli_fail(const char *cmd, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* a getopt_long() '?' or ':' (with opterr 0 and an optstring starting
 * with ':') as one usage error; returns CLI_EXIT_USAGE */
int cli_bad_option(const char *cmd, int c, char **argv);

/* -h/--help and -V/--version, for programs that look before getopt */
bool cli_is_help(const char *arg);
bool cli_is_version(const char *arg);

/* "PROG (kvfs) VERSION" and the optional parts built in, on f */
void cli_version(FILE *f);

/*
 * Numbers, each a usage error (message printed, -EINVAL returned) when
 * arg is not one: opt names the option in the message ("--requests",
 * "-o slots").
 */
int cli_parse_u64(const char *cmd, const char *opt, const char *arg,
		  uint64_t min, uint64_t max, uint64_t *out);
/* the same with an optional K/M/G suffix; bounds apply to the result */
int cli_parse_size(const char *cmd, const char *opt, const char *arg,
		   uint64_t min, uint64_t max, uint64_t *out);
/* a finite number > min (>= min when min_ok) and <= max */
int cli_parse_double(const char *cmd, const char *opt, const char *arg,
		     double min, bool min_ok, double max, double *out);

struct cli_progress {
	const char *what;
	uint64_t total;	  /* 0: no "/total" */
	uint64_t next_ns; /* no line before this (CLOCK_MONOTONIC) */
	bool tty;	  /* stderr is a terminal */
	bool drawn;	  /* a '\r' line is on screen, to erase */
};

void cli_progress_start(struct cli_progress *p, const char *what,
			uint64_t total);
/* "WHAT DONE/TOTAL", when one is due */
void cli_progress_draw(struct cli_progress *p, uint64_t done);
/* true when a line is due now: format one and call cli_progress_say */
bool cli_progress_due(const struct cli_progress *p);
/* a line of the caller's own; final: the last one, always printed */
void cli_progress_say(struct cli_progress *p, bool final, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* erase a drawn terminal line, so that results follow on a clean one */
void cli_progress_end(struct cli_progress *p);

/* "1,234,567" of v rounded; returns buf */
char *cli_fmt_count(char *buf, size_t cap, double v);

#endif /* KVFS_COMMON_CLI_H */
