/*
 * cli.c - helpers the kvconductor subcommands share (cli.h).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sched/cli.h"
#include "src/common/clock.h"

int kvc_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "kvconductor %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return KVC_EXIT_USAGE;
}

int kvc_bad_option(const char *cmd, int c, char **argv)
{
	const char *arg = argv[optind - 1];

	if (c == ':')
		return kvc_usage_error(cmd, "option %s needs a value", arg);
	if (optopt)
		return kvc_usage_error(cmd, "unknown option -%c (try "
					    "'kvconductor help %s')",
				       optopt, cmd);
	return kvc_usage_error(cmd, "unknown option %s (try 'kvconductor "
				    "help %s')",
			       arg, cmd);
}

int kvc_parse_u64(const char *cmd, const char *opt, const char *arg,
		  uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(arg, &end, 10);
	if (!*arg || *end || errno || arg[0] == '-' || v < min || v > max) {
		kvc_usage_error(cmd, "%s: '%s' is not a whole number "
				     "%llu..%llu",
				opt, arg, (unsigned long long)min,
				(unsigned long long)max);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

int kvc_parse_double(const char *cmd, const char *opt, const char *arg,
		     double min, bool min_ok, double max, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (!*arg || *end || errno || !isfinite(v) || v > max ||
	    (min_ok ? v < min : v <= min)) {
		kvc_usage_error(cmd, "%s: '%s' is not a number %s %g", opt, arg,
				min_ok ? ">=" : ">", min);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

void kvc_fail(const char *cmd, int err, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "kvconductor %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (err)
		fprintf(stderr, ": %s", strerror(-err));
	fputc('\n', stderr);
}

void kvc_progress_start(struct kvc_progress *p, const char *what)
{
	p->what = what;
	p->next_ns = 0;
	p->tty = isatty(STDERR_FILENO);
	p->drawn = false;
}

void kvc_progress_draw(struct kvc_progress *p, uint64_t done, uint64_t total)
{
	uint64_t now;

	if (!p->tty)
		return;
	now = kvfs_mono_ns();
	if (now < p->next_ns)
		return;
	p->next_ns = now + 250000000ull;
	fprintf(stderr, "\r%s %llu/%llu", p->what, (unsigned long long)done,
		(unsigned long long)total);
	p->drawn = true;
}

void kvc_progress_end(struct kvc_progress *p)
{
	if (p->drawn)
		fputs("\r\033[K", stderr);
	p->drawn = false;
}

char *kvc_fmt_count(char *buf, size_t cap, double v)
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
