/*
 * check_ctl.c - fuse/ctl.h + src/ctl_client.h: the control protocol of
 * src/ctlproto.h end to end over a real unix socket, no FUSE.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#include "tests/testutil.h"

#include "fuse/ctl.h"
#include "src/common/ctl_client.h"
#include "fuse/ctl_int.h"
#include "src/common/ctlproto.h"
#include "src/common/json.h"
#include "fuse/render.h"

#define SLOT 4096
#define NSLOTS 32

static struct tu_paths P;
static struct kv_store *S;
static struct ctl_server *SRV;
static struct kvfs_ctl *C;
static char SOCK[108]; /* sun_path's size */
static uint32_t NS;
static uint8_t H[8][KVFS_HASH_LEN]; /* a chain in "m": H[0..3] cached */

static void msleep(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static void setup(void)
{
	char err[256];

	tu_paths(&P);
	S = tu_open(&P, SLOT, NSLOTS);
	ck_assert_int_lt(snprintf(SOCK, sizeof(SOCK), "%s/ctl-%u.sock", tu_root,
				  (unsigned)getpid()),
			 (int)sizeof(SOCK));
	ck_assert_int_eq(kv_store_ns_create(S, "m", 16, &NS), 0);
	for (uint32_t i = 0; i < 8; i++)
		tu_hash(H[i], i, 7);
	for (uint32_t i = 0; i < 4; i++)
		ck_assert_int_eq(
			tu_put_block(S, NS, H[i], i ? H[i - 1] : NULL, 100 + i),
			0);
	ck_assert_int_eq(ctl_server_start(S, SOCK, 0600,
					  "{\"pid\":1,\"mountpoint\":\"/x\"}",
					  &SRV),
			 0);
	ck_assert_int_eq(kvfs_ctl_connect(SOCK, &C, err, sizeof(err)), 0);
}

static void teardown(void)
{
	kvfs_ctl_close(C);
	ctl_server_stop(SRV);
	kv_store_close(S);
}

/* ---- helpers -------------------------------------------------------- */

/* req -> parsed response; asserts that it is a well-formed response */
static struct kvfs_json *call(struct kvfs_ctl *c, const char *req)
{
	struct kvfs_json *j = NULL;
	char *line = NULL;

	ck_assert_int_eq(kvfs_ctl_call(c, req, &line), 0);
	ck_assert_msg(kvfs_json_parse(line, strlen(line), &j) == 0,
		      "bad JSON for \"%s\": %s", req, line);
	ck_assert(kvfs_json_get(j, "ok"));
	free(line);
	return j;
}

/* the request must fail with err (positive) */
static void call_err(struct kvfs_ctl *c, const char *req, int err)
{
	struct kvfs_json *j = call(c, req);
	uint64_t e = 0;

	ck_assert_msg(!kvfs_json_true(kvfs_json_get(j, "ok")),
		      "\"%s\" succeeded", req);
	ck_assert_int_eq(kvfs_json_u64(kvfs_json_get(j, "errno"), &e), 0);
	ck_assert_msg((int)e == err, "\"%.60s\": errno %d, want %d", req,
		      (int)e, err);
	ck_assert_str_eq(kvfs_json_str(kvfs_json_get(j, "error")),
			 kvfs_ctlp_errno_name(err));
	ck_assert(kvfs_json_str(kvfs_json_get(j, "message")));
	kvfs_json_free(j);
}

static struct kvfs_json *call_ok(struct kvfs_ctl *c, const char *req)
{
	struct kvfs_json *j = call(c, req);

	ck_assert_msg(kvfs_json_true(kvfs_json_get(j, "ok")),
		      "\"%.60s\" failed: %s", req,
		      kvfs_json_str(kvfs_json_get(j, "message")));
	return j;
}

static uint64_t u64(const struct kvfs_json *j, const char *key)
{
	uint64_t v = 0;

	ck_assert_msg(kvfs_json_u64(kvfs_json_get(j, key), &v) == 0,
		      "no integer \"%s\"", key);
	return v;
}

static uint64_t stat_u64(const char *key)
{
	struct kvfs_json *j = call_ok(C, "status");
	uint64_t v = u64(kvfs_json_get(j, "stats"), key);

	kvfs_json_free(j);
	return v;
}

/* without a connection of ours, straight from the store */
static uint64_t stat_leases(void)
{
	struct kv_store_stats s;

	ck_assert_int_eq(kv_store_stats(S, &s), 0);
	return s.leases;
}

static void hex(const uint8_t h[KVFS_HASH_LEN], char out[65])
{
	kvfs_hash_to_hex(h, out);
}

/* a raw client, for what kvfs_ctl_call refuses to send */
static int raw_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	memcpy(sa.sun_path, SOCK, sizeof(SOCK));
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void raw_send(int fd, const void *p, size_t len)
{
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		ck_assert_int_gt(n, 0);
		p = (const char *)p + n;
		len -= (size_t)n;
	}
}

/* one line (without "\n") within 5 s; NULL at EOF */
static char *raw_line(int fd)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char ch, *out;

	for (;;) {
		ck_assert_int_eq(poll(&pfd, 1, 5000), 1);
		if (recv(fd, &ch, 1, 0) != 1) {
			kvfs_buf_release(&b);
			return NULL;
		}
		if (ch == '\n')
			break;
		kvfs_buf_add(&b, &ch, 1);
	}
	ck_assert_int_eq(kvfs_buf_finish(&b, &out, NULL), 0);
	return out;
}

static int raw_errno(const char *line)
{
	struct kvfs_json *j;
	uint64_t e = 0;

	ck_assert_msg(line, "no response");
	ck_assert_int_eq(kvfs_json_parse(line, strlen(line), &j), 0);
	if (!kvfs_json_true(kvfs_json_get(j, "ok")))
		ck_assert_int_eq(kvfs_json_u64(kvfs_json_get(j, "errno"), &e),
				 0);
	kvfs_json_free(j);
	return (int)e;
}

/* ---- tests ---------------------------------------------------------- */

START_TEST(test_status)
{
	struct kvfs_json *j = call_ok(C, "status");
	const struct kvfs_json *st = kvfs_json_get(j, "stats");
	const struct kvfs_json *nss = kvfs_json_get(st, "namespaces");

	ck_assert_str_eq(kvfs_json_str(kvfs_json_get(kvfs_json_get(j, "daemon"),
						     "mountpoint")),
			 "/x");
	ck_assert_uint_eq(u64(kvfs_json_get(st, "pool"), "slots"), NSLOTS);
	ck_assert_uint_eq(u64(kvfs_json_get(st, "pool"), "slot_size"), SLOT);
	ck_assert_uint_eq(u64(st, "blocks"), 4);
	ck_assert_uint_eq(u64(st, "seals"), 4);
	ck_assert(kvfs_json_get(st, "hit_rate"));
	ck_assert(kvfs_json_get(st, "recovery_dropped"));
	ck_assert_uint_eq(u64(kvfs_json_get(j, "ctl"), "clients"), 1);
	ck_assert_int_eq(nss->type, KVFS_JSON_ARR);
	ck_assert_uint_eq(nss->n, 1);
	ck_assert_str_eq(kvfs_json_str(kvfs_json_get(&nss->kid[0], "name")),
			 "m");
	ck_assert_uint_eq(u64(&nss->kid[0], "block_tokens"), 16);
	ck_assert_uint_eq(u64(&nss->kid[0], "bytes"), 100 + 101 + 102 + 103);
	kvfs_json_free(j);
	/* requests keep working on one connection, \r\n too */
	j = call_ok(C, "status\r");
	kvfs_json_free(j);
}
END_TEST

