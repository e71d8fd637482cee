/*
 * check_sched.h - what the sched/ Check tests share: a runner, and a
 * scheduler on a small cluster with keys that are easy to read.
 */
#ifndef KVFS_CHECK_SCHED_H
#define KVFS_CHECK_SCHED_H

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "sched/sched.h"

/* a - b within a relative (or, near 0, absolute) tolerance */
#define ck_assert_near(a, b)                                                   \
	ck_assert_msg(fabs((double)(a) - (double)(b)) <=                       \
			      1e-9 * fmax(1.0, fabs((double)(b))),             \
		      "%s = %.12g, want %.12g", #a, (double)(a), (double)(b))

static inline int cs_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* np prefill instances on nodes 0..np-1, nd decode on np..np+nd-1 */
static inline struct sched *cs_sched(const char *policy, uint32_t np,
				     uint32_t nd,
				     const struct sched_config *cfg)
{
	struct sched_config def;
	struct sched_setup su = { .nprefill = np, .ndecode = nd, .seed = 7 };
	struct sched *s = NULL;
	const struct sched_policy_ops *p = sched_policy_find(policy);

	ck_assert_msg(p, "policy %s", policy);
	if (!cfg) {
		sched_config_default(&def);
		cfg = &def;
	}
	ck_assert_int_eq(sched_create(cfg, &su, p, &s), 0);
	return s;
}

/* keys of a chain: base + 0, base + 1, ... */
static inline void cs_chain(uint64_t *keys, uint32_t n, uint64_t base)
{
	for (uint32_t i = 0; i < n; i++)
		keys[i] = base + i;
}

/* node holds the first n blocks of the chain at base */
static inline void cs_hold(struct sched *s, uint32_t node, uint64_t base,
			   uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		ck_assert_int_ge(sched_block_insert(s, node, base + i), 0);
}

static inline struct sched_req cs_req(const uint64_t *keys, uint32_t nkeys,
				      uint64_t out)
{
	struct sched_req r = {
		.keys = keys,
		.nkeys = nkeys,
		.input_tokens = (uint64_t)nkeys * SCHED_DEF_BLOCK_TOKENS,
		.output_tokens = out,
	};

	return r;
}

#endif /* KVFS_CHECK_SCHED_H */
