/*
 * cmd_serve.c - `kvconductor serve`: the conductor daemon.  HTTP requests
 * (serve_http.c) and block events (serve.c) drive the scheduling core
 * with the daemon's monotonic clock; main waits for SIGTERM/SIGINT and,
 * once a second meanwhile, expires requests past --request-ttl.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kvstore/elect.h"
#include "sched/cli.h"
#include "src/common/cli.h"
#include "src/common/clock.h"
#include "src/common/privfile.h"
#include "sched/serve_int.h"

#define CMD "serve"
#define DEF_LISTEN "127.0.0.1:7400"
#define DEF_POLICY "lookahead"
#define TOKEN_MAX 4096 /* bytes of a token file */
/* --kv-events: as many engines as serve_kvev.c takes */
#define KV_EVENTS_MAX 64

struct serve_args {
	const char *listen, *events, *config, *policy, *reject, *token_file;
	const char *secret_file, *handoff;
	uint64_t nprefill, ndecode, max_body, http_conns, http_per_ip;
	double slo_ttft, slo_tbt; /* < 0: not given */
	double http_timeout, ev_hello, ev_idle, request_ttl;
	const char *election; /* etcd[s]://.../NAME */
	uint64_t election_ttl;
	struct kv_etcd_auth etcd;
	const char *kv_events[KV_EVENTS_MAX]; /* --kv-events SPECs */
	const char *kv_allow;		      /* --kv-events-allow */
	unsigned nkv_events;
};

static const char serve_usage[] =
	"usage: kvconductor serve [--listen ADDR:PORT] [--events ADDR:PORT]\n"
	"         [--prefill N --decode M] [--config FILE] [--policy P]\n"
	"         [--slo-ttft S] [--slo-tbt S] [--reject MODE]\n"
	"         [--max-body BYTES] [--token-file PATH] [--http-timeout S]\n"
	"         [--http-max-conns N] [--http-per-ip N]\n"
	"         [--events-hello-timeout S] [--events-idle-timeout S]\n"
	"         [--request-ttl S] [--secret-file PATH] [--handoff on|off]\n"
	"         [--election URL [--election-ttl S] [ETCD OPTIONS]]\n"
	"         [--kv-events SPEC]... [--kv-events-allow NETS]\n"
	"\n"
	"The conductor daemon: schedules requests over HTTP (POST "
	"/v1/schedule,\n"
	"/v1/complete, /v1/instances; GET /v1/stats, /metrics) and takes "
	"kvfsd\n"
	"block events on a TCP port.  Prints \"listen ADDR:PORT\" (and "
	"\"events\n"
	"ADDR:PORT\") on standard output once it serves; port 0 picks one.\n"
	"With --policy queue, prefill engines ask POST /v1/next for their\n"
	"next request and report chunks to POST /v1/progress.\n"
	"\n"
	"  -l, --listen ADDR:PORT  HTTP address, IPv4 (default "
	"127.0.0.1:7400)\n"
	"  -e, --events ADDR:PORT  block-event listener (default: none)\n"
	"  -p, --prefill N         prefill instances, on nodes 0..N-1\n"
	"  -d, --decode M          decode instances, on nodes N..N+M-1\n"
	"                          (neither: POST /v1/instances sets them)\n"
	"  -f, --config FILE       cost model and SLOs (kvconductor fit writes "
	"one)\n"
	"  -P, --policy P          routing policy (default lookahead)\n"
	"      --slo-ttft S        TTFT SLO, seconds (default 30)\n"
	"      --slo-tbt S         TBT SLO, seconds (default 0.1)\n"
	"  -r, --reject MODE       early rejection: off, early, predict\n"
	"                          (default early)\n"
	"      --max-body BYTES    largest request body (default 1048576)\n"
	"      --token-file PATH   HTTP API bearer token, a file of mode 0600\n"
	"                          or 0400 (default: none, no authentication)\n"
	"      --http-timeout S    a request must be in whole S seconds after\n"
	"                          its connection or previous answer (default "
	"10)\n"
	"      --http-max-conns N  HTTP connections; one more evicts the one\n"
	"                          waiting longest for its request (default "
	"256)\n"
	"      --http-per-ip N     HTTP connections from one address (default "
	"64)\n"
	"      --events-hello-timeout S\n"
	"                          an event stream's RESET is due S seconds\n"
	"                          after it connects (default 10)\n"
	"      --events-idle-timeout S\n"
	"                          an event stream without a frame for S\n"
	"                          seconds is closed (default 120)\n"
	"      --request-ttl S     a request not completed S seconds after "
	"its\n"
	"                          last call is forgotten; 0: never (default "
	"600)\n"
	"      --election URL      campaign for leader of the conductors of\n"
	"                          etcd[s]://HOST:PORT[,HOST:PORT...]/NAME; a\n"
	"                          standby answers 503 with the leader's "
	"address\n"
	"      --election-ttl S    the leader's etcd lease, seconds (default "
	"3)\n"
	"      --secret-file PATH  the cluster secret: event streams must\n"
	"                          authenticate with it, and election\n"
	"                          records in etcd are signed with it\n"
	"                          (default: none, plain)\n"
	"      --handoff on|off    have the decode node pull the blocks the\n"
	"                          prefill node seals (default on)\n"
	"      --kv-events SPEC    subscribe to a vLLM engine's KV events,\n"
	"                          SPEC: ENDPOINT,node=N[,replay=ENDPOINT]\n"
	"                          [,model=M][,block-size=B][,instance=ID]\n"
	"                          [,topic=T]; repeatable\n"
	"      --kv-events-allow NETS\n"
	"                          the networks POST /v1/kv-events may\n"
	"                          subscribe to: A.B.C.D[/BITS],... or none\n"
	"                          (default 127.0.0.0/8)\n";

