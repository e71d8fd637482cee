/*
 * check_failmalloc.c - every allocation failure the store and the control
 * server can meet, after SQLite's test_malloc.c: for N = 1, 2, 3, ... the
 * Nth allocation of a scenario fails (tests/helpers/failmalloc.h), and
 * whatever the scenario then got (an error, -ENOMEM mostly, or a closed
 * connection), the store must stay consistent: every block it lists reads
 * back with its bytes, no reference or lease or writer is left, a reopen
 * finds the same blocks, the server still answers.  The loop ends at the
 * first N the scenario completes without reaching.  Under ASan
 * (--enable-sanitizers) LeakSanitizer checks that every failed path freed
 * what it had.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <time.h>

#include "tests/testutil.h"

#include "fuse/ctl.h"
#include "kvstore/pool.h"
#include "src/common/clock.h"
#include "src/common/ctl_client.h"
#include "src/common/json.h"
#include "tests/helpers/failmalloc.h"

#define SLOT 4096
#define NSLOTS 8
#define NCHAIN 6   /* blocks of the chain in "a" */
#define NEXTRA 16  /* namespaces past the table's first 16 */
#define N_MAX 5000 /* iterations, at most */
#define BUDGET_NS (20ull * 1000000000ull) /* per loop, on a loaded box */

/* the bytes of block i: its length follows from its hash (tu_hash puts i
 * in the first four bytes), so a check needs no model of the scenario */
static size_t blen(const uint8_t h[KVFS_HASH_LEN])
{
	uint32_t i;

	memcpy(&i, h, sizeof(i));
	return 64 + (i * 97u) % 3000u;
}

/* tu_put_block without its assertion: Check's assertions allocate (they
 * report their place to the runner), so none may run while armed */
static int put_block(struct kv_store *st, uint32_t ns,
		     const uint8_t h[KVFS_HASH_LEN], const uint8_t *parent)
{
	uint8_t buf[SLOT];
	size_t len = blen(h);
	uint32_t wh;
	int rc;

	rc = kv_store_create(st, ns, h, parent, &wh);
	if (rc < 0)
		return rc;
	tu_fill(buf, len, h);
	rc = kv_store_write(st, wh, 0, buf, len);
	if (rc < 0) {
		kv_store_abort(st, wh);
		return rc;
	}
	return kv_store_seal(st, wh);
}

static void rm_store(const struct tu_paths *p)
{
	nftw(p->index, tu_rm, 16, FTW_DEPTH | FTW_PHYS);
	unlink(p->pool);
}

static int open_store(const struct tu_paths *p, struct kv_store **st)
{
	struct kv_store_config cfg = {
		.pool_path = p->pool,
		.index_dir = p->index,
		.slot_size = SLOT,
		.nslots = NSLOTS,
	};

	return kv_store_open(&cfg, st);
}

/* ---- the invariants, checked disarmed ------------------------------- */

struct seen {
	uint64_t blocks;
};

static int check_ns(const char *name, uint32_t id, uint32_t bt,
		    const struct kv_stats *s, void *arg)
{
	uint32_t *ids = arg;

	/* ids[0] counts, the rest are the ids (bounded by the caller) */
	if (ids[0] < 64)
		ids[1 + ids[0]++] = id;
	return 0;
}

/*
 * Every sealed block listed by every namespace reads back with its bytes
 * and holds no reference; nothing is being written, pinned or leased; the
 * pool's free slots and the table agree.  Returns the blocks seen.
 */
