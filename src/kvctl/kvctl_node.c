/*
 * kvctl_node.c - the kvctl commands that talk to a running kvfsd through
 * its control socket (src/ctlproto.h): status, ls, stat, lookup, pin,
 * unpin, renew, leases, evict, ns.
 *
 * Each command checks its arguments before connecting (a usage error is
 * exit 2 whether or not a daemon runs), makes its requests, and prints
 * either the daemon's JSON lines as they came (-j) or a view for people.
 * Any failure is one line on stderr and exit 1.
 *
 * Pins: the protocol's "match" lease dies with its connection, which for
 * a command-line tool is at once; kvctl pin therefore sends "pin", whose
 * lease lives until unpin or its expiry.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/cli.h"
#include "src/common/ctl_client.h"
#include "src/common/ctlproto.h"
#include "src/common/hash.h"
#include "src/common/json.h"
#include "src/common/node_id.h"
#include "src/kvctl/kvctl.h"
#include "src/common/log.h"
#include "src/common/tokens.h"

#define PIN_LEASE_MS 600000  /* kvctl pin's default: 10 minutes */
#define NS_BLOCK_TOKENS 512  /* ns create's default block size */
#define STDIN_MAX (4u << 20) /* hashes read from stdin, bytes */

/* ---- options -------------------------------------------------------- */

struct nopts {
	const char *cmd; /* for messages: "ls", "ns create" */
	bool json;
	const char *node; /* -N */
	bool longfmt;
	bool tokens;
	uint32_t lease_ms;
	uint32_t block_tokens;
	const char *layout; /* ns create: "chain" or "open" */
	bool path;	    /* -p: names are paths in an open namespace */
};

struct node_help {
	const char *name;
	const char *allowed; /* short options the command takes */
	const char *text;
};

#define USAGE "usage: kvctl [-m mount | -s socket] "
#define OPT_J "  -j | --json\n          print the daemon's JSON response\n"
#define OPT_H "  -h | --help\n          show this help\n"
#define OPT_P                                                                  \
	"  -p | --path\n"                                                      \
	"          the names are paths of files in an open namespace\n"

static const struct node_help helps[] = {
	{ "status", "jh",
	  USAGE "status [-j]\n"
		"\n"
		"Show the daemon, its pool, its counters and its namespaces.\n"
		"\n" OPT_J OPT_H },
	{ "ls", "jlh",
	  USAGE
	  "ls [-jl] ns\n"
	  "\n"
	  "List the names of the sealed blocks of namespace ns, one per\n"
	  "line.  -j prints one JSON line per page of up to 1000 blocks.\n"
	  "\n" OPT_J "  -l | --long\n"
	  "          also print size, references and seal time (UTC)\n" OPT_H },
	{ "stat", "jph",
	  USAGE
	  "stat [-jp] ns hash\n"
	  "\n"
	  "Show one sealed block: size, slot, checksum, references, seal\n"
	  "time, parent, and in an open namespace its path.\n"
	  "\n" OPT_J OPT_P OPT_H },
	{ "lookup", "jth",
	  USAGE
	  "lookup [-jt] ns [hash ... | token ...]\n"
	  "\n"
	  "Count the leading blocks of a chain that are cached, in one\n"
	  "request, pinning nothing.  The chain is given as block names,\n"
	  "or with -t as tokens hashed with the namespace's block_tokens;\n"
	  "either is read from standard input when there are no arguments.\n"
	  "\n" OPT_J "  -t | --tokens\n"
	  "          the arguments are tokens, not block names\n" OPT_H },
	{ "pin", "jtLh",
	  USAGE
	  "pin [-jt] [-L ms] ns [hash ... | token ...]\n"
	  "\n"
	  "Pin the cached prefix of a chain (given as for lookup) so that\n"
	  "it is not evicted, and print the lease id.  The lease outlives\n"
	  "kvctl: it lasts until 'kvctl unpin' or its expiry.\n"
	  "\n" OPT_J "  -t | --tokens\n"
	  "          the arguments are tokens, not block names\n"
	  "  -L ms | --lease=ms\n"
	  "          lease length, 1..86400000 ms (default 600000)\n" OPT_H },
	{ "unpin", "jh",
	  USAGE "unpin [-j] lease\n"
		"\n"
		"Release a lease now.\n"
		"\n" OPT_J OPT_H },
	{ "renew", "jLh",
	  USAGE
	  "renew [-j] [-L ms] lease\n"
	  "\n"
	  "Make a lease last ms from now.\n"
	  "\n" OPT_J "  -L ms | --lease=ms\n"
	  "          new length, 1..86400000 ms (default 600000)\n" OPT_H },
	{ "leases", "jh",
	  USAGE
	  "leases [list] [-j]\n"
	  "       kvctl [-m mount | -s socket] leases revoke [-j] lease\n"
	  "\n"
	  "List the live leases: id, kind (match: dies with its\n"
	  "connection; pin: lives until unpin or expiry), owner uid and\n"
	  "pid, blocks pinned and time left; or revoke one now.  Only the\n"
	  "lease's owner uid or root may revoke it.\n"
	  "\n" OPT_J OPT_H },
	{ "evict", "jph",
	  USAGE "evict [-jp] ns hash ...\n"
		"\n"
		"Evict sealed blocks now; a referenced block (open, mapped or\n"
		"pinned) is refused.\n"
		"\n" OPT_J OPT_P OPT_H },
	{ "nodes", "jh",
	  USAGE "nodes [-j]\n"
		"\n"
		"Show the cluster the node is in: its live members, their\n"
		"transfer addresses and pools.\n"
		"\n" OPT_J OPT_H },
	{ "prefetch", "jNh",
	  USAGE
	  "prefetch [-j] [-N id] ns hash ...\n"
	  "\n"
	  "Warm a node with blocks before a request reaches it: each one\n"
	  "is fetched from the cluster into this node, then, with -N,\n"
	  "pushed to node id.  Exits 1 when any block could not be had.\n"
	  "\n" OPT_J "  -N id | --node=id\n"
	  "          the node to warm (default this one)\n" OPT_H },
	{ "ns", "jbyh",
	  USAGE
	  "ns list [-j]\n"
	  "       kvctl [-m mount | -s socket] ns create [-j] "
	  "[-b block_tokens] [-y chain|open] name\n"
	  "       kvctl [-m mount | -s socket] ns rm [-j] name\n"
	  "\n"
	  "List, create or remove namespaces.  A namespace is removed only\n"
	  "when it holds no block.\n"
	  "\n" OPT_J "  -b block_tokens | --block-tokens=block_tokens\n"
	  "          tokens per block for ns create, 1..1048576 "
	  "(default 512)\n"
	  "  -y chain|open | --layout=chain|open\n"
	  "          the new namespace's layout (kvfs(7), Layouts; default\n"
	  "          chain: names are kvfs chain hashes)\n" OPT_H },
};

