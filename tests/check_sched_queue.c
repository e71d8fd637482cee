/*
 * check_sched_queue.c - the queue policy's held queues on crafted cases:
 * least work first, the SLO guard's bound, waiting for the writer of an
 * in-flight prefix, preemption at chunk boundaries, stealing, CPP, and
 * the config keys that set them.
 *
 * Times by hand (cost.h defaults): T(n) = 2.097152e-9 n^2 + 9.4489280512e-5 n
 *   T(4096)  = 0.422212465065984     T(16384) = 2.11106232532992
 *   T(32768) = 5.348024557502464
 */
#include "config.h"

#include <string.h>

#include "tests/check_sched.h"

#define T4K 0.422212465065984
#define T16K 2.11106232532992
#define T32K 5.348024557502464
#define QUAD 2.097152e-9
#define LIN 9.4489280512e-5

static uint64_t A[64], B[64], C[64], D[64], E[40];

static void setup(void)
{
	cs_chain(A, 64, 1000);
	cs_chain(B, 64, 2000);
	cs_chain(C, 64, 3000);
	cs_chain(D, 64, 4000);
	cs_chain(E, 40, 1000); /* A's first 32 blocks and 8 of its own */
	for (uint32_t i = 32; i < 40; i++)
		E[i] = 9000 + i;
}

static struct sched_config cfg_base(void)
{
	struct sched_config c;

	sched_config_default(&c);
	return c;
}

static uint64_t held_ok(struct sched *s, const uint64_t *keys, uint32_t n,
			double now, struct sched_decision *out)
{
	struct sched_req r = cs_req(keys, n, 16);
	struct sched_decision d;

	ck_assert_int_eq(sched_schedule(s, &r, now, &d), 0);
	ck_assert_int_eq(d.verdict, SCHED_ACCEPT);
	ck_assert(d.held);
	if (out)
		*out = d;
	return d.id;
}

static uint64_t next_id(struct sched *s, uint32_t i, double now)
{
	struct sched_dispatch d;
	int rc = sched_next(s, i, now, &d);

	ck_assert_int_ge(rc, 0);
	return rc == 1 ? d.id : 0;
}

START_TEST(test_held_only)
{
	struct sched *s = cs_sched("kvcache-centric", 2, 1, NULL);
	struct sched_dispatch d;
	struct sched_req r = cs_req(A, 8, 16);
	struct sched_decision dec;

	ck_assert(sched_policy_held(sched_policy_find("queue")));
	ck_assert(!sched_policy_held(sched_policy_find("lookahead")));
	ck_assert_int_eq(sched_next(s, 0, 0, &d), -EINVAL);
	ck_assert_int_eq(sched_schedule(s, &r, 0, &dec), 0);
	ck_assert(!dec.held);
	ck_assert_int_eq(sched_progress(s, dec.id, 512, 0), -EINVAL);
	sched_destroy(s);
}
END_TEST

/* least work first; equal work in arrival order; a dispatch names the
 * instance, and a busy instance is -EBUSY */
START_TEST(test_order)
{
	struct sched *s = cs_sched("queue", 1, 1, NULL);
	struct sched_decision db, dc, dd;
	uint64_t a, b, c, d;

	a = held_ok(s, A, 64, 0, NULL);
	ck_assert_uint_eq(next_id(s, 0, 0), a);
	b = held_ok(s, B, 32, 0.1, &db);
	c = held_ok(s, C, 8, 0.2, &dc);
	d = held_ok(s, D, 8, 0.3, &dd);
	/* B waits for A; C for A only (B goes after it); D for A and C */
	ck_assert_near(db.est_queue, T32K - 0.1);
	ck_assert_near(dc.est_queue, T32K - 0.2);
	ck_assert_near(dd.est_queue, T32K - 0.3 + T4K);
	{
		struct sched_dispatch x;

		ck_assert_int_eq(sched_next(s, 0, 1, &x), -EBUSY);
		ck_assert_int_eq(sched_next(s, 1, 1, &x), -EINVAL);
	}
	ck_assert_int_eq(sched_prefill_done(s, a, 5.4), 0);
	ck_assert_uint_eq(next_id(s, 0, 5.4), c);
	ck_assert_int_eq(sched_prefill_done(s, c, 5.8), 0);
	ck_assert_uint_eq(next_id(s, 0, 5.8), d);
	ck_assert_int_eq(sched_prefill_done(s, d, 6.2), 0);
	ck_assert_uint_eq(next_id(s, 0, 6.2), b);
	ck_assert_int_eq(sched_prefill_done(s, b, 8.4), 0);
	ck_assert_uint_eq(next_id(s, 0, 8.4), 0);
	sched_destroy(s);
}
END_TEST