static uint64_t check_store(struct kv_store *st, int n)
{
	struct kv_store_stats ss;
	uint32_t ids[65] = { 0 };
	uint64_t seen = 0;

	kv_store_lease_sweep(st);
	ck_assert_int_eq(kv_store_ns_foreach(st, check_ns, ids), 0);
	for (uint32_t k = 0; k < ids[0]; k++) {
		struct kv_block_info bi;
		uint8_t h[KVFS_HASH_LEN];
		uint64_t cur = 0;
		int rc, guard = 0;

		while ((rc = kv_store_ns_next(st, ids[1 + k], &cur, h, &bi)) ==
		       1) {
			ck_assert_msg(tu_verify(st, ids[1 + k], h, blen(h)),
				      "N=%d: block in ns %u reads back wrong",
				      n, ids[1 + k]);
			ck_assert_msg(bi.refs == 0, "N=%d: refs %u left", n,
				      bi.refs);
			seen++;
			ck_assert_int_lt(++guard, NSLOTS + 1);
		}
		ck_assert_int_eq(rc, 0);
	}
	ck_assert_int_eq(kv_store_stats(st, &ss), 0);
	ck_assert_msg(ss.total.blocks == seen,
		      "N=%d: %" PRIu64 " blocks counted, %" PRIu64 " listed", n,
		      ss.total.blocks, seen);
	ck_assert_msg(ss.total.writing == 0, "N=%d: %" PRIu64 " writing", n,
		      ss.total.writing);
	ck_assert_msg(ss.pinned == 0, "N=%d: %" PRIu64 " pinned", n, ss.pinned);
	ck_assert_msg(ss.leases == 0, "N=%d: %" PRIu64 " leases", n, ss.leases);
	ck_assert_msg(ss.slots_free + seen == ss.slots_total,
		      "N=%d: %" PRIu64 " free + %" PRIu64 " blocks != %" PRIu64,
		      n, ss.slots_free, seen, ss.slots_total);
	return seen;
}

/* close, reopen disarmed: the same blocks come back, all intact */
static void check_reopen(const struct tu_paths *p, struct kv_store **st, int n)
{
	uint64_t before = check_store(*st, n);
	struct kv_store_stats ss;

	kv_store_close(*st);
	*st = NULL;
	ck_assert_int_eq(open_store(p, st), 0);
	ck_assert_int_eq(kv_store_stats(*st, &ss), 0);
	ck_assert_msg(ss.recovery_dropped == 0 && ss.recovered == before,
		      "N=%d: %" PRIu64 " blocks before close, %" PRIu64
		      " recovered, %" PRIu64 " dropped",
		      n, before, ss.recovered, ss.recovery_dropped);
	check_store(*st, n);
}

/* the loop's end, for the summary line */
static void summary(const char *what, int n, bool done, uint64_t t0)
{
	fprintf(stderr,
		"failmalloc: %s: %d iterations in %.1f s, %zu distinct "
		"allocation sites failed so far, %s\n",
		what, n, (double)(kvfs_mono_ns() - t0) / 1e9,
		failmalloc_nsites(),
		done ? "all invariants held"
		     : "time budget spent before the end (invariants held)");
	if (getenv("FAILMALLOC_SITES"))
		failmalloc_print_sites(stderr);
}

/* the first failure of a run is the armed one: -ENOMEM, or a connection
 * the server hung up on for want of memory (-EIO/-EPIPE/-ECONNRESET) */
static bool enomem_like(int rc)
{
	return rc == -ENOMEM || rc == -EIO || rc == -EPIPE || rc == -ECONNRESET;
}

/* ---- the store ------------------------------------------------------ */

/* a failed step: the first one must be the armed failure */
struct run {
	int n;
	int first_err; /* 0 until a step fails */
	const char *first_step;
	const char *bad_ok; /* a request answered "ok" but incomplete */
};

static int step(struct run *r, const char *what, long rc)
{
	if (rc < 0 && !r->first_err) {
		r->first_err = (int)rc;
		r->first_step = what;
	}
	return (int)rc;
}

/*
 * The store's life, every step tolerating the failure of any before it.
 * *st is the open store at the end, or NULL.
 */
static void store_scenario(struct run *r, const struct tu_paths *p,
			   struct kv_store **st)
{
	uint8_t h[NCHAIN + NSLOTS][KVFS_HASH_LEN], eh[KVFS_HASH_LEN];
	uint8_t q[65][KVFS_HASH_LEN];
	struct kv_block_info bi;
	struct kv_pool_geom g = { .slot_size = SLOT, .nslots = NSLOTS };
	struct kv_pool *pool;
	struct kv_ref ref;
	uint32_t a = 0, b = 0, wh, bad_slot = UINT32_MAX;
	uint64_t lease = 0, cur = 0;
	char name[16];