static const struct node_help *find_help(const char *name)
{
	for (size_t i = 0; i < sizeof(helps) / sizeof(helps[0]); i++)
		if (!strcmp(helps[i].name, name))
			return &helps[i];
	return NULL;
}

static int opt_value(struct nopts *o, int c, const char *arg)
{
	uint64_t v;

	if (c == 'L') {
		if (cli_parse_u64(o->cmd, "--lease", arg, 1, CTLP_LEASE_MS_MAX,
				  &v))
			return EXIT_USAGE;
		o->lease_ms = (uint32_t)v;
	} else if (c == 'y') {
		if (strcmp(arg, "chain") && strcmp(arg, "open")) {
			cli_usage_error(o->cmd,
					"--layout: '%s' is neither chain nor "
					"open",
					arg);
			return EXIT_USAGE;
		}
		o->layout = arg;
	} else {
		if (cli_parse_u64(o->cmd, "--block-tokens", arg, 1,
				  KVFS_BLOCK_TOKENS_MAX, &v))
			return EXIT_USAGE;
		o->block_tokens = (uint32_t)v;
	}
	return -1;
}

static const struct option all_longopts[] = {
	{ "json", no_argument, NULL, 'j' },
	{ "long", no_argument, NULL, 'l' },
	{ "tokens", no_argument, NULL, 't' },
	{ "path", no_argument, NULL, 'p' },
	{ "lease", required_argument, NULL, 'L' },
	{ "block-tokens", required_argument, NULL, 'b' },
	{ "layout", required_argument, NULL, 'y' },
	{ "node", required_argument, NULL, 'N' },
	{ "mount", required_argument, NULL, 'm' },
	{ "socket", required_argument, NULL, 's' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

#define NLONGOPTS (sizeof(all_longopts) / sizeof(all_longopts[0]))

/* getopt's view of the options in allowed, so that any other one is
 * reported as unknown by its own spelling */
static void build_opts(const char *allowed, char *optstr, struct option *lo)
{
	size_t n = 0, k = 0;

	optstr[k++] = ':';
	for (size_t i = 0; i + 1 < NLONGOPTS; i++) {
		if (!strchr(allowed, all_longopts[i].val))
			continue;
		lo[n++] = all_longopts[i];
		optstr[k++] = (char)all_longopts[i].val;
		if (all_longopts[i].has_arg)
			optstr[k++] = ':';
	}
	optstr[k] = '\0';
	memset(&lo[n], 0, sizeof(lo[n]));
}

/*
 * The options of one command: allowed (or, when NULL, its help entry's)
 * says which.  -1 to go on with the operands at argv[optind], else the
 * exit status.
 */
static int node_getopt(int argc, char **argv, const char *help_name,
		       const char *allowed, struct nopts *o)
{
	const struct node_help *h = find_help(help_name);
	struct option lo[NLONGOPTS];
	char optstr[2 * NLONGOPTS + 2], all[16];
	int c, rc;

	/* -m/-s may follow the command too: "kvctl status -m MNT" */
	snprintf(all, sizeof(all), "%sms", allowed ? allowed : h->allowed);
	build_opts(all, optstr, lo);
	o->lease_ms = PIN_LEASE_MS;
	o->block_tokens = NS_BLOCK_TOKENS;
	opterr = 0;
	optind = 0; /* GNU getopt: start afresh on this argv */
	while ((c = getopt_long(argc, argv, optstr, lo, NULL)) != -1) {
		switch (c) {
		case 'j':
			o->json = true;
			break;
		case 'l':
			o->longfmt = true;
			break;
		case 't':
			o->tokens = true;
			break;
		case 'p':
			o->path = true;
			break;
		case 'h':
			fputs(h->text, stdout);
			return kvctl_flush_stdout();
		case 'N':
			o->node = optarg;
			break;
		case 'm':
		case 's':
			rc = kvctl_set_target(o->cmd, c, optarg);
			if (rc >= 0)
				return rc;
			break;
		case 'L':
		case 'b':
		case 'y':
			rc = opt_value(o, c, optarg);
			if (rc >= 0)
				return rc;
			break;
		default:
			return cli_bad_option(o->cmd, c, argv);
		}
	}
	return -1;
}

static int want_operands(const struct nopts *o, int have, int min, int max)
{
	if (have < min) {
		return cli_usage_error(o->cmd, "missing operand");
	}
	if (max >= 0 && have > max) {
		return cli_usage_error(o->cmd, "too many operands");
	}
	return -1;
}

/* why kvfs_ns_valid() refused ns, in words */
static int bad_ns(const struct nopts *o, const char *ns)
{
	const char *why = !*ns			     ? "empty"
			  : strlen(ns) > KVFS_NS_MAX ? "longer than 255 bytes"
			  : ns[0] == '.' ? "starts with '.' (reserved)"
					 : "contains '/'";

	return cli_usage_error(o->cmd, "bad namespace \"%.64s\": %s", ns, why);
}

static int check_ns(const struct nopts *o, const char *ns)
{
	return kvfs_ns_valid(ns) ? bad_ns(o, ns) : -1;
}

/* a block name, or with -p a path whose key it is (kvfs_path_key) */
static int check_hash(const struct nopts *o, const char *s,
		      uint8_t h[KVFS_HASH_LEN])
{
	size_t n = strlen(s);

	if (o->path) {
		while (n && s[n - 1] == '/')
			n--;
		while (n && *s == '/') {
			s++;
			n--;
		}
		if (n && kvfs_path_key(s, n, h) == 0)
			return -1;
		return cli_usage_error(o->cmd, "bad path \"%.70s\"", s);
	}
	if (kvfs_hash_from_hex(s, h) == 0)
		return -1;
	return cli_usage_error(
		o->cmd, "bad hash \"%.70s\": need 64 lowercase hex digits", s);
}

/* ---- talking to the daemon ----------------------------------------- */

static int node_connect(struct kvfs_ctl **c)
{
	char err[600];
	int rc;

	rc = kvctl_find_target();
	if (rc)
		return rc;
	if (kvfs_ctl_connect(kvctl_target, c, err, sizeof(err)) < 0) {
		cli_fail(kvctl_cmd, 0, "%s", err);
		return 1;
	}
	return 0;
}

/* one request: 0 with the response, or 1 after one error line */
static int node_call(struct kvfs_ctl *c, const char *req, struct kvfs_json **j,
		     char **raw)
{
	char err[600];
	int rc = kvfs_ctl_request(c, req, j, raw, err, sizeof(err));

	if (rc == 0)
		return 0;
	if (raw) {
		free(*raw);
		*raw = NULL;
	}
	cli_fail(kvctl_cmd, 0, "%s", err);
	return 1;
}

/* connect, one request, print its JSON with -j: the usual command */
static int node_simple(const struct nopts *o, const char *req,
		       struct kvfs_json **j)
{
	struct kvfs_ctl *c;
	char *raw = NULL;
	int rc;

	rc = node_connect(&c);
	if (rc)
		return rc;
	rc = node_call(c, req, j, &raw);
	kvfs_ctl_close(c);
	if (!rc && o->json)
		puts(raw);
	free(raw);
	return rc;
}

/* "VERB NAME" with NAME percent-encoded, then more words */
static char *req_ns(const char *verb, const char *ns, const char *more)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	char *out;

	kvfs_buf_puts(&b, verb);
	kvfs_buf_puts(&b, " ");
	kvfs_ctlp_pct_encode(&b, ns, strlen(ns));
	if (more)
		kvfs_buf_puts(&b, more);
	if (kvfs_buf_finish(&b, &out, NULL) < 0) {
		cli_fail(kvctl_cmd, 0, "out of memory");
		return NULL;
	}
	return out;
}

int kvctl_status(int argc, char **argv)
{
	struct nopts o = { .cmd = "status" };
	struct kvfs_json *j = NULL;
	int rc;

	rc = node_getopt(argc, argv, "status", NULL, &o);
	if (rc < 0)
		rc = want_operands(&o, argc - optind, 0, 0);
	if (rc >= 0)
		return rc;
	rc = node_simple(&o, "status", &j);
	if (!rc && !o.json) {
		kvctl_show_status(j);
		rc = kvctl_show_namespaces(
			kvfs_json_get(kvfs_json_get(j, "stats"), "namespaces"));
	}
	kvfs_json_free(j);
	return rc ? rc : kvctl_flush_stdout();
}

/* ---- ls ------------------------------------------------------------- */

static int ls_page(struct kvfs_ctl *c, const struct nopts *o, const char *ns,
		   uint64_t *cursor)
{
	struct kvfs_json *j = NULL;
	char more[64], *req, *raw = NULL;
	uint64_t next = 0;
	int rc;

	snprintf(more, sizeof(more), " %llu %u", (unsigned long long)*cursor,
		 CTLP_LS_DEFAULT);
	req = req_ns("ls", ns, more);
	if (!req)
		return 1;
	rc = node_call(c, req, &j, &raw);
	free(req);
	if (rc)
		return rc;
	if (o->json)
		puts(raw);
	else
		kvctl_show_blocks(kvfs_json_get(j, "blocks"), o->longfmt);
	if (!kvfs_json_true(kvfs_json_get(j, "end")) &&
	    (kvfs_json_u64(kvfs_json_get(j, "next"), &next) ||
	     next <= *cursor)) {
		cli_fail(kvctl_cmd, 0, "the daemon's cursor did not advance");
		rc = 1;
	}
	*cursor = next;
	kvfs_json_free(j);
	free(raw);
	return rc;
}

int kvctl_ls(int argc, char **argv)
{
	struct nopts o = { .cmd = "ls" };
	struct kvfs_ctl *c;
	uint64_t cursor = 0;
	int rc;

	rc = node_getopt(argc, argv, "ls", NULL, &o);
	if (rc < 0)
		rc = want_operands(&o, argc - optind, 1, 1);
	if (rc < 0)
		rc = check_ns(&o, argv[optind]);
	if (rc >= 0)
		return rc;
	rc = node_connect(&c);
	if (rc)
		return rc;
	if (o.longfmt && !o.json)
		printf("%-64s  %10s  %4s  %s\n", "HASH", "SIZE", "REFS",
		       "SEALED");
	/* the cursor grows with every page, so this ends */
	do
		rc = ls_page(c, &o, argv[optind], &cursor);
	while (!rc && cursor);
	kvfs_ctl_close(c);
	return rc ? rc : kvctl_flush_stdout();
}

/* ---- stat ----------------------------------------------------------- */

int kvctl_stat(int argc, char **argv)
{
	struct nopts o = { .cmd = "stat" };
	uint8_t h[KVFS_HASH_LEN];
	struct kvfs_json *j = NULL;
	char more[KVFS_HASH_HEX_LEN + 2], *req;
	int rc;

	rc = node_getopt(argc, argv, "stat", NULL, &o);
	if (rc < 0)
		rc = want_operands(&o, argc - optind, 2, 2);
	if (rc < 0)
		rc = check_ns(&o, argv[optind]);
	if (rc < 0)
		rc = check_hash(&o, argv[optind + 1], h);
	if (rc >= 0)
		return rc;
	more[0] = ' ';
	kvfs_hash_to_hex(h, more + 1);
	req = req_ns("stat", argv[optind], more);
	if (!req)
		return 1;
	rc = node_simple(&o, req, &j);
	free(req);
	if (!rc && !o.json)
		kvctl_show_block(argv[optind], j);
	kvfs_json_free(j);
	return rc ? rc : kvctl_flush_stdout();
}

/* ---- lookup and pin: a chain in ------------------------------------ */

struct chain {
	uint8_t (*h)[KVFS_HASH_LEN];
	size_t n;
	uint32_t *tok; /* -t only */
	size_t ntok;
	uint32_t block_tokens; /* -t only, from the daemon */
};

static void chain_free(struct chain *ch)
{
	free(ch->h);
	free(ch->tok);
}

static int chain_room(struct chain *ch, size_t n)
{
	if (n > CTLP_HASHES_MAX) {
		cli_fail(kvctl_cmd, 0,
			 "%zu blocks: at most %u go in one request", n,
			 CTLP_HASHES_MAX);
		return EXIT_USAGE;
	}
	ch->h = calloc(n ? n : 1, KVFS_HASH_LEN);
	if (!ch->h) {
		cli_fail(kvctl_cmd, 0, "out of memory");
		return 1;
	}
	return 0;
}

/* names from argv, or whitespace-separated from stdin when there are none */
static int chain_names(const struct nopts *o, int argc, char **argv,
		       struct chain *ch)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	char chunk[4096], *save, *w;
	size_t got;
	int rc;

	if (argc > 0) {
		rc = chain_room(ch, (size_t)argc);
		for (int i = 0; !rc && i < argc; i++) {
			rc = check_hash(o, argv[i], ch->h[i]);
			rc = rc < 0 ? 0 : rc;
			ch->n += !rc;
		}
		return rc;
	}
	while ((got = fread(chunk, 1, sizeof(chunk), stdin)) > 0 &&
	       b.len < STDIN_MAX)
		kvfs_buf_add(&b, chunk, got);
	if (ferror(stdin) || b.err || b.len >= STDIN_MAX) {
		cli_fail(kvctl_cmd, 0, "reading block names from stdin: %s",
			 b.len >= STDIN_MAX ? "too long" : strerror(errno));
		kvfs_buf_release(&b);
		return 1;
	}
	rc = chain_room(ch, b.len / (KVFS_HASH_HEX_LEN + 1) + 1);
	for (w = b.p ? strtok_r(b.p, " \t\r\n,", &save) : NULL; !rc && w;
	     w = strtok_r(NULL, " \t\r\n,", &save)) {
		rc = check_hash(o, w, ch->h[ch->n]);
		rc = rc < 0 ? 0 : rc;
		ch->n += !rc;
	}
	kvfs_buf_release(&b);
	return rc;
}

