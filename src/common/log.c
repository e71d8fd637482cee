#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

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

bool kvfs_ratelimit(struct kvfs_ratelimit *rl, uint32_t interval_ms,
		    uint64_t *missed)
{
	uint_least64_t next = atomic_load(&rl->next_ms);
	struct timespec ts;
	uint64_t now;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	/* + 1: a zeroed struct lets the very first line through */
	now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000 + 1;
	/* of the threads racing past next, one wins the exchange and says
	 * it; the others count as held back */
	if (now < next || !atomic_compare_exchange_strong(&rl->next_ms, &next,
							  now + interval_ms)) {
		atomic_fetch_add(&rl->missed, 1);
		return false;
	}
	if (missed)
		*missed = atomic_exchange(&rl->missed, 0);
	return true;
}
