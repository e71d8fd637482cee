/*
 * cost_fit.c - least-squares fit of the prefill model (cost.h), for
 * `kvconductor fit`.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "sched/cost.h"

#define NCOEF 3 /* quad, lin, const */

/* the model's columns for one row */
static void features(const struct sched_fit_row *r, double x[NCOEF])
{
	x[0] = r->n * r->n - r->cached * r->cached;
	x[1] = r->n - r->cached;
	x[2] = 1;
}

static bool row_ok(const struct sched_fit_row *r)
{
	return isfinite(r->n) && isfinite(r->cached) && isfinite(r->seconds) &&
	       r->n >= 0 && r->cached >= 0 && r->cached <= r->n &&
	       r->seconds >= 0;
}

/*
 * Solve the k x k system a x = b in place by Gaussian elimination with
 * partial pivoting; false when it is singular.  The columns were scaled
 * to unit RMS first, so a relative pivot test is meaningful.
 */
static void swap_rows(double a[NCOEF][NCOEF], double b[NCOEF], int i, int j)
{
	double t;

	for (int c = 0; c < NCOEF; c++) {
		t = a[i][c];
		a[i][c] = a[j][c];
		a[j][c] = t;
	}
	t = b[i];
	b[i] = b[j];
	b[j] = t;
}

static bool solve(double a[NCOEF][NCOEF], double b[NCOEF], int k)
{
	for (int col = 0; col < k; col++) {
		int piv = col;

		for (int r = col + 1; r < k; r++)
			if (fabs(a[r][col]) > fabs(a[piv][col]))
				piv = r;
		if (fabs(a[piv][col]) < 1e-12)
			return false;
		swap_rows(a, b, col, piv);
		for (int r = 0; r < k; r++) {
			double f;

			if (r == col)
				continue;
			f = a[r][col] / a[col][col];
			for (int j = col; j < k; j++)
				a[r][j] -= f * a[col][j];
			b[r] -= f * b[col];
		}
	}
	for (int r = 0; r < k; r++)
		b[r] /= a[r][r];
	return true;
}

struct fit_sums {
	double xtx[NCOEF][NCOEF];
	double xty[NCOEF];
	double yty;
	double scale[NCOEF];
};

static void accumulate(const struct sched_fit_row *rows, size_t nrows,
		       struct fit_sums *s)
{
	double x[NCOEF];

	memset(s, 0, sizeof(*s));
	for (size_t i = 0; i < nrows; i++) {
		features(&rows[i], x);
		for (int j = 0; j < NCOEF; j++)
			s->scale[j] += x[j] * x[j];
	}
	for (int j = 0; j < NCOEF; j++)
		s->scale[j] = s->scale[j] > 0 ? sqrt(s->scale[j] / nrows) : 0;
	for (size_t i = 0; i < nrows; i++) {
		features(&rows[i], x);
		for (int j = 0; j < NCOEF; j++)
			x[j] = s->scale[j] > 0 ? x[j] / s->scale[j] : 0;
		for (int j = 0; j < NCOEF; j++) {
			for (int k = 0; k < NCOEF; k++)
				s->xtx[j][k] += x[j] * x[k];
			s->xty[j] += x[j] * rows[i].seconds;
		}
		s->yty += rows[i].seconds * rows[i].seconds;
	}
}

/*
 * Least squares on the columns in mask; writes the scaled coefficients to
 * beta (0 outside mask) and returns the residual sum of squares, or -1
 * when the subset is singular or a coefficient comes out negative.
 */
static double fit_subset(const struct fit_sums *s, unsigned mask,
			 double beta[NCOEF])
{
	double a[NCOEF][NCOEF], b[NCOEF];
	int idx[NCOEF], k = 0;
	double sse;

	for (int j = 0; j < NCOEF; j++)
		if (mask & (1u << j) && s->scale[j] > 0)
			idx[k++] = j;
	if (k == 0)
		return -1;
	for (int r = 0; r < k; r++) {
		for (int c = 0; c < k; c++)
			a[r][c] = s->xtx[idx[r]][idx[c]];
		b[r] = s->xty[idx[r]];
	}
	if (!solve(a, b, k))
		return -1;
	memset(beta, 0, NCOEF * sizeof(double));
	for (int r = 0; r < k; r++) {
		if (b[r] < 0)
			return -1;
		beta[idx[r]] = b[r];
	}
	/* sse = y'y - 2 b'X'y + b'X'X b */
	sse = s->yty;
	for (int j = 0; j < NCOEF; j++) {
		sse -= 2 * beta[j] * s->xty[j];
		for (int k2 = 0; k2 < NCOEF; k2++)
			sse += beta[j] * s->xtx[j][k2] * beta[k2];
	}
	return sse < 0 ? 0 : sse;
}

int sched_cost_fit(const struct sched_fit_row *rows, size_t nrows,
		   struct sched_cost *c, double *rmse)
{
	double best[NCOEF] = { 0 }, beta[NCOEF], best_sse = -1;
	struct fit_sums s;
	bool varied = false;

	if (nrows < 2)
		return -EINVAL;
	for (size_t i = 0; i < nrows; i++) {
		if (!row_ok(&rows[i]))
			return -EINVAL;
		varied |= rows[i].n > rows[i].cached;
	}
	if (!varied)
		return -EINVAL;
	accumulate(rows, nrows, &s);
	for (unsigned mask = 1; mask < (1u << NCOEF); mask++) {
		double sse = fit_subset(&s, mask, beta);

		if (sse < 0 || (best_sse >= 0 && sse >= best_sse))
			continue;
		best_sse = sse;
		memcpy(best, beta, sizeof(best));
	}
	if (best_sse < 0)
		return -EINVAL;
	c->pf_quad = s.scale[0] > 0 ? best[0] / s.scale[0] : 0;
	c->pf_lin = s.scale[1] > 0 ? best[1] / s.scale[1] : 0;
	c->pf_const = s.scale[2] > 0 ? best[2] / s.scale[2] : 0;
	if (rmse)
		*rmse = sqrt(best_sse / nrows);
	return 0;
}
