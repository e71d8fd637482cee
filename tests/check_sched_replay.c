/*
 * check_sched_replay.c - sched/replay.h: the simulated node cache evicts
 * as kvstore does (LRU, leaves first), TBT and percentiles, replays of
 * tiny traces against hand-computed times, and trace loading.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/check_sched.h"
#include "sched/replay.h"
#include "sched/replay_int.h"

#define T1K 0.09895604649984	/* T(1024) */
#define T1536 0.150083337191424 /* T(1536) */
#define T4K 0.422212465065984
#define T32K 5.348024557502464
#define XFER1 0.0016777216

/* ---- the node cache ----------------------------------------------------- */

struct evlog {
	int n;
	int op[32];
	uint64_t key[32];
};

static void on_ev(void *arg, int op, uint64_t key)
{
	struct evlog *l = arg;

	ck_assert_int_lt(l->n, 32);
	l->op[l->n] = op;
	l->key[l->n++] = key;
}

START_TEST(test_cache_leaves_first)
{
	static const uint64_t a[3] = { 1, 2, 3 }, b[1] = { 10 }, c[1] = { 20 },
			      d[1] = { 30 }, e[1] = { 40 };
	struct sim_cache sc;
	struct evlog log = { 0 };

	ck_assert_int_eq(sim_cache_init(&sc, 4, on_ev, &log), 0);
	ck_assert_int_eq(sim_cache_put_chain(&sc, a, 3), 0);
	ck_assert_int_eq(sim_cache_put_chain(&sc, b, 1), 0);
	ck_assert_int_eq(log.n, 4);
	/* full: block 1 is the oldest, but it has a cached child; the
	 * oldest leaf is 3 */
	ck_assert_int_eq(sim_cache_put_chain(&sc, c, 1), 1);
	ck_assert_int_eq(log.op[4], 2);
	ck_assert_uint_eq(log.key[4], 3);
	ck_assert_uint_eq(sim_cache_prefix(&sc, a, 3), 2);
	/* 2 became a leaf keeping its age: older than 10, it goes next */
	ck_assert_int_eq(sim_cache_put_chain(&sc, d, 1), 1);
	ck_assert_uint_eq(sim_cache_prefix(&sc, a, 3), 1);
	ck_assert_uint_eq(sim_cache_prefix(&sc, b, 1), 1);
	/* a use makes 1 young: 10 goes before it */
	sim_cache_touch(&sc, a, 1);
	ck_assert_int_eq(sim_cache_put_chain(&sc, e, 1), 1);
	ck_assert_uint_eq(sim_cache_prefix(&sc, b, 1), 0);
	ck_assert_uint_eq(sim_cache_prefix(&sc, a, 3), 1);
	ck_assert_uint_eq(sc.n, 4);
	sim_cache_release(&sc);
}
END_TEST

/* a chain longer than the cache keeps its head, not its tail */
START_TEST(test_cache_long_chain)
{
	uint64_t k[10];
	struct sim_cache sc;

	cs_chain(k, 10, 500);
	ck_assert_int_eq(sim_cache_init(&sc, 4, NULL, NULL), 0);
	ck_assert_int_eq(sim_cache_put_chain(&sc, k, 10), 0);
	ck_assert_uint_eq(sim_cache_prefix(&sc, k, 10), 4);
	ck_assert_int_eq(sim_cache_init(&sc, 0, NULL, NULL), -EINVAL);
	sim_cache_release(&sc);
}
END_TEST

/* ---- statistics --------------------------------------------------------- */

static int cmp_desc(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x < y) - (x > y);
}

