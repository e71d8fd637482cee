/*
 * kvctl - inspect and manage kvfs.
 *
 * One static table of subcommands; each takes (argc, argv) with argv[0] the
 * subcommand's name and returns the exit status.  hash, version and help
 * are here; the commands that talk to kvfsd's control socket (status, ls,
 * stat, lookup, pin, unpin, renew, leases, evict, ns) are in
 * kvctl_node.c.  The
 * global options -m/-s, which say which daemon, come before the command.
 *
 * Exit status: 0 success, 1 failure at run time, 2 usage error (bad option,
 * bad namespace, bad token).  The help texts here mirror man/kvctl.1.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/cli.h"
#include "src/common/probe.h"
#include "src/common/hash.h"
#include "src/kvctl/kvctl.h"
#include "src/common/log.h"
#include "src/common/tokens.h"

const char *kvctl_target;
const char *kvctl_cmd;
static const char *opt_mount, *opt_socket;

static int cmd_hash(int argc, char **argv);
static int cmd_version(int argc, char **argv);
static int cmd_help(int argc, char **argv);

static const struct kvctl_cmd kvctl_cmds[] = {
	{ "hash", cmd_hash, "print the block names of a token sequence" },
	{ "status", kvctl_status,
	  "show the daemon, its pool and its counters" },
	{ "ls", kvctl_ls, "list the blocks of a namespace" },
	{ "stat", kvctl_stat, "show one block" },
	{ "lookup", kvctl_lookup,
	  "count the cached leading blocks of a chain" },
	{ "pin", kvctl_pin, "pin the cached prefix of a chain under a lease" },
	{ "unpin", kvctl_unpin, "release a lease" },
	{ "renew", kvctl_renew, "extend a lease" },
	{ "leases", kvctl_leases, "list the live leases, or revoke one" },
	{ "evict", kvctl_evict, "evict blocks now" },
	{ "ns", kvctl_ns, "list, create or remove namespaces" },
	{ "nodes", kvctl_nodes, "show the cluster's live nodes" },
	{ "prefetch", kvctl_prefetch,
	  "warm a node with blocks from the cluster" },
	{ "version", cmd_version, "print the version and optional features" },
	{ "help", cmd_help, "show help for kvctl or one command" },
};

#define NCMDS (sizeof(kvctl_cmds) / sizeof(kvctl_cmds[0]))

static void usage(FILE *f)
{
	fputs("usage: kvctl hash [-c kvfs] -n ns -b block_tokens [-j] "
	      "[token ...]\n"
	      "       kvctl hash -c sglang -b block_tokens [-j] [token ...]\n"
	      "       kvctl [-m mount | -s socket] command [argument ...]\n"
	      "       kvctl version\n"
	      "       kvctl help [command]\n"
	      "       kvctl -h | --help\n"
	      "       kvctl -V | --version\n"
	      "\n"
	      "commands:\n",
	      f);
	for (size_t i = 0; i < NCMDS; i++)
		fprintf(f, "  %-10s %s\n", kvctl_cmds[i].name,
			kvctl_cmds[i].summary);
	fputs("\n"
	      "The commands from status to ns talk to a running kvfsd(8):\n"
	      "\n"
	      "  -m mount | --mount=mount\n"
	      "          the one mounted at mount\n"
	      "  -s socket | --socket=socket\n"
	      "          the one serving this control socket\n"
	      "\n"
	      "Without either, KVFS_SOCKET names the socket.\n"
	      "'kvctl help COMMAND' shows one command; see kvctl(1).\n",
	      f);
}

/* stdout is where the answer goes: a lost write must not exit 0 */
int kvctl_flush_stdout(void)
{
	if (fflush(stdout) == 0 && !ferror(stdout))
		return 0;
	cli_fail(kvctl_cmd, errno, "writing output");
	return 1;
}

/* ------------------------------------------------------------ hash */

/* the chains kvctl hash computes (kvfs(7), HASH CHAIN) */
enum hash_scheme {
	HASH_KVFS,   /* kvfs v1: seeded with the namespace and B */
	HASH_SGLANG, /* SGLang HiCache page keys: no seed, no namespace */
};

struct hash_opts {
	enum hash_scheme scheme;
	const char *ns; /* NULL with HASH_SGLANG */
	uint32_t block_tokens;
	int json;
};

