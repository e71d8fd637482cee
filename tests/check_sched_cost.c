/*
 * check_sched_cost.c - sched/cost.h and the config file: the cost model
 * against hand-computed values, the least-squares fit, and config
 * reading and writing.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/check_sched.h"
#include "sched/cost.h"

/*
 * By hand, LLaMA3-70B on 8 x A800 (l 80, d 8192, a 4, b 22, 1.25e15):
 *   quad = 80*4*8192 / 1.25e15         = 2.097152e-9 s/token^2
 *   lin  = 80*22*8192^2 / 1.25e15      = 9.4489280512e-5 s/token
 *   T(8192)  = 80*26*8192^3 / 1.25e15  = 0.914793674309632 s
 *   T(16384) = 0.562949953421312 + 1.548112371908608 = 2.11106232532992
 */
START_TEST(test_defaults)
{
	struct sched_cost c;

	sched_cost_default(&c);
	ck_assert_near(c.pf_quad, 2.097152e-9);
	ck_assert_near(c.pf_lin, 9.4489280512e-5);
	ck_assert_near(c.pf_const, 0);
	ck_assert_uint_eq(c.block_tokens, 512);
	/* 2 * 80 layers * 1024 (8 KV heads x 128) * 2 bytes * 512 tokens */
	ck_assert_near(c.block_bytes, 2.0 * 80 * 1024 * 2 * 512);
	ck_assert_int_eq(sched_cost_check(&c, NULL), 0);
}
END_TEST

START_TEST(test_prefill)
{
	struct sched_cost c;

	sched_cost_default(&c);
	ck_assert_near(sched_cost_prefill(&c, 8192, 0), 0.914793674309632);
	ck_assert_near(sched_cost_prefill(&c, 16384, 0), 2.11106232532992);
	/* cached prefix: T(n) - T(c), not T(n - c) */
	ck_assert_near(sched_cost_prefill(&c, 16384, 8192),
		       2.11106232532992 - 0.914793674309632);
	ck_assert(sched_cost_prefill(&c, 16384, 8192) >
		  sched_cost_prefill(&c, 8192, 0));
	ck_assert_near(sched_cost_prefill(&c, 100, 100), 0);
	ck_assert_near(sched_cost_prefill(&c, 100, 500), 0);
	c.pf_const = 0.25;
	ck_assert_near(sched_cost_prefill(&c, 100, 100), 0.25);
	/* blocks to tokens: capped by the prompt */
	ck_assert_uint_eq(sched_cost_block_tok(&c, 3, 5000), 1536);
	ck_assert_uint_eq(sched_cost_block_tok(&c, 3, 1000), 1000);
}
END_TEST

START_TEST(test_transfer_step)
{
	struct sched_cost c;

	sched_cost_default(&c);
	/* 10 blocks of 160 MiB at 100 GB/s */
	ck_assert_near(sched_cost_transfer(&c, 10), 0.016777216);
	ck_assert_near(sched_cost_transfer(&c, 0), 0);
	c.xfer_lat = 0.001;
	ck_assert_near(sched_cost_transfer(&c, 10), 0.017777216);
	/* 9 ms + 4 * 0.14 ms + 10000 * 20 ns */
	ck_assert_near(sched_cost_step(&c, 4, 10000), 0.00976);
}
END_TEST

START_TEST(test_from_flops)
{
	struct sched_flop_model f = {
		.layers = 32, .hidden = 4096, .a = 4, .b = 24, .flops = 1e14
	};
	struct sched_cost c;

	sched_cost_default(&c);
	ck_assert_int_eq(sched_cost_from_flops(&c, &f), 0);
	ck_assert_near(c.pf_quad, 32.0 * 4 * 4096 / 1e14);
	ck_assert_near(c.pf_lin, 32.0 * 24 * 4096 * 4096 / 1e14);
	f.flops = 0;
	ck_assert_int_eq(sched_cost_from_flops(&c, &f), -EINVAL);
}
END_TEST

static void rows_of(struct sched_fit_row *r, size_t n, double q, double l,
		    double k)
{
	for (size_t i = 0; i < n; i++) {
		double tok = 512.0 * (double)(1 + i % 60);
		double cached = 512.0 * (double)((i * 7) % (1 + i % 60));

		r[i].n = tok;
		r[i].cached = cached;
		r[i].seconds = q * (tok * tok - cached * cached) +
			       l * (tok - cached) + k;
	}
}

START_TEST(test_fit_exact)
{
	struct sched_fit_row r[200];
	struct sched_cost c;
	double rmse;

	rows_of(r, 200, 3e-9, 1e-4, 0.02);
	sched_cost_default(&c);
	ck_assert_int_eq(sched_cost_fit(r, 200, &c, &rmse), 0);
	ck_assert_msg(fabs(c.pf_quad - 3e-9) < 1e-15, "quad %g", c.pf_quad);
	ck_assert_msg(fabs(c.pf_lin - 1e-4) < 1e-10, "lin %g", c.pf_lin);
	ck_assert_msg(fabs(c.pf_const - 0.02) < 1e-6, "const %g", c.pf_const);
	ck_assert(rmse < 1e-6);
}
END_TEST

/* data a negative constant would fit best: the fit keeps it at 0 and
 * still explains the data with the other two */