void kvc_serve_usage(FILE *f)
{
	fputs(serve_usage, f);
	fputs(kvc_etcd_usage, f);
}

enum {
	OPT_SLO_TTFT = 256,
	OPT_SLO_TBT,
	OPT_MAX_BODY,
	OPT_ELECTION,
	OPT_ELECTION_TTL,
	OPT_TOKEN_FILE,
	OPT_HTTP_TIMEOUT,
	OPT_HTTP_CONNS,
	OPT_HTTP_PER_IP,
	OPT_EV_HELLO,
	OPT_EV_IDLE,
	OPT_REQUEST_TTL,
	OPT_SECRET_FILE,
	OPT_HANDOFF,
	OPT_KV_EVENTS,
	OPT_KV_ALLOW,
};

static const struct option serve_opts[] = {
	{ "listen", required_argument, NULL, 'l' },
	{ "events", required_argument, NULL, 'e' },
	{ "prefill", required_argument, NULL, 'p' },
	{ "decode", required_argument, NULL, 'd' },
	{ "config", required_argument, NULL, 'f' },
	{ "policy", required_argument, NULL, 'P' },
	{ "slo-ttft", required_argument, NULL, OPT_SLO_TTFT },
	{ "slo-tbt", required_argument, NULL, OPT_SLO_TBT },
	{ "reject", required_argument, NULL, 'r' },
	{ "max-body", required_argument, NULL, OPT_MAX_BODY },
	{ "token-file", required_argument, NULL, OPT_TOKEN_FILE },
	{ "http-timeout", required_argument, NULL, OPT_HTTP_TIMEOUT },
	{ "http-max-conns", required_argument, NULL, OPT_HTTP_CONNS },
	{ "http-per-ip", required_argument, NULL, OPT_HTTP_PER_IP },
	{ "events-hello-timeout", required_argument, NULL, OPT_EV_HELLO },
	{ "events-idle-timeout", required_argument, NULL, OPT_EV_IDLE },
	{ "request-ttl", required_argument, NULL, OPT_REQUEST_TTL },
	{ "election", required_argument, NULL, OPT_ELECTION },
	{ "election-ttl", required_argument, NULL, OPT_ELECTION_TTL },
	KVC_ETCD_OPTS,
	{ "secret-file", required_argument, NULL, OPT_SECRET_FILE },
	{ "handoff", required_argument, NULL, OPT_HANDOFF },
	{ "kv-events", required_argument, NULL, OPT_KV_EVENTS },
	{ "kv-events-allow", required_argument, NULL, OPT_KV_ALLOW },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* the deadlines and caps; 0 or -EINVAL */
static int parse_limit(struct serve_args *a, int c, char **argv)
{
	switch (c) {
	case OPT_TOKEN_FILE:
		a->token_file = optarg;
		return 0;
	case OPT_SECRET_FILE:
		a->secret_file = optarg;
		return 0;
	case OPT_HANDOFF:
		if (strcmp(optarg, "on") && strcmp(optarg, "off")) {
			cli_usage_error(CMD, "--handoff: '%s' is not on or off",
					optarg);
			return -EINVAL;
		}
		a->handoff = optarg;
		return 0;
	case OPT_KV_EVENTS:
		if (a->nkv_events == KV_EVENTS_MAX) {
			cli_usage_error(CMD, "--kv-events: at most %d engines",
					KV_EVENTS_MAX);
			return -EINVAL;
		}
		a->kv_events[a->nkv_events++] = optarg;
		return 0;
	case OPT_KV_ALLOW:
		a->kv_allow = optarg;
		return 0;
	case OPT_HTTP_TIMEOUT:
		return cli_parse_double(CMD, "--http-timeout", optarg, 0, false,
					3600, &a->http_timeout);
	case OPT_HTTP_CONNS:
		return cli_parse_u64(CMD, "--http-max-conns", optarg, 1, 10000,
				     &a->http_conns);
	case OPT_HTTP_PER_IP:
		return cli_parse_u64(CMD, "--http-per-ip", optarg, 1, 10000,
				     &a->http_per_ip);
	case OPT_EV_HELLO:
		return cli_parse_double(CMD, "--events-hello-timeout", optarg,
					0, false, 3600, &a->ev_hello);
	case OPT_EV_IDLE:
		return cli_parse_double(CMD, "--events-idle-timeout", optarg, 0,
					false, 86400, &a->ev_idle);
	case OPT_REQUEST_TTL:
		return cli_parse_double(CMD, "--request-ttl", optarg, 0, true,
					1e9, &a->request_ttl);
	}
	if (kvc_etcd_opt(&a->etcd, c, optarg))
		return 0;
	return cli_bad_option(CMD, c, argv) ? -EINVAL : 0;
}

static int parse_opt(struct serve_args *a, int c, char **argv)
{
	switch (c) {
	case 'l':
		a->listen = optarg;
		return 0;
	case 'e':
		a->events = optarg;
		return 0;
	case 'f':
		a->config = optarg;
		return 0;
	case 'P':
		a->policy = optarg;
		return 0;
	case 'r':
		a->reject = optarg;
		return 0;
	case 'p':
		return cli_parse_u64(CMD, "--prefill", optarg, 1,
				     SCHED_MAX_INSTANCES, &a->nprefill);
	case 'd':
		return cli_parse_u64(CMD, "--decode", optarg, 1,
				     SCHED_MAX_INSTANCES, &a->ndecode);
	case OPT_SLO_TTFT:
		return cli_parse_double(CMD, "--slo-ttft", optarg, 0, false,
					1e9, &a->slo_ttft);
	case OPT_SLO_TBT:
		return cli_parse_double(CMD, "--slo-tbt", optarg, 0, false, 1e9,
					&a->slo_tbt);
	case OPT_MAX_BODY:
		return cli_parse_u64(CMD, "--max-body", optarg, 64, 1u << 30,
				     &a->max_body);
	case OPT_ELECTION:
		a->election = optarg;
		return 0;
	case OPT_ELECTION_TTL:
		return cli_parse_u64(CMD, "--election-ttl", optarg, 2,
				     KV_ELECT_TTL_MAX, &a->election_ttl);
	}
	return parse_limit(a, c, argv);
}

static int check_args(const struct serve_args *a)
{
	if (a->election_ttl && !a->election) {
		cli_usage_error(CMD, "--election-ttl needs --election");
		return -EINVAL;
	}
	if (kvc_etcd_check(CMD, "--election", a->election, &a->etcd) < 0)
		return -EINVAL;
	if (!a->nprefill != !a->ndecode) {
		cli_usage_error(CMD, "--prefill and --decode go together");
		return -EINVAL;
	}
	/* every instance is a node of the index */
	if (a->nprefill + a->ndecode > SCHED_MAX_INSTANCES) {
		cli_usage_error(CMD,
				"--prefill + --decode: at most %d "
				"instances in all",
				SCHED_MAX_INSTANCES);
		return -EINVAL;
	}
	return 0;
}

/* 1: --help was asked for; 0: parsed; -EINVAL: one line printed */
static int parse_args(struct serve_args *a, int argc, char **argv)
{
	int c;

	*a = (struct serve_args){
		.listen = DEF_LISTEN,
		.policy = DEF_POLICY,
		.max_body = SRV_DEF_MAX_BODY,
		.slo_ttft = -1,
		.slo_tbt = -1,
		.http_timeout = SRV_DEF_HTTP_TIMEOUT,
		.http_conns = SRV_DEF_HTTP_CONNS,
		.http_per_ip = SRV_DEF_HTTP_PER_IP,
		.ev_hello = SRV_DEF_EV_HELLO,
		.ev_idle = SRV_DEF_EV_IDLE,
		.request_ttl = SRV_DEF_REQUEST_TTL,
	};
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":l:e:p:d:f:P:r:h", serve_opts,
				NULL)) != -1) {
		if (c == 'h')
			return 1;
		if (parse_opt(a, c, argv) < 0)
			return -EINVAL;
	}
	if (optind < argc) {
		cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
		return -EINVAL;
	}
	return check_args(a);
}