static void hash_usage(FILE *f)
{
	fputs("usage: kvctl hash [-c kvfs] -n ns -b block_tokens [-j] "
	      "[token ...]\n"
	      "       kvctl hash -c sglang -b block_tokens [-j] [token ...]\n"
	      "\n"
	      "Print the kvfs v1 name of every full block of block_tokens\n"
	      "tokens, one per line; a trailing partial block has no name.\n"
	      "With -c sglang, print SGLang HiCache's page keys instead: the\n"
	      "same chain with no seed, so no namespace is given.\n"
	      "Tokens are decimal integers 0..4294967295 separated by\n"
	      "whitespace and/or commas, taken from the arguments or, when\n"
	      "there are none, from standard input.\n"
	      "\n"
	      "  -c scheme, --scheme=scheme\n"
	      "          kvfs (the default) or sglang\n"
	      "  -n ns, --namespace=ns\n"
	      "          namespace the tokens belong to (required with kvfs,\n"
	      "          refused with sglang)\n"
	      "  -b block_tokens, --block-tokens=block_tokens\n"
	      "          tokens per block, 1..1048576 (required)\n"
	      "  -j, --json\n"
	      "          print one JSON object instead of one name per line\n"
	      "  -h, --help\n"
	      "          show this help\n",
	      f);
}

/* why kvfs_ns_valid() refused ns, in words; the rules are in hash.h */
static const char *ns_problem(const char *ns)
{
	if (!*ns)
		return "empty";
	if (strlen(ns) > KVFS_NS_MAX)
		return "longer than 255 bytes";
	if (ns[0] == '.')
		return "starts with '.' (reserved)";
	if (strchr(ns, '/'))
		return "contains '/'";
	return "not a namespace name";
}

/* -c's argument; returns -1 to go on, else the exit status */
static int hash_parse_scheme(const char *arg, enum hash_scheme *out)
{
	if (strcmp(arg, "kvfs") == 0)
		*out = HASH_KVFS;
	else if (strcmp(arg, "sglang") == 0)
		*out = HASH_SGLANG;
	else
		return cli_usage_error("hash",
				       "unknown --scheme \"%.64s\" "
				       "(kvfs or sglang)",
				       arg);
	return -1;
}

/*
 * The SGLang chain has no seed, so a namespace would change nothing:
 * refusing it keeps anyone from believing it went into the names.
 */
static int hash_check_ns(const struct hash_opts *o)
{
	if (o->scheme == HASH_SGLANG && o->ns)
		return cli_usage_error("hash", "--namespace does not apply to "
					       "--scheme=sglang (no seed)");
	if (o->scheme == HASH_SGLANG)
		return -1;
	if (!o->ns)
		return cli_usage_error("hash", "missing --namespace");
	if (kvfs_ns_valid(o->ns))
		return cli_usage_error("hash", "bad namespace \"%.64s\": %s",
				       o->ns, ns_problem(o->ns));
	return -1;
}