static int chain_tokens(int argc, char **argv, struct chain *ch)
{
	char err[256];
	int rc = 0;

	if (argc == 0)
		rc = kvfs_tokens_read_stream(stdin, &ch->tok, &ch->ntok, err,
					     sizeof(err));
	for (int i = 0; !rc && i < argc; i++)
		rc = kvfs_tokens_parse(argv[i], &ch->tok, &ch->ntok, err,
				       sizeof(err));
	if (!rc)
		return 0;
	cli_fail(kvctl_cmd, 0, "%s", err);
	return rc == -EINVAL ? EXIT_USAGE : 1;
}

/* the namespace's block_tokens, from "ns list" */
static int ns_block_tokens(struct kvfs_ctl *c, const char *ns, uint32_t *bt)
{
	struct kvfs_buf want = KVFS_BUF_INIT;
	const struct kvfs_json *l;
	struct kvfs_json *j;
	int rc;

	rc = node_call(c, "ns list", &j, NULL);
	if (rc)
		return rc;
	kvfs_ctlp_pct_encode(&want, ns, strlen(ns));
	l = kvfs_json_get(j, "namespaces");
	rc = 1;
	for (size_t i = 0; want.p && l && i < l->n; i++) {
		if (strcmp(kvctl_jstr(&l->kid[i], "name_pct"), want.p))
			continue;
		*bt = (uint32_t)kvctl_jnum(&l->kid[i], "block_tokens");
		rc = *bt ? 0 : 1;
	}
	if (rc)
		cli_fail(kvctl_cmd, 0, "unknown namespace \"%.255s\"", ns);
	kvfs_buf_release(&want);
	kvfs_json_free(j);
	return rc;
}