/* defaults (early rejection: a daemon should refuse what it cannot
 * serve in time), then --config, then the options that override */
static int build_config(const struct serve_args *a, struct sched_config *c)
{
	char err[512];
	const char *msg;

	sched_config_default(c);
	c->reject = SCHED_REJECT_EARLY;
	if (a->config &&
	    sched_config_load(c, a->config, err, sizeof(err)) < 0) {
		cli_fail(CMD, 0, "%s", err);
		return -EINVAL;
	}
	if (a->slo_ttft > 0)
		c->slo_ttft = a->slo_ttft;
	if (a->slo_tbt > 0)
		c->slo_tbt = a->slo_tbt;
	if (a->reject && sched_reject_parse(a->reject, &c->reject) < 0) {
		cli_usage_error(CMD,
				"--reject: '%s' is not off, early or "
				"predict",
				a->reject);
		return -EINVAL;
	}
	if (sched_config_check(c, &msg) < 0) {
		cli_usage_error(CMD, "config: %s", msg);
		return -EINVAL;
	}
	return 0;
}

/* the token's bytes: printable, no white space (RFC 6750's b64token is
 * narrower; this refuses only what cannot travel in a header line) */
static int token_check(const char *path, const char *t, size_t len)
{
	if (!len) {
		cli_fail(CMD, 0, "--token-file %s: empty token", path);
		return -EINVAL;
	}
	for (size_t i = 0; i < len; i++)
		if (t[i] < 0x21 || t[i] > 0x7e) {
			cli_fail(CMD, 0,
				 "--token-file %s: the token has white space "
				 "or control characters",
				 path);
			return -EINVAL;
		}
	return 0;
}

