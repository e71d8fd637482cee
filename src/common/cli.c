/*
 * cli.c - the command-line helpers every kvfs program shares (cli.h).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/common/cli.h"
#include "src/common/clock.h"

static const char *prog_name = "kvfs";

void cli_init(const char *prog)
{
	prog_name = prog;
}

const char *cli_prog(void)
{
	return prog_name;
}

static void say_prefix(const char *cmd)
{
	if (cmd)
		fprintf(stderr, "%s %s: ", prog_name, cmd);
	else
		fprintf(stderr, "%s: ", prog_name);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	say_prefix(cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see '%s%s%s --help')\n", prog_name, cmd ? " " : "",
		cmd ? cmd : "");
	return CLI_EXIT_USAGE;
}

void cli_fail(const char *cmd, int err, const char *fmt, ...)
{
	va_list ap;

	say_prefix(cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (err)
		fprintf(stderr, ": %s", strerror(err < 0 ? -err : err));
	fputc('\n', stderr);
}

int cli_bad_option(const char *cmd, int c, char **argv)
{
	const char *what = argv[optind - 1];

	if (c == ':')
		return cli_usage_error(cmd, "option '%s' needs a value", what);
	/* a short option may sit inside a cluster ("-qx"): name it alone */
	if (optopt)
		return cli_usage_error(cmd, "unknown option '-%c'", optopt);
	return cli_usage_error(cmd, "unknown option '%s'", what);
}

bool cli_is_help(const char *arg)
{
	return !strcmp(arg, "-h") || !strcmp(arg, "--help");
}

bool cli_is_version(const char *arg)
{
	return !strcmp(arg, "-V") || !strcmp(arg, "--version");
}

void cli_version(FILE *f)
{
	fprintf(f, "%s (kvfs) %s\n", prog_name, PACKAGE_VERSION);
	fprintf(f, "built with: %s\n",
		KVFS_FEATURES[0] ? KVFS_FEATURES : "no optional parts");
}

/* strict decimal: strtoull alone takes "-1", " 4" and leading '+' */
static bool all_digits_prefix(const char *s)
{
	return *s >= '0' && *s <= '9';
}

static int parse_num(const char *cmd, const char *opt, const char *arg,
		     uint64_t min, uint64_t max, bool suffix, uint64_t *out)
{
	unsigned long long n;
	unsigned shift = 0;
	char *end;

	errno = 0;
	n = all_digits_prefix(arg) ? strtoull(arg, &end, 10) : 0;
	if (!all_digits_prefix(arg) || errno == ERANGE) {
		cli_usage_error(cmd, "%s: '%s' is not a whole number", opt,
				arg);
		return -EINVAL;
	}
	if (suffix && *end) {
		static const char units[] = "KMG";
		const char *u = strchr(units, *end & ~0x20);

		if (!u || !*u || end[1]) {
			cli_usage_error(cmd,
					"%s: '%s' has an unknown suffix "
					"(K, M or G)",
					opt, arg);
			return -EINVAL;
		}
		shift = 10 * (unsigned)(u - units + 1);
		end++;
	}
	if (*end) {
		cli_usage_error(cmd, "%s: '%s' is not a whole number", opt,
				arg);
		return -EINVAL;
	}
	if (n > (max >> shift) || ((uint64_t)n << shift) < min) {
		cli_usage_error(cmd, "%s: '%s' is outside %llu..%llu", opt, arg,
				(unsigned long long)min,
				(unsigned long long)max);
		return -EINVAL;
	}
	*out = (uint64_t)n << shift;
	return 0;
}

int cli_parse_u64(const char *cmd, const char *opt, const char *arg,
		  uint64_t min, uint64_t max, uint64_t *out)
{
	return parse_num(cmd, opt, arg, min, max, false, out);
}

int cli_parse_size(const char *cmd, const char *opt, const char *arg,
		   uint64_t min, uint64_t max, uint64_t *out)
{
	return parse_num(cmd, opt, arg, min, max, true, out);
}

int cli_parse_double(const char *cmd, const char *opt, const char *arg,
		     double min, bool min_ok, double max, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (!*arg || *end || errno || !isfinite(v) || v > max ||
	    (min_ok ? v < min : v <= min)) {
		cli_usage_error(cmd, "%s: '%s' is not a number %s %g..%g", opt,
				arg, min_ok ? "in" : "above", min, max);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

/* ---- progress ---------------------------------------------------------- */

/* a terminal redraws in place, so often is fine; a log keeps every line */
#define CLI_TTY_PERIOD_NS 250000000ull
#define CLI_LOG_PERIOD_NS 5000000000ull

void cli_progress_start(struct cli_progress *p, const char *what,
			uint64_t total)
{
	p->what = what;
	p->total = total;
	p->tty = isatty(STDERR_FILENO);
	/* a log's first line after one period: short runs print none */
	p->next_ns = p->tty ? 0 : kvfs_mono_ns() + CLI_LOG_PERIOD_NS;
	p->drawn = false;
}

bool cli_progress_due(const struct cli_progress *p)
{
	return kvfs_mono_ns() >= p->next_ns;
}

void cli_progress_say(struct cli_progress *p, bool final, const char *fmt, ...)
{
	va_list ap;

	p->next_ns = kvfs_mono_ns() +
		     (p->tty ? CLI_TTY_PERIOD_NS : CLI_LOG_PERIOD_NS);
	if (p->tty)
		fputc('\r', stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (p->tty)
		fputs("\033[K", stderr);
	if (!p->tty || final)
		fputc('\n', stderr);
	p->drawn = p->tty && !final;
}

void cli_progress_draw(struct cli_progress *p, uint64_t done)
{
	if (!cli_progress_due(p))
		return;
	if (p->total)
		cli_progress_say(p, false, "%s %llu/%llu", p->what,
				 (unsigned long long)done,
				 (unsigned long long)p->total);
	else
		cli_progress_say(p, false, "%s %llu", p->what,
				 (unsigned long long)done);
}

void cli_progress_end(struct cli_progress *p)
{
	if (p->drawn)
		fputs("\r\033[K", stderr);
	p->drawn = false;
}

char *cli_fmt_count(char *buf, size_t cap, double v)
{
	char digits[32];
	size_t n, o = 0;
	int len;

	len = snprintf(digits, sizeof(digits), "%.0f", v < 0 ? 0 : v);
	n = len > 0 ? (size_t)len : 0;
	for (size_t i = 0; i < n && o + 1 < cap; i++) {
		if (i && (n - i) % 3 == 0 && o + 2 < cap)
			buf[o++] = ',';
		buf[o++] = digits[i];
	}
	buf[o < cap ? o : cap - 1] = 0;
	return buf;
}
