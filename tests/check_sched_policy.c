/*
 * check_sched_policy.c - every policy on small crafted cases where the
 * right choice is known, decode selection (now and predicted), early
 * rejection (both variants), and the request life's errors.
 *
 * Times by hand (cost.h defaults): T(n) = 2.097152e-9 n^2 + 9.4489280512e-5 n
 *   T(4096)  = 0.422212465065984     T(16384) = 2.11106232532992
 *   T(32768) = 5.348024557502464     a 160 MiB block at 100 GB/s: 1.6777216 ms
 */
#include "config.h"

#include <string.h>

#include "tests/check_sched.h"

#define T4K 0.422212465065984
#define T16K 2.11106232532992
#define T32K 5.348024557502464
#define XFER1 0.0016777216

static uint64_t C[64], D[64], E[65]; /* prompt chains */

static void setup(void)
{
	cs_chain(C, 64, 1000);
	cs_chain(D, 64, 2000);
	cs_chain(E, 64, 1000); /* C and one more block */
	E[64] = 5000;
}

static struct sched_decision sched_ok(struct sched *s, const uint64_t *keys,
				      uint32_t n, uint64_t out, double now)
{
	struct sched_req r = cs_req(keys, n, out);
	struct sched_decision d;

	ck_assert_int_eq(sched_schedule(s, &r, now, &d), 0);
	return d;
}

START_TEST(test_random)
{
	struct sched *a = cs_sched("random", 4, 2, NULL);
	struct sched *b = cs_sched("random", 4, 2, NULL);
	unsigned count[4] = { 0 };

	for (int i = 0; i < 400; i++) {
		struct sched_decision x = sched_ok(a, C, 8, 16, i);
		struct sched_decision y = sched_ok(b, C, 8, 16, i);

		ck_assert_uint_eq(x.prefill, y.prefill); /* seeded */
		count[x.prefill]++;
		ck_assert_int_eq(sched_complete(a, x.id, i), 0);
		ck_assert_int_eq(sched_complete(b, y.id, i), 0);
	}
	for (int i = 0; i < 4; i++)
		ck_assert_uint_gt(count[i], 60);
	sched_destroy(a);
	sched_destroy(b);
}
END_TEST

START_TEST(test_round_robin)
{
	struct sched *s = cs_sched("round-robin", 3, 1, NULL);

	for (uint32_t i = 0; i < 7; i++)
		ck_assert_uint_eq(sched_ok(s, C, 4, 16, 0).prefill, i % 3);
	sched_destroy(s);
}
END_TEST

START_TEST(test_load)
{
	struct sched *s = cs_sched("load", 4, 1, NULL);
	struct sched_decision d[4];

	for (uint32_t i = 0; i < 4; i++) {
		d[i] = sched_ok(s, D, 8, 16, 0);
		ck_assert_uint_eq(d[i].prefill, i); /* to an idle one */
	}
	ck_assert_near(sched_prefill_queue(s, 2, 0), T4K);
	ck_assert_near(sched_prefill_queue(s, 2, 0.2), T4K - 0.2);
	ck_assert_int_eq(sched_complete(s, d[2].id, 0.1), 0);
	ck_assert_near(sched_prefill_queue(s, 2, 0.1), 0);
	ck_assert_uint_eq(sched_ok(s, D, 8, 16, 0.1).prefill, 2);
	sched_destroy(s);
}
END_TEST

START_TEST(test_longest_prefix)
{
	struct sched *s = cs_sched("longest-prefix", 4, 1, NULL);
	struct sched_decision d;

	cs_hold(s, 1, 1000, 4);
	cs_hold(s, 2, 1000, 8);
	d = sched_ok(s, C, 16, 16, 0);
	ck_assert_uint_eq(d.prefill, 2);
	ck_assert_uint_eq(d.local_blocks, 8);
	ck_assert_uint_eq(d.reuse_blocks, 8);
	/* a tie in length goes to the shorter queue: 1 now holds 8 too */
	cs_hold(s, 1, 1004, 4);
	ck_assert_uint_eq(sched_ok(s, C, 16, 16, 0).prefill, 1);
	sched_destroy(s);
}
END_TEST

/* node 0 holds half of C, behind a queue of b seconds; the others none */
static struct sched_decision cache_aware_case(uint32_t busy_blocks)
{
	struct sched *s = cs_sched("cache-aware", 4, 1, NULL);
	struct sched_decision d;