/*
 * A file of option opt that only its owner may read or write (a secret
 * that others can read is not one), at most max bytes, trailing newlines
 * stripped: its length and *buf (kvfs_privfile_free it), or -errno with
 * the reason printed.
 */
static ssize_t read_private(const char *opt, const char *path, char **buf,
			    size_t max)
{
	const char *why;
	mode_t perm;
	ssize_t n = kvfs_privfile_read(path, max, buf, &perm, &why);

	if (n < 0) {
		cli_fail(CMD, 0, "%s %s: %s", opt, path,
			 n == -EFBIG ? "longer than 4096 bytes" : why);
		return n;
	}
	if (perm & 077) {
		cli_fail(CMD, 0,
			 "%s %s: mode %04o lets group or others at it; "
			 "chmod 600 it",
			 opt, path, (unsigned)perm);
		kvfs_privfile_free(*buf, (size_t)n);
		*buf = NULL;
		return -EINVAL;
	}
	return n;
}

/* the bearer token: printable, no white space.  0, or -errno with
 * the reason printed. */
static int read_token(const char *path, char **out)
{
	char *buf;
	ssize_t n = read_private("--token-file", path, &buf, TOKEN_MAX);

	if (n < 0)
		return (int)n;
	if (token_check(path, buf, (size_t)n) < 0) {
		kvfs_privfile_free(buf, (size_t)n);
		return -EINVAL;
	}
	*out = buf;
	return 0;
}

/* the cluster secret, as kvfsd reads the same file: trailing newlines
 * stripped, KV_XFER_SECRET_MIN to TOKEN_MAX bytes */
static int read_secret(const char *path, struct srv *srv)
{
	char *buf;
	ssize_t n = read_private("--secret-file", path, &buf, TOKEN_MAX);

	if (n < 0)
		return (int)n;
	if (n < SRV_SECRET_MIN) {
		cli_fail(CMD, 0,
			 "--secret-file %s: the secret must be %d to %d bytes",
			 path, SRV_SECRET_MIN, TOKEN_MAX);
		kvfs_privfile_free(buf, (size_t)n);
		return -EINVAL;
	}
	srv->secret = (uint8_t *)buf;
	srv->secret_len = (size_t)n;
	return 0;
}