/* tokens -> names with the daemon's block_tokens for ns */
static int chain_hash(struct kvfs_ctl *c, const char *ns, struct chain *ch)
{
	long n;
	int rc;

	rc = ns_block_tokens(c, ns, &ch->block_tokens);
	if (!rc)
		rc = chain_room(ch, ch->ntok / ch->block_tokens);
	if (rc)
		return rc;
	n = kvfs_hash_chain(ns, ch->block_tokens, ch->tok, ch->ntok, ch->h,
			    ch->ntok / ch->block_tokens);
	if (n < 0) {
		cli_fail(kvctl_cmd, 0, "hashing failed: %s", strerror((int)-n));
		return 1;
	}
	ch->n = (size_t)n;
	return 0;
}

/*
 * The common part of lookup and pin: options, then the chain, then one
 * request; 0 with the response in *j, or the exit status.
 */
static int prefix_cmd(int argc, char **argv, struct nopts *o, struct chain *ch,
		      struct kvfs_json **j)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	bool pin = !strcmp(o->cmd, "pin");
	struct kvfs_ctl *c = NULL;
	char *raw = NULL;
	const char *ns;
	int rc;

	rc = node_getopt(argc, argv, o->cmd, NULL, o);
	if (rc < 0)
		rc = want_operands(o, argc - optind, 1, -1);
	if (rc < 0)
		rc = check_ns(o, argv[optind]);
	if (rc >= 0)
		return rc;
	ns = argv[optind];
	argc -= optind + 1;
	argv += optind + 1;
	rc = o->tokens ? chain_tokens(argc, argv, ch)
		       : chain_names(o, argc, argv, ch);
	if (!rc)
		rc = node_connect(&c);
	if (!rc && o->tokens)
		rc = chain_hash(c, ns, ch);
	if (!rc &&
	    kvfs_ctl_prefix_req(&b, pin ? "pin" : "lookup", ns,
				pin ? (long)o->lease_ms : -1,
				(const uint8_t(*)[32])ch->h, ch->n) < 0) {
		cli_fail(kvctl_cmd, 0, "out of memory");
		rc = 1;
	}
	if (!rc)
		rc = node_call(c, b.p, j, &raw);
	if (!rc && o->json)
		puts(raw);
	free(raw);
	kvfs_buf_release(&b);
	kvfs_ctl_close(c);
	return rc;
}

