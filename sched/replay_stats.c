/*
 * replay_stats.c - percentiles and the TBT of one request (replay.h).
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "sched/replay_int.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double sim_percentile(double *v, size_t n, double p)
{
	size_t rank;

	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	rank = (size_t)ceil(p * (double)n);
	return v[rank ? rank - 1 : 0];
}

/* Hoare-style selection: afterwards v[k..n) holds the n - k largest */
static void select_top(float *v, size_t n, size_t k)
{
	size_t lo = 0, hi = n - 1;

	while (lo < hi) {
		float pivot = v[lo + (hi - lo) / 2];
		size_t i = lo, j = hi;

		while (i <= j) {
			while (v[i] < pivot)
				i++;
			while (v[j] > pivot)
				j--;
			if (i <= j) {
				float t = v[i];

				v[i] = v[j];
				v[j] = t;
				i++;
				if (j == 0)
					break;
				j--;
			}
		}
		if (k <= j)
			hi = j;
		else if (k >= i)
			lo = i;
		else
			return;
	}
}

double sim_tbt(float *v, size_t n)
{
	size_t top, k;
	double sum = 0;

	if (n == 0)
		return 0;
	top = (n + 9) / 10;
	k = n - top;
	if (k > 0)
		select_top(v, n, k);
	for (size_t i = k; i < n; i++)
		sum += v[i];
	return sum / (double)top;
}

void sim_top_push(float *heap, uint32_t *n, uint32_t k, float v)
{
	uint32_t i;

	if (k == 0)
		return;
	if (*n < k) {
		/* sift up */
		for (i = (*n)++; i && heap[(i - 1) / 2] > v; i = (i - 1) / 2)
			heap[i] = heap[(i - 1) / 2];
		heap[i] = v;
		return;
	}
	if (v <= heap[0])
		return;
	/* replace the smallest kept, sift down */
	for (i = 0;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		float mv = v;

		if (l < k && heap[l] < mv) {
			m = l;
			mv = heap[l];
		}
		if (r < k && heap[r] < mv)
			m = r;
		if (m == i)
			break;
		heap[i] = heap[m];
		i = m;
	}
	heap[i] = v;
}

double sim_top_mean(const float *heap, uint32_t n)
{
	double sum = 0;

	for (uint32_t i = 0; i < n; i++)
		sum += heap[i];
	return n ? sum / (double)n : 0;
}