START_TEST(test_ns)
{
	struct kvfs_json *j;
	const struct kvfs_json *l;
	const char *odd = "a b\"\\\n\xff\xc3\xbc~%";
	struct kvfs_buf b = KVFS_BUF_INIT;
	uint32_t id, bt;

	j = call_ok(C, "ns create llama%203 512");
	ck_assert_str_eq(kvfs_json_str(kvfs_json_get(j, "name")), "llama 3");
	ck_assert_str_eq(kvfs_json_str(kvfs_json_get(j, "name_pct")),
			 "llama%203");
	ck_assert_uint_eq(u64(j, "block_tokens"), 512);
	kvfs_json_free(j);
	ck_assert_int_eq(kv_store_ns_find(S, "llama 3", &id, &bt), 0);
	ck_assert_uint_eq(bt, 512);
	call_err(C, "ns create llama%203 512", EEXIST);
	call_err(C, "ns create m 16", EEXIST);

	/* any bytes round-trip through percent-encoding */
	kvfs_buf_puts(&b, "ns create ");
	kvfs_ctlp_pct_encode(&b, odd, strlen(odd));
	kvfs_buf_puts(&b, " 7");
	j = call_ok(C, b.p);
	kvfs_json_free(j);
	ck_assert_int_eq(kv_store_ns_find(S, odd, &id, &bt), 0);
	ck_assert_uint_eq(bt, 7);
	j = call_ok(C, "ns list");
	l = kvfs_json_get(j, "namespaces");
	ck_assert_uint_eq(l->n, 3);
	{
		const char *pct = NULL;
		char dec[256];
		size_t len;

		for (size_t i = 0; i < l->n; i++)
			if (u64(&l->kid[i], "block_tokens") == 7)
				pct = kvfs_json_str(
					kvfs_json_get(&l->kid[i], "name_pct"));
		ck_assert(pct);
		ck_assert_str_eq(pct, "a%20b%22%5C%0A%FF%C3%BC~%25");
		ck_assert_int_eq(kvfs_ctlp_pct_decode(pct, strlen(pct), dec,
						      sizeof(dec), &len),
				 0);
		ck_assert_str_eq(dec, odd);
	}
	kvfs_json_free(j);
	kvfs_buf_release(&b);

	call_err(C, "ns rm m", ENOTEMPTY);
	j = call_ok(C, "ns rm llama%203");
	kvfs_json_free(j);
	call_err(C, "ns rm llama%203", ENOENT);
	call_err(C, "ns create %2Fa 4", EINVAL);
	call_err(C, "ns create .kvfs 4", EINVAL);
	call_err(C, "ns create a%00b 4", EINVAL);
	call_err(C, "ns create a%zz 4", EINVAL);
	call_err(C, "ns create a% 4", EINVAL);
	call_err(C, "ns create a 0", EINVAL);
	call_err(C, "ns create a 1048577", EINVAL);
	call_err(C, "ns create a -1", EINVAL);
	call_err(C, "ns create a +4", EINVAL);
	call_err(C, "ns create a", EINVAL);
	call_err(C, "ns create a 4 5", EINVAL);
	call_err(C, "ns list x", EINVAL);
}
END_TEST

START_TEST(test_ns_long_name)
{
	struct kvfs_buf b = KVFS_BUF_INIT;

	kvfs_buf_puts(&b, "ns create ");
	for (int i = 0; i < 255; i++)
		kvfs_buf_puts(&b, "%C3"); /* 255 bytes: fits */
	kvfs_buf_puts(&b, " 4");
	kvfs_json_free(call_ok(C, b.p));
	kvfs_buf_release(&b);
	kvfs_buf_puts(&b, "ns create ");
	for (int i = 0; i < 256; i++)
		kvfs_buf_puts(&b, "x");
	kvfs_buf_puts(&b, " 4");
	call_err(C, b.p, EINVAL);
	kvfs_buf_release(&b);
}
END_TEST

START_TEST(test_ls_stat)
{
	char req[256], h0[65], h1[65], seen[4][65];
	const struct kvfs_json *bl;
	struct kvfs_json *j;
	const char *next = "0";
	char cur[32];
	int pages = 0, n = 0;

	/* page through two at a time */
	for (;;) {
		snprintf(req, sizeof(req), "ls m %s 2", next);
		j = call_ok(C, req);
		bl = kvfs_json_get(j, "blocks");
		ck_assert_uint_le(bl->n, 2);
		for (size_t i = 0; i < bl->n; i++) {
			ck_assert_int_lt(n, 4);
			snprintf(seen[n++], 65, "%s",
				 kvfs_json_str(
					 kvfs_json_get(&bl->kid[i], "hash")));
			ck_assert(kvfs_json_get(&bl->kid[i], "size"));
		}
		snprintf(cur, sizeof(cur), "%s",
			 kvfs_json_str(kvfs_json_get(j, "next")));
		next = cur;
		pages++;
		if (kvfs_json_true(kvfs_json_get(j, "end"))) {
			kvfs_json_free(j);
			break;
		}
		kvfs_json_free(j);
		ck_assert_int_lt(pages, 10);
	}
	ck_assert_int_eq(n, 4);
	for (int i = 0; i < 4; i++) {
		int found = 0;

		hex(H[i], h0);
		for (int k = 0; k < 4; k++)
			found += !strcmp(seen[k], h0);
		ck_assert_int_eq(found, 1);
	}
	j = call_ok(C, "ls m");
	ck_assert_uint_eq(kvfs_json_get(j, "blocks")->n, 4);
	ck_assert(kvfs_json_true(kvfs_json_get(j, "end")));
	kvfs_json_free(j);

	hex(H[1], h1);
	hex(H[0], h0);
	snprintf(req, sizeof(req), "stat m %s", h1);
	j = call_ok(C, req);
	ck_assert_str_eq(kvfs_json_str(kvfs_json_get(j, "hash")), h1);
	ck_assert_str_eq(kvfs_json_str(kvfs_json_get(j, "parent")), h0);
	ck_assert_uint_eq(u64(j, "size"), 101);
	ck_assert_uint_eq(u64(j, "refs"), 0);
	ck_assert_uint_eq(strlen(kvfs_json_str(kvfs_json_get(j, "checksum"))),
			  8);
	kvfs_json_free(j);
	snprintf(req, sizeof(req), "stat m %s", h0);
	j = call_ok(C, req);
	ck_assert_int_eq(kvfs_json_get(j, "parent")->type, KVFS_JSON_NULL);
	kvfs_json_free(j);

	hex(H[5], h1);
	snprintf(req, sizeof(req), "stat m %s", h1);
	call_err(C, req, ENOENT);
	snprintf(req, sizeof(req), "stat nope %s", h1);
	call_err(C, req, ENOENT);
	call_err(C, "ls nope", ENOENT);
	call_err(C, "ls m 0 0", EINVAL);
	call_err(C, "ls m 0 10001", EINVAL);
	call_err(C, "ls m x", EINVAL);
	call_err(C, "ls m 18446744073709551616", EINVAL);
	j = call_ok(C, "ls m 18446744073709551615 5");
	ck_assert_uint_eq(kvfs_json_get(j, "blocks")->n, 0);
	kvfs_json_free(j);
	call_err(C, "ls m 0 5 6", EINVAL);
}
END_TEST