static void print_cached(const struct chain *ch, uint64_t k, bool tokens)
{
	printf("%llu of %zu blocks cached", (unsigned long long)k, ch->n);
	if (tokens)
		printf(" (%llu of %zu tokens)",
		       (unsigned long long)k * ch->block_tokens, ch->ntok);
	putchar('\n');
}

int kvctl_lookup(int argc, char **argv)
{
	struct nopts o = { .cmd = "lookup" };
	struct kvfs_json *j = NULL;
	struct chain ch = { 0 };
	int rc;

	rc = prefix_cmd(argc, argv, &o, &ch, &j);
	/* no response: --help was asked for */
	if (!rc && j && !o.json)
		print_cached(&ch, kvctl_jnum(j, "count"), o.tokens);
	kvfs_json_free(j);
	chain_free(&ch);
	return rc ? rc : kvctl_flush_stdout();
}

int kvctl_pin(int argc, char **argv)
{
	struct nopts o = { .cmd = "pin" };
	struct kvfs_json *j = NULL;
	struct chain ch = { 0 };
	int rc;

	rc = prefix_cmd(argc, argv, &o, &ch, &j);
	if (!rc && j && !o.json) {
		printf("lease     %s\n", kvctl_jstr(j, "lease"));
		/* the daemon may grant less than asked (-o lease_max_ms) */
		printf("pinned    %llu of %zu blocks for %llu ms\n",
		       (unsigned long long)kvctl_jnum(j, "count"), ch.n,
		       (unsigned long long)kvctl_jnum(j, "lease_ms"));
	}
	kvfs_json_free(j);
	chain_free(&ch);
	return rc ? rc : kvctl_flush_stdout();
}

/* ---- unpin, renew, evict ------------------------------------------- */

static int lease_arg(const struct nopts *o, const char *s, uint64_t *lease)
{
	/* cli_parse_u64 says what is wrong with it */
	if (cli_parse_u64(o->cmd, "lease", s, 1, UINT64_MAX, lease))
		return EXIT_USAGE;
	return -1;
}

/* a command of one lease operand: the request "VERB LEASE", and in
 * text mode "DONE LEASE" once it is answered */
static int lease_command(int argc, char **argv, const char *cmd,
			 const char *verb, const char *done)
{
	struct nopts o = { .cmd = cmd };
	struct kvfs_json *j = NULL;
	uint64_t lease;
	char req[64];
	int rc;

	rc = node_getopt(argc, argv, cmd, NULL, &o);
	if (rc < 0)
		rc = want_operands(&o, argc - optind, 1, 1);
	if (rc < 0)
		rc = lease_arg(&o, argv[optind], &lease);
	if (rc >= 0)
		return rc;
	snprintf(req, sizeof(req), "%s %llu", verb, (unsigned long long)lease);
	rc = node_simple(&o, req, &j);
	if (!rc && !o.json)
		printf("%s %llu\n", done, (unsigned long long)lease);
	kvfs_json_free(j);
	return rc ? rc : kvctl_flush_stdout();
}