START_TEST(test_fit_nonneg)
{
	struct sched_fit_row r[100];
	struct sched_cost c;
	double rmse;

	for (int i = 0; i < 100; i++) {
		r[i].n = 4096.0 + 512.0 * i;
		r[i].cached = 0;
		r[i].seconds = 2e-9 * r[i].n * r[i].n + 5e-5 * r[i].n - 0.05;
	}
	sched_cost_default(&c);
	ck_assert_int_eq(sched_cost_fit(r, 100, &c, &rmse), 0);
	ck_assert(c.pf_quad >= 0 && c.pf_lin >= 0);
	ck_assert_near(c.pf_const, 0);
	ck_assert(rmse < 0.05);
}
END_TEST

START_TEST(test_fit_refuses)
{
	struct sched_fit_row r[3] = { { 1000, 0, 1 },
				      { 2000, 0, 2 },
				      { 10, 10, 1 } };
	struct sched_cost c;

	ck_assert_int_eq(sched_cost_fit(r, 1, &c, NULL), -EINVAL);
	r[0].cached = r[0].n;
	r[1].cached = r[1].n;
	ck_assert_int_eq(sched_cost_fit(r, 3, &c, NULL), -EINVAL);
	r[0].cached = 2 * r[0].n;
	ck_assert_int_eq(sched_cost_fit(r, 3, &c, NULL), -EINVAL);
}
END_TEST

/* a temporary file with text; the caller unlinks it */
static void write_tmp(char *path, size_t cap, const char *text)
{
	FILE *f;
	int fd;

	snprintf(path, cap, "%s/kvfs-sched-cfg-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	f = fdopen(fd, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

START_TEST(test_config_roundtrip)
{
	struct sched_config a, b;
	char path[256], err[256];
	FILE *f;

	sched_config_default(&a);
	a.cost.pf_quad = 1.234567890123e-9;
	a.cost.xfer_bw = 25e9;
	a.slo_ttft = 12.5;
	a.reject = SCHED_REJECT_PREDICT;
	write_tmp(path, sizeof(path), "");
	f = fopen(path, "w");
	ck_assert_int_eq(sched_config_write(&a, "a header\nof two lines", f),
			 0);
	fclose(f);
	sched_config_default(&b);
	ck_assert_int_eq(sched_config_load(&b, path, err, sizeof(err)), 0);
	unlink(path);
	ck_assert(memcmp(&a.cost, &b.cost, sizeof(a.cost)) == 0);
	ck_assert(a.slo_ttft == b.slo_ttft && a.slo_tbt == b.slo_tbt);
	ck_assert(a.balance == b.balance && b.reject == SCHED_REJECT_PREDICT);
}
END_TEST

START_TEST(test_config_errors)
{
	struct sched_config c;
	char path[256], err[256];

	sched_config_default(&c);
	write_tmp(path, sizeof(path), "# comment\nslo_ttft = 10\nbogus = 1\n");
	ck_assert_int_eq(sched_config_load(&c, path, err, sizeof(err)),
			 -EINVAL);
	ck_assert_msg(strstr(err, ":3: unknown key 'bogus'"), "%s", err);
	ck_assert(c.slo_ttft == SCHED_DEF_SLO_TTFT); /* unchanged */
	unlink(path);

	write_tmp(path, sizeof(path), "transfer_bw = fast\n");
	ck_assert_int_eq(sched_config_load(&c, path, err, sizeof(err)),
			 -EINVAL);
	ck_assert_msg(strstr(err, ":1: transfer_bw"), "%s", err);
	unlink(path);

	write_tmp(path, sizeof(path), "prefill_lin = 1e-4\nflop_a = 3\n");
	ck_assert_int_eq(sched_config_load(&c, path, err, sizeof(err)),
			 -EINVAL);
	unlink(path);

	write_tmp(path, sizeof(path), "no equals sign\n");
	ck_assert_int_eq(sched_config_load(&c, path, err, sizeof(err)),
			 -EINVAL);
	ck_assert_msg(strstr(err, ":1:"), "%s", err);
	unlink(path);

	ck_assert_int_eq(sched_config_load(&c, path, err, sizeof(err)),
			 -ENOENT);
}
END_TEST

START_TEST(test_config_flops)
{
	struct sched_config c;
	char path[256], err[256];

	sched_config_default(&c);
	write_tmp(path, sizeof(path),
		  "model_layers = 32\nmodel_hidden = 4096\n"
		  "prefill_flops = 1e14 # a smaller model\nreject = early\n");
	ck_assert_int_eq(sched_config_load(&c, path, err, sizeof(err)), 0);
	unlink(path);
	ck_assert_near(c.cost.pf_quad, 32.0 * 4 * 4096 / 1e14);
	ck_assert_near(c.cost.pf_lin, 32.0 * 22 * 4096 * 4096 / 1e14);
	ck_assert_int_eq(c.reject, SCHED_REJECT_EARLY);
	ck_assert_str_eq(sched_reject_name(SCHED_REJECT_OFF), "off");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("sched_cost");
	TCase *tc = tcase_create("cost");

	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_prefill);
	tcase_add_test(tc, test_transfer_step);
	tcase_add_test(tc, test_from_flops);
	tcase_add_test(tc, test_fit_exact);
	tcase_add_test(tc, test_fit_nonneg);
	tcase_add_test(tc, test_fit_refuses);
	tcase_add_test(tc, test_config_roundtrip);
	tcase_add_test(tc, test_config_errors);
	tcase_add_test(tc, test_config_flops);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return cs_run(suite());
}
