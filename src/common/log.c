#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>

#include "src/common/log.h"

static const char *log_prog = "kvfs";
static enum kvfs_log_level log_max = KVFS_LOG_WARN;

void kvfs_log_init(const char *progname, enum kvfs_log_level max)
{
	const char *slash = strrchr(progname, '/');

	log_prog = slash ? slash + 1 : progname;
	log_max = max;
}

void kvfs_log_set_level(enum kvfs_log_level max)
{
	log_max = max;
}

void kvfs_log(enum kvfs_log_level lvl, const char *fmt, ...)
{
	static const char *const tag[] = { "error", "warning", "info",
					   "debug" };
	char line[1024];
	va_list ap;
	int n;

	if (lvl > log_max)
		return;
	n = snprintf(line, sizeof(line), "%s: %s: ", log_prog, tag[lvl]);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	/* one fputs per line so threads do not interleave within a line */
	flockfile(stderr);
	fputs(line, stderr);
	fputc('\n', stderr);
	funlockfile(stderr);
}
