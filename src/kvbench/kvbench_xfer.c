/*
 * kvbench_xfer.c - "kvbench xfer": block fetch between two nodes' transfer
 * engines on loopback, beside a plain TCP socket copy of the same bytes.
 *
 * Two stores (two pools in /dev/shm, two indexes) and two engines, the
 * very code kvfsd runs in a cluster (kvstore/xfer.h): node A holds N
 * blocks of BYTES each; node B fetches all of them with
 * kv_xfer_fetch_many, which authenticates, receives each block straight
 * into a fresh slot of B's pool, verifies its CRC-32C and seals it.  The
 * baseline in the same run sends the same bytes from A's slots over one
 * loopback TCP connection and receives them into B's slots with plain
 * send(2)/recv(2): no framing, no checksum, no seal.  Each figure is the
 * median over the rounds; B's copies are evicted between rounds, and
 * every fetched block is compared with its bytes once, untimed.
 *
 * No FUSE, no etcd: what is measured is the engine.  The mount adds one
 * lookup per block on top (kvfsd(8)).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "src/kvbench/kvbench.h"
#include "kvstore/store.h"
#include "kvstore/xfer.h"

#define XF_CMD "xfer"
#define XF_NS "kvbench-xfer"
#define XF_ROUNDS 5
#define XF_BYTES_PER_ROUND (512ull << 20)
#define XF_TARGET 0.7

struct xf_opts {
	uint64_t sizes[8];
	size_t nsizes;
	uint64_t blocks; /* 0: XF_BYTES_PER_ROUND / size */
	uint64_t rounds;
	enum kv_transport transport;
	bool json;
};

struct xf_node {
	char dir[4096];
	char pool[4096];
	struct kv_store *st;
	struct kv_xfer *x;
	uint32_t ns;
};

struct xf_result {
	uint64_t size, blocks;
	double engine_gbs, socket_gbs;
	const char *transport;
};

void kvb_xfer_usage(FILE *f)
{
	fputs("usage: kvbench xfer [options]\n"
	      "\n"
	      "Fetch throughput between two transfer engines on loopback,\n"
	      "beside a plain TCP socket copy of the same bytes.\n"
	      "\n"
	      "  -s, --size BYTES[,BYTES...]  block sizes, each a multiple of "
	      "4096 with\n"
	      "                      a K, M or G suffix allowed (default "
	      "2M,32M)\n"
	      "  -n, --blocks N      blocks per round (default 512 MiB worth)\n"
	      "  -r, --rounds N      rounds; figures are medians (default 5)\n"
	      "  -t, --transport T   auto, tcp or rdma (default auto)\n"
	      "  -j, --json          one JSON object on stdout\n"
	      "  -h, --help          this help\n",
	      f);
}

static int parse_sizes(const char *arg, struct xf_opts *o)
{
	char *copy = strdup(arg), *save = NULL, *tok;
	int rc = 0;

	if (!copy)
		return -ENOMEM;
	o->nsizes = 0;
	for (tok = strtok_r(copy, ",", &save); tok && rc == 0;
	     tok = strtok_r(NULL, ",", &save)) {
		if (o->nsizes == sizeof(o->sizes) / sizeof(o->sizes[0])) {
			rc = cli_usage_error(XF_CMD, "at most 8 sizes");
			break;
		}
		rc = cli_parse_size(XF_CMD, "--size", tok, 4096, 1ull << 30,
				    &o->sizes[o->nsizes]);
		if (rc == 0 && o->sizes[o->nsizes] % 4096)
			rc = cli_usage_error(
				XF_CMD, "--size %s: not a multiple of 4096",
				tok);
		o->nsizes++;
	}
	free(copy);
	if (rc == 0 && o->nsizes == 0)
		rc = cli_usage_error(XF_CMD, "--size: no size given");
	return rc ? -EINVAL : 0;
}