START_TEST(test_lookup_match)
{
	char err[256];
	struct kvfs_ctl *c2;
	uint64_t lease = 7, hits;
	char req[512], h3[65];

	hits = stat_u64("hits");
	ck_assert_int_eq(
		kvfs_ctl_match(C, "m", (const uint8_t(*)[32])H, 6, 0, NULL), 4);
	ck_assert_uint_eq(stat_u64("hits"), hits + 4);
	ck_assert_int_eq(
		kvfs_ctl_match(C, "m", (const uint8_t(*)[32])H + 1, 3, 0, NULL),
		3);
	ck_assert_int_eq(
		kvfs_ctl_match(C, "m", (const uint8_t(*)[32])H + 4, 3, 0, NULL),
		0);
	ck_assert_int_eq(
		kvfs_ctl_match(C, "m", (const uint8_t(*)[32])H, 0, 0, NULL), 0);
	ck_assert_int_eq(
		kvfs_ctl_match(C, "nope", (const uint8_t(*)[32])H, 1, 0, NULL),
		-ENOENT);
	ck_assert_int_eq(
		kvfs_ctl_match(C, "a/b", (const uint8_t(*)[32])H, 1, 0, NULL),
		-EINVAL);
	ck_assert_uint_eq(stat_u64("pinned"), 0);

	ck_assert_int_eq(kvfs_ctl_match(C, "m", (const uint8_t(*)[32])H, 8,
					60000, &lease),
			 4);
	ck_assert_uint_ne(lease, 0);
	ck_assert_uint_eq(stat_u64("pinned"), 4);
	ck_assert_uint_eq(stat_u64("leases"), 1);
	hex(H[3], h3);
	snprintf(req, sizeof(req), "evict m %s", h3);
	call_err(C, req, EBUSY);
	/* any connection may renew and release it */
	ck_assert_int_eq(kvfs_ctl_connect(SOCK, &c2, err, sizeof(err)), 0);
	snprintf(req, sizeof(req), "renew %llu 1000",
		 (unsigned long long)lease);
	kvfs_json_free(call_ok(c2, req));
	ck_assert_int_eq(kvfs_ctl_unpin(c2, lease), 0);
	ck_assert_int_eq(kvfs_ctl_unpin(c2, lease), -ENOENT);
	call_err(c2, req, ENOENT);
	kvfs_ctl_close(c2);
	ck_assert_uint_eq(stat_u64("pinned"), 0);

	/* nothing cached: nothing pinned, lease 0 */
	ck_assert_int_eq(kvfs_ctl_match(C, "m", (const uint8_t(*)[32])H + 5, 2,
					1000, &lease),
			 0);
	ck_assert_uint_eq(lease, 0);
	ck_assert_uint_eq(stat_u64("leases"), 0);

	snprintf(req, sizeof(req), "evict m %s", h3);
	kvfs_json_free(call_ok(C, req));
	call_err(C, req, ENOENT);
	ck_assert_int_eq(
		kvfs_ctl_match(C, "m", (const uint8_t(*)[32])H, 4, 0, NULL), 3);
	call_err(C, "evict m", EINVAL);
	call_err(C, "unpin 0", EINVAL);
	call_err(C, "unpin", EINVAL);
	call_err(C, "unpin 12345678901234567890123", EINVAL);
	call_err(C, "renew 1", EINVAL);
	call_err(C, "renew 1 86400001", EINVAL);
	call_err(C, "match m 86400001", EINVAL);
	snprintf(req, sizeof(req), "match m 0 %s", h3);
	call_err(C, req, EINVAL);
	snprintf(req, sizeof(req), "pin m 0 %s", h3);
	call_err(C, req, EINVAL);
	call_err(C, "renew 1 0", EINVAL);
	ck_assert_int_eq(kvfs_ctl_match(C, "m", (const uint8_t(*)[32])H, 1,
					86400001, &lease),
			 -EINVAL);
}
END_TEST

/* a match lease dies with its connection; a pin lease does not */
START_TEST(test_lease_scope)
{
	char err[256], req[512], h0[65];
	struct kvfs_ctl *c2;
	struct kvfs_json *j;
	uint64_t lease, pin;
	int i;

	ck_assert_int_eq(kvfs_ctl_connect(SOCK, &c2, err, sizeof(err)), 0);
	ck_assert_int_eq(kvfs_ctl_match(c2, "m", (const uint8_t(*)[32])H, 2,
					600000, &lease),
			 2);
	ck_assert_int_eq(kvfs_ctl_match(c2, "m", (const uint8_t(*)[32])H, 1,
					600000, &lease),
			 1);
	hex(H[0], h0);
	snprintf(req, sizeof(req), "pin m 600000 %s", h0);
	j = call_ok(c2, req);
	ck_assert_uint_eq(u64(j, "count"), 1);
	pin = u64(j, "lease");
	ck_assert_uint_ne(pin, 0);
	kvfs_json_free(j);
	ck_assert_uint_eq(stat_u64("leases"), 3);
	j = call_ok(C, "status");
	ck_assert_uint_eq(u64(kvfs_json_get(j, "ctl"), "conn_leases"), 2);
	kvfs_json_free(j);
	kvfs_ctl_close(c2);
	/* the server notices the close asynchronously */
	for (i = 0; i < 200 && stat_u64("leases") != 1; i++)
		msleep(10);
	ck_assert_uint_eq(stat_u64("leases"), 1);
	ck_assert_uint_eq(stat_u64("pinned"), 1);
	ck_assert_int_eq(kvfs_ctl_unpin(C, pin), 0);
	ck_assert_uint_eq(stat_u64("pinned"), 0);

	/* an unpinned match lease is forgotten, so close has nothing left */
	ck_assert_int_eq(kvfs_ctl_match(C, "m", (const uint8_t(*)[32])H, 1,
					600000, &lease),
			 1);
	ck_assert_int_eq(kvfs_ctl_unpin(C, lease), 0);
	j = call_ok(C, "status");
	ck_assert_uint_eq(u64(kvfs_json_get(j, "ctl"), "conn_leases"), 0);
	kvfs_json_free(j);
}
END_TEST

/* a connection holds CTL_CONN_LEASES_DEFAULT live match leases at most;
 * expired ones make room again */
START_TEST(test_conn_lease_cap)
{
	char err[256], req[128], h0[65];
	uint64_t lease, first = 0;
	struct kvfs_ctl *c2;
	struct kvfs_json *j;

	for (unsigned i = 0; i < CTL_CONN_LEASES_DEFAULT; i++) {
		ck_assert_int_eq(kvfs_ctl_match(C, "m", (const uint8_t(*)[32])H,
						1, 600000, &lease),
				 1);
		first = first ? first : lease;
	}
	ck_assert_int_eq(kvfs_ctl_match(C, "m", (const uint8_t(*)[32])H, 1,
					600000, &lease),
			 -EAGAIN);
	/* a detached pin does not count against the connection */
	hex(H[0], h0);
	snprintf(req, sizeof(req), "pin m 1000 %s", h0);
	j = call_ok(C, req);
	ck_assert_uint_ne(u64(j, "lease"), 0);
	kvfs_json_free(j);
	ck_assert_int_eq(kvfs_ctl_unpin(C, first), 0);
	ck_assert_int_eq(kvfs_ctl_match(C, "m", (const uint8_t(*)[32])H, 1,
					600000, &lease),
			 1);

	ck_assert_int_eq(kvfs_ctl_connect(SOCK, &c2, err, sizeof(err)), 0);
	for (unsigned i = 0; i < CTL_CONN_LEASES_DEFAULT; i++)
		ck_assert_int_eq(kvfs_ctl_match(c2, "m",
						(const uint8_t(*)[32])H, 1,
						i < 10 ? 50 : 600000, &lease),
				 1);
	msleep(100);
	ck_assert_int_eq(kvfs_ctl_match(c2, "m", (const uint8_t(*)[32])H, 1,
					600000, &lease),
			 1);
	kvfs_ctl_close(c2);
	kvfs_ctl_close(C);
	C = NULL;
	for (int i = 0; i < 200 && stat_leases() != 0; i++)
		msleep(10);
	ck_assert_uint_eq(stat_leases(), 0);
}
END_TEST

/* ctl_server_stop releases what its clients held */
START_TEST(test_stop_releases)
{
	uint64_t lease;
	struct stat sb;

	ck_assert_int_eq(kvfs_ctl_match(C, "m", (const uint8_t(*)[32])H, 4,
					600000, &lease),
			 4);
	ctl_server_stop(SRV);
	SRV = NULL;
	ck_assert_int_eq(stat(SOCK, &sb), -1);
	{
		struct kv_store_stats s;

		ck_assert_int_eq(kv_store_stats(S, &s), 0);
		ck_assert_uint_eq(s.pinned, 0);
		ck_assert_uint_eq(s.leases, 0);
	}
	/* the client sees the daemon gone */
	ck_assert_int_eq(kvfs_ctl_unpin(C, lease), -EPIPE);
	ck_assert_int_eq(kvfs_ctl_unpin(C, lease), -EPIPE);
}
END_TEST