static int srv_init(struct srv *srv, const struct serve_args *a)
{
	memset(srv, 0, sizeof(*srv));
	srv->ev_fd = -1;
	srv->seed = 1;
	srv->max_body = a->max_body;
	srv->http_timeout = a->http_timeout;
	srv->http_conns = (unsigned)a->http_conns;
	srv->http_per_ip = (unsigned)a->http_per_ip;
	srv->ev_hello = a->ev_hello;
	srv->ev_idle = a->ev_idle;
	srv->request_ttl = a->request_ttl;
	srv->handoff = !a->handoff || !strcmp(a->handoff, "on");
	srv->start_ns = kvfs_mono_ns();
	srv->pol = sched_policy_find(a->policy);
	if (!srv->pol) {
		cli_usage_error(CMD, "--policy: no policy '%s'", a->policy);
		return -EINVAL;
	}
	if (build_config(a, &srv->cfg) < 0)
		return -EINVAL;
	if (srv_parse_nets(a->kv_allow ? a->kv_allow : "127.0.0.0/8",
			   srv->kv_allow, &srv->nkv_allow) < 0) {
		cli_usage_error(CMD,
				"--kv-events-allow: '%s' is not none or up to "
				"%d of A.B.C.D[/BITS], comma-separated",
				a->kv_allow, SRV_NETS_MAX);
		return -EINVAL;
	}
	if (srv->handoff &&
	    srv_ho_create(SRV_HO_MAX_REQS, SRV_HO_MAX_KEYS, &srv->ho) < 0) {
		cli_fail(CMD, -ENOMEM, "handoff");
		return -ENOMEM;
	}
	pthread_mutex_init(&srv->lock, NULL);
	return 0;
}

static void srv_release(struct srv *srv)
{
	srv_kvev_stop(srv); /* its thread uses the scheduler */
	srv_q_free(srv);
	sched_destroy(srv->s);
	srv_ho_destroy(srv->ho);
	free(srv->pf_node);
	free(srv->dc_node);
	if (srv->token) {
		explicit_bzero(srv->token, strlen(srv->token));
		free(srv->token);
	}
	if (srv->secret) {
		explicit_bzero(srv->secret, srv->secret_len);
		free(srv->secret);
	}
	pthread_mutex_destroy(&srv->lock);
}

/* an HTTP API without a token is anyone's who reaches it: say so when
 * that is more than this host */
static void warn_open(const struct serve_args *a)
{
	const char *colon = strrchr(a->listen, ':');
	char host[INET_ADDRSTRLEN];
	struct in_addr in;

	if (a->token_file || !colon ||
	    (size_t)(colon - a->listen) >= sizeof(host))
		return;
	memcpy(host, a->listen, colon - a->listen);
	host[colon - a->listen] = 0;
	if (inet_pton(AF_INET, host, &in) == 1 &&
	    (ntohl(in.s_addr) >> 24) == 127)
		return;
	fprintf(stderr,
		"%s %s: warning: HTTP API on %s without --token-file: anyone "
		"who reaches it can schedule and complete requests\n",
		cli_prog(), CMD, a->listen);
}

/* "listen 127.0.0.1:PORT": the host part as given, the port as bound */
static void print_bound(const char *what, const char *spec, int fd)
{
	const char *colon = strrchr(spec, ':');

	printf("%s %.*s:%u\n", what, (int)(colon - spec), spec, srv_port(fd));
}

/* --election: campaign with the addresses as print_bound says them */
static int elect_start(struct srv *srv, const struct serve_args *a, int http_fd)
{
	char http[300], events[300] = "";
	const char *colon = strrchr(a->listen, ':');
	int rc;

	snprintf(http, sizeof(http), "%.*s:%u", (int)(colon - a->listen),
		 a->listen, srv_port(http_fd));
	if (srv->ev_fd >= 0) {
		colon = strrchr(a->events, ':');
		snprintf(events, sizeof(events), "%.*s:%u",
			 (int)(colon - a->events), a->events,
			 srv_port(srv->ev_fd));
	}
	rc = srv_elect_start(srv, a->election, &a->etcd,
			     (uint32_t)a->election_ttl, http, events);
	if (rc < 0)
		cli_fail(CMD, rc, "--election %s", a->election);
	return rc;
}

static int open_listeners(const struct serve_args *a, int *http_fd, int *ev_fd)
{
	int rc;

	rc = srv_listen(a->listen, http_fd);
	if (rc < 0) {
		cli_fail(CMD, rc, "--listen %s", a->listen);
		return rc;
	}
	if (!a->events)
		return 0;
	rc = srv_listen(a->events, ev_fd);
	if (rc < 0) {
		cli_fail(CMD, rc, "--events %s", a->events);
		close(*http_fd);
	}
	return rc;
}

