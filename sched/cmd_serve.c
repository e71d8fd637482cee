/*
 * cmd_serve.c - `kvconductor serve`: the conductor daemon.  HTTP requests
 * (serve_http.c) and block events (serve.c) drive the scheduling core
 * with the daemon's monotonic clock; main only waits for SIGTERM/SIGINT.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sched/cli.h"
#include "src/common/cli.h"
#include "src/common/clock.h"
#include "sched/serve_int.h"

#define CMD "serve"
#define DEF_LISTEN "127.0.0.1:7400"
#define DEF_POLICY "lookahead"

struct serve_args {
	const char *listen, *events, *config, *policy, *reject;
	uint64_t nprefill, ndecode, max_body;
	double slo_ttft, slo_tbt; /* < 0: not given */
};

static const char serve_usage[] =
	"usage: kvconductor serve [--listen ADDR:PORT] [--events ADDR:PORT]\n"
	"         [--prefill N --decode M] [--config FILE] [--policy P]\n"
	"         [--slo-ttft S] [--slo-tbt S] [--reject MODE]\n"
	"         [--max-body BYTES]\n"
	"\n"
	"The conductor daemon: schedules requests over HTTP (POST "
	"/v1/schedule,\n"
	"/v1/complete, /v1/instances; GET /v1/stats, /metrics) and takes "
	"kvfsd\n"
	"block events on a TCP port.  Prints \"listen ADDR:PORT\" (and "
	"\"events\n"
	"ADDR:PORT\") on standard output once it serves; port 0 picks one.\n"
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
	"      --max-body BYTES    largest request body (default 1048576)\n";

void kvc_serve_usage(FILE *f)
{
	fputs(serve_usage, f);
}

enum {
	OPT_SLO_TTFT = 256,
	OPT_SLO_TBT,
	OPT_MAX_BODY,
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
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

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
	}
	return cli_bad_option(CMD, c, argv) ? -EINVAL : 0;
}

static int check_args(const struct serve_args *a)
{
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

static int srv_init(struct srv *srv, const struct serve_args *a)
{
	memset(srv, 0, sizeof(*srv));
	srv->ev_fd = -1;
	srv->seed = 1;
	srv->max_body = a->max_body;
	srv->start_ns = kvfs_mono_ns();
	srv->pol = sched_policy_find(a->policy);
	if (!srv->pol) {
		cli_usage_error(CMD, "--policy: no policy '%s'", a->policy);
		return -EINVAL;
	}
	if (build_config(a, &srv->cfg) < 0)
		return -EINVAL;
	pthread_mutex_init(&srv->lock, NULL);
	return 0;
}

static void srv_release(struct srv *srv)
{
	sched_destroy(srv->s);
	free(srv->pf_node);
	free(srv->dc_node);
	pthread_mutex_destroy(&srv->lock);
}

/* "listen 127.0.0.1:PORT": the host part as given, the port as bound */
static void print_bound(const char *what, const char *spec, int fd)
{
	const char *colon = strrchr(spec, ':');

	printf("%s %.*s:%u\n", what, (int)(colon - spec), spec, srv_port(fd));
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

/* serve until SIGTERM or SIGINT; the signals are blocked before any
 * thread starts, so every thread inherits the mask and only sigwait()
 * here takes them */
static int run(struct srv *srv, const struct serve_args *a)
{
	struct srv_http *h = NULL;
	sigset_t set;
	int http_fd, sig, rc;

	rc = open_listeners(a, &http_fd, &srv->ev_fd);
	if (rc < 0)
		return CLI_EXIT_FAIL;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (srv->ev_fd >= 0) {
		rc = srv_events_start(srv);
		if (rc < 0) {
			cli_fail(CMD, rc, "event listener");
			goto out_close;
		}
	}
	rc = srv_http_start(srv, http_fd, &h);
	if (rc < 0) {
		cli_fail(CMD, rc, "HTTP daemon on %s", a->listen);
		goto out_stop_events;
	}
	print_bound("listen", a->listen, http_fd);
	if (srv->ev_fd >= 0)
		print_bound("events", a->events, srv->ev_fd);
	fflush(stdout);
	while (sigwait(&set, &sig) != 0)
		;
	srv_http_stop(h); /* closes http_fd */
	srv_events_stop(srv);
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

int kvc_serve_main(int argc, char **argv)
{
	struct serve_args a;
	struct srv srv;
	int rc;

	rc = parse_args(&a, argc, argv);
	if (rc == 1) {
		kvc_serve_usage(stdout);
		return CLI_EXIT_OK;
	}
	if (rc < 0 || srv_init(&srv, &a) < 0)
		return CLI_EXIT_USAGE;
	if (a.nprefill) {
		rc = srv_set_instances(&srv, (uint32_t)a.nprefill, NULL,
				       (uint32_t)a.ndecode, NULL);
		if (rc < 0) {
			cli_fail(CMD, rc, "scheduler");
			srv_release(&srv);
			return CLI_EXIT_FAIL;
		}
	}
	rc = run(&srv, &a);
	srv_release(&srv);
	return rc;
}
