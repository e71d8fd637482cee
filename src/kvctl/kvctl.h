/*
 * kvctl.h - shared by kvctl.c (main, the command table, hash, version,
 * help) and kvctl_node.c (the commands that talk to a running kvfsd).
 *
 * Every command takes (argc, argv) with argv[0] its own name and returns
 * the exit status: 0 success, 1 failure at run time (the daemon refused,
 * is gone, or output failed), EXIT_USAGE for a usage error.
 */
#ifndef KVFS_KVCTL_H
#define KVFS_KVCTL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define EXIT_USAGE 2

struct kvctl_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

/*
 * The daemon to talk to: -s SOCKET or -m MOUNT from the command line,
 * else $KVFS_SOCKET; NULL when none was given.  Set by main before the
 * command runs.
 */
extern const char *kvctl_target;

/* "Try 'kvctl CMD --help'." on stderr; returns EXIT_USAGE */
int kvctl_usage_error(const char *cmd);
/* flush stdout; 1 (after one error line) when the output was lost */
int kvctl_flush_stdout(void);

/* kvctl_show.c: reading response fields, and the views for people */
struct kvfs_json;
/* a member as an integer (0 when absent) or a string ("" when absent) */
uint64_t kvctl_jnum(const struct kvfs_json *j, const char *key);
const char *kvctl_jstr(const struct kvfs_json *j, const char *key);
/* malloc'd copy of s with control bytes as '?'; NULL without memory */
char *kvctl_printable(const char *s);
void kvctl_show_status(const struct kvfs_json *status);
/* the namespace table; 0, or 1 after an error line */
int kvctl_show_namespaces(const struct kvfs_json *list);
/* blocks of an ls page: names only, or with size, refs and seal time */
void kvctl_show_blocks(const struct kvfs_json *blocks, bool longfmt);
void kvctl_show_block(const char *ns, const struct kvfs_json *stat);

/* kvctl_node.c */
int kvctl_status(int argc, char **argv);
int kvctl_ls(int argc, char **argv);
int kvctl_stat(int argc, char **argv);
int kvctl_lookup(int argc, char **argv);
int kvctl_pin(int argc, char **argv);
int kvctl_unpin(int argc, char **argv);
int kvctl_renew(int argc, char **argv);
int kvctl_evict(int argc, char **argv);
int kvctl_ns(int argc, char **argv);
int kvctl_nodes(int argc, char **argv);
int kvctl_prefetch(int argc, char **argv);

#endif /* KVFS_KVCTL_H */