/*
 * The guard: with slo_ttft 10 and guard 0.75 a request is urgent once
 * its wait plus its work reaches 7.5 s.  A long request (2.11 s of work)
 * queued at 0 behind a stream of short ones, one every 0.5 s, is
 * overtaken by each until 7.5 - 2.11 = 5.39 s, then goes first.
 */
START_TEST(test_guard_bound)
{
	struct sched_config cfg = cfg_base();
	struct sched *s;
	uint64_t run, lng, shorts[32];
	double t, started = -1;

	cfg.slo_ttft = 10;
	s = cs_sched("queue", 1, 1, &cfg);
	run = held_ok(s, A, 8, 0, NULL);
	ck_assert_uint_eq(next_id(s, 0, 0), run);
	lng = held_ok(s, B, 32, 0, NULL);
	for (int i = 1; i < 32 && started < 0; i++) {
		uint64_t keys[8];

		t = 0.5 * i;
		cs_chain(keys, 8, 100000 + 100 * (uint64_t)i);
		shorts[i] = held_ok(s, keys, 8, t, NULL);
		ck_assert_int_eq(sched_prefill_done(s, run, t), 0);
		run = next_id(s, 0, t);
		if (run == lng)
			started = t;
		else
			ck_assert_uint_eq(run, shorts[i]);
	}
	ck_assert_near(started, 5.5);
	sched_destroy(s);

	/* guard 0: every request is urgent: the latest start that meets
	 * the SLO first (arrival - work), so the long one, older by less
	 * than its extra work, goes first */
	cfg.guard = 0;
	s = cs_sched("queue", 1, 1, &cfg);
	run = held_ok(s, A, 8, 0, NULL);
	ck_assert_uint_eq(next_id(s, 0, 0), run);
	lng = held_ok(s, B, 32, 0, NULL);
	held_ok(s, C, 8, 0.1, NULL);
	ck_assert_int_eq(sched_prefill_done(s, run, 0.5), 0);
	ck_assert_uint_eq(next_id(s, 0, 0.5), lng);
	sched_destroy(s);
}
END_TEST

/* a request that reuses blocks still being written waits for their
 * writer, though its own work is less */
START_TEST(test_writer_wait)
{
	struct sched *s = cs_sched("queue", 1, 1, NULL);
	struct sched_decision de;
	struct sched_dispatch x;
	uint64_t a, e;

	a = held_ok(s, A, 32, 0, NULL);
	e = held_ok(s, E, 40, 0.1, &de);
	ck_assert_uint_eq(de.local_blocks, 32);
	ck_assert_near(de.est_queue, T16K);	  /* A's work first */
	ck_assert_uint_eq(next_id(s, 0, 0.2), a); /* not E */
	ck_assert_int_eq(sched_prefill_done(s, a, 2.4), 0);
	cs_hold(s, 0, 1000, 32);
	ck_assert_int_eq(sched_next(s, 0, 2.4, &x), 1);
	ck_assert_uint_eq(x.id, e);
	ck_assert_uint_eq(x.local_blocks, 32);
	ck_assert_uint_eq(x.reuse_blocks, 32);
	sched_destroy(s);
}
END_TEST

/* at a chunk boundary the running request yields to a shorter one, and
 * resumes from the tokens it computed */