START_TEST(test_tbt)
{
	float v[300], ref[300], heap[30];
	uint32_t heap_n;
	uint64_t x = 99;

	ck_assert(sim_tbt(v, 0) == 0);
	for (int i = 0; i < 20; i++)
		v[i] = (float)(20 - i);
	ck_assert_near(sim_tbt(v, 20), 19.5); /* longest 2 of 20 */
	v[0] = 5;
	ck_assert_near(sim_tbt(v, 1), 5);
	for (size_t n = 1; n <= 300; n += 7) {
		double want = 0;
		size_t top = (n + 9) / 10;

		for (size_t i = 0; i < n; i++) {
			x = x * 6364136223846793005ull + 1;
			v[i] = ref[i] = (float)((x >> 40) % 50);
		}
		qsort(ref, n, sizeof(*ref), cmp_desc);
		for (size_t i = 0; i < top; i++)
			want += ref[i];
		/* kept on the fly, as the replay does, before v is reordered */
		heap_n = 0;
		for (size_t i = 0; i < n; i++)
			sim_top_push(heap, &heap_n, (uint32_t)top, v[i]);
		ck_assert_uint_eq(heap_n, top);
		ck_assert_near(sim_top_mean(heap, heap_n), want / (double)top);
		ck_assert_near(sim_tbt(v, n), want / (double)top);
	}
}
END_TEST

START_TEST(test_percentile)
{
	double v[100];

	for (int i = 0; i < 100; i++)
		v[i] = 100 - i;
	ck_assert_near(sim_percentile(v, 100, 0.5), 50);
	ck_assert_near(sim_percentile(v, 100, 0.9), 90);
	ck_assert_near(sim_percentile(v, 100, 0.99), 99);
	ck_assert_near(sim_percentile(v, 100, 1.0), 100);
	ck_assert_near(sim_percentile(v, 1, 0.99), 1);
	ck_assert_near(sim_percentile(v, 0, 0.5), 0);
}
END_TEST

/* ---- replays ------------------------------------------------------------ */

struct mini {
	struct sched_trace t;
	double arrival[8];
	uint64_t input[8], output[8], keys[256];
	size_t first[8];
	uint32_t nkeys[8];
};

static void mini_add(struct mini *m, double at, uint64_t base, uint32_t nk,
		     uint64_t out)
{
	size_t i = m->t.n++;
	size_t off = i ? m->first[i - 1] + m->nkeys[i - 1] : 0;

	m->arrival[i] = at;
	m->input[i] = (uint64_t)nk * 512;
	m->output[i] = out;
	m->first[i] = off;
	m->nkeys[i] = nk;
	cs_chain(m->keys + off, nk, base);
	m->t.arrival = m->arrival;
	m->t.input = m->input;
	m->t.output = m->output;
	m->t.first = m->first;
	m->t.nkeys = m->nkeys;
	m->t.keys = m->keys;
}

static void run(const struct mini *m, const char *policy, uint32_t np,
		const struct sched_config *cfg, struct sched_replay_result *r)
{
	struct sched_config def;
	struct sched_replay_opts o = {
		.cfg = cfg,
		.policy = sched_policy_find(policy),
		.nprefill = np,
		.ndecode = 1,
		.cache_blocks = 100,
		.speed = 1,
		.seed = 1,
	};

	if (!cfg) {
		sched_config_default(&def);
		o.cfg = &def;
	}
	ck_assert_int_eq(sched_replay_run(&m->t, &o, r), 0);
}

/*
 * Two requests on one prefill and one decode instance: the second reuses
 * the first's 2 blocks and decodes 2 tokens after its first.
 */
START_TEST(test_replay_by_hand)
{
	struct sched_replay_result r;
	struct mini m = { 0 };
	double s1 = 0.009 + 0.00014 + 1537 * 2e-8; /* step, 1 req */
	double s2 = 0.009 + 0.00014 + 1538 * 2e-8;

	mini_add(&m, 0, 1, 2, 1);
	mini_add(&m, 10, 1, 3, 3);
	run(&m, "kvcache-centric", 1, NULL, &r);
	ck_assert_uint_eq(r.requests, 2);
	ck_assert_uint_eq(r.served, 2);
	ck_assert_uint_eq(r.blocks, 5);
	ck_assert_uint_eq(r.hit_local, 2);
	ck_assert_uint_eq(r.hit_remote, 0);
	ck_assert_near(r.hit_rate, 0.4);
	ck_assert_near(r.ttft_mean, (T1K + (T1536 - T1K)) / 2);
	ck_assert_near(r.ttft_p99, T1K);
	ck_assert_msg(fabs(r.tbt_p50 - s2) < 1e-7, "tbt %.9g", r.tbt_p50);
	ck_assert_msg(fabs(r.span - (10 + T1536 - T1K + s1 + s2)) < 1e-6,
		      "span %.9g", r.span);
	ck_assert_uint_eq(r.slo_met, 2);
	ck_assert_near(r.attainment, 1);
	ck_assert_near(r.capacity, 0.2); /* 2 met over 10 s */
}
END_TEST