int kvctl_unpin(int argc, char **argv)
{
	return lease_command(argc, argv, "unpin", "unpin", "released lease");
}

int kvctl_renew(int argc, char **argv)
{
	struct nopts o = { .cmd = "renew" };
	struct kvfs_json *j = NULL;
	uint64_t lease;
	char req[64];
	int rc;

	rc = node_getopt(argc, argv, "renew", NULL, &o);
	if (rc < 0)
		rc = want_operands(&o, argc - optind, 1, 1);
	if (rc < 0)
		rc = lease_arg(&o, argv[optind], &lease);
	if (rc >= 0)
		return rc;
	snprintf(req, sizeof(req), "renew %llu %u", (unsigned long long)lease,
		 o.lease_ms);
	rc = node_simple(&o, req, &j);
	if (!rc && !o.json)
		printf("lease %llu renewed for %llu ms\n",
		       (unsigned long long)lease,
		       (unsigned long long)kvctl_jnum(j, "lease_ms"));
	kvfs_json_free(j);
	return rc ? rc : kvctl_flush_stdout();
}

/* ---- leases ---------------------------------------------------------- */

static void show_leases(const struct kvfs_json *leases)
{
	for (size_t i = 0; leases && i < leases->n; i++) {
		const struct kvfs_json *l = &leases->kid[i];
		const struct kvfs_json *uid = kvfs_json_get(l, "uid");
		uint64_t ms = kvctl_jnum(l, "expires_ms");
		char owner[48];

		if (uid && uid->type == KVFS_JSON_NUM)
			snprintf(owner, sizeof(owner), "%10llu %8llu",
				 (unsigned long long)kvctl_jnum(l, "uid"),
				 (unsigned long long)kvctl_jnum(l, "pid"));
		else
			snprintf(owner, sizeof(owner), "%10s %8s", "-", "-");
		printf("%-20s %-5s %s %8llu %8llu.%03llu\n",
		       kvctl_jstr(l, "lease"), kvctl_jstr(l, "kind"), owner,
		       (unsigned long long)kvctl_jnum(l, "blocks"),
		       (unsigned long long)(ms / 1000),
		       (unsigned long long)(ms % 1000));
	}
}

static int leases_page(struct kvfs_ctl *c, const struct nopts *o,
		       uint64_t *cursor, bool *end)
{
	struct kvfs_json *j = NULL;
	char req[64], *raw = NULL;
	uint64_t next = 0;
	int rc;

	snprintf(req, sizeof(req), "lease list %llu",
		 (unsigned long long)*cursor);
	rc = node_call(c, req, &j, &raw);
	if (rc)
		return rc;
	if (o->json)
		puts(raw);
	else
		show_leases(kvfs_json_get(j, "leases"));
	*end = kvfs_json_true(kvfs_json_get(j, "end"));
	if (!*end && (kvfs_json_u64(kvfs_json_get(j, "next"), &next) ||
		      next <= *cursor)) {
		cli_fail(kvctl_cmd, 0, "the daemon's cursor did not advance");
		rc = 1;
	}
	*cursor = next;
	kvfs_json_free(j);
	free(raw);
	return rc;
}

static int leases_list(int argc, char **argv)
{
	struct nopts o = { .cmd = "leases" };
	struct kvfs_ctl *c;
	uint64_t cursor = 0;
	bool end = false;
	int rc;

	rc = node_getopt(argc, argv, "leases", NULL, &o);
	if (rc < 0)
		rc = want_operands(&o, argc - optind, 0, 0);
	if (rc >= 0)
		return rc;
	rc = node_connect(&c);
	if (rc)
		return rc;
	if (!o.json)
		printf("%-20s %-5s %10s %8s %8s %12s\n", "LEASE", "KIND", "UID",
		       "PID", "BLOCKS", "EXPIRES_S");
	/* the cursor grows with every page, so this ends */
	do
		rc = leases_page(c, &o, &cursor, &end);
	while (!rc && !end);
	kvfs_ctl_close(c);
	return rc ? rc : kvctl_flush_stdout();
}

static int leases_revoke(int argc, char **argv)
{
	return lease_command(argc, argv, "leases", "lease revoke",
			     "revoked lease");
}

/* "leases" alone lists, as "leases list" does */
int kvctl_leases(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "list"))
		return leases_list(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "revoke"))
		return leases_revoke(argc - 1, argv + 1);
	if (argc >= 2 && argv[1][0] != '-')
		return cli_usage_error("leases",
				       "unknown verb \"%.32s\" (list or "
				       "revoke)",
				       argv[1]);
	return leases_list(argc, argv);
}