START_TEST(test_malformed)
{
	static const struct {
		const char *req;
		int err;
	} cases[] = {
		{ "frob", ENOSYS },
		{ "STATUS", ENOSYS },
		{ "ns", ENOSYS },
		{ "ns frob", ENOSYS },
		{ "status x", EINVAL },
		{ " status", EINVAL },
		{ "status ", EINVAL },
		{ "ls  m", EINVAL },
		{ "ls", EINVAL },
		{ "stat m", EINVAL },
		{ "stat m zz", EINVAL },
		{ "stat m 0123456789abcdef0123456789abcdef0123456789abcdef01234"
		  "56789ABCDEF",
		  EINVAL },
		{ "stat m 0123456789abcdef0123456789abcdef0123456789abcdef01234"
		  "56789abcde",
		  EINVAL },
		{ "stat m 0123456789abcdef0123456789abcdef0123456789abcdef01234"
		  "56789abcdef0",
		  EINVAL },
		{ "lookup m "
		  "g123456789abcdef0123456789abcdef0123456789abcdef01234"
		  "56789abcde",
		  EINVAL },
		{ "lookup", EINVAL },
		{ "match m", EINVAL },
		{ "match m x", EINVAL },
		{ "match m 99999999999", EINVAL },
		{ "pin m -5", EINVAL },
		{ "evict nope 0123456789abcdef0123456789abcdef0123456789abcdef0"
		  "123456789abcdef",
		  ENOENT },
		{ "\xff\xfe", ENOSYS },
		{ "ns create \xc3\xa4 4", 0 }, /* raw non-ASCII is taken */
	};
	struct kvfs_json *j;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (cases[i].err) {
			call_err(C, cases[i].req, cases[i].err);
		} else {
			j = call_ok(C, cases[i].req);
			kvfs_json_free(j);
		}
	}
	/* the client refuses what it cannot send as one line */
	{
		char *resp;

		ck_assert_int_eq(kvfs_ctl_call(C, "status\nstatus", &resp),
				 -EINVAL);
	}
	/* and the connection still works after all of that */
	j = call_ok(C, "status");
	kvfs_json_free(j);
}
END_TEST

START_TEST(test_malformed_raw)
{
	static const char nul[] = "ns create a\0b 4\n";
	static const char ctl[] = "status\tx\n";
	static const char empty[] = "\n";
	char *line;
	int fd = raw_connect();

	raw_send(fd, nul, sizeof(nul) - 1);
	line = raw_line(fd);
	ck_assert_int_eq(raw_errno(line), EINVAL);
	free(line);
	raw_send(fd, ctl, sizeof(ctl) - 1);
	line = raw_line(fd);
	ck_assert_int_eq(raw_errno(line), EINVAL);
	free(line);
	raw_send(fd, empty, 1);
	line = raw_line(fd);
	ck_assert_int_eq(raw_errno(line), EINVAL);
	free(line);
	/* binary garbage with a newline in it: one error per line */
	{
		unsigned char g[512];

		for (size_t i = 0; i < sizeof(g); i++)
			g[i] = (unsigned char)(i * 37 + 11);
		for (size_t i = 0; i < sizeof(g); i++)
			if (g[i] == '\n')
				g[i] = 'x';
		g[sizeof(g) - 1] = '\n';
		raw_send(fd, g, sizeof(g));
		line = raw_line(fd);
		ck_assert_int_eq(raw_errno(line), EINVAL);
		free(line);
	}
	raw_send(fd, "status\n", 7);
	line = raw_line(fd);
	ck_assert_int_eq(raw_errno(line), 0);
	free(line);
	/* a partial last line before EOF is no request: just closed */
	raw_send(fd, "stat", 4);
	shutdown(fd, SHUT_WR);
	ck_assert_ptr_null(raw_line(fd));
	close(fd);
	ck_assert_int_eq(
		kvfs_ctl_match(C, "m", (const uint8_t(*)[32])H, 1, 0, NULL), 1);
}
END_TEST

/* an overlong line: -E2BIG, then the connection is closed */
START_TEST(test_overlong)
{
	size_t len = CTLP_LINE_MAX + 4096;
	char *big = malloc(len), *line, *resp;
	int fd = raw_connect();

	ck_assert_ptr_nonnull(big);
	memset(big, 'a', len);
	memcpy(big, "lookup m ", 9);
	/* the server stops reading at the limit, so send what fits */
	{
		size_t off = 0;

		while (off < len) {
			struct pollfd pfd = { .fd = fd, .events = POLLOUT };
			ssize_t n;

			if (poll(&pfd, 1, 5000) != 1 || (pfd.revents & POLLHUP))
				break;
			n = send(fd, big + off, len - off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n <= 0)
				break;
			off += (size_t)n;
		}
		ck_assert_uint_ge(off, CTLP_LINE_MAX);
	}
	line = raw_line(fd);
	ck_assert_int_eq(raw_errno(line), E2BIG);
	free(line);
	close(fd);
	/* the longest legal line is served */
	memset(big, 0, len);
	strcpy(big, "status");
	ck_assert_int_eq(kvfs_ctl_call(C, big, &resp), 0);
	free(resp);
	memset(big, 'a', CTLP_LINE_MAX);
	big[CTLP_LINE_MAX] = '\0';
	ck_assert_int_eq(kvfs_ctl_call(C, big, &resp), -E2BIG);
	big[CTLP_LINE_MAX - 1] = '\0';
	memcpy(big, "status ", 7);
	call_err(C, big, EINVAL);
	free(big);
}
END_TEST

/* the most hashes in one request, and one more */
START_TEST(test_many_hashes)
{
	size_t n = CTLP_HASHES_MAX;
	uint8_t(*h)[KVFS_HASH_LEN] = calloc(n + 1, KVFS_HASH_LEN);
	struct kvfs_buf b = KVFS_BUF_INIT;
	uint64_t lease;

	ck_assert_ptr_nonnull(h);
	for (size_t i = 0; i < n + 1; i++)
		tu_hash(h[i], (uint32_t)i, 99);
	memcpy(h, H, 4 * KVFS_HASH_LEN);
	ck_assert_int_eq(
		kvfs_ctl_match(C, "m", (const uint8_t(*)[32])h, n, 0, NULL), 4);
	ck_assert_int_eq(kvfs_ctl_match(C, "m", (const uint8_t(*)[32])h, n,
					1000, &lease),
			 4);
	ck_assert_int_eq(
		kvfs_ctl_match(C, "m", (const uint8_t(*)[32])h, n + 1, 0, NULL),
		-E2BIG);
	/* the server's own count limit, in a line that still fits */
	kvfs_buf_puts(&b, "lookup m");
	for (size_t i = 0; i < n + 1; i++)
		kvfs_buf_puts(&b, " 0");
	call_err(C, b.p, E2BIG);
	kvfs_buf_release(&b);
	free(h);
}
END_TEST

/* requests pipelined in one write come back in order, all of them */
START_TEST(test_pipeline)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	char h0[65], *line;
	int fd = raw_connect();

	hex(H[0], h0);
	for (int i = 0; i < 200; i++)
		kvfs_buf_printf(&b, i % 2 ? "lookup m %s\n" : "frob%.0s\n", h0);
	raw_send(fd, b.p, b.len);
	for (int i = 0; i < 200; i++) {
		line = raw_line(fd);
		ck_assert_int_eq(raw_errno(line), i % 2 ? 0 : ENOSYS);
		free(line);
	}
	kvfs_buf_release(&b);
	close(fd);
}
END_TEST

/* bytes queued on fd: what it has to read (SIOCINQ) and what it sent
 * that its peer has not read yet (SIOCOUTQ) */
static void queued(int fd, int *inq, int *outq)
{
	ck_assert_int_eq(ioctl(fd, SIOCINQ, inq), 0);
	ck_assert_int_eq(ioctl(fd, SIOCOUTQ, outq), 0);
}

/*
 * A client that never reads its responses stalls only itself.  First the
 * stall is made real and measured, or the timing below proves nothing:
 * the client pipelines requests until its send hits EAGAIN, then the
 * queues must settle with responses waiting in its receive queue and
 * requests the server has stopped reading in its send queue (the server
 * holds a response it cannot send and reads no more, ctl.c conn_step).
 */