/* returns -1 to go on, else the exit status */
static int hash_getopt(int argc, char **argv, struct hash_opts *o)
{
	static const struct option longopts[] = {
		{ "scheme", required_argument, NULL, 'c' },
		{ "namespace", required_argument, NULL, 'n' },
		{ "block-tokens", required_argument, NULL, 'b' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *bt = NULL;
	uint64_t v;
	int c, rc;

	opterr = 0; /* errors go through log.h, one format for all */
	while ((c = getopt_long(argc, argv, ":c:n:b:jh", longopts, NULL)) !=
	       -1) {
		switch (c) {
		case 'c':
			rc = hash_parse_scheme(optarg, &o->scheme);
			if (rc >= 0)
				return rc;
			break;
		case 'n':
			o->ns = optarg;
			break;
		case 'b':
			bt = optarg;
			break;
		case 'j':
			o->json = 1;
			break;
		case 'h':
			hash_usage(stdout);
			return kvctl_flush_stdout();
		default:
			return cli_bad_option("hash", c, argv);
		}
	}
	rc = hash_check_ns(o);
	if (rc >= 0)
		return rc;
	if (!bt)
		return cli_usage_error("hash", "missing --block-tokens");
	if (cli_parse_u64("hash", "--block-tokens", bt, 1,
			  KVFS_BLOCK_TOKENS_MAX, &v))
		return EXIT_USAGE;
	o->block_tokens = (uint32_t)v;
	return -1;
}

/* argv tokens, or stdin when there are none; returns an exit status */
static int hash_read_tokens(int argc, char **argv, uint32_t **tok, size_t *n)
{
	char err[256];
	int rc = 0;

	if (optind == argc)
		rc = kvfs_tokens_read_stream(stdin, tok, n, err, sizeof(err));
	for (int i = optind; !rc && i < argc; i++)
		rc = kvfs_tokens_parse(argv[i], tok, n, err, sizeof(err));
	if (!rc)
		return 0;
	if (rc == -EINVAL)
		return cli_usage_error("hash", "%s", err);
	cli_fail("hash", 0, "%s", err);
	return 1;
}

/* length of the valid UTF-8 sequence at p (1..4), or 0 if there is none */
static size_t utf8_len(const unsigned char *p)
{
	uint32_t cp;
	size_t len;

	if (p[0] < 0x80)
		return 1;
	if (p[0] < 0xc2 || p[0] > 0xf4)
		return 0;
	len = p[0] < 0xe0 ? 2 : p[0] < 0xf0 ? 3 : 4;
	cp = p[0] & (0x3f >> (len - 1));
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0; /* also stops at the NUL */
		cp = cp << 6 | (p[i] & 0x3f);
	}
	/* overlong forms, surrogates, beyond U+10FFFF */
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return len;
}

/*
 * A JSON string.  JSON text is UTF-8, a namespace is any bytes: bytes that
 * are not valid UTF-8 print as U+FFFD (the hashes still use the raw bytes).
 */
static void json_string(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	fputc('"', f);
	while (*p) {
		size_t len = utf8_len(p);

		if (len == 0) {
			fputs("\\ufffd", f);
			p++;
		} else if (*p == '"' || *p == '\\') {
			fprintf(f, "\\%c", *p++);
		} else if (*p < 0x20) {
			fprintf(f, "\\u%04x", *p++);
		} else {
			fwrite(p, 1, len, f);
			p += len;
		}
	}
	fputc('"', f);
}

static void hash_print(const struct hash_opts *o, size_t ntok,
		       uint8_t (*names)[KVFS_HASH_LEN], size_t count)
{
	char hex[KVFS_HASH_HEX_LEN + 1];

	if (o->json) {
		/* kvfs keeps the members it always had; sglang has no ns */
		if (o->scheme == HASH_SGLANG) {
			fputs("{\"scheme\":\"sglang\"", stdout);
		} else {
			fputs("{\"namespace\":", stdout);
			json_string(stdout, o->ns);
		}
		printf(",\"block_tokens\":%u,\"tokens\":%zu,\"blocks\":[",
		       o->block_tokens, ntok);
	}
	for (size_t i = 0; i < count; i++) {
		kvfs_hash_to_hex(names[i], hex);
		if (o->json)
			printf("%s\"%s\"", i ? "," : "", hex);
		else
			puts(hex);
	}
	if (o->json)
		puts("]}");
}

static int hash_run(const struct hash_opts *o, const uint32_t *tok, size_t ntok)
{
	size_t count = ntok / o->block_tokens;
	uint8_t(*names)[KVFS_HASH_LEN];
	long rc;

	names = calloc(count ? count : 1, sizeof(*names));
	if (!names) {
		cli_fail("hash", 0, "out of memory for %zu block names", count);
		return 1;
	}
	if (o->scheme == HASH_SGLANG)
		rc = kvfs_hash_chain_sglang(o->block_tokens, tok, ntok, names,
					    count);
	else
		rc = kvfs_hash_chain(o->ns, o->block_tokens, tok, ntok, names,
				     count);
	if (rc < 0) {
		cli_fail("hash", (int)rc, "hashing failed");
		free(names);
		return 1;
	}
	hash_print(o, ntok, names, (size_t)rc);
	free(names);
	return kvctl_flush_stdout();
}

static int cmd_hash(int argc, char **argv)
{
	struct hash_opts o = { 0 };
	uint32_t *tok = NULL;
	size_t ntok = 0;
	int rc;

	rc = hash_getopt(argc, argv, &o);
	if (rc >= 0)
		return rc;
	rc = hash_read_tokens(argc, argv, &tok, &ntok);
	if (!rc)
		rc = hash_run(&o, tok, ntok);
	free(tok);
	return rc;
}

/* ------------------------------------------------------------ version */

static void print_probe(const char *what, int (*probe)(char *, size_t))
{
	char why[256] = "";
	int n = probe(why, sizeof(why));

	/* why already reads as a sentence, often with its own parentheses */
	if (n > 0)
		printf("%s %d device%s: %s\n", what, n, n == 1 ? "" : "s", why);
	else if (n == 0)
		printf("%s no device: %s\n", what, why);
	else
		printf("%s not built: %s\n", what, why);
}

static int cmd_version(int argc, char **argv)
{
	if (argc > 1 && cli_is_help(argv[1])) {
		puts("usage: kvctl version\n"
		     "print the version and optional features");
		return kvctl_flush_stdout();
	}
	if (argc > 1)
		return cli_usage_error("version", "takes no arguments");
	cli_version(stdout);
	print_probe("rdma:", kvfs_rdma_probe);
	print_probe("cuda:", kvfs_cuda_probe);
	return kvctl_flush_stdout();
}

/* ------------------------------------------------------------ help */

static const struct kvctl_cmd *find_cmd(const char *name)
{
	for (size_t i = 0; i < NCMDS; i++)
		if (strcmp(kvctl_cmds[i].name, name) == 0)
			return &kvctl_cmds[i];
	return NULL;
}

static int unknown_cmd(const char *name)
{
	return cli_usage_error(NULL, "unknown command \"%s\"", name);
}

/* "kvctl help CMD" is "kvctl CMD --help", so each help text lives once */
static int cmd_help(int argc, char **argv)
{
	const struct kvctl_cmd *cmd;
	char help_opt[] = "--help";
	char *sub[3] = { NULL, help_opt, NULL };

	if (argc < 2 || cli_is_help(argv[1])) {
		usage(stdout);
		return kvctl_flush_stdout();
	}
	cmd = find_cmd(argv[1]);
	if (!cmd)
		return unknown_cmd(argv[1]);
	if (cmd->fn == cmd_help || cmd->fn == cmd_version) {
		printf("usage: kvctl %s\n%s\n", cmd->name, cmd->summary);
		return kvctl_flush_stdout();
	}
	sub[0] = argv[1];
	optind = 0; /* GNU getopt: the command parses afresh */
	return cmd->fn(2, sub);
}

int kvctl_set_target(const char *cmd, int c, const char *arg)
{
	if (c == 'm')
		opt_mount = arg;
	else
		opt_socket = arg;
	if (opt_mount && opt_socket)
		return cli_usage_error(
			cmd, "-m and -s both name the daemon: give one");
	kvctl_target = arg;
	return -1;
}

/* the mount points of kvfs file systems: fuse.kvfs in /proc/mounts */
static int kvfs_mounts(char found[2][PATH_MAX], int *n)
{
	char line[2 * PATH_MAX], dev[256], mnt[PATH_MAX], type[64];
	FILE *f = fopen("/proc/mounts", "re");

	*n = 0;
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		/* octal escapes (\040) in the path are left as they are */
		if (sscanf(line, "%255s %4095s %63s", dev, mnt, type) != 3 ||
		    strcmp(type, "fuse.kvfs"))
			continue;
		if (*n < 2)
			snprintf(found[*n], PATH_MAX, "%s", mnt);
		(*n)++;
	}
	fclose(f);
	return 0;
}

