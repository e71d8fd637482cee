/*
 * cost.h - the conductor's cost model, in one place: prefill, queue,
 * KV transfer and decode-step times.  kvconductor(8) documents the same
 * formulas and defaults; keep them in step.
 *
 * Prefill of n tokens from scratch (the Mooncake paper, FAST'25):
 *
 *   FLOPs(n) = l * (a*n^2*d + b*n*d^2)
 *   T(n)     = quad*n^2 + lin*n,  quad = l*a*d / P,  lin = l*b*d^2 / P
 *
 * with l layers, hidden size d, a and b the attention and linear-layer
 * constants and P the effective FLOP/s of one prefill instance.  Default:
 * LLaMA3-70B on 8 x A800, l = 80, d = 8192, a = 4, b = 22, P = 1.25e15.
 *
 * Prefill of n tokens whose first c are cached: attention of the new
 * tokens still reads the cached ones, so it costs what the whole prompt
 * costs minus what the cached prefix alone would, plus a fixed overhead
 * k (0 by default; `kvconductor fit` measures it):
 *
 *   T(n | c) = quad*(n^2 - c^2) + lin*(n - c) + k          (c <= n)
 *
 * Transfer of m remote blocks: lat + m * block_bytes / bw.  A block is
 * block_tokens tokens of KV: 2 (K and V) * l * d_kv * elem bytes per token,
 * LLaMA3-70B with GQA d_kv = 8 * 128 = 1024 and bf16: 327,680 B a token,
 * 167,772,160 B (160 MiB) a 512-token block.  bw default 100e9 B/s (half
 * the 200 GB/s of 8 x 200 Gbps RDMA NICs).
 *
 * Decode: one step of continuous batching over B requests holding C
 * context tokens in all (its length is every request's token interval):
 *
 *   step(B, C) = base + per_seq*B + per_token*C
 *
 * Default base 9 ms (140 GB of bf16 weights read at 16 TB/s, 8 x A800
 * HBM), per_seq 0.14 ms (2 * 70e9 FLOPs at 40% of 8 x 312 TFLOP/s),
 * per_token 20 ns (327,680 B of KV read at 16 TB/s).
 */
#ifndef KVFS_SCHED_COST_H
#define KVFS_SCHED_COST_H

#include <stddef.h>
#include <stdint.h>

struct sched_cost {
	double pf_quad;	       /* s per token^2 */
	double pf_lin;	       /* s per token */
	double pf_const;       /* s per prefill */
	uint32_t block_tokens; /* tokens per block (512) */
	double block_bytes;    /* KV bytes of one block */
	double xfer_bw;	       /* bytes/s between two nodes */
	double xfer_lat;       /* s per transfer */
	double dec_base;       /* s per decode step */
	double dec_per_seq;    /* s per request in the batch */
	double dec_per_token;  /* s per context token in the batch */
};

/* the FLOP model's parameters, to derive pf_quad and pf_lin from */
struct sched_flop_model {
	double layers; /* l */
	double hidden; /* d */
	double a;
	double b;
	double flops; /* P, FLOP/s of one prefill instance */
};

#define SCHED_DEF_LAYERS 80
#define SCHED_DEF_HIDDEN 8192
#define SCHED_DEF_FLOP_A 4
#define SCHED_DEF_FLOP_B 22
#define SCHED_DEF_FLOPS 1.25e15
#define SCHED_DEF_BLOCK_TOKENS 512
#define SCHED_DEF_BLOCK_BYTES 167772160.0
#define SCHED_DEF_XFER_BW 100e9
#define SCHED_DEF_DEC_BASE 0.009
#define SCHED_DEF_DEC_PER_SEQ 0.00014
#define SCHED_DEF_DEC_PER_TOKEN 2e-8

void sched_flop_default(struct sched_flop_model *f);
/* pf_quad and pf_lin from f; -EINVAL unless every field is > 0 */
int sched_cost_from_flops(struct sched_cost *c,
			  const struct sched_flop_model *f);
void sched_cost_default(struct sched_cost *c);
/* -EINVAL (msg says which) when a field is negative, not finite, or the
 * model would cost nothing (block_tokens, bw 0) */
int sched_cost_check(const struct sched_cost *c, const char **msg);

/* T(n | c) above; c > n counts as c = n */
double sched_cost_prefill(const struct sched_cost *c, uint64_t n,
			  uint64_t cached);
/* tokens of a prompt of n tokens covered by its first blocks blocks */
static inline uint64_t sched_cost_block_tok(const struct sched_cost *c,
					    uint64_t blocks, uint64_t n)
{
	uint64_t t = blocks * c->block_tokens;

	return t < n ? t : n;
}
/* s to move blocks remote blocks; 0 for none */
double sched_cost_transfer(const struct sched_cost *c, uint64_t blocks);
/* s of one decode step over batch requests with ctx tokens in all */
double sched_cost_step(const struct sched_cost *c, uint64_t batch,
		       uint64_t ctx);

/*
 * Least squares of seconds = quad*(n^2 - c^2) + lin*(n - c) + k over rows
 * (n, c, seconds), every coefficient kept >= 0 (exact: the best of the
 * 2^3 sign-feasible subsets).  Sets c->pf_* and *rmse (s).  -EINVAL with
 * fewer rows than 2 or rows that fix no coefficient (all n == c), or when
 * a row has c > n, a negative or non-finite value.
 */
struct sched_fit_row {
	double n;
	double cached;
	double seconds;
};

int sched_cost_fit(const struct sched_fit_row *rows, size_t nrows,
		   struct sched_cost *c, double *rmse);

#endif /* KVFS_SCHED_COST_H */