int kvctl_evict(int argc, char **argv)
{
	struct nopts o = { .cmd = "evict" };
	uint8_t h[KVFS_HASH_LEN];
	char more[KVFS_HASH_HEX_LEN + 2], *req, *raw;
	struct kvfs_ctl *c = NULL;
	int rc;

	rc = node_getopt(argc, argv, "evict", NULL, &o);
	if (rc < 0)
		rc = want_operands(&o, argc - optind, 2, -1);
	if (rc < 0)
		rc = check_ns(&o, argv[optind]);
	for (int i = optind + 1; rc < 0 && i < argc; i++)
		rc = check_hash(&o, argv[i], h) < 0 ? -1 : EXIT_USAGE;
	if (rc >= 0)
		return rc;
	rc = node_connect(&c);
	/* one request per block, stopping at the first refusal */
	for (int i = optind + 1; !rc && i < argc; i++) {
		check_hash(&o, argv[i], h);
		more[0] = ' ';
		kvfs_hash_to_hex(h, more + 1);
		req = req_ns("evict", argv[optind], more);
		rc = req ? node_call(c, req, NULL, &raw) : 1;
		free(req);
		if (!rc) {
			puts(o.json ? raw : argv[i]);
			free(raw);
		}
	}
	kvfs_ctl_close(c);
	return rc ? rc : kvctl_flush_stdout();
}

/* ---- ns ------------------------------------------------------------- */

static int ns_list(int argc, char **argv)
{
	struct nopts o = { .cmd = "ns" };
	struct kvfs_json *j = NULL;
	int rc;

	rc = node_getopt(argc, argv, "ns", "jh", &o);
	if (rc < 0)
		rc = want_operands(&o, argc - optind, 0, 0);
	if (rc >= 0)
		return rc;
	rc = node_simple(&o, "ns list", &j);
	if (!rc && !o.json)
		rc = kvctl_show_namespaces(kvfs_json_get(j, "namespaces"));
	kvfs_json_free(j);
	return rc ? rc : kvctl_flush_stdout();
}

static int ns_create(int argc, char **argv)
{
	struct nopts o = { .cmd = "ns" };
	struct kvfs_json *j = NULL;
	char more[32], *req, *name;
	int rc;

	rc = node_getopt(argc, argv, "ns", "jbyh", &o);
	if (rc < 0)
		rc = want_operands(&o, argc - optind, 1, 1);
	if (rc < 0)
		rc = check_ns(&o, argv[optind]);
	if (rc >= 0)
		return rc;
	if (!o.layout)
		o.layout = "chain";
	snprintf(more, sizeof(more), " %u %s", o.block_tokens, o.layout);
	req = req_ns("ns create", argv[optind], more);
	if (!req)
		return 1;
	rc = node_simple(&o, req, &j);
	free(req);
	if (!rc && !o.json) {
		name = kvctl_printable(argv[optind]);
		printf("created namespace %s (block_tokens %u, layout %s)\n",
		       name ? name : "?", o.block_tokens, o.layout);
		free(name);
	}
	kvfs_json_free(j);
	return rc ? rc : kvctl_flush_stdout();
}

static int ns_rm(int argc, char **argv)
{
	struct nopts o = { .cmd = "ns" };
	struct kvfs_json *j = NULL;
	char *req, *name;
	int rc;

	rc = node_getopt(argc, argv, "ns", "jh", &o);
	if (rc < 0)
		rc = want_operands(&o, argc - optind, 1, 1);
	if (rc < 0)
		rc = check_ns(&o, argv[optind]);
	if (rc >= 0)
		return rc;
	req = req_ns("ns rm", argv[optind], NULL);
	if (!req)
		return 1;
	rc = node_simple(&o, req, &j);
	free(req);
	if (!rc && !o.json) {
		name = kvctl_printable(argv[optind]);
		printf("removed namespace %s\n", name ? name : "?");
		free(name);
	}
	kvfs_json_free(j);
	return rc ? rc : kvctl_flush_stdout();
}

int kvctl_ns(int argc, char **argv)
{
	struct nopts o = { .cmd = "ns" };

	if (argc < 2 || argv[1][0] == '-') {
		/* "ns --help", or an option where the verb belongs */
		int rc = node_getopt(argc, argv, "ns", "h", &o);

		if (rc >= 0)
			return rc;
		return cli_usage_error("ns", "missing list, create or rm");
	}
	if (!strcmp(argv[1], "list"))
		return ns_list(argc - 1, argv + 1);
	if (!strcmp(argv[1], "create"))
		return ns_create(argc - 1, argv + 1);
	if (!strcmp(argv[1], "rm"))
		return ns_rm(argc - 1, argv + 1);
	return cli_usage_error(
		"ns", "unknown verb \"%.32s\" (list, create or rm)", argv[1]);
}

/* ---- cluster: nodes, prefetch -------------------------------------- */

int kvctl_nodes(int argc, char **argv)
{
	struct nopts o = { .cmd = "nodes" };
	struct kvfs_json *j = NULL;
	const struct kvfs_json *nodes;
	int rc;

	rc = node_getopt(argc, argv, "nodes", NULL, &o);
	if (rc < 0)
		rc = want_operands(&o, argc - optind, 0, 0);
	if (rc >= 0)
		return rc;
	rc = node_simple(&o, "nodes", &j);
	if (!rc && !o.json) {
		nodes = kvfs_json_get(j, "nodes");
		printf("self %s, %llu replicas, transport %s, epoch %llu, "
		       "%llu queued, %llu etcd records refused\n",
		       kvctl_jstr(j, "self"),
		       (unsigned long long)kvctl_jnum(j, "replicas"),
		       kvctl_jstr(j, "transport"),
		       (unsigned long long)kvctl_jnum(j, "epoch"),
		       (unsigned long long)kvctl_jnum(j, "queued"),
		       (unsigned long long)kvctl_jnum(j, "bad_records"));
		printf("%-20s %-24s %-10s %10s %8s\n", "ID", "ADDRESS",
		       "TRANSPORT", "SLOT", "SLOTS");
		for (size_t i = 0; nodes && i < nodes->n; i++) {
			const struct kvfs_json *n = &nodes->kid[i];

			printf("%-20s %-24s %-10s %10llu %8llu\n",
			       kvctl_jstr(n, "id"), kvctl_jstr(n, "addr"),
			       kvctl_jstr(n, "transports"),
			       (unsigned long long)kvctl_jnum(n, "slot_size"),
			       (unsigned long long)kvctl_jnum(n, "slots"));
		}
	}
	kvfs_json_free(j);
	return rc ? rc : kvctl_flush_stdout();
}

