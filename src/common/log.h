/*
 * log.h - one-line diagnostics on stderr (a daemon's reach the journal).
 *
 * Library code logs the reason for a failure where it is known and returns
 * a negative errno; callers print nothing more than their own context.
 */
#ifndef KVFS_LOG_H
#define KVFS_LOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum kvfs_log_level {
	KVFS_LOG_ERR = 0,
	KVFS_LOG_WARN,
	KVFS_LOG_INFO,
	KVFS_LOG_DEBUG,
};

/* program name printed before each line; default "kvfs" */
void kvfs_log_init(const char *progname, enum kvfs_log_level max);
void kvfs_log_set_level(enum kvfs_log_level max);

void kvfs_log(enum kvfs_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define kvfs_err(...) kvfs_log(KVFS_LOG_ERR, __VA_ARGS__)
#define kvfs_warn(...) kvfs_log(KVFS_LOG_WARN, __VA_ARGS__)
#define kvfs_info(...) kvfs_log(KVFS_LOG_INFO, __VA_ARGS__)
#define kvfs_debug(...) kvfs_log(KVFS_LOG_DEBUG, __VA_ARGS__)

/*
 * At most one line per interval for a kind of message that someone else
 * (a peer on the network) can provoke at will, so that a flood costs a
 * line now and then rather than the journal.  One zeroed struct per kind.
 */
struct kvfs_ratelimit {
	atomic_uint_least64_t next_ms; /* CLOCK_MONOTONIC */
	atomic_uint_least64_t missed;
};

/* true: say it now, and *missed (if not NULL) gets how many were held
 * back since the last line; false: hold it back (counted) */
bool kvfs_ratelimit(struct kvfs_ratelimit *rl, uint32_t interval_ms,
		    uint64_t *missed);

#endif /* KVFS_LOG_H */