/* SIGTERM and SIGINT, blocked before any thread starts (--kv-events
 * starts its subscribers before run()): every thread inherits the mask,
 * so only run()'s sigtimedwait() takes them.  Another thread that did
 * not block them would be killed by them, and the daemon with it. */
static void block_stop_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	pthread_sigmask(SIG_BLOCK, set, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* serve until SIGTERM or SIGINT (block_stop_signals) */
static int run(struct srv *srv, const struct serve_args *a)
{
	struct srv_http *h = NULL;
	sigset_t set;
	int http_fd, sig, rc;

	rc = open_listeners(a, &http_fd, &srv->ev_fd);
	if (rc < 0)
		return CLI_EXIT_FAIL;
	block_stop_signals(&set);
	if (srv->ev_fd >= 0) {
		rc = srv_events_start(srv);
		if (rc < 0) {
			cli_fail(CMD, rc, "event listener");
			goto out_close;
		}
	}
	/* before HTTP: its threads read srv->el, set once from here on */
	if (a->election && elect_start(srv, a, http_fd) < 0)
		goto out_stop_events;
	rc = srv_http_start(srv, http_fd, &h);
	if (rc < 0) {
		cli_fail(CMD, rc, "HTTP daemon on %s", a->listen);
		srv_elect_stop(srv);
		goto out_stop_events;
	}
	warn_open(a);
	print_bound("listen", a->listen, http_fd);
	if (srv->ev_fd >= 0)
		print_bound("events", a->events, srv->ev_fd);
	fflush(stdout);
	for (;;) {
		struct timespec tick = { .tv_sec = 1 };

		sig = sigtimedwait(&set, NULL, &tick);
		if (sig == SIGTERM || sig == SIGINT)
			break;
		srv_expire(srv);
		srv_instances_adopt(srv);
	}
	/* resign first: a standby takes over while this one winds down */
	srv_elect_resign(srv);
	srv_q_stop(srv);  /* ends /v1/next's long polls */
	srv_http_stop(h); /* closes http_fd */
	srv_events_stop(srv);
	srv_elect_stop(srv);
	if (srv->ev_fd >= 0)
		close(srv->ev_fd);
	return CLI_EXIT_OK;

out_stop_events:
	srv_events_stop(srv);
out_close:
	close(http_fd);
	if (srv->ev_fd >= 0)
		close(srv->ev_fd);
	return CLI_EXIT_FAIL;
}

/* --kv-events: every engine subscribed to, or a CLI_EXIT_* code */
static int subscribe(struct srv *srv, const struct serve_args *a)
{
	const char *msg;
	int rc;

	for (unsigned i = 0; i < a->nkv_events; i++) {
		rc = srv_kvev_add_spec(srv, a->kv_events[i], &msg);
		if (rc == -EINVAL) {
			cli_usage_error(CMD, "--kv-events %s: %s",
					a->kv_events[i], msg);
			return CLI_EXIT_USAGE;
		}
		if (rc < 0) {
			cli_fail(CMD, 0, "--kv-events %s: %s", a->kv_events[i],
				 msg);
			return CLI_EXIT_FAIL;
		}
	}
	return 0;
}

int kvc_serve_main(int argc, char **argv)
{
	struct serve_args a;
	struct srv srv;
	sigset_t set;
	int rc;

	block_stop_signals(&set); /* before srv_init or --kv-events start any */
	rc = parse_args(&a, argc, argv);
	if (rc == 1) {
		kvc_serve_usage(stdout);
		return CLI_EXIT_OK;
	}
	if (rc < 0 || srv_init(&srv, &a) < 0)
		return CLI_EXIT_USAGE;
	if ((a.token_file && read_token(a.token_file, &srv.token) < 0) ||
	    (a.secret_file && read_secret(a.secret_file, &srv) < 0)) {
		srv_release(&srv);
		return CLI_EXIT_FAIL;
	}
	if (a.nprefill) {
		rc = srv_set_instances(&srv, (uint32_t)a.nprefill, NULL,
				       (uint32_t)a.ndecode, NULL);
		if (rc < 0) {
			cli_fail(CMD, rc, "scheduler");
			srv_release(&srv);
			return CLI_EXIT_FAIL;
		}
	}
	rc = subscribe(&srv, &a);
	if (rc == 0)
		rc = run(&srv, &a);
	srv_release(&srv);
	return rc;
}