START_TEST(test_slow_reader)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	struct timespec t0, t1;
	int fd = raw_connect();
	int inq = 0, outq = 0, inq2 = -1, outq2 = -1, tries;
	size_t sent = 0;
	ssize_t n = 0;

	/* far more than both socket buffers hold (a few hundred KiB each
	 * by default): the loop ends at EAGAIN, or the test fails */
	for (int i = 0; i < 400000; i++)
		kvfs_buf_puts(&b, "ls m 0 10000\n");
	ck_assert_int_eq(b.err, 0);
	while (sent < b.len) {
		n = send(fd, b.p + sent, b.len - sent,
			 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n <= 0)
			break;
		sent += (size_t)n;
	}
	ck_assert_msg(n < 0 && errno == EAGAIN,
		      "all %zu bytes of requests went through (n %zd, %s): "
		      "the socket never filled",
		      sent, n, n < 0 ? strerror(errno) : "-");

	/* settled: two samples 50 ms apart agree (at most 5 s) */
	for (tries = 0; tries < 100; tries++) {
		queued(fd, &inq, &outq);
		if (inq == inq2 && outq == outq2)
			break;
		inq2 = inq;
		outq2 = outq;
		msleep(50);
	}
	ck_assert_msg(tries < 100, "the queues never settled");
	ck_assert_msg(inq > 0, "no responses waiting for the client");
	/* requests left unread although the server is idle otherwise: it
	 * stopped reading this client, as it must while a response waits */
	ck_assert_msg(outq > 0, "the server read every request");

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 20; i++)
		kvfs_json_free(call_ok(C, "status"));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_int_lt(t1.tv_sec - t0.tv_sec, 3);
	/* the stalled client is still stalled: nothing was dropped to
	 * answer the others */
	queued(fd, &inq2, &outq2);
	ck_assert_int_eq(inq2, inq);
	kvfs_buf_release(&b);
	close(fd);
}
END_TEST

#define NTHREADS 32
#define NREQ 50

static void *client_thread(void *arg)
{
	struct kvfs_ctl *c;
	uint64_t lease;
	char err[256];
	long ok = 0;

	(void)arg;
	if (kvfs_ctl_connect(SOCK, &c, err, sizeof(err)))
		return (void *)-1L;
	for (int i = 0; i < NREQ; i++) {
		long k = kvfs_ctl_match(c, "m", (const uint8_t(*)[32])H, 6,
					i % 2 ? 5000 : 0, &lease);

		if (k == 4 && (i % 2 == 0 || kvfs_ctl_unpin(c, lease) == 0))
			ok++;
	}
	kvfs_ctl_close(c);
	return (void *)ok;
}

START_TEST(test_concurrent)
{
	pthread_t t[NTHREADS];
	void *r;

	for (int i = 0; i < NTHREADS; i++)
		ck_assert_int_eq(
			pthread_create(&t[i], NULL, client_thread, NULL), 0);
	for (int i = 0; i < NTHREADS; i++) {
		ck_assert_int_eq(pthread_join(t[i], &r), 0);
		ck_assert_int_eq((long)r, NREQ);
	}
	ck_assert_uint_eq(stat_u64("pinned"), 0);
}
END_TEST

/* the server again, with other limits (C is reconnected) */
static void restart(const struct ctl_limits *lim)
{
	char err[256];

	kvfs_ctl_close(C);
	ctl_server_stop(SRV);
	ck_assert_int_eq(
		ctl_server_start_limits(S, SOCK, 0600, "{}", lim, &SRV), 0);
	ck_assert_int_eq(kvfs_ctl_connect(SOCK, &C, err, sizeof(err)), 0);
}

static struct ctl_limits limits(void)
{
	struct ctl_limits lim;

	ctl_limits_default(&lim);
	return lim;
}

/* a raw client that took a match lease: it holds something */
static int raw_holder(void)
{
	char req[128], h0[65];
	int fd = raw_connect();
	char *line;

	hex(H[0], h0);
	snprintf(req, sizeof(req), "match m 600000 %s\n", h0);
	raw_send(fd, req, strlen(req));
	line = raw_line(fd);
	ck_assert_int_eq(raw_errno(line), 0);
	free(line);
	return fd;
}

static int raw_status(int fd)
{
	char *line;
	int e;

	raw_send(fd, "status\n", 7);
	line = raw_line(fd);
	e = line ? raw_errno(line) : -1;
	free(line);
	return e;
}

/* wait (bounded) until the server has closed fd: its EOF */
static bool raw_closed_within(int fd, unsigned ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char ch;

	if (poll(&pfd, 1, (int)ms) != 1)
		return false;
	return recv(fd, &ch, 1, MSG_DONTWAIT) == 0;
}

/*
 * Past CTL_MAX_CLIENTS a client is told -EMFILE and hung up on while
 * every client is busy or holds something; once one holds nothing and
 * has been idle CTL_EVICT_IDLE_MS, a new client takes its place, so
 * idle clients cannot lock everyone out (the old code refused forever).
 */
START_TEST(test_client_cap)
{
	struct ctl_limits lim = limits();
	int fds[CTL_MAX_CLIENTS], fd;
	uint64_t lease;
	char *line;

	lim.uid_clients = 0;
	lim.idle_s = 0;
	restart(&lim);
	/* C is one client already, and holds a lease */
	ck_assert_int_eq(kvfs_ctl_match(C, "m", (const uint8_t(*)[32])H, 1,
					600000, &lease),
			 1);
	for (int i = 0; i < CTL_MAX_CLIENTS - 1; i++) {
		fds[i] = i < CTL_MAX_CLIENTS - 2 ? raw_holder() : raw_connect();
		if (i == CTL_MAX_CLIENTS - 2)
			ck_assert_int_eq(raw_status(fds[i]), 0);
	}
	/* all active just now: refused */
	fd = raw_connect();
	line = raw_line(fd);
	ck_assert_int_eq(raw_errno(line), EMFILE);
	free(line);
	ck_assert_ptr_null(raw_line(fd));
	close(fd);
	/* the one holding nothing goes idle: a newcomer takes its slot */
	msleep(CTL_EVICT_IDLE_MS + 200);
	fd = raw_connect();
	ck_assert_int_eq(raw_status(fd), 0);
	ck_assert(raw_closed_within(fds[CTL_MAX_CLIENTS - 2], 2000));
	close(fds[CTL_MAX_CLIENTS - 2]);
	/* now everyone holds something or is fresh: refused again */
	fds[CTL_MAX_CLIENTS - 2] = fd;
	fd = raw_connect();
	line = raw_line(fd);
	ck_assert_int_eq(raw_errno(line), EMFILE);
	free(line);
	close(fd);
	close(fds[0]);
	/* a slot frees up once the server sees the close */
	for (int i = 0; i < 100; i++) {
		fd = raw_connect();
		raw_send(fd, "status\n", 7);
		line = raw_line(fd);
		close(fd);
		if (line && raw_errno(line) == 0) {
			free(line);
			break;
		}
		free(line);
		ck_assert_int_lt(i, 99);
		msleep(10);
	}
	for (int i = 1; i < CTL_MAX_CLIENTS - 1; i++)
		close(fds[i]);
}
END_TEST

/* one uid holds at most uid_clients connections; an idle one of its own
 * makes room */
START_TEST(test_uid_client_cap)
{
	struct ctl_limits lim = limits();
	int fds[3], fd;
	char *line;

	lim.uid_clients = 4;
	restart(&lim);
	ck_assert_int_eq(raw_status(fds[0] = raw_holder()), 0);
	fds[1] = raw_holder();
	fds[2] = raw_holder();
	fd = raw_connect();
	line = raw_line(fd);
	ck_assert_int_eq(raw_errno(line), EMFILE);
	ck_assert_ptr_nonnull(strstr(line, "ctl_uid_clients"));
	free(line);
	close(fd);
	/* C holds nothing: idle long enough, it makes room */
	msleep(CTL_EVICT_IDLE_MS + 200);
	fd = raw_connect();
	ck_assert_int_eq(raw_status(fd), 0);
	close(fd);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
}
END_TEST

/* idle_s: a client that holds nothing is closed after it; one that holds
 * a lease is kept (its close would drop the lease) */
START_TEST(test_idle_timeout)
{
	struct ctl_limits lim = limits();
	int idle, holder;

	lim.idle_s = 1;
	restart(&lim);
	idle = raw_connect();
	ck_assert_int_eq(raw_status(idle), 0);
	holder = raw_holder();
	ck_assert(raw_closed_within(idle, 3000));
	msleep(1500);
	ck_assert_int_eq(raw_status(holder), 0);
	close(idle);
	close(holder);
	/* a client library's idle connection is gone by now too, and its
	 * next call dials again instead of failing with EPIPE */
	kvfs_json_free(call_ok(C, "status"));
}
END_TEST

/* uid_leases bounds every lease of one uid, pins included, across its
 * connections, so one user cannot fill the store's lease table for all;
 * conn_leases still bounds one connection */