	ck_assert_uint_eq(sched_ok(s, D, busy_blocks, 16, 0).prefill, 0);
	cs_hold(s, 0, 1000, 32);
	d = sched_ok(s, C, 64, 16, 0);
	sched_destroy(s);
	return d;
}

START_TEST(test_cache_aware)
{
	/* queue 0.42 s + T(32K) - T(16K) = 3.66 s beats T(32K) = 5.35 s */
	struct sched_decision d = cache_aware_case(8);

	ck_assert_uint_eq(d.prefill, 0);
	ck_assert_uint_eq(d.local_blocks, 32);
	ck_assert_near(d.est_queue, T4K);
	ck_assert_near(d.est_prefill, T32K - T16K);
	ck_assert_near(d.est_ttft, T4K + T32K - T16K);
	ck_assert_uint_eq(d.src_node, SCHED_NO_NODE);
	/* queue 5.35 s + 3.24 s loses to recomputing on an idle one */
	d = cache_aware_case(64);
	ck_assert_uint_eq(d.prefill, 1);
	ck_assert_uint_eq(d.reuse_blocks, 0);
	ck_assert_near(d.est_ttft, T32K);
}
END_TEST

START_TEST(test_kvcache_centric_fetch)
{
	struct sched *s = cs_sched("kvcache-centric", 4, 1, NULL);
	struct sched_decision d;

	ck_assert_uint_eq(sched_ok(s, D, 64, 16, 0).prefill, 0);
	cs_hold(s, 0, 1000, 64);
	/* node 0 holds all of C but is busy for 5.35 s: fetch to node 1 */
	d = sched_ok(s, C, 64, 16, 0);
	ck_assert_uint_eq(d.prefill, 1);
	ck_assert_uint_eq(d.src_node, 0);
	ck_assert_uint_eq(d.local_blocks, 0);
	ck_assert_uint_eq(d.reuse_blocks, 64);
	ck_assert_uint_eq(d.xfer_blocks, 64);
	ck_assert_near(d.est_xfer, 64 * XFER1);
	ck_assert_near(d.est_prefill, 0);
	ck_assert_near(d.est_ttft, 64 * XFER1);
	sched_destroy(s);
}
END_TEST

/* two instances: node 0 holds C whole behind a 5.35 s queue, node 1 half */
static struct sched_decision balance_case(double balance)
{
	struct sched_config cfg;
	struct sched *s;
	struct sched_decision d;

	sched_config_default(&cfg);
	cfg.balance = balance;
	s = cs_sched("kvcache-centric", 2, 1, &cfg);
	ck_assert_uint_eq(sched_ok(s, D, 64, 16, 0).prefill, 0);
	cs_hold(s, 0, 1000, 64);
	cs_hold(s, 1, 1000, 32);
	d = sched_ok(s, C, 64, 16, 0);
	sched_destroy(s);
	return d;
}

START_TEST(test_kvcache_centric_balance)
{
	/* 64 > 1 * 32: fetch the 32 node 1 lacks */
	struct sched_decision d = balance_case(1);

	ck_assert_uint_eq(d.prefill, 1);
	ck_assert_uint_eq(d.xfer_blocks, 32);
	ck_assert_uint_eq(d.src_node, 0);
	ck_assert_near(d.est_ttft, 32 * XFER1);
	/* 64 <= 3 * 32: not worth replicating, compute the rest locally */
	d = balance_case(3);
	ck_assert_uint_eq(d.prefill, 1);
	ck_assert_uint_eq(d.xfer_blocks, 0);
	ck_assert_uint_eq(d.reuse_blocks, 32);
	ck_assert_uint_eq(d.src_node, SCHED_NO_NODE);
	ck_assert_near(d.est_ttft, T32K - T16K);
}
END_TEST

/*
 * A (C, 64 blocks) is placed at 0 s and still prefilling when B (C and one
 * more block) arrives at 2 s.  Nothing of C is cached yet.  Lookahead
 * queues B behind A on instance 0, where C will be written: 3.35 s of
 * queue + 0.12 s.  Kvcache-centric sees no prefix anywhere and recomputes
 * all of B on idle instance 1: 5.47 s.
 */