static int xf_parse(int argc, char **argv, struct xf_opts *o)
{
	static const struct option lo[] = {
		{ "size", required_argument, NULL, 's' },
		{ "blocks", required_argument, NULL, 'n' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "transport", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	o->sizes[0] = 2ull << 20;
	o->sizes[1] = 32ull << 20;
	o->nsizes = 2;
	o->rounds = XF_ROUNDS;
	opterr = 0;
	optind = 0;
	while ((c = getopt_long(argc, argv, ":s:n:r:t:jh", lo, NULL)) != -1) {
		switch (c) {
		case 's':
			if (parse_sizes(optarg, o) < 0)
				return KVB_EXIT_USAGE;
			break;
		case 'n':
			if (cli_parse_u64(XF_CMD, "--blocks", optarg, 1, 4096,
					  &o->blocks) < 0)
				return KVB_EXIT_USAGE;
			break;
		case 'r':
			if (cli_parse_u64(XF_CMD, "--rounds", optarg, 1, 1000,
					  &o->rounds) < 0)
				return KVB_EXIT_USAGE;
			break;
		case 't':
			if (kv_transport_parse(optarg, &o->transport) < 0)
				return cli_usage_error(XF_CMD,
						       "bad --transport '%s' "
						       "(auto, tcp or rdma)",
						       optarg);
			break;
		case 'j':
			o->json = true;
			break;
		case 'h':
			kvb_xfer_usage(stdout);
			return KVB_EXIT_OK;
		default:
			return cli_bad_option(XF_CMD, c, argv);
		}
	}
	if (optind < argc)
		return cli_usage_error(XF_CMD, "unexpected argument '%s'",
				       argv[optind]);
	return -1;
}

/* ---- two nodes ----------------------------------------------------- */

static int node_open(struct xf_node *n, uint64_t size, uint64_t slots,
		     const uint8_t *secret, size_t slen, const char *listen,
		     enum kv_transport t)
{
	struct kv_store_config sc = { 0 };
	struct kv_xfer_config xc = { 0 };
	char ix[4200];
	int rc;

	rc = kvb_tmpdir(n->dir, sizeof(n->dir));
	if (rc == 0)
		rc = kvb_pool_path(n->dir, n->pool, sizeof(n->pool));
	if (rc < 0)
		return rc;
	snprintf(ix, sizeof(ix), "%s/index", n->dir);
	sc.pool_path = n->pool;
	sc.index_dir = ix;
	sc.slot_size = size;
	sc.nslots = (uint32_t)slots;
	sc.reformat = true;
	rc = kv_store_open(&sc, &n->st);
	if (rc == 0)
		rc = kvb_pool_prefault(n->pool);
	if (rc == 0)
		rc = kv_store_ns_create(n->st, XF_NS, 512, &n->ns);
	if (rc < 0)
		return rc;
	xc.store = n->st;
	xc.listen = listen;
	xc.secret = secret;
	xc.secret_len = slen;
	xc.transport = t;
	xc.timeout_ms = 30000;
	return kv_xfer_open(&xc, &n->x);
}

static void node_close(struct xf_node *n)
{
	if (n->x)
		kv_xfer_close(n->x);
	if (n->st)
		kv_store_close(n->st);
	n->x = NULL;
	n->st = NULL;
}

static void block_name(uint8_t h[KVFS_HASH_LEN], uint64_t i, uint64_t size)
{
	memset(h, 0, KVFS_HASH_LEN);
	memcpy(h, &i, sizeof(i));
	memcpy(h + 8, &size, sizeof(size));
	h[31] = 0x5a;
}

static int fill(struct xf_node *a, uint64_t n, uint64_t size)
{
	for (uint64_t i = 0; i < n; i++) {
		uint8_t h[KVFS_HASH_LEN];
		uint32_t wh;
		void *p;
		int rc;

		block_name(h, i, size);
		rc = kv_store_create(a->st, a->ns, h, NULL, &wh);
		if (rc < 0)
			return rc;
		p = kv_store_wptr(a->st, wh);
		kvb_kv_fill(h, p, size);
		rc = kv_store_set_size(a->st, wh, size);
		if (rc == 0)
			rc = kv_store_seal(a->st, wh);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ---- the baseline: one TCP connection, send from slots, recv into slots */

struct sock_send {
	int fd;
	struct kv_store *st;
	uint32_t ns;
	uint64_t n, size;
	int rc;
};

static void *sender(void *arg)
{
	struct sock_send *s = arg;

	for (uint64_t i = 0; i < s->n && !s->rc; i++) {
		uint8_t h[KVFS_HASH_LEN];
		struct kv_ref ref;
		const char *p;
		uint64_t left;

		block_name(h, i, s->size);
		s->rc = kv_store_get(s->st, s->ns, h, &ref);
		if (s->rc)
			break;
		p = ref.data;
		left = ref.size;
		while (left) {
			ssize_t k = send(s->fd, p, left, MSG_NOSIGNAL);

			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0) {
				s->rc = -errno;
				break;
			}
			p += k;
			left -= (uint64_t)k;
		}
		kv_store_put(s->st, &ref);
	}
	shutdown(s->fd, SHUT_WR);
	return NULL;
}

static int sock_pair(int *cfd, int *sfd)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (l < 0)
		return -errno;
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &alen) < 0) {
		close(l);
		return -errno;
	}
	*cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*cfd < 0 || connect(*cfd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = errno;

		close(l);
		return -e;
	}
	*sfd = accept(l, NULL, NULL);
	close(l);
	if (*sfd < 0)
		return -errno;
	setsockopt(*cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(*sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

/* ns for the socket copy of n blocks from a to b's slots */
static int socket_round(struct xf_node *a, struct xf_node *b, uint64_t n,
			uint64_t size, uint64_t *ns)
{
	struct sock_send s = { .st = a->st, .ns = a->ns, .n = n, .size = size };
	uint32_t *wh = calloc(n, sizeof(*wh));
	bool started = false;
	pthread_t th;
	int cfd = -1, rc;
	uint64_t t0;

	s.fd = -1;
	if (!wh)
		return -ENOMEM;
	/* the destination slots, taken before the clock starts */
	for (uint64_t i = 0; i < n; i++) {
		uint8_t h[KVFS_HASH_LEN];

		block_name(h, i + (1ull << 40), size);
		rc = kv_store_create(b->st, b->ns, h, NULL, &wh[i]);
		if (rc < 0) {
			for (uint64_t k = 0; k < i; k++)
				kv_store_abort(b->st, wh[k]);
			free(wh);
			return rc;
		}
	}
	rc = sock_pair(&cfd, &s.fd);
	t0 = kvb_now();
	if (rc == 0)
		rc = -pthread_create(&th, NULL, sender, &s);
	started = rc == 0;
	for (uint64_t i = 0; rc == 0 && i < n; i++) {
		char *p = kv_store_wptr(b->st, wh[i]);
		uint64_t left = size;

		while (left) {
			ssize_t k = recv(cfd, p, left, 0);

			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0) {
				rc = k < 0 ? -errno : -EPIPE;
				break;
			}
			p += k;
			left -= (uint64_t)k;
		}
	}
	*ns = kvb_now() - t0;
	if (cfd >= 0)
		close(cfd); /* a sender blocked on a failed round wakes up */
	if (started) {
		pthread_join(th, NULL);
		if (rc == 0)
			rc = s.rc;
	}
	if (s.fd >= 0)
		close(s.fd);
	for (uint64_t i = 0; i < n; i++)
		kv_store_abort(b->st, wh[i]);
	free(wh);
	return rc;
}

/* ---- the engine ---------------------------------------------------- */

static int engine_round(struct xf_node *a, struct xf_node *b, uint64_t n,
			uint64_t size, bool verify, uint64_t *ns)
{
	uint8_t(*h)[KVFS_HASH_LEN] = calloc(n, KVFS_HASH_LEN);
	int *res = calloc(n, sizeof(*res));
	char peer[64];
	uint64_t t0;
	long got;
	int rc = 0;

	if (!h || !res) {
		free(h);
		free(res);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < n; i++)
		block_name(h[i], i, size);
	snprintf(peer, sizeof(peer), "127.0.0.1:%d", kv_xfer_port(a->x));
	t0 = kvb_now();
	got = kv_xfer_fetch_many(b->x, peer, XF_NS,
				 (const uint8_t(*)[KVFS_HASH_LEN])h, n, res);
	*ns = kvb_now() - t0;
	if (got < 0)
		rc = (int)got;
	for (uint64_t i = 0; rc == 0 && i < n; i++)
		if (res[i] < 0)
			rc = res[i];
	for (uint64_t i = 0; rc == 0 && verify && i < n; i++) {
		struct kv_ref ref;

		rc = kv_store_get(b->st, b->ns, h[i], &ref);
		if (rc == 0) {
			if (ref.size != size ||
			    kvb_kv_check(h[i], ref.data, size) != size)
				rc = -EBADMSG;
			kv_store_put(b->st, &ref);
		}
	}
	/* empty B again for the next round */
	for (uint64_t i = 0; i < n; i++)
		kv_store_evict(b->st, b->ns, h[i]);
	free(h);
	free(res);
	return rc;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int run_size(const struct xf_opts *o, uint64_t size, struct xf_result *r)
{
	uint64_t n = o->blocks ? o->blocks : XF_BYTES_PER_ROUND / size;
	uint64_t *te = calloc(o->rounds, sizeof(*te));
	uint64_t *ts = calloc(o->rounds, sizeof(*ts));
	struct xf_node a = { 0 }, b = { 0 };
	struct cli_progress p;
	uint8_t secret[32];
	char sz[32];
	int rc;

	if (!te || !ts) {
		free(te);
		free(ts);
		return -ENOMEM;
	}
	if (n < 1)
		n = 1;
	if (getrandom(secret, sizeof(secret), 0) != sizeof(secret))
		rc = -EIO;
	else
		rc = kvb_check_space(XF_CMD, "/dev/shm",
				     2 * (n + 1) * size + (2 * n + 1) * size);
	if (rc == 0)
		rc = node_open(&a, size, n + 1, secret, sizeof(secret),
			       "127.0.0.1:0", o->transport);
	if (rc == 0)
		rc = node_open(&b, size, 2 * n + 1, secret, sizeof(secret),
			       NULL, o->transport);
	if (rc == 0)
		rc = fill(&a, n, size);
	kvb_fmt_size(sz, sizeof(sz), size);
	cli_progress_start(&p, sz, o->rounds);
	for (uint64_t k = 0; rc == 0 && k < o->rounds && !kvb_stop; k++) {
		rc = engine_round(&a, &b, n, size, k == 0, &te[k]);
		if (rc == 0)
			rc = socket_round(&a, &b, n, size, &ts[k]);
		cli_progress_draw(&p, k + 1);
	}
	cli_progress_end(&p);
	if (rc == 0 && kvb_stop)
		rc = -EINTR;
	if (rc == 0) {
		qsort(te, o->rounds, sizeof(*te), cmp_u64);
		qsort(ts, o->rounds, sizeof(*ts), cmp_u64);
		r->size = size;
		r->blocks = n;
		r->engine_gbs = (double)(n * size) / (double)te[o->rounds / 2];
		r->socket_gbs = (double)(n * size) / (double)ts[o->rounds / 2];
		r->transport = kv_xfer_transport(b.x);
	}
	node_close(&b);
	node_close(&a);
	free(te);
	free(ts);
	return rc;
}

int kvb_xfer_main(int argc, char **argv)
{
	struct xf_result r[8];
	struct xf_opts o = { 0 };
	char cpu[128], sz[32];
	int rc = xf_parse(argc, argv, &o);

	if (rc >= 0)
		return rc;
	for (size_t i = 0; i < o.nsizes; i++) {
		rc = run_size(&o, o.sizes[i], &r[i]);
		if (rc < 0) {
			kvb_fail(XF_CMD, rc, "%s blocks",
				 kvb_fmt_size(sz, sizeof(sz), o.sizes[i]));
			return KVB_EXIT_FAIL;
		}
	}
	kvb_cpu_model(cpu, sizeof(cpu));
	if (o.json) {
		printf("{\"cpu\":\"%s\",\"rounds\":%llu,\"target\":%.2f,"
		       "\"results\":[",
		       cpu, (unsigned long long)o.rounds, XF_TARGET);
		for (size_t i = 0; i < o.nsizes; i++)
			printf("%s{\"size\":%llu,\"blocks\":%llu,"
			       "\"transport\":\"%s\",\"engine_gbs\":%.3f,"
			       "\"socket_gbs\":%.3f,\"ratio\":%.3f}",
			       i ? "," : "", (unsigned long long)r[i].size,
			       (unsigned long long)r[i].blocks, r[i].transport,
			       r[i].engine_gbs, r[i].socket_gbs,
			       r[i].engine_gbs / r[i].socket_gbs);
		puts("]}");
		return KVB_EXIT_OK;
	}
	printf("kvbench xfer: fetch between two engines on loopback, "
	       "median of %llu rounds\n",
	       (unsigned long long)o.rounds);
	kvb_line(stdout, "cpu", "%s", cpu);
	printf("\n  %-8s %6s %-9s %12s %12s %7s %7s\n", "block", "blocks",
	       "transport", "fetch GB/s", "socket GB/s", "ratio", "target");
	for (size_t i = 0; i < o.nsizes; i++) {
		double ratio = r[i].engine_gbs / r[i].socket_gbs;

		printf("  %-8s %6llu %-9s %12.2f %12.2f %6.2fx %5.1fx%s\n",
		       kvb_fmt_size(sz, sizeof(sz), r[i].size),
		       (unsigned long long)r[i].blocks, r[i].transport,
		       r[i].engine_gbs, r[i].socket_gbs, ratio, XF_TARGET,
		       ratio >= XF_TARGET ? "" : "  (below target)");
	}
	return fflush(stdout) == 0 ? KVB_EXIT_OK : KVB_EXIT_FAIL;
}