/*
 * Node 0 holds A and is busy with a 5.35 s prefill when A comes again:
 * kvcache-centric fetches A's 8 blocks to idle node 1.
 */
START_TEST(test_replay_fetch)
{
	struct sched_replay_result r;
	struct mini m = { 0 };

	mini_add(&m, 0, 1, 8, 1);
	mini_add(&m, 0.5, 100, 64, 1);
	mini_add(&m, 1.0, 1, 8, 1);
	run(&m, "kvcache-centric", 2, NULL, &r);
	ck_assert_uint_eq(r.hit_remote, 8);
	ck_assert_uint_eq(r.hit_local, 0);
	ck_assert_near(r.ttft_mean, (T4K + T32K + 8 * XFER1) / 3);
	/* cache-aware cannot fetch: it recomputes A on node 1 */
	run(&m, "cache-aware", 2, NULL, &r);
	ck_assert_uint_eq(r.hit_remote, 0);
	ck_assert_near(r.ttft_mean, (T4K + T32K + T4K) / 3);
}
END_TEST

START_TEST(test_replay_reject)
{
	struct sched_replay_result r;
	struct sched_config cfg;
	struct mini m = { 0 };

	sched_config_default(&cfg);
	cfg.slo_ttft = 1;
	cfg.reject = SCHED_REJECT_EARLY;
	mini_add(&m, 0, 1, 8, 1);
	mini_add(&m, 0.5, 100, 64, 1);
	mini_add(&m, 1.0, 1, 8, 1);
	run(&m, "kvcache-centric", 2, &cfg, &r);
	ck_assert_uint_eq(r.rejected, 1);
	ck_assert_uint_eq(r.rejected_ttft, 1);
	ck_assert_uint_eq(r.served, 2);
	ck_assert_uint_eq(r.slo_met, 2);
	ck_assert_near(r.attainment, 2.0 / 3);
}
END_TEST

/*
 * The queue policy in the replay.  One 64-block prompt on 4 idle
 * instances runs as a CPP pipeline over all 4: T(32768) / (4 * 0.9).
 */
START_TEST(test_replay_queue_cpp)
{
	struct sched_replay_result r;
	struct sched_config cfg;
	struct mini m = { 0 };

	mini_add(&m, 0, 1, 64, 1);
	run(&m, "queue", 4, NULL, &r);
	ck_assert_uint_eq(r.served, 1);
	ck_assert_near(r.ttft_mean, T32K / (4 * 0.9));
	ck_assert_near(r.ttft_max, r.ttft_mean);
	sched_config_default(&cfg);
	cfg.cpp_max = 1;
	run(&m, "queue", 4, &cfg, &r);
	ck_assert_near(r.ttft_mean, T32K);
}
END_TEST

#define TOK(n) (2.097152e-9 * (double)(n) * (n) + 9.4489280512e-5 * (n))

/*
 * One instance, chunks of 4096 tokens: the long prompt is in its third
 * chunk (8192..12288) when a short one arrives at 1 s; at that chunk's
 * end, T(12288), the long one yields, the short one runs, and the long
 * one resumes from its 12288 tokens.  Without preemption the short one
 * waits for the whole long prefill.
 */