	if (step(r, "open", open_store(p, st)) < 0)
		return;
	step(r, "ns create a", kv_store_ns_create(*st, "a", 16, &a));
	step(r, "ns create b", kv_store_ns_create(*st, "b", 32, &b));
	/* past the namespace table's first size: it grows */
	for (int i = 0; i < NEXTRA; i++) {
		snprintf(name, sizeof(name), "x%d", i);
		step(r, "ns create x", kv_store_ns_create(*st, name, 16, NULL));
	}
	for (uint32_t i = 0; i < NCHAIN + NSLOTS; i++)
		tu_hash(h[i], i, 1);
	for (uint32_t i = 0; a && i < NCHAIN; i++)
		step(r, "put", put_block(*st, a, h[i], i ? h[i - 1] : NULL));
	/* a block written and aborted */
	tu_hash(eh, 1000, 2);
	if (b && step(r, "create", kv_store_create(*st, b, eh, NULL, &wh)) == 0)
		kv_store_abort(*st, wh);
	if (a && step(r, "get", kv_store_get(*st, a, h[0], &ref)) == 0)
		kv_store_put(*st, &ref);
	if (a) {
		step(r, "lookup", kv_store_lookup(*st, a, h[1]));
		step(r, "stat", kv_store_stat(*st, a, h[2], &bi));
		step(r, "match",
		     kv_store_match(*st, a, (const uint8_t(*)[KVFS_HASH_LEN])h,
				    NCHAIN, 0, NULL));
		if (step(r, "match lease",
			 kv_store_match(*st, a,
					(const uint8_t(*)[KVFS_HASH_LEN])h,
					NCHAIN, 60000, &lease)) > 0 &&
		    lease) {
			step(r, "renew",
			     kv_store_lease_renew(*st, lease, 60000));
			step(r, "release", kv_store_lease_release(*st, lease));
		}
		/* past 64 hashes the slots to pin are allocated */
		for (uint32_t i = 0; i < 65; i++)
			if (i < NCHAIN)
				memcpy(q[i], h[i], KVFS_HASH_LEN);
			else
				tu_hash(q[i], i, 9);
		if (step(r, "match 65",
			 kv_store_match(*st, a,
					(const uint8_t(*)[KVFS_HASH_LEN])q, 65,
					60000, &lease)) > 0 &&
		    lease)
			step(r, "release", kv_store_lease_release(*st, lease));
		while (kv_store_ns_next(*st, a, &cur, eh, &bi) == 1)
			;
		step(r, "evict", kv_store_evict(*st, a, h[NCHAIN - 1]));
		step(r, "remove", kv_store_remove(*st, a, h[NCHAIN - 2]));
	}
	/* more blocks than slots: allocation evicts */
	for (uint32_t i = NCHAIN; b && i < NCHAIN + NSLOTS; i++)
		step(r, "put b", put_block(*st, b, h[i], NULL));
	step(r, "ns rm", kv_store_ns_remove(*st, "x0"));
	/* a block whose bytes rot while the store is closed: the reopen
	 * drops it (recovery's own allocations) */
	if (b && kv_store_stat(*st, b, h[NCHAIN + NSLOTS - 1], &bi) == 0)
		bad_slot = bi.slot;
	kv_store_close(*st);
	*st = NULL;
	if (bad_slot != UINT32_MAX &&
	    step(r, "pool open", kv_pool_open(p->pool, &g, 0, &pool)) == 0) {
		((uint8_t *)kv_pool_slot(pool, bad_slot))[0] ^= 0xff;
		kv_pool_close(pool);
	}
	step(r, "reopen", open_store(p, st));
}

/*
 * When the scenario's own reopen went through, it was the reopen of the
 * invariants (recovery found what the index holds); when it did not, or
 * never ran, the store is reopened disarmed, twice: the blocks it lists
 * must survive a close.
 */
static void store_loop(bool persist)
{
	uint64_t t0 = kvfs_mono_ns();
	bool done = false;
	int n;

	for (n = 1; n <= N_MAX && kvfs_mono_ns() - t0 < BUDGET_NS; n++) {
		struct run r = { .n = n };
		struct tu_paths p;
		struct kv_store *st = NULL;
		unsigned long hit;

		tu_paths(&p);
		failmalloc_arm((unsigned long)n, persist);
		store_scenario(&r, &p, &st);
		hit = failmalloc_disarm();
		ck_assert_msg(hit || !r.first_err,
			      "N=%d: %s failed (%d) with no failed allocation",
			      n, r.first_step, r.first_err);
		ck_assert_msg(!r.first_err || r.first_err == -ENOMEM,
			      "N=%d: %s: %d, want -ENOMEM", n, r.first_step,
			      r.first_err);
		if (st) {
			check_store(st, n);
		} else {
			ck_assert_int_eq(open_store(&p, &st), 0);
			check_reopen(&p, &st, n);
		}
		kv_store_close(st);
		rm_store(&p);
		if (!hit) {
			done = true;
			break;
		}
	}
	summary(persist ? "store (persistent)" : "store", n, done, t0);
	ck_assert_msg(done || kvfs_mono_ns() - t0 >= BUDGET_NS,
		      "no run completed in %d iterations", N_MAX);
	ck_assert_uint_gt(failmalloc_nsites(), 0);
}

