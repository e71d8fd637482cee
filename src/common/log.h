/*
 * log.h - one-line diagnostics on stderr (a daemon's reach the journal).
 *
 * Library code logs the reason for a failure where it is known and returns
 * a negative errno; callers print nothing more than their own context.
 */
#ifndef KVFS_LOG_H
#define KVFS_LOG_H

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

#endif /* KVFS_LOG_H */