START_TEST(test_replay_queue_preempt)
{
	struct sched_replay_result r;
	struct sched_config cfg;
	struct mini m = { 0 };

	sched_config_default(&cfg);
	cfg.chunk_tokens = 4096;
	mini_add(&m, 0, 1, 64, 1);
	mini_add(&m, 1.0, 500, 8, 1);
	run(&m, "queue", 1, &cfg, &r);
	ck_assert_uint_eq(r.served, 2);
	ck_assert_near(r.ttft_max, T32K + T4K);
	ck_assert_near(r.ttft_mean, (T32K + T4K + TOK(12288) + T4K - 1.0) / 2);
	cfg.chunk_tokens = 0;
	run(&m, "queue", 1, &cfg, &r);
	ck_assert_near(r.ttft_max, T32K);
	ck_assert_near(r.ttft_mean, (T32K + T32K - 1.0 + T4K) / 2);
}
END_TEST

/* ---- trace loading ------------------------------------------------------ */

static void write_tmp(char *path, size_t cap, const char *text)
{
	FILE *f;
	int fd;

	snprintf(path, cap, "%s/kvfs-sched-trace-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	f = fdopen(fd, "w");
	fputs(text, f);
	fclose(f);
}

START_TEST(test_trace_load)
{
	struct sched_trace t;
	char path[256], err[512];

	write_tmp(path, sizeof(path),
		  "{\"timestamp\": 500, \"input_length\": 1000, "
		  "\"output_length\": 0, \"hash_ids\": [7, 8]}\n"
		  "\n"
		  "{\"timestamp\": 100, \"input_length\": 1024, "
		  "\"output_length\": 5, \"hash_ids\": [7, 9]}\n");
	ck_assert_int_eq(sched_trace_load(path, false, &t, err, sizeof(err)),
			 0);
	unlink(path);
	ck_assert_uint_eq(t.n, 2);
	/* sorted by arrival, times after the earliest */
	ck_assert_near(t.arrival[0], 0);
	ck_assert_near(t.arrival[1], 0.4);
	ck_assert_uint_eq(t.input[0], 1024);
	ck_assert_uint_eq(t.output[1], 1); /* 0 read as 1 */
	/* full blocks only: 1000 tokens name one block */
	ck_assert_uint_eq(t.nkeys[0], 2);
	ck_assert_uint_eq(t.nkeys[1], 1);
	ck_assert_uint_eq(t.keys[t.first[1]], 7);
	sched_trace_free(&t);
}
END_TEST

START_TEST(test_trace_bad_line)
{
	static const char *text =
		"{\"timestamp\": 0, \"input_length\": 512, "
		"\"output_length\": 1, \"hash_ids\": [1]}\n"
		"{\"timestamp\": 1, \"input_length\": 512, "
		"\"output_length\": 1, \"hash_ids\": [1]}\n"
		"{\"timestamp\": 2, \"input_length\": \"x\"}\n"
		"{\"timestamp\": 3, \"input_length\": 512, "
		"\"output_length\": 1, \"hash_ids\": [1]}\n";
	struct sched_trace t;
	char path[256], err[512];

	write_tmp(path, sizeof(path), text);
	ck_assert_int_eq(sched_trace_load(path, false, &t, err, sizeof(err)),
			 -EINVAL);
	ck_assert_msg(strstr(err, ":3:"), "%s", err);
	ck_assert_int_eq(sched_trace_load(path, true, &t, err, sizeof(err)), 0);
	ck_assert_uint_eq(t.n, 3);
	ck_assert_uint_eq(t.skipped, 1);
	sched_trace_free(&t);
	unlink(path);
	ck_assert_int_lt(sched_trace_load(path, false, &t, err, sizeof(err)),
			 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("sched_replay");
	TCase *tc = tcase_create("replay");

	tcase_add_test(tc, test_cache_leaves_first);
	tcase_add_test(tc, test_cache_long_chain);
	tcase_add_test(tc, test_tbt);
	tcase_add_test(tc, test_percentile);
	tcase_add_test(tc, test_replay_by_hand);
	tcase_add_test(tc, test_replay_fetch);
	tcase_add_test(tc, test_replay_reject);
	tcase_add_test(tc, test_replay_queue_cpp);
	tcase_add_test(tc, test_replay_queue_preempt);
	tcase_add_test(tc, test_trace_load);
	tcase_add_test(tc, test_trace_bad_line);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return cs_run(suite());
}