START_TEST(test_store)
{
	store_loop(false);
}
END_TEST

/* the same with every allocation failing from the Nth on, as when memory
 * is really gone: nothing may hang or leak either */
START_TEST(test_store_persist)
{
	store_loop(true);
}
END_TEST

/* ---- the control server --------------------------------------------- */

struct cli {
	struct run *r;
	struct kvfs_ctl *c;
	bool gone; /* the connection broke: stop sending */
};

/*
 * One request; the parsed response in *out when it said "ok":true (the
 * caller frees), else NULL; want is a key such an answer must hold.  An
 * "ok":false answer counts as the step's failure with its errno.
 */
static int req(struct cli *k, const char *what, const char *line,
	       const char *want, struct kvfs_json **out)
{
	struct kvfs_json *j = NULL;
	char *resp = NULL;
	uint64_t e = 0;
	int rc;

	if (out)
		*out = NULL;
	if (k->gone)
		return -EPIPE;
	rc = kvfs_ctl_call(k->c, line, &resp);
	if (rc < 0) {
		if (rc != -ENOMEM)
			k->gone = true;
		return step(k->r, what, rc);
	}
	rc = kvfs_json_parse(resp, strlen(resp), &j);
	free(resp);
	if (rc < 0)
		return step(k->r, what, rc);
	if (!kvfs_json_true(kvfs_json_get(j, "ok"))) {
		kvfs_json_u64(kvfs_json_get(j, "errno"), &e);
		kvfs_json_free(j);
		return step(k->r, what, -(int)e);
	}
	/* "ok":true is the whole answer: memory that ran out while it was
	 * written must have turned it into an error, never cut it short */
	if (want && !kvfs_json_get(j, want) && !k->r->bad_ok) {
		k->r->bad_ok = what;
		kvfs_json_free(j);
		return -EPROTO;
	}
	if (out)
		*out = j;
	else
		kvfs_json_free(j);
	return 0;
}

/* a decimal-string or numeric field; 0 when absent */
static uint64_t field(const struct kvfs_json *j, const char *key)
{
	const struct kvfs_json *v = kvfs_json_get(j, key);
	const char *s = kvfs_json_str(v);
	uint64_t x = 0;

	if (s)
		return strtoull(s, NULL, 10);
	kvfs_json_u64(v, &x);
	return x;
}

static void hexes(char *out, size_t sz, const char *prefix,
		  uint8_t (*h)[KVFS_HASH_LEN], int from, int n)
{
	size_t len = (size_t)snprintf(out, sz, "%s", prefix);

	for (int i = from; i < from + n && len + 66 < sz; i++) {
		out[len++] = ' ';
		kvfs_hash_to_hex(h[i], out + len);
		len += KVFS_HASH_HEX_LEN;
	}
	out[len] = '\0';
}

/* a cluster that answers at once, so that "nodes" and "prefetch" (a job
 * on a thread of its own) run without a network */
static int fake_nodes(void *arg, struct kvfs_buf *out)
{
	kvfs_buf_puts(out, ",\"self\":\"n1\",\"nodes\":[]");
	return out->err;
}

static long fake_prefetch(void *arg, const char *node, const char *ns,
			  const uint8_t (*hashes)[32], size_t n, int *res,
			  const atomic_bool *stop)
{
	for (size_t i = 0; i < n; i++)
		res[i] = 0;
	return (long)n;
}

static void fake_sealed(void *arg, const char *ns, const uint8_t *hash)
{
}

static const struct ctl_cluster_ops fake_cluster = {
	.sealed = fake_sealed,
	.nodes = fake_nodes,
	.prefetch = fake_prefetch,
};