START_TEST(test_preempt)
{
	struct sched_config cfg = cfg_base();
	struct sched *s;
	struct sched_dispatch x;
	uint64_t a, b;
	double left;

	cfg.chunk_tokens = 4096;
	s = cs_sched("queue", 1, 1, &cfg);
	a = held_ok(s, A, 64, 0, NULL);
	ck_assert_int_eq(sched_next(s, 0, 0, &x), 1);
	ck_assert_uint_eq(x.id, a);
	ck_assert_uint_eq(x.chunk_tokens, 4096);
	ck_assert_uint_eq(x.done_tokens, 0);
	ck_assert_int_eq(sched_progress(s, a, 4096, 0.5), 0); /* no one */
	b = held_ok(s, B, 8, 0.6, NULL);
	ck_assert_int_eq(sched_progress(s, a, 8192, 1.0), 1);
	ck_assert_int_eq(sched_progress(s, a, 8192, 1.0), -EINVAL);
	ck_assert_int_eq(sched_next(s, 0, 1.0, &x), 1);
	ck_assert_uint_eq(x.id, b);
	ck_assert_int_eq(sched_prefill_done(s, b, 1.5), 0);
	ck_assert_int_eq(sched_next(s, 0, 1.5, &x), 1);
	ck_assert_uint_eq(x.id, a);
	ck_assert_uint_eq(x.done_tokens, 8192);
	left = T32K - (QUAD * 8192.0 * 8192.0 + LIN * 8192.0);
	ck_assert_near(x.est_service, left);
	/* a request with less work left is not preempted */
	held_ok(s, C, 32, 1.6, NULL);
	ck_assert_int_eq(sched_progress(s, a, 28672, 2.0), 0);
	ck_assert_int_eq(sched_prefill_done(s, a, 2.5), 0);
	sched_destroy(s);

	/* chunk_tokens 0: no preemption points */
	cfg.chunk_tokens = 0;
	s = cs_sched("queue", 1, 1, &cfg);
	a = held_ok(s, A, 64, 0, NULL);
	ck_assert_int_eq(sched_next(s, 0, 0, &x), 1);
	ck_assert_uint_eq(x.chunk_tokens, 0);
	held_ok(s, B, 8, 0.6, NULL);
	ck_assert_int_eq(sched_progress(s, a, 8192, 1.0), 0);
	sched_destroy(s);
}
END_TEST

/* an idle instance with an empty queue takes the head of a busy one */
START_TEST(test_steal)
{
	struct sched_config cfg = cfg_base();
	struct sched *s;
	struct sched_decision db;
	struct sched_dispatch x;
	uint64_t a1, a2, b;

	for (int steal = 1; steal >= 0; steal--) {
		cfg.cpp_max = 1;
		cfg.steal = (uint32_t)steal;
		s = cs_sched("queue", 2, 1, &cfg);
		a1 = held_ok(s, A, 64, 0, NULL);
		ck_assert_uint_eq(next_id(s, 0, 0), a1);
		a2 = held_ok(s, B, 64, 0, NULL);
		ck_assert_uint_eq(next_id(s, 1, 0), a2);
		b = held_ok(s, C, 8, 0.1, &db);
		ck_assert_uint_eq(db.prefill, 0); /* a tie: the lower one */
		/* instance 1 is done early: B would wait ~5 s on 0 */
		ck_assert_int_eq(sched_prefill_done(s, a2, 1.0), 0);
		if (steal) {
			ck_assert_int_eq(sched_next(s, 1, 1.0, &x), 1);
			ck_assert_uint_eq(x.id, b);
			ck_assert(x.stolen);
			ck_assert_uint_eq(x.prefill, 1);
			ck_assert_near(sched_prefill_queue(s, 1, 1.0), T4K);
		} else {
			ck_assert_int_eq(sched_next(s, 1, 1.0, &x), 0);
		}
		sched_destroy(s);
	}
}
END_TEST

