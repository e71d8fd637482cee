/*
 * cost.c - prefill, transfer and decode-step times (cost.h).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "sched/cost.h"

void sched_flop_default(struct sched_flop_model *f)
{
	f->layers = SCHED_DEF_LAYERS;
	f->hidden = SCHED_DEF_HIDDEN;
	f->a = SCHED_DEF_FLOP_A;
	f->b = SCHED_DEF_FLOP_B;
	f->flops = SCHED_DEF_FLOPS;
}

int sched_cost_from_flops(struct sched_cost *c,
			  const struct sched_flop_model *f)
{
	if (!(f->layers > 0 && f->hidden > 0 && f->a > 0 && f->b > 0 &&
	      f->flops > 0))
		return -EINVAL;
	c->pf_quad = f->layers * f->a * f->hidden / f->flops;
	c->pf_lin = f->layers * f->b * f->hidden * f->hidden / f->flops;
	return 0;
}

void sched_cost_default(struct sched_cost *c)
{
	struct sched_flop_model f;

	memset(c, 0, sizeof(*c));
	sched_flop_default(&f);
	sched_cost_from_flops(c, &f);
	c->pf_const = 0;
	c->block_tokens = SCHED_DEF_BLOCK_TOKENS;
	c->block_bytes = SCHED_DEF_BLOCK_BYTES;
	c->xfer_bw = SCHED_DEF_XFER_BW;
	c->xfer_lat = 0;
	c->dec_base = SCHED_DEF_DEC_BASE;
	c->dec_per_seq = SCHED_DEF_DEC_PER_SEQ;
	c->dec_per_token = SCHED_DEF_DEC_PER_TOKEN;
}

static bool bad(double v)
{
	return !isfinite(v) || v < 0;
}

int sched_cost_check(const struct sched_cost *c, const char **msg)
{
	const char *why = NULL;

	if (bad(c->pf_quad) || bad(c->pf_lin) || bad(c->pf_const))
		why = "prefill coefficients must be finite and >= 0";
	else if (c->pf_quad == 0 && c->pf_lin == 0 && c->pf_const == 0)
		why = "a prefill that costs nothing";
	else if (c->block_tokens == 0)
		why = "block_tokens must be > 0";
	else if (bad(c->block_bytes) || bad(c->xfer_lat))
		why = "block_bytes and transfer_latency must be >= 0";
	else if (bad(c->xfer_bw) || c->xfer_bw == 0)
		why = "transfer_bw must be > 0";
	else if (bad(c->dec_base) || bad(c->dec_per_seq) ||
		 bad(c->dec_per_token))
		why = "decode coefficients must be finite and >= 0";
	if (msg)
		*msg = why;
	return why ? -EINVAL : 0;
}

double sched_cost_prefill(const struct sched_cost *c, uint64_t n,
			  uint64_t cached)
{
	double dn = (double)n;
	double dc = (double)(cached < n ? cached : n);

	return c->pf_quad * (dn * dn - dc * dc) + c->pf_lin * (dn - dc) +
	       c->pf_const;
}

double sched_cost_transfer(const struct sched_cost *c, uint64_t blocks)
{
	if (!blocks)
		return 0;
	return c->xfer_lat + (double)blocks * c->block_bytes / c->xfer_bw;
}

double sched_cost_step(const struct sched_cost *c, uint64_t batch, uint64_t ctx)
{
	return c->dec_base + c->dec_per_seq * (double)batch +
	       c->dec_per_token * (double)ctx;
}
