/*
 * config.c - the scheduler's config file (sched.h): defaults, checks,
 * "key = value" reading and writing.
 *
 * The keys, kvconductor(8) lists the same:
 *
 *   prefill_quad prefill_lin prefill_const     the prefill model (cost.h)
 *   model_layers model_hidden flop_a flop_b prefill_flops
 *                                              or the FLOP model it comes
 *                                              from (not both)
 *   block_tokens block_bytes transfer_bw transfer_latency
 *   decode_base decode_per_seq decode_per_token
 *   slo_ttft slo_tbt balance_threshold reject
 *   chunk_tokens guard steal cpp_threshold cpp_max cpp_efficiency
 *                                              the queue policy
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched.h"

enum key_type {
	K_DBL,	  /* double in struct sched_config */
	K_TOKENS, /* uint32 in struct sched_config, > 0 */
	K_COUNT,  /* uint32 in struct sched_config, >= 0 */
	K_FLOP,	  /* double in struct sched_flop_model */
	K_REJECT,
};

struct key {
	const char *name;
	enum key_type type;
	size_t off;
	const char *doc;
};

#define CFG(f) offsetof(struct sched_config, f)
#define FLOP(f) offsetof(struct sched_flop_model, f)

static const struct key keys[] = {
	{ "prefill_quad", K_DBL, CFG(cost.pf_quad), "s per token^2" },
	{ "prefill_lin", K_DBL, CFG(cost.pf_lin), "s per token" },
	{ "prefill_const", K_DBL, CFG(cost.pf_const), "s per prefill" },
	{ "model_layers", K_FLOP, FLOP(layers), NULL },
	{ "model_hidden", K_FLOP, FLOP(hidden), NULL },
	{ "flop_a", K_FLOP, FLOP(a), NULL },
	{ "flop_b", K_FLOP, FLOP(b), NULL },
	{ "prefill_flops", K_FLOP, FLOP(flops), NULL },
	{ "block_tokens", K_TOKENS, CFG(cost.block_tokens), "tokens a block" },
	{ "block_bytes", K_DBL, CFG(cost.block_bytes), "KV bytes a block" },
	{ "transfer_bw", K_DBL, CFG(cost.xfer_bw), "bytes/s node to node" },
	{ "transfer_latency", K_DBL, CFG(cost.xfer_lat), "s per fetch" },
	{ "decode_base", K_DBL, CFG(cost.dec_base), "s per decode step" },
	{ "decode_per_seq", K_DBL, CFG(cost.dec_per_seq),
	  "s per request in a step" },
	{ "decode_per_token", K_DBL, CFG(cost.dec_per_token),
	  "s per context token in a step" },
	{ "slo_ttft", K_DBL, CFG(slo_ttft), "s" },
	{ "slo_tbt", K_DBL, CFG(slo_tbt), "s" },
	{ "balance_threshold", K_DBL, CFG(balance),
	  "kvcache-centric fetches when remote > local * this" },
	{ "reject", K_REJECT, CFG(reject), "off, early or predict" },
	{ "chunk_tokens", K_COUNT, CFG(chunk_tokens),
	  "queue: preemption point every this many tokens (0 none)" },
	{ "guard", K_DBL, CFG(guard),
	  "queue: first after waiting guard * slo_ttft - work" },
	{ "steal", K_COUNT, CFG(steal), "queue: idle instances steal (0/1)" },
	{ "cpp_threshold", K_DBL, CFG(cpp_threshold),
	  "queue: CPP for prefills over this many s" },
	{ "cpp_max", K_COUNT, CFG(cpp_max),
	  "queue: instances of a CPP pipeline (1 off)" },
	{ "cpp_efficiency", K_DBL, CFG(cpp_eff),
	  "queue: CPP speed-up over k instances is k * this" },
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

void sched_config_default(struct sched_config *c)
{
	memset(c, 0, sizeof(*c));
	sched_cost_default(&c->cost);
	c->slo_ttft = SCHED_DEF_SLO_TTFT;
	c->slo_tbt = SCHED_DEF_SLO_TBT;
	c->balance = SCHED_DEF_BALANCE;
	c->reject = SCHED_REJECT_OFF;
	c->chunk_tokens = SCHED_DEF_CHUNK_TOKENS;
	c->guard = SCHED_DEF_GUARD;
	c->steal = 1;
	c->cpp_threshold = SCHED_DEF_CPP_THRESHOLD;
	c->cpp_max = SCHED_DEF_CPP_MAX;
	c->cpp_eff = SCHED_DEF_CPP_EFF;
}

int sched_config_check(const struct sched_config *c, const char **msg)
{
	const char *why = NULL;

	if (sched_cost_check(&c->cost, &why) == 0) {
		if (!(c->slo_ttft > 0) || !(c->slo_tbt > 0) ||
		    !isfinite(c->slo_ttft) || !isfinite(c->slo_tbt))
			why = "slo_ttft and slo_tbt must be > 0";
		else if (!(c->balance >= 1) || !isfinite(c->balance))
			why = "balance_threshold must be >= 1";
		else if (c->reject > SCHED_REJECT_PREDICT)
			why = "reject must be off, early or predict";
		else if (!(c->guard >= 0) || !isfinite(c->guard))
			why = "guard must be >= 0";
		else if (c->steal > 1)
			why = "steal must be 0 or 1";
		else if (!(c->cpp_threshold >= 0) ||
			 !isfinite(c->cpp_threshold))
			why = "cpp_threshold must be >= 0";
		else if (c->cpp_max < 1 || c->cpp_max > SCHED_CPP_LIMIT)
			why = "cpp_max must be 1..8";
		else if (!(c->cpp_eff > 0) || !(c->cpp_eff <= 1))
			why = "cpp_efficiency must be > 0 and <= 1";
	}
	if (msg)
		*msg = why;
	return why ? -EINVAL : 0;
}

static const char *reject_names[] = { "off", "early", "predict" };

int sched_reject_parse(const char *name, enum sched_reject_mode *out)
{
	for (int i = 0; i <= SCHED_REJECT_PREDICT; i++)
		if (name && !strcmp(name, reject_names[i])) {
			*out = (enum sched_reject_mode)i;
			return 0;
		}
	return -EINVAL;
}

const char *sched_reject_name(enum sched_reject_mode m)
{
	return m <= SCHED_REJECT_PREDICT ? reject_names[m] : "?";
}

/* ---- reading ------------------------------------------------------------ */

struct load {
	const char *path;
	unsigned line;
	struct sched_config c;
	struct sched_flop_model flop;
	bool flop_set, coef_set;
	char *err;
	size_t errlen;
};

static int load_err(struct load *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int load_err(struct load *l, const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (l->errlen)
		snprintf(l->err, l->errlen, "%s:%u: %s", l->path, l->line, msg);
	return -EINVAL;
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && strchr(" \t\r\n", e[-1]))
		*--e = 0;
	return s;
}

static int set_key(struct load *l, const struct key *k, const char *val)
{
	char *end;
	double v;

	if (k->type == K_REJECT) {
		if (sched_reject_parse(
			    val,
			    (enum sched_reject_mode *)((char *)&l->c + k->off)))
			return load_err(l,
					"%s: '%s' is not off, early or "
					"predict",
					k->name, val);
		return 0;
	}
	errno = 0;
	v = strtod(val, &end);
	if (end == val || *end || errno || !isfinite(v) || v < 0)
		return load_err(l, "%s: '%s' is not a number >= 0", k->name,
				val);
	if (k->type == K_FLOP) {
		*(double *)((char *)&l->flop + k->off) = v;
		l->flop_set = true;
	} else if (k->type == K_TOKENS || k->type == K_COUNT) {
		if (v < (k->type == K_TOKENS) || v > (1u << 20) ||
		    v != floor(v))
			return load_err(l,
					"%s: '%s' is not a whole number "
					"%d..1048576",
					k->name, val, k->type == K_TOKENS);
		*(uint32_t *)((char *)&l->c + k->off) = (uint32_t)v;
	} else {
		*(double *)((char *)&l->c + k->off) = v;
		l->coef_set |= !strncmp(k->name, "prefill_", 8) &&
			       strcmp(k->name, "prefill_const");
	}
	return 0;
}

static int load_line(struct load *l, char *line)
{
	char *eq, *key, *val;

	if ((eq = strchr(line, '#')))
		*eq = 0;
	key = trim(line);
	if (!*key)
		return 0;
	eq = strchr(key, '=');
	if (!eq)
		return load_err(l, "not 'key = value'");
	*eq = 0;
	val = trim(eq + 1);
	key = trim(key);
	for (size_t i = 0; i < NKEYS; i++)
		if (!strcmp(keys[i].name, key))
			return set_key(l, &keys[i], val);
	return load_err(l, "unknown key '%s'", key);
}

static int load_finish(struct load *l)
{
	const char *why;

	if (l->flop_set) {
		if (l->coef_set)
			return load_err(l, "give prefill_quad/prefill_lin or "
					   "the FLOP model, not both");
		if (sched_cost_from_flops(&l->c.cost, &l->flop) < 0)
			return load_err(l, "the FLOP model needs every value "
					   "> 0");
	}
	if (sched_config_check(&l->c, &why) < 0)
		return load_err(l, "%s", why);
	return 0;
}

int sched_config_load(struct sched_config *c, const char *path, char *err,
		      size_t errlen)
{
	struct load l = { .path = path, .c = *c, .err = err, .errlen = errlen };
	char buf[1024];
	FILE *f = fopen(path, "re");
	int rc = 0;

	if (!f) {
		rc = -errno;
		if (errlen)
			snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		return rc;
	}
	sched_flop_default(&l.flop);
	while (rc == 0 && fgets(buf, sizeof(buf), f)) {
		l.line++;
		if (!strchr(buf, '\n') && !feof(f))
			rc = load_err(&l, "line too long");
		else
			rc = load_line(&l, buf);
	}
	if (rc == 0 && ferror(f)) {
		rc = -EIO;
		if (errlen)
			snprintf(err, errlen, "%s: read error", path);
	}
	fclose(f);
	if (rc == 0)
		rc = load_finish(&l);
	if (rc == 0)
		*c = l.c;
	return rc;
}

int sched_config_set(struct sched_config *c, const char *kv, char *err,
		     size_t errlen)
{
	struct load l = {
		.path = "--set", .c = *c, .err = err, .errlen = errlen
	};
	char buf[256];
	int rc;

	if (strlen(kv) >= sizeof(buf) || !strchr(kv, '=')) {
		if (errlen)
			snprintf(err, errlen, "--set: '%s' is not key=value",
				 kv);
		return -EINVAL;
	}
	snprintf(buf, sizeof(buf), "%s", kv);
	sched_flop_default(&l.flop);
	l.line = 1;
	rc = load_line(&l, buf);
	if (rc == 0)
		rc = load_finish(&l);
	if (rc == 0)
		*c = l.c;
	else if (errlen > 8 && !strncmp(err, "--set:1: ", 9))
		memmove(err + 6, err + 8, strlen(err + 8) + 1); /* "--set: " */
	return rc;
}

/* ---- writing ------------------------------------------------------------ */

/* the shortest %g that reads back as v */
static void put_num(FILE *f, double v)
{
	char buf[40];

	for (int prec = 6; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	fputs(buf, f);
}

int sched_config_write(const struct sched_config *c, const char *header,
		       FILE *f)
{
	const char *p = header;

	while (p && *p) {
		size_t n = strcspn(p, "\n");

		fprintf(f, "# %.*s\n", (int)n, p);
		p += n + (p[n] == '\n');
	}
	for (size_t i = 0; i < NKEYS; i++) {
		const struct key *k = &keys[i];
		const char *at = (const char *)c + k->off;

		if (k->type == K_FLOP)
			continue; /* the coefficients say it all */
		fprintf(f, "%-17s = ", k->name);
		if (k->type == K_REJECT)
			fputs(sched_reject_name(
				      *(const enum sched_reject_mode *)at),
			      f);
		else if (k->type == K_TOKENS || k->type == K_COUNT)
			fprintf(f, "%u", *(const uint32_t *)at);
		else
			put_num(f, *(const double *)at);
		fprintf(f, "\t# %s\n", k->doc);
	}
	return fflush(f) || ferror(f) ? -EIO : 0;
}