int kvctl_find_target(void)
{
	static char one[PATH_MAX];
	char found[2][PATH_MAX];
	int n, rc;

	if (kvctl_target)
		return 0;
	rc = kvfs_mounts(found, &n);
	if (rc == 0 && n == 1) {
		snprintf(one, sizeof(one), "%s", found[0]);
		kvctl_target = one;
		return 0;
	}
	if (n > 1)
		return cli_usage_error(kvctl_cmd,
				       "%d kvfs mounts (%s, %s%s): say which "
				       "with -m MOUNT or -s SOCKET",
				       n, found[0], found[1],
				       n > 2 ? ", ..." : "");
	return cli_usage_error(kvctl_cmd,
			       "no daemon given and no kvfs mounted: use -m "
			       "MOUNT, -s SOCKET or set KVFS_SOCKET");
}

/*
 * The options before the command: -h, -V, and which daemon (-m, -s).
 * Returns -1 to go on with the command at argv[optind], else the exit
 * status.
 */
static int global_getopt(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "mount", required_argument, NULL, 'm' },
		{ "socket", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c, rc;

	opterr = 0;
	/* '+': stop at the command, whose options are its own */
	while ((c = getopt_long(argc, argv, "+:m:s:hV", longopts, NULL)) !=
	       -1) {
		switch (c) {
		case 'm':
		case 's':
			rc = kvctl_set_target(NULL, c, optarg);
			if (rc >= 0)
				return rc;
			break;
		case 'h':
			return cmd_help(1, argv);
		case 'V':
			return cmd_version(1, argv);
		default:
			return cli_bad_option(NULL, c, argv);
		}
	}
	if (!kvctl_target) {
		kvctl_target = getenv("KVFS_SOCKET");
		if (kvctl_target && !*kvctl_target)
			kvctl_target = NULL;
	}
	return -1;
}

int main(int argc, char **argv)
{
	const struct kvctl_cmd *cmd;
	int rc;

	cli_init("kvctl");
	kvfs_log_init("kvctl", KVFS_LOG_WARN);
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	rc = global_getopt(argc, argv);
	if (rc >= 0)
		return rc;
	if (optind >= argc)
		return cli_usage_error(NULL, "missing command");
	cmd = find_cmd(argv[optind]);
	if (!cmd)
		return unknown_cmd(argv[optind]);
	kvctl_cmd = cmd->name;
	argc -= optind;
	argv += optind;
	optind = 0; /* GNU getopt: the command parses afresh */
	return cmd->fn(argc, argv);
}