START_TEST(test_uid_lease_cap)
{
	struct ctl_limits lim = limits();
	struct kv_lease_owner other = { .uid = (uint32_t)getuid() + 1 };
	char err[256], req[128], h0[65];
	struct kvfs_ctl *c2;
	uint64_t lease, mine;

	lim.conn_leases = 4;
	lim.uid_leases = 8;
	restart(&lim);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(kvfs_ctl_match(C, "m", (const uint8_t(*)[32])H,
						1, 600000, &mine),
				 1);
	ck_assert_int_eq(kvfs_ctl_match(C, "m", (const uint8_t(*)[32])H, 1,
					600000, &lease),
			 -EAGAIN);
	ck_assert_int_eq(kvfs_ctl_connect(SOCK, &c2, err, sizeof(err)), 0);
	hex(H[0], h0);
	snprintf(req, sizeof(req), "pin m 600000 %s", h0);
	for (int i = 0; i < 4; i++)
		kvfs_json_free(call_ok(c2, req));
	call_err(c2, req, EAGAIN);
	call_err(C, req, EAGAIN);
	/* a lease released, by unpin or by its connection's close, is room
	 * again */
	ck_assert_int_eq(kvfs_ctl_unpin(C, mine), 0);
	kvfs_json_free(call_ok(c2, req));
	call_err(c2, req, EAGAIN);
	kvfs_ctl_close(C);
	C = NULL;
	for (int i = 0; i < 200 && stat_leases() != 5; i++)
		msleep(10);
	ck_assert_uint_eq(stat_leases(), 5);
	for (int i = 0; i < 3; i++)
		kvfs_json_free(call_ok(c2, req));
	call_err(c2, req, EAGAIN);
	/* another uid is not held back by this one's leases */
	ck_assert_int_eq(kv_store_match_owned(S, NS, (const uint8_t(*)[32])H, 1,
					      600000, &other, 8, &lease),
			 1);
	ck_assert_int_eq(kv_store_match_owned(S, NS, (const uint8_t(*)[32])H, 1,
					      600000, &other, 1, &lease),
			 -EDQUOT);
	kvfs_ctl_close(c2);
}
END_TEST

/* lease_max_ms: a longer lease or renewal is granted for that long */
START_TEST(test_lease_max)
{
	struct ctl_limits lim = limits();
	char req[128], h0[65];
	struct kvfs_json *j;
	uint64_t lease;

	lim.lease_max_ms = 1000;
	restart(&lim);
	hex(H[0], h0);
	snprintf(req, sizeof(req), "pin m 86400000 %s", h0);
	j = call_ok(C, req);
	ck_assert_uint_eq(u64(j, "lease_ms"), 1000);
	lease = u64(j, "lease");
	kvfs_json_free(j);
	snprintf(req, sizeof(req), "renew %llu 600000",
		 (unsigned long long)lease);
	j = call_ok(C, req);
	ck_assert_uint_eq(u64(j, "lease_ms"), 1000);
	kvfs_json_free(j);
	snprintf(req, sizeof(req), "match m 500 %s", h0);
	j = call_ok(C, req);
	ck_assert_uint_eq(u64(j, "lease_ms"), 500);
	kvfs_json_free(j);
	/* and it does expire then */
	for (int i = 0; i < 300 && stat_leases() != 0; i++)
		msleep(10);
	ck_assert_uint_eq(stat_leases(), 0);
}
END_TEST

/* "lease list" shows every live lease with its owner, a page at a time;
 * "lease revoke" (and unpin) only for the owner's uid or root */
START_TEST(test_lease_list_revoke)
{
	struct kv_lease_owner other = { .uid = 4242, .pid = 7 };
	const struct kvfs_json *l;
	char req[128], h0[65];
	uint64_t match, pin, foreign;
	struct kvfs_json *j;

	ck_assert_int_eq(kvfs_ctl_match(C, "m", (const uint8_t(*)[32])H, 2,
					600000, &match),
			 2);
	hex(H[0], h0);
	snprintf(req, sizeof(req), "pin m 600000 %s", h0);
	j = call_ok(C, req);
	pin = u64(j, "lease");
	kvfs_json_free(j);
	ck_assert_int_eq(kv_store_match_owned(S, NS, (const uint8_t(*)[32])H, 3,
					      600000, &other, 0, &foreign),
			 3);

	j = call_ok(C, "lease list");
	l = kvfs_json_get(j, "leases");
	ck_assert_uint_eq(l->n, 3);
	ck_assert(kvfs_json_true(kvfs_json_get(j, "end")));
	/* in id order: match, pin, foreign */
	ck_assert_uint_eq(u64(&l->kid[0], "lease"), match);
	ck_assert_str_eq(kvfs_json_str(kvfs_json_get(&l->kid[0], "kind")),
			 "match");
	ck_assert_uint_eq(u64(&l->kid[0], "blocks"), 2);
	ck_assert_uint_eq(u64(&l->kid[0], "uid"), getuid());
	ck_assert_uint_eq(u64(&l->kid[0], "pid"), (uint64_t)getpid());
	ck_assert_uint_le(u64(&l->kid[0], "expires_ms"), 600000);
	ck_assert_uint_gt(u64(&l->kid[0], "expires_ms"), 500000);
	ck_assert_str_eq(kvfs_json_str(kvfs_json_get(&l->kid[1], "kind")),
			 "pin");
	ck_assert_uint_eq(u64(&l->kid[1], "lease"), pin);
	ck_assert_uint_eq(u64(&l->kid[2], "uid"), 4242);
	ck_assert_uint_eq(u64(&l->kid[2], "blocks"), 3);
	kvfs_json_free(j);

	/* pages */
	j = call_ok(C, "lease list 0 2");
	ck_assert_uint_eq(kvfs_json_get(j, "leases")->n, 2);
	ck_assert(!kvfs_json_true(kvfs_json_get(j, "end")));
	ck_assert_uint_eq(u64(j, "next"), pin);
	kvfs_json_free(j);
	snprintf(req, sizeof(req), "lease list %llu 2",
		 (unsigned long long)pin);
	j = call_ok(C, req);
	l = kvfs_json_get(j, "leases");
	ck_assert_uint_eq(l->n, 1);
	ck_assert_uint_eq(u64(&l->kid[0], "lease"), foreign);
	ck_assert(kvfs_json_true(kvfs_json_get(j, "end")));
	kvfs_json_free(j);
	call_err(C, "lease list 0 0", EINVAL);
	call_err(C, "lease frob", ENOSYS);

	/* revoke: the owner may; another uid may not, root may */
	snprintf(req, sizeof(req), "lease revoke %llu",
		 (unsigned long long)pin);
	kvfs_json_free(call_ok(C, req));
	call_err(C, req, ENOENT);
	snprintf(req, sizeof(req), "lease revoke %llu",
		 (unsigned long long)foreign);
	if (getuid() == 0) {
		kvfs_json_free(call_ok(C, req));
	} else {
		call_err(C, req, EPERM);
		snprintf(req, sizeof(req), "unpin %llu",
			 (unsigned long long)foreign);
		call_err(C, req, EPERM);
		snprintf(req, sizeof(req), "renew %llu 1000",
			 (unsigned long long)foreign);
		call_err(C, req, EPERM);
		ck_assert_int_eq(kv_store_lease_release(S, foreign), 0);
	}
	j = call_ok(C, "lease list");
	ck_assert_uint_eq(kvfs_json_get(j, "leases")->n, 1);
	kvfs_json_free(j);
}
END_TEST

/* ---- binding and connecting ---------------------------------------- */