/* a long prefill over idle instances: one pipeline, all busy, split */
START_TEST(test_cpp)
{
	struct sched_config cfg = cfg_base();
	struct sched *s = cs_sched("queue", 4, 1, NULL);
	struct sched_dispatch x;
	uint64_t a, b;

	a = held_ok(s, A, 64, 0, NULL);
	ck_assert_int_eq(sched_next(s, 0, 0, &x), 1);
	ck_assert_uint_eq(x.id, a);
	ck_assert_uint_eq(x.ninst, 4);
	for (uint32_t i = 0; i < 4; i++)
		ck_assert_uint_eq(x.inst[i], i);
	ck_assert_uint_eq(x.chunk_tokens, 0); /* a pipeline never yields */
	ck_assert_near(x.est_service, T32K / (4 * 0.9));
	for (uint32_t i = 0; i < 4; i++)
		ck_assert_int_eq(sched_next(s, i, 0.1, &x), -EBUSY);
	ck_assert_int_eq(sched_progress(s, a, 4096, 0.2), 0);
	ck_assert_int_eq(sched_prefill_done(s, a, 1.5), 0);
	for (uint32_t i = 0; i < 4; i++)
		ck_assert_int_eq(sched_next(s, i, 1.5, &x), 0);
	/* short prompts run alone */
	b = held_ok(s, B, 8, 2, NULL);
	ck_assert_int_eq(sched_next(s, 0, 2, &x), 1);
	ck_assert_uint_eq(x.id, b);
	ck_assert_uint_eq(x.ninst, 1);
	sched_destroy(s);

	/* cpp_max 1: off */
	cfg.cpp_max = 1;
	s = cs_sched("queue", 4, 1, &cfg);
	held_ok(s, A, 64, 0, NULL);
	ck_assert_int_eq(sched_next(s, 0, 0, &x), 1);
	ck_assert_uint_eq(x.ninst, 1);
	ck_assert_near(x.est_service, T32K);
	sched_destroy(s);
}
END_TEST

/* cancelling a queued or running request frees its place */
START_TEST(test_cancel)
{
	struct sched *s = cs_sched("queue", 1, 1, NULL);
	uint64_t a, b, c;

	a = held_ok(s, A, 8, 0, NULL);
	ck_assert_uint_eq(next_id(s, 0, 0), a);
	b = held_ok(s, B, 8, 0.1, NULL);
	c = held_ok(s, C, 16, 0.1, NULL);
	ck_assert_int_eq(sched_complete(s, b, 0.2), 0);
	ck_assert_int_eq(sched_complete(s, a, 0.2), 0); /* while running */
	ck_assert_uint_eq(next_id(s, 0, 0.3), c);
	ck_assert_int_eq(sched_progress(s, b, 512, 0.3), -ENOENT);
	ck_assert_uint_eq(sched_expire(s, 100, 10), 1);
	ck_assert_uint_eq(next_id(s, 0, 100), 0);
	sched_destroy(s);
}
END_TEST

START_TEST(test_config_keys)
{
	struct sched_config c = cfg_base();
	char err[256];

	ck_assert_near(c.guard, SCHED_DEF_GUARD);
	ck_assert_uint_eq(c.cpp_max, SCHED_DEF_CPP_MAX);
	ck_assert_int_eq(sched_config_set(&c, "guard=0.5", err, sizeof(err)),
			 0);
	ck_assert_near(c.guard, 0.5);
	ck_assert_int_eq(
		sched_config_set(&c, "chunk_tokens = 0", err, sizeof(err)), 0);
	ck_assert_uint_eq(c.chunk_tokens, 0);
	ck_assert_int_eq(sched_config_set(&c, "cpp_max=9", err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "cpp_max"));
	ck_assert_uint_eq(c.cpp_max, SCHED_DEF_CPP_MAX);
	ck_assert_int_eq(
		sched_config_set(&c, "cpp_efficiency=1.5", err, sizeof(err)),
		-EINVAL);
	ck_assert_int_eq(sched_config_set(&c, "steal=2", err, sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(sched_config_set(&c, "no_such=1", err, sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(sched_config_set(&c, "guard", err, sizeof(err)),
			 -EINVAL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sched_queue");
	TCase *tc = tcase_create("queue");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_held_only);
	tcase_add_test(tc, test_order);
	tcase_add_test(tc, test_guard_bound);
	tcase_add_test(tc, test_writer_wait);
	tcase_add_test(tc, test_preempt);
	tcase_add_test(tc, test_steal);
	tcase_add_test(tc, test_cpp);
	tcase_add_test(tc, test_cancel);
	tcase_add_test(tc, test_config_keys);
	suite_add_tcase(s, tc);
	return cs_run(s);
}
