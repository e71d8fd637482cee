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

#include "src/common/cli.h"

#define EXIT_USAGE CLI_EXIT_USAGE

struct kvctl_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

/*
 * The daemon to talk to: -s SOCKET or -m MOUNT from the command line
 * (before or after the command), else $KVFS_SOCKET, else the one kvfs
 * mounted (kvctl_find_target); NULL until one is known.
 */
extern const char *kvctl_target;
/* the command running, for messages ("kvctl status: ..."); NULL: none */
extern const char *kvctl_cmd;

/* -m (c 'm') or -s (c 's') ARG: -1 to go on, else EXIT_USAGE (both
 * given) */
int kvctl_set_target(const char *cmd, int c, const char *arg);
/*
 * Make sure kvctl_target is set: with none given, the one fuse.kvfs mount
 * in /proc/mounts.  0, or EXIT_USAGE with one line that names what was
 * found (none, or several mounts).
 */
int kvctl_find_target(void);
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
int kvctl_leases(int argc, char **argv);
int kvctl_evict(int argc, char **argv);
int kvctl_ns(int argc, char **argv);
int kvctl_nodes(int argc, char **argv);
int kvctl_prefetch(int argc, char **argv);

#endif /* KVFS_KVCTL_H */