/* the requests of ctlproto.h that allocate, on one connection */
static void ctl_requests(struct cli *k, struct kv_store *st, uint32_t ns,
			 uint8_t (*h)[KVFS_HASH_LEN])
{
	struct kvfs_json *j;
	char line[1024];
	uint64_t lease, ref, w;
	char *resp;

	req(k, "status", "status", "stats", NULL);
	req(k, "ns create", "ns create y%20z 64", "id", NULL);
	req(k, "ns list", "ns list", "namespaces", NULL);
	req(k, "ls", "ls a", "blocks", NULL);
	hexes(line, sizeof(line), "stat a", h, 0, 1);
	req(k, "stat", line, "checksum", NULL);
	hexes(line, sizeof(line), "lookup a", h, 0, 4);
	req(k, "lookup", line, "count", NULL);
	hexes(line, sizeof(line), "match a 60000", h, 0, 3);
	if (req(k, "match", line, "lease", &j) == 0) {
		lease = field(j, "lease");
		kvfs_json_free(j);
		snprintf(line, sizeof(line), "renew %" PRIu64 " 60000", lease);
		req(k, "renew", line, "lease", NULL);
	}
	/* past the connection's first 16 leases: its table grows */
	hexes(line, sizeof(line), "match a 60000", h, 0, 1);
	for (int i = 0; i < 17; i++)
		req(k, "match", line, "lease", NULL);
	/* a pin outlives the connection: unpinned here, or (when the
	 * answer got lost) waited out by the caller; a loaded machine may
	 * let it expire before the unpin, so ENOENT is no failure */
	hexes(line, sizeof(line), "pin a 20", h, 0, 2);
	if (req(k, "pin", line, "lease", &j) == 0) {
		lease = field(j, "lease");
		kvfs_json_free(j);
		snprintf(line, sizeof(line), "unpin %" PRIu64, lease);
		if (kvfs_ctl_call(k->c, line, &resp) == 0)
			free(resp);
	}
	hexes(line, sizeof(line), "map a", h, 1, 1);
	if (req(k, "map", line, "ref", &j) == 0) {
		ref = field(j, "ref");
		kvfs_json_free(j);
		snprintf(line, sizeof(line), "unmap %" PRIu64, ref);
		req(k, "unmap", line, NULL, NULL);
	}
	/* left mapped: the connection's close drops them */
	hexes(line, sizeof(line), "mapv a", h, 0, 3);
	req(k, "mapv", line, "maps", NULL);
	/* a zero-copy writer: the bytes go in through the slot */
	hexes(line, sizeof(line), "alloc a", h, 4, 2);
	if (req(k, "alloc", line, "slot", &j) == 0) {
		w = field(j, "ref");
		tu_fill(kv_store_wptr(st, (uint32_t)field(j, "slot")),
			blen(h[4]), h[4]);
		kvfs_json_free(j);
		snprintf(line, sizeof(line), "commit %" PRIu64 " %zu", w,
			 blen(h[4]));
		req(k, "commit", line, NULL, NULL);
	}
	hexes(line, sizeof(line), "alloc a", h, 5, 1);
	if (req(k, "alloc", line, "slot", &j) == 0) {
		w = field(j, "ref");
		kvfs_json_free(j);
		snprintf(line, sizeof(line), "abort %" PRIu64, w);
		req(k, "abort", line, NULL, NULL);
	}
	/* and one left for the close to abort */
	hexes(line, sizeof(line), "alloc a", h, 6, 1);
	req(k, "alloc", line, "slot", NULL);
	hexes(line, sizeof(line), "evict a", h, 3, 1);
	req(k, "evict", line, NULL, NULL);
	req(k, "ns rm", "ns rm y%20z", NULL, NULL);
	req(k, "nodes", "nodes", "self", NULL);
	hexes(line, sizeof(line), "prefetch - a", h, 0, 2);
	req(k, "prefetch", line, "errors", NULL);
	req(k, "status", "status", "stats", NULL);
}

/* back to the state the scenario starts from (disarmed): H[0..3] cached,
 * nothing else in "a", no namespace "y z" */
static void ctl_reset(struct kv_store *st, uint32_t ns,
		      uint8_t (*h)[KVFS_HASH_LEN])
{
	struct kv_block_info bi;
	int rc;

	rc = kv_store_ns_remove(st, "y z");
	ck_assert_msg(rc == 0 || rc == -ENOENT, "ns rm: %d", rc);
	for (uint32_t i = 0; i < 8; i++) {
		rc = kv_store_stat(st, ns, h[i], &bi);
		if (i < 4 && rc == -ENOENT)
			ck_assert_int_eq(
				put_block(st, ns, h[i], i ? h[i - 1] : NULL),
				0);
		else if (i >= 4 && rc == 0)
			ck_assert_int_eq(kv_store_remove(st, ns, h[i]), 0);
	}
}