START_TEST(test_lookahead_inflight)
{
	struct sched *la = cs_sched("lookahead", 2, 1, NULL);
	struct sched *kc = cs_sched("kvcache-centric", 2, 1, NULL);
	double tb = sched_cost_prefill(&sched_get_config(la)->cost, 65 * 512,
				       64 * 512);
	struct sched_decision a, b, k;

	a = sched_ok(la, C, 64, 16, 0);
	ck_assert_uint_eq(a.prefill, 0);
	ck_assert_uint_eq(sched_ok(kc, C, 64, 16, 0).prefill, 0);

	b = sched_ok(la, E, 65, 16, 2.0);
	ck_assert_uint_eq(b.prefill, 0);
	ck_assert_uint_eq(b.local_blocks, 64);
	ck_assert_uint_eq(b.reuse_blocks, 64);
	ck_assert_near(b.est_queue, T32K - 2.0);
	ck_assert_near(b.est_ttft, T32K - 2.0 + tb);
	k = sched_ok(kc, E, 65, 16, 2.0);
	ck_assert_uint_eq(k.prefill, 1);
	ck_assert_uint_eq(k.reuse_blocks, 0);

	/* both cancelled: nothing in flight any more */
	ck_assert_int_eq(sched_complete(la, a.id, 2.0), 0);
	ck_assert_int_eq(sched_complete(la, b.id, 2.0), 0);
	ck_assert_uint_eq(sched_ok(la, E, 65, 16, 2.0).local_blocks, 0);
	sched_destroy(la);
	sched_destroy(kc);
}
END_TEST

/*
 * A slow network (16.8 s a block): node 0 holds C but queues a 48 s
 * prefill, node 1 holds half of C.  Algorithm 1's ratio rule would fetch
 * the other half to node 1 (537 s), so kvcache-centric waits on node 0;
 * lookahead weighs the fetch against computing the half: 3.2 s on node 1.
 */
static struct sched_decision slow_fetch_case(const char *policy)
{
	struct sched_config cfg;
	struct sched *s;
	struct sched_decision d;
	uint64_t big[256];

	sched_config_default(&cfg);
	cfg.cost.xfer_bw = 1e7;
	s = cs_sched(policy, 2, 1, &cfg);
	cs_chain(big, 256, 90000);
	ck_assert_uint_eq(sched_ok(s, big, 256, 16, 0).prefill, 0);
	cs_hold(s, 0, 1000, 64);
	cs_hold(s, 1, 1000, 32);
	d = sched_ok(s, C, 64, 16, 0);
	sched_destroy(s);
	return d;
}

START_TEST(test_lookahead_no_slow_fetch)
{
	struct sched_decision d = slow_fetch_case("kvcache-centric");

	ck_assert_uint_eq(d.prefill, 0);
	ck_assert(d.est_ttft > 48);
	d = slow_fetch_case("lookahead");
	ck_assert_uint_eq(d.prefill, 1);
	ck_assert_uint_eq(d.xfer_blocks, 0);
	ck_assert_uint_eq(d.reuse_blocks, 32);
	ck_assert_near(d.est_ttft, T32K - T16K);
}
END_TEST

START_TEST(test_decode_now)
{
	struct sched *s = cs_sched("kvcache-centric", 1, 2, NULL);
	struct sched_decision a, b;

	a = sched_ok(s, C, 1, 16, 0);
	ck_assert_uint_eq(a.decode, 0);
	b = sched_ok(s, D, 1, 16, 0);
	ck_assert_uint_eq(b.decode, 1); /* equal load: fewer headed there */
	ck_assert_int_eq(sched_prefill_done(s, a.id, 0.1), 0);
	ck_assert_uint_eq(sched_decode_batch(s, 0), 1);
	ck_assert_int_eq(sched_complete(s, b.id, 0.1), 0);
	/* decode 0 runs a: the next goes to 1 */
	ck_assert_uint_eq(sched_ok(s, D, 1, 16, 0.1).decode, 1);
	sched_destroy(s);
}
END_TEST

/*
 * Decode 0 runs R1 (long context) that ends within a second; R2 is still
 * prefilling and will decode on 1 for nine seconds.  R3, whose prefill
 * ends in 5 s, belongs on 0: lookahead predicts that, the load now says 1.
 */
static uint32_t decode_case(const char *policy)
{
	struct sched *s = cs_sched(policy, 1, 2, NULL);
	struct sched_decision r1, r2, r3;
	uint32_t dec;

	cs_hold(s, 0, 1000, 64);
	r1 = sched_ok(s, C, 64, 10, 0);
	ck_assert_uint_eq(r1.decode, 0);
	ck_assert_int_eq(sched_prefill_done(s, r1.id, 0), 0);
	r2 = sched_ok(s, D, 1, 1000, 0);
	ck_assert_uint_eq(r2.decode, 1);
	r3 = sched_ok(s, D, 64, 10, 0);
	dec = r3.decode;
	sched_destroy(s);
	return dec;
}