START_TEST(test_bind_rules)
{
	char path[sizeof(SOCK) + 100], err[256];
	struct ctl_server *s2 = NULL;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct kvfs_ctl *c;
	struct stat sb;
	int fd;

	/* a live daemon keeps its socket */
	ck_assert_int_eq(ctl_server_start(S, SOCK, 0600, NULL, &s2),
			 -EADDRINUSE);
	kvfs_json_free(call_ok(C, "status"));
	ck_assert_int_eq(stat(SOCK, &sb), 0);
	ck_assert_uint_eq(sb.st_mode & 0777, 0600);

	/* a stale one (bound, nobody listening) is taken over */
	ck_assert_int_lt(snprintf(path, sizeof(sa.sun_path), "%s/stale-%u.sock",
				  tu_root, (unsigned)getpid()),
			 (int)sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, sizeof(sa.sun_path));
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	ck_assert_int_eq(kvfs_ctl_connect(path, &c, err, sizeof(err)),
			 -ECONNREFUSED);
	ck_assert_msg(strstr(err, "no kvfs daemon at") &&
			      strstr(err, "connection refused"),
		      "%s", err);
	ck_assert_int_eq(ctl_server_start(S, path, 0660, "{}", &s2), 0);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_uint_eq(sb.st_mode & 0777, 0660);
	ck_assert_int_eq(kvfs_ctl_connect(path, &c, err, sizeof(err)), 0);
	ck_assert_int_eq(
		kvfs_ctl_match(c, "m", (const uint8_t(*)[32])H, 2, 0, NULL), 2);
	kvfs_ctl_close(c);
	ctl_server_stop(s2);
	ck_assert_int_eq(stat(path, &sb), -1);

	/* not a socket: not ours to remove */
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(ctl_server_start(S, path, 0600, NULL, &s2), -EEXIST);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_eq(kvfs_ctl_connect(path, &c, err, sizeof(err)),
			 -ENOTSOCK);
	unlink(path);

	/* bad arguments */
	ck_assert_int_eq(ctl_server_start(S, path, 0600, "[1]", &s2), -EINVAL);
	ck_assert_int_eq(ctl_server_start(S, path, 0600, "{", &s2), -EINVAL);
	ck_assert_int_eq(ctl_server_start(S, "", 0600, NULL, &s2), -EINVAL);
	memset(path, 'x', 200);
	path[0] = '/';
	path[200] = '\0';
	ck_assert_int_eq(ctl_server_start(S, path, 0600, NULL, &s2),
			 -ENAMETOOLONG);
	ctl_server_stop(NULL);
}
END_TEST

START_TEST(test_connect_errors)
{
	char path[700], err[256];
	struct kvfs_ctl *c;

	snprintf(path, sizeof(path), "%s/absent.sock", tu_root);
	ck_assert_int_eq(kvfs_ctl_connect(path, &c, err, sizeof(err)), -ENOENT);
	ck_assert_msg(strstr(err, "no kvfs daemon at") &&
			      strstr(err, "no such file"),
		      "%s", err);
	/* a directory that is no kvfs mount */
	ck_assert_int_eq(kvfs_ctl_connect(tu_root, &c, err, sizeof(err)),
			 -ENOENT);
	ck_assert_msg(strstr(err, "no kvfs daemon behind"), "%s", err);
	ck_assert_int_eq(kvfs_ctl_connect("", &c, err, sizeof(err)), -EINVAL);
	/* the path of a connection is the socket */
	ck_assert_str_eq(kvfs_ctl_path(C), SOCK);
}
END_TEST

/* ---- rendering ------------------------------------------------------ */

START_TEST(test_render)
{
	static const char *odd = "q\"\\\nz\xff";
	struct kvfs_json *j;
	char *text;
	size_t len;
	uint32_t id;

	ck_assert_int_eq(kv_store_ns_create(S, odd, 4, &id), 0);
	ck_assert_int_eq(kv_store_lookup(S, NS, H[0]), 1);
	ck_assert_int_eq(kv_store_lookup(S, NS, H[6]), 0);

	ck_assert_int_eq(render_stats_json(S, &text, &len), 0);
	ck_assert_uint_eq(strlen(text), len);
	ck_assert_int_eq(kvfs_json_parse(text, len, &j), 0);
	ck_assert_uint_eq(u64(j, "hits"), 1);
	ck_assert_uint_eq(u64(j, "misses"), 1);
	{
		double hr = -1;

		ck_assert_int_eq(
			kvfs_json_double(kvfs_json_get(j, "hit_rate"), &hr), 0);
		ck_assert(hr > 0.49 && hr < 0.51);
	}
	ck_assert_uint_eq(kvfs_json_get(j, "namespaces")->n, 2);
	ck_assert_str_eq(
		kvfs_json_str(kvfs_json_get(
			&kvfs_json_get(j, "namespaces")->kid[1], "name")),
		"q\"\\\nz\xef\xbf\xbd");
	kvfs_json_free(j);
	free(text);

	ck_assert_int_eq(render_metrics(S, &text, &len), 0);
	ck_assert_uint_eq(strlen(text), len);
	ck_assert_ptr_nonnull(strstr(text, "# TYPE kvfs_hits_total counter\n"
					   "kvfs_hits_total 1\n"));
	ck_assert_ptr_nonnull(strstr(text, "# HELP kvfs_pool_slots "));
	ck_assert_ptr_nonnull(strstr(text, "kvfs_pool_slots 32\n"));
	ck_assert_ptr_nonnull(strstr(text, "# TYPE kvfs_blocks gauge\n"));
	ck_assert_ptr_nonnull(
		strstr(text, "kvfs_namespace_hits_total{namespace=\"m\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(
		text, "kvfs_namespace_block_tokens{namespace=\"m\"} 16\n"));
	ck_assert_ptr_nonnull(
		strstr(text, "kvfs_namespace_blocks{namespace=\"q\\\"\\\\\\nz"
			     "\xef\xbf\xbd\"} 0\n"));
	/* every line is a comment or "name{labels} value"; no raw newline
	 * inside a label */
	for (char *p = text; *p; p = strchr(p, '\n') + 1) {
		ck_assert(*p == '#' || strncmp(p, "kvfs_", 5) == 0);
		ck_assert_ptr_nonnull(strchr(p, '\n'));
	}
	ck_assert_int_eq(text[len - 1], '\n');
	free(text);
}
END_TEST

START_TEST(test_json_codec)
{
	static const char *bad[] = {
		"",    "{",	"[1,]",	    "{\"a\":1,}",  "01",
		"1.",  "-",	"\"\\x\"",  "\"\\ud800\"", "\"a\x01\"",
		"tru", "[1] 2", "\"\xff\"", "{1:2}",	   "nul",
	};
	static const char good[] =
		"{\"a\":[1,\"\\u00fc\\ud83d\\ude00\",true,null,-1.5e3],"
		"\"b\":18446744073709551615}";
	struct kvfs_json *j;
	char deep[100];
	uint64_t v;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(kvfs_json_parse(bad[i], strlen(bad[i]), &j) ==
				      -EINVAL,
			      "parsed %s", bad[i]);
	memset(deep, '[', sizeof(deep));
	ck_assert_int_eq(kvfs_json_parse(deep, sizeof(deep), &j), -EINVAL);
	ck_assert_int_eq(kvfs_json_parse(good, strlen(good), &j), 0);
	ck_assert_str_eq(kvfs_json_get(j, "a")->kid[1].str,
			 "\xc3\xbc\xf0\x9f\x98\x80");
	ck_assert_int_eq(kvfs_json_u64(kvfs_json_get(j, "b"), &v), 0);
	ck_assert_uint_eq(v, UINT64_MAX);
	ck_assert_int_eq(kvfs_json_u64(&kvfs_json_get(j, "a")->kid[4], &v),
			 -EINVAL);
	kvfs_json_free(j);
}
END_TEST

/* ---- prefetch: a job off the loop thread ---------------------------- */

/* a cluster whose prefetch holds until the test lets it go (or the
 * server stops), bounded at 10 s */
static pthread_mutex_t F_MU = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t F_CV = PTHREAD_COND_INITIALIZER;
static bool F_GO, F_SAW_STOP;
static unsigned F_IN; /* prefetches inside fake_prefetch now */

static void fake_sealed(void *arg, const char *ns, const uint8_t *hash)
{
	(void)arg, (void)ns, (void)hash;
}

static atomic_uint F_NS_MADE; /* namespaces the cluster was told of */

static void fake_ns_made(void *arg)
{
	(void)arg;
	atomic_fetch_add(&F_NS_MADE, 1);
}

static int fake_nodes(void *arg, struct kvfs_buf *out)
{
	(void)arg;
	kvfs_buf_puts(out, ",\"nodes\":[]");
	return 0;
}