/*
 * One store for the whole loop (a RocksDB open costs more than a run of
 * the scenario), put back in its first state after each run and reopened
 * every REOPEN_EVERY runs; a server and a client per run.
 */
#define REOPEN_EVERY 32

static void ctl_loop(bool persist)
{
	uint8_t h[8][KVFS_HASH_LEN];
	uint64_t t0 = kvfs_mono_ns();
	char sock[108], err[256];
	struct kv_store *st = NULL;
	struct tu_paths p;
	bool done = false;
	uint32_t ns;
	int n;

	for (uint32_t i = 0; i < 8; i++)
		tu_hash(h[i], i, 3);
	ck_assert_int_lt(snprintf(sock, sizeof(sock), "%s/ctl.sock", tu_root),
			 (int)sizeof(sock));
	tu_paths(&p);
	ck_assert_int_eq(open_store(&p, &st), 0);
	ck_assert_int_eq(kv_store_ns_create(st, "a", 16, &ns), 0);
	ctl_reset(st, ns, h);
	for (n = 1; n <= N_MAX && kvfs_mono_ns() - t0 < BUDGET_NS; n++) {
		struct run r = { .n = n };
		struct cli k = { .r = &r };
		struct ctl_server *srv = NULL;
		struct kv_store_stats ss;
		struct kvfs_ctl *c2;
		unsigned long hit;
		char *resp;

		failmalloc_arm((unsigned long)n, persist);
		if (step(&r, "start",
			 ctl_server_start(st, sock, 0600, "{\"pid\":1}",
					  &srv)) == 0)
			ctl_server_set_cluster(srv, &fake_cluster);
		if (srv &&
		    step(&r, "connect",
			 kvfs_ctl_connect(sock, &k.c, err, sizeof(err))) == 0)
			ctl_requests(&k, st, ns, h);
		kvfs_ctl_close(k.c);
		hit = failmalloc_disarm();
		ck_assert_msg(hit || !r.first_err,
			      "N=%d: %s failed (%d) with no failed allocation",
			      n, r.first_step, r.first_err);
		ck_assert_msg(!r.first_err || enomem_like(r.first_err),
			      "N=%d: %s: %d, want -ENOMEM", n, r.first_step,
			      r.first_err);
		ck_assert_msg(!r.bad_ok, "N=%d: %s: incomplete \"ok\" answer",
			      n, r.bad_ok);
		/* the server still answers a new client */
		if (!srv)
			ck_assert_int_eq(
				ctl_server_start(st, sock, 0600, "{}", &srv),
				0);
		ck_assert_int_eq(kvfs_ctl_connect(sock, &c2, err, sizeof(err)),
				 0);
		ck_assert_int_eq(kvfs_ctl_call(c2, "status", &resp), 0);
		ck_assert_msg(strncmp(resp, "{\"ok\":true", 10) == 0,
			      "N=%d: %s", n, resp);
		free(resp);
		kvfs_ctl_close(c2);
		ctl_server_stop(srv);
		/* the server is gone with its match leases: a lease left is
		 * the pin's, when its unpin did not get through */
		ck_assert_int_eq(kv_store_stats(st, &ss), 0);
		if (ss.leases)
			nanosleep(&(struct timespec){ 0, 25000000 }, NULL);
		check_store(st, n);
		ctl_reset(st, ns, h);
		if (!hit || n % REOPEN_EVERY == 0)
			check_reopen(&p, &st, n);
		if (!hit) {
			done = true;
			break;
		}
	}
	kv_store_close(st);
	rm_store(&p);
	summary(persist ? "ctl (persistent)" : "ctl", n, done, t0);
	ck_assert_msg(done || kvfs_mono_ns() - t0 >= BUDGET_NS,
		      "no run completed in %d iterations", N_MAX);
}

START_TEST(test_ctl)
{
	ctl_loop(false);
}
END_TEST

START_TEST(test_ctl_persist)
{
	ctl_loop(true);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("failmalloc");
	TCase *tc;

	tu_init("failmalloc");
	/* one case each, so CK_RUN_CASE=ctl runs one loop alone */
	tc = tcase_create("store");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_store);
	tcase_add_test(tc, test_store_persist);
	suite_add_tcase(s, tc);
	tc = tcase_create("ctl");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_ctl);
	tcase_add_test(tc, test_ctl_persist);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