START_TEST(test_decode_predict)
{
	ck_assert_uint_eq(decode_case("kvcache-centric"), 1);
	ck_assert_uint_eq(decode_case("lookahead"), 0);
}
END_TEST

START_TEST(test_reject_ttft)
{
	struct sched_config cfg;
	struct sched *s;
	struct sched_decision d;
	struct sched_load l;

	sched_config_default(&cfg);
	cfg.slo_ttft = 1.0;
	cfg.reject = SCHED_REJECT_EARLY;
	s = cs_sched("kvcache-centric", 2, 1, &cfg);
	d = sched_ok(s, C, 64, 16, 0); /* 5.35 s anywhere */
	ck_assert_int_eq(d.verdict, SCHED_REJECT_TTFT);
	ck_assert_uint_eq(d.id, 0);
	/* cached on node 1: about 0 s there */
	cs_hold(s, 1, 1000, 64);
	d = sched_ok(s, C, 64, 16, 0);
	ck_assert_int_eq(d.verdict, SCHED_ACCEPT);
	ck_assert_uint_ne(d.id, 0);
	sched_get_load(s, &l);
	ck_assert_uint_eq(l.rejected_ttft, 1);
	ck_assert_uint_eq(l.accepted, 1);
	sched_destroy(s);

	cfg.reject = SCHED_REJECT_OFF;
	s = cs_sched("kvcache-centric", 2, 1, &cfg);
	ck_assert_int_eq(sched_ok(s, C, 64, 16, 0).verdict, SCHED_ACCEPT);
	sched_destroy(s);
}
END_TEST

START_TEST(test_reject_tbt)
{
	struct sched_config cfg;
	struct sched *s;
	int i;

	sched_config_default(&cfg);
	cfg.slo_tbt = 0.05;
	cfg.reject = SCHED_REJECT_EARLY;
	s = cs_sched("kvcache-centric", 1, 1, &cfg);
	cs_hold(s, 0, 1000, 64);
	/* each decoding request adds 0.14 ms + 32818 * 20 ns to a step */
	for (i = 0; i < 100; i++) {
		struct sched_decision d = sched_ok(s, C, 64, 101, 0);

		if (d.verdict != SCHED_ACCEPT) {
			ck_assert_int_eq(d.verdict, SCHED_REJECT_TBT);
			break;
		}
		ck_assert_int_eq(sched_prefill_done(s, d.id, 0), 0);
	}
	/* 1.1 * (9 ms + (i + 1) * 0.796 ms) passes 50 ms at i + 1 = 46 */
	ck_assert_int_eq(i, 45);
	sched_destroy(s);
}
END_TEST

/*
 * 40 requests decode now and end within 5 s; a 256-block prompt arrives
 * whose prefill takes 48 s.  The load now misses the TBT SLO, the load
 * predicted for when its prefill ends does not.
 */
static enum sched_verdict predict_case(enum sched_reject_mode mode)
{
	struct sched_config cfg;
	struct sched *s;
	uint64_t big[256];
	enum sched_verdict v;

	sched_config_default(&cfg);
	cfg.slo_tbt = 0.046;
	cfg.slo_ttft = 100;
	cfg.reject = mode;
	s = cs_sched("kvcache-centric", 1, 1, &cfg);
	cs_hold(s, 0, 1000, 64);
	for (int i = 0; i < 40; i++) {
		struct sched_decision d = sched_ok(s, C, 64, 101, 0);

		ck_assert_int_eq(d.verdict, SCHED_ACCEPT);
		ck_assert_int_eq(sched_prefill_done(s, d.id, 0), 0);
	}
	cs_chain(big, 256, 90000);
	v = sched_ok(s, big, 256, 101, 0).verdict;
	sched_destroy(s);
	return v;
}

START_TEST(test_reject_predict)
{
	ck_assert_int_eq(predict_case(SCHED_REJECT_EARLY), SCHED_REJECT_TBT);
	ck_assert_int_eq(predict_case(SCHED_REJECT_PREDICT), SCHED_ACCEPT);
	ck_assert_int_eq(predict_case(SCHED_REJECT_OFF), SCHED_ACCEPT);
}
END_TEST