/* the errno names a prefetch may meet; others print as their number */
static const char *errno_name(int e)
{
	static const struct {
		int e;
		const char *name;
	} names[] = {
		{ ENOENT, "ENOENT" },
		{ EIO, "EIO" },
		{ ENXIO, "ENXIO" },
		{ ENOMEM, "ENOMEM" },
		{ EBUSY, "EBUSY" },
		{ EEXIST, "EEXIST" },
		{ EINVAL, "EINVAL" },
		{ ENOSPC, "ENOSPC" },
		{ EAGAIN, "EAGAIN" },
		{ EPIPE, "EPIPE" },
		{ EPROTO, "EPROTO" },
		{ EBADMSG, "EBADMSG" },
		{ ENODATA, "ENODATA" },
		{ ECONNREFUSED, "ECONNREFUSED" },
		{ ECONNRESET, "ECONNRESET" },
		{ ETIMEDOUT, "ETIMEDOUT" },
		{ EHOSTUNREACH, "EHOSTUNREACH" },
		{ ECANCELED, "ECANCELED" },
		{ EINTR, "EINTR" },
		{ ESHUTDOWN, "ESHUTDOWN" },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].e == e)
			return names[i].name;
	return NULL;
}

/*
 * prefetch -j: the daemon answers "ok":true with one errno number per
 * block even when blocks are missing; kvctl prints its own line instead,
 * ok only when every block is there, each error in words.
 */
static void prefetch_json(const struct kvfs_json *errs, uint64_t got, int argc,
			  char **argv, size_t n)
{
	printf("{\"ok\":%s,\"count\":%llu,\"n\":%zu,\"blocks\":[",
	       got == n ? "true" : "false", (unsigned long long)got, n);
	for (size_t i = 0; i < n; i++) {
		uint64_t e = 0;
		const char *name;

		if (errs && i < errs->n)
			kvfs_json_u64(&errs->kid[i], &e);
		printf("%s{\"hash\":\"%s\"", i ? "," : "",
		       argv[argc - (int)n + (int)i]);
		if (!e) {
			fputs(",\"ok\":true}", stdout);
			continue;
		}
		name = errno_name((int)e);
		printf(",\"ok\":false,\"error\":\"%s\",\"errno\":%llu",
		       strerror((int)e), (unsigned long long)e);
		if (name)
			printf(",\"errno_name\":\"%s\"", name);
		putchar('}');
	}
	puts("]}");
}

int kvctl_prefetch(int argc, char **argv)
{
	struct nopts o = { .cmd = "prefetch" };
	struct kvfs_json *j = NULL;
	struct kvfs_buf more = KVFS_BUF_INIT;
	const struct kvfs_json *errs;
	uint8_t h[KVFS_HASH_LEN];
	char *req, *tail = NULL, verb[80];
	bool json;
	int rc;

	rc = node_getopt(argc, argv, "prefetch", NULL, &o);
	if (rc < 0)
		rc = want_operands(&o, argc - optind, 2, CTLP_HASHES_MAX + 1);
	if (rc < 0)
		rc = check_ns(&o, argv[optind]);
	for (int i = optind + 1; rc < 0 && i < argc; i++)
		rc = check_hash(&o, argv[i], h) < 0 ? -1 : EXIT_USAGE;
	if (rc < 0 && o.node && kv_node_id_valid(o.node) < 0)
		rc = cli_usage_error(o.cmd, "bad node id \"%.64s\"", o.node);
	if (rc >= 0)
		return rc;
	for (int i = optind + 1; i < argc; i++) {
		kvfs_buf_puts(&more, " ");
		kvfs_buf_puts(&more, argv[i]);
	}
	if (kvfs_buf_finish(&more, &tail, NULL) < 0) {
		cli_fail(kvctl_cmd, 0, "out of memory");
		return 1;
	}
	/* "prefetch NODE NS HASH...": NODE "-" is the node we ask */
	snprintf(verb, sizeof(verb), "prefetch %s", o.node ? o.node : "-");
	req = req_ns(verb, argv[optind], tail);
	free(tail);
	/* the daemon's line is not printed as it came: see prefetch_json */
	json = o.json;
	o.json = false;
	rc = req ? node_simple(&o, req, &j) : 1;
	free(req);
	if (!rc) {
		uint64_t got = kvctl_jnum(j, "count");
		size_t n = (size_t)(argc - optind - 1);

		errs = kvfs_json_get(j, "errors");
		if (json)
			prefetch_json(errs, got, argc, argv, n);
		for (size_t i = 0; !json && errs && i < errs->n && i < n; i++) {
			uint64_t e = 0;

			kvfs_json_u64(&errs->kid[i], &e);
			printf("%s %s\n", argv[optind + 1 + (int)i],
			       e ? strerror((int)e) : "ok");
		}
		if (got != n) {
			cli_fail(kvctl_cmd, 0, "%llu of %zu blocks are there",
				 (unsigned long long)got, n);
			rc = 1;
		}
	}
	kvfs_json_free(j);
	return rc ? rc : kvctl_flush_stdout();
}