static long fake_prefetch(void *arg, const char *node, const char *ns,
			  const uint8_t (*h)[32], size_t n, int *res,
			  const atomic_bool *stop)
{
	long k = 0;

	(void)arg, (void)ns, (void)h;
	pthread_mutex_lock(&F_MU);
	F_IN++;
	pthread_cond_broadcast(&F_CV);
	for (int i = 0; i < 1000 && !F_GO && !atomic_load(stop); i++) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&F_CV, &F_MU, &ts);
	}
	F_SAW_STOP = F_SAW_STOP || atomic_load(stop);
	F_IN--;
	pthread_mutex_unlock(&F_MU);
	if (node && strcmp(node, "n2"))
		return -ENXIO;
	for (size_t i = 0; i < n; i++) {
		res[i] = atomic_load(stop) ? -ECANCELED : 0;
		k += !res[i];
	}
	return k;
}

static const struct ctl_cluster_ops FAKE = { .sealed = fake_sealed,
					     .ns_made = fake_ns_made,
					     .nodes = fake_nodes,
					     .prefetch = fake_prefetch };

static void fake_hold(bool hold)
{
	pthread_mutex_lock(&F_MU);
	F_GO = !hold;
	pthread_cond_broadcast(&F_CV);
	pthread_mutex_unlock(&F_MU);
}

/* until want prefetches are inside the fake (5 s at most) */
static void fake_wait_in(unsigned want)
{
	unsigned in = 0;

	for (int i = 0; i < 500; i++) {
		pthread_mutex_lock(&F_MU);
		in = F_IN;
		pthread_mutex_unlock(&F_MU);
		if (in == want)
			break;
		msleep(10);
	}
	ck_assert_uint_eq(in, want);
}

static int raw_prefetch(const char *node, const char *also)
{
	char req[256], h0[65];
	int fd = raw_connect();

	hex(H[0], h0);
	snprintf(req, sizeof(req), "prefetch %s m %s\n%s", node, h0, also);
	raw_send(fd, req, strlen(req));
	return fd;
}

START_TEST(test_prefetch_job)
{
	struct pollfd pfd;
	int a, more[CTL_JOBS_MAX];
	char req[128], h0[65], *line;

	hex(H[0], h0);
	snprintf(req, sizeof(req), "prefetch - m %s", h0);
	call_err(C, req, ENOTSUP); /* not in a cluster yet */
	ctl_server_set_cluster(SRV, &FAKE);
	fake_hold(true);

	/* a prefetch waiting on the network holds up nobody else ... */
	a = raw_prefetch("-", "status\n");
	ck_assert_int_eq(shutdown(a, SHUT_WR), 0); /* nothing more to say */
	fake_wait_in(1);
	kvfs_json_free(call_ok(C, "status"));
	kvfs_json_free(call_ok(C, "nodes"));
	/* ... and its own connection is answered in order, when it ends */
	pfd = (struct pollfd){ .fd = a, .events = POLLIN };
	ck_assert_int_eq(poll(&pfd, 1, 50), 0);
	fake_hold(false);
	line = raw_line(a);
	ck_assert_str_eq(line, "{\"ok\":true,\"count\":1,\"n\":1,"
			       "\"errors\":[0]}");
	free(line);
	line = raw_line(a);
	ck_assert_int_eq(raw_errno(line), 0);
	ck_assert_ptr_nonnull(strstr(line, "\"daemon\""));
	free(line);
	ck_assert_ptr_null(raw_line(a)); /* then the server hangs up */
	close(a);
	fake_wait_in(0);

	/* errors come back through the job too */
	snprintf(req, sizeof(req), "prefetch n9 m %s", h0);
	call_err(C, req, ENXIO);
	snprintf(req, sizeof(req), "prefetch n2 m %s", h0);
	kvfs_json_free(call_ok(C, req));
	call_err(C, "prefetch - m zz", EINVAL);

	/* CTL_JOBS_MAX at once, then -EAGAIN; clients that hang up while
	 * theirs runs are answered by nobody, and nothing breaks */
	fake_hold(true);
	for (int i = 0; i < CTL_JOBS_MAX; i++)
		more[i] = raw_prefetch("-", "");
	fake_wait_in(CTL_JOBS_MAX);
	snprintf(req, sizeof(req), "prefetch - m %s", h0);
	call_err(C, req, EAGAIN);
	close(more[0]);
	close(more[1]);
	msleep(20);
	fake_hold(false);
	for (int i = 2; i < CTL_JOBS_MAX; i++) {
		line = raw_line(more[i]);
		ck_assert_int_eq(raw_errno(line), 0);
		free(line);
		close(more[i]);
	}
	fake_wait_in(0);
	kvfs_json_free(call_ok(C, req));

	/* stopping the server ends a running job and waits for it */
	fake_hold(true);
	a = raw_prefetch("-", "");
	fake_wait_in(1);
	ctl_server_stop(SRV);
	SRV = NULL;
	pthread_mutex_lock(&F_MU);
	ck_assert(F_SAW_STOP);
	ck_assert_uint_eq(F_IN, 0);
	pthread_mutex_unlock(&F_MU);
	close(a);
}
END_TEST

/* an open namespace keys files by path: the calls that name blocks by
 * the hash chain are refused there, the ones that take any key are not */
START_TEST(test_open_ns_chain_calls)
{
	char req[200], h0[65];

	hex(H[0], h0);
	kvfs_json_free(call_ok(C, "ns create o 16 open"));
	static const char *const refused[] = { "lookup", "match", "pin",
					       "map",	 "mapv",  "alloc" };
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		snprintf(req, sizeof(req), "%s o %s", refused[i], h0);
		call_err(C, req, EOPNOTSUPP);
	}
	snprintf(req, sizeof(req), "stat o %s", h0);
	call_err(C, req, ENOENT); /* a key, looked up: not there */
	snprintf(req, sizeof(req), "lookup m %s", h0);
	kvfs_json_free(call_ok(C, req)); /* a chain namespace still works */
}
END_TEST

/* "ns create" tells the cluster at once (it publishes the namespace),
 * and a refused one does not */
START_TEST(test_ns_made_told)
{
	atomic_store(&F_NS_MADE, 0);
	kvfs_json_free(call_ok(C, "ns create before 16"));
	ck_assert_uint_eq(atomic_load(&F_NS_MADE), 0); /* no cluster yet */
	ctl_server_set_cluster(SRV, &FAKE);
	kvfs_json_free(call_ok(C, "ns create after 16 open"));
	ck_assert_uint_eq(atomic_load(&F_NS_MADE), 1);
	call_err(C, "ns create after 16", EEXIST);
	ck_assert_uint_eq(atomic_load(&F_NS_MADE), 1);
}
END_TEST

static Suite *ctl_suite(void)
{
	Suite *s = suite_create("ctl");
	TCase *tc = tcase_create("ctl");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_status);
	tcase_add_test(tc, test_ns);
	tcase_add_test(tc, test_ns_long_name);
	tcase_add_test(tc, test_ls_stat);
	tcase_add_test(tc, test_lookup_match);
	tcase_add_test(tc, test_lease_scope);
	tcase_add_test(tc, test_conn_lease_cap);
	tcase_add_test(tc, test_stop_releases);
	tcase_add_test(tc, test_malformed);
	tcase_add_test(tc, test_malformed_raw);
	tcase_add_test(tc, test_overlong);
	tcase_add_test(tc, test_many_hashes);
	tcase_add_test(tc, test_pipeline);
	tcase_add_test(tc, test_slow_reader);
	tcase_add_test(tc, test_concurrent);
	tcase_add_test(tc, test_client_cap);
	tcase_add_test(tc, test_uid_client_cap);
	tcase_add_test(tc, test_idle_timeout);
	tcase_add_test(tc, test_uid_lease_cap);
	tcase_add_test(tc, test_lease_max);
	tcase_add_test(tc, test_lease_list_revoke);
	tcase_add_test(tc, test_bind_rules);
	tcase_add_test(tc, test_connect_errors);
	tcase_add_test(tc, test_render);
	tcase_add_test(tc, test_json_codec);
	tcase_add_test(tc, test_prefetch_job);
	tcase_add_test(tc, test_ns_made_told);
	tcase_add_test(tc, test_open_ns_chain_calls);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	/* a test whose client dies must not kill the runner with SIGPIPE */
	signal(SIGPIPE, SIG_IGN);
	tu_init("ctl");
	return tu_run(ctl_suite());
}