START_TEST(test_life_errors)
{
	struct sched *s = cs_sched("kvcache-centric", 1, 1, NULL);
	struct sched_req r = cs_req(C, 4, 16);
	struct sched_decision d;

	d = sched_ok(s, C, 4, 16, 0);
	ck_assert_int_eq(sched_prefill_done(s, d.id + 1, 1), -ENOENT);
	ck_assert_int_eq(sched_prefill_done(s, 0, 1), -ENOENT);
	ck_assert_int_eq(sched_prefill_done(s, d.id, 1), 0);
	ck_assert_int_eq(sched_prefill_done(s, d.id, 1), -EALREADY);
	ck_assert_int_eq(sched_complete(s, d.id, 2), 0);
	ck_assert_int_eq(sched_complete(s, d.id, 2), -ENOENT);
	/* the slot is reused, the old id stays dead */
	ck_assert_uint_ne(sched_ok(s, C, 4, 16, 3).id, d.id);
	ck_assert_int_eq(sched_complete(s, d.id, 3), -ENOENT);

	r.keys = NULL;
	ck_assert_int_eq(sched_schedule(s, &r, 0, &d), -EINVAL);
	r = cs_req(C, 4, 16);
	r.input_tokens = 100; /* fewer tokens than 4 full blocks */
	ck_assert_int_eq(sched_schedule(s, &r, 0, &d), -EINVAL);
	sched_destroy(s);
}
END_TEST

/* requests never completed are forgotten after ttl, books and all */
START_TEST(test_expire)
{
	struct sched *s = cs_sched("lookahead", 1, 1, NULL);
	struct sched_decision a, b, c;
	struct sched_load l;

	a = sched_ok(s, C, 64, 16, 0);
	b = sched_ok(s, D, 64, 16, 5);
	c = sched_ok(s, E, 65, 16, 6);
	ck_assert_int_eq(sched_prefill_done(s, c.id, 9), 0);
	ck_assert_double_gt(sched_prefill_queue(s, 0, 9), 0);
	/* at 10 with ttl 5: a (0) and b (5) are due, c (9) is not */
	ck_assert_uint_eq(sched_expire(s, 10, 5), 2);
	sched_get_load(s, &l);
	ck_assert_uint_eq(l.live, 1);
	ck_assert_int_eq(sched_complete(s, a.id, 10), -ENOENT);
	ck_assert_int_eq(sched_prefill_done(s, b.id, 10), -ENOENT);
	/* their queue and in-flight blocks went with them */
	ck_assert_double_eq(sched_prefill_queue(s, 0, 10), 0);
	ck_assert_uint_eq(sched_ok(s, C, 64, 16, 10).local_blocks, 0);
	ck_assert_uint_eq(sched_decode_batch(s, 0), 1);
	ck_assert_uint_eq(sched_expire(s, 13.9, 5), 0);
	ck_assert_uint_eq(sched_expire(s, 100, 5), 2);
	sched_get_load(s, &l);
	ck_assert_uint_eq(l.live, 0);
	ck_assert_uint_eq(sched_decode_batch(s, 0), 0);
	sched_destroy(s);
}
END_TEST

START_TEST(test_policy_table)
{
	static const char *names[] = { "random",      "round-robin",
				       "load",	      "longest-prefix",
				       "cache-aware", "kvcache-centric",
				       "lookahead",   "queue" };

	ck_assert_uint_eq(sched_policy_count(), 8);
	for (size_t i = 0; i < 8; i++) {
		ck_assert_str_eq(sched_policy_name(sched_policy_at(i)),
				 names[i]);
		ck_assert_ptr_eq(sched_policy_find(names[i]),
				 sched_policy_at(i));
		ck_assert(strlen(sched_policy_summary(sched_policy_at(i))));
	}
	ck_assert_ptr_null(sched_policy_find("fastest"));
	ck_assert_ptr_null(sched_policy_at(8));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("sched_policy");
	TCase *tc = tcase_create("policy");

	tcase_add_unchecked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_random);
	tcase_add_test(tc, test_round_robin);
	tcase_add_test(tc, test_load);
	tcase_add_test(tc, test_longest_prefix);
	tcase_add_test(tc, test_cache_aware);
	tcase_add_test(tc, test_kvcache_centric_fetch);
	tcase_add_test(tc, test_kvcache_centric_balance);
	tcase_add_test(tc, test_lookahead_inflight);
	tcase_add_test(tc, test_lookahead_no_slow_fetch);
	tcase_add_test(tc, test_decode_now);
	tcase_add_test(tc, test_decode_predict);
	tcase_add_test(tc, test_reject_ttft);
	tcase_add_test(tc, test_reject_tbt);
	tcase_add_test(tc, test_reject_predict);
	tcase_add_test(tc, test_life_errors);
	tcase_add_test(tc, test_expire);
	tcase_add_test(tc, test_policy_table);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return cs_run(suite());
}
