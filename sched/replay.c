/*
 * replay.c - the discrete-event replay (replay.h): arrivals from the
 * trace, prefill ends and decode steps from a heap of events, every
 * decision from the scheduling core.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched/replay_int.h"

/* at equal times prefill ends go first, then decode steps, then arrivals:
 * a request arriving at the moment capacity frees is scheduled seeing it */
enum ev_type {
	EV_PREFILL_END = 0,
	EV_STEP_END = 1,
};

struct ev {
	double t;
	uint64_t seq; /* insertion order breaks the remaining ties */
	uint32_t type;
	uint32_t arg; /* instance */
};

struct heap {
	struct ev *v;
	size_t n, cap;
};

struct sim_req {
	uint64_t id; /* the scheduler's */
	double arrival;
	double last_token;
	uint64_t gen; /* tokens out so far */
	uint32_t p, d;
	uint32_t plan_reuse; /* decided prefix use, with a fetch */
	uint32_t src;
	uint32_t qnext; /* its prefill queue */
	size_t top_off; /* its longest intervals: sim.top[top_off..] */
	uint32_t ntop;	/* how many are kept: ceil(intervals / 10) */
	uint32_t nheap; /* kept so far (a min-heap) */
	uint64_t nivl;	/* intervals seen */
	double ttft, tbt;
	bool served;
};

struct sim_pf {
	uint32_t qhead, qtail; /* waiting, in order */
	uint32_t cur;	       /* running, or SIM_NIL */
};

struct sim_dc {
	uint32_t *batch, nb, cb; /* in the step running now */
	uint32_t *join, nj, cj;	 /* waiting for the next step */
	uint64_t ctx;		 /* context tokens of the batch */
	bool stepping;
};

struct sim_node {
	struct sim *sim;
	uint32_t node;
};

struct sim {
	const struct sched_trace *t;
	const struct sched_replay_opts *o;
	const struct sched_cost *cost;
	struct sched *s;
	struct sim_cache *cache; /* [nprefill]: prefill i on node i */
	struct sim_node *nodes;
	struct sim_req *req;
	struct sim_pf *pf;
	struct sim_dc *dc;
	float *top; /* per request, its longest token intervals */
	struct heap h;
	uint64_t seq;
	double now;
	int err; /* first error of a callback */
	struct sched_replay_result *r;
};

/* ---- events ------------------------------------------------------------ */

static bool ev_before(const struct ev *a, const struct ev *b)
{
	if (a->t != b->t)
		return a->t < b->t;
	if (a->type != b->type)
		return a->type < b->type;
	return a->seq < b->seq;
}

static int ev_push(struct sim *m, double t, uint32_t type, uint32_t arg)
{
	struct heap *h = &m->h;
	size_t i;

	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 256;
		struct ev *v = realloc(h->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		h->v = v;
		h->cap = cap;
	}
	i = h->n++;
	h->v[i] = (struct ev){
		.t = t, .seq = m->seq++, .type = type, .arg = arg
	};
	while (i && ev_before(&h->v[i], &h->v[(i - 1) / 2])) {
		struct ev x = h->v[i];

		h->v[i] = h->v[(i - 1) / 2];
		h->v[(i - 1) / 2] = x;
		i = (i - 1) / 2;
	}
	return 0;
}

static struct ev ev_pop(struct heap *h)
{
	struct ev top = h->v[0];
	size_t i = 0;

	h->v[0] = h->v[--h->n];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		struct ev x;

		if (l < h->n && ev_before(&h->v[l], &h->v[m]))
			m = l;
		if (r < h->n && ev_before(&h->v[r], &h->v[m]))
			m = r;
		if (m == i)
			break;
		x = h->v[i];
		h->v[i] = h->v[m];
		h->v[m] = x;
		i = m;
	}
	return top;
}

/* ---- nodes -------------------------------------------------------------- */

/* a node's cache changed: the block event kvfsd would send */
static void on_cache_event(void *arg, int op, uint64_t key)
{
	struct sim_node *n = arg;
	int rc = op == 1 ? sched_block_insert(n->sim->s, n->node, key)
			 : sched_block_evict(n->sim->s, n->node, key);

	if (rc < 0 && !n->sim->err)
		n->sim->err = rc;
}

static const uint64_t *req_keys(const struct sim *m, uint32_t k)
{
	return m->t->keys + m->t->first[k];
}

/* ---- prefill ------------------------------------------------------------ */

/* what the request reuses, read from the caches as it starts */
static double prefill_service(struct sim *m, uint32_t k)
{
	struct sim_req *q = &m->req[k];
	const uint64_t *keys = req_keys(m, k);
	uint32_t n = m->t->nkeys[k];
	struct sim_cache *own = &m->cache[q->p];
	uint32_t local = sim_cache_prefix(own, keys, n), reuse = local;
	double xfer = 0;

	if (q->src < m->o->nprefill && q->src != q->p &&
	    q->plan_reuse > local) {
		struct sim_cache *src = &m->cache[q->src];
		uint32_t there = sim_cache_prefix(src, keys, q->plan_reuse);

		if (there > local) {
			reuse = there;
			xfer = sched_cost_transfer(m->cost, there - local);
			sim_cache_touch(src, keys + local, there - local);
		}
	}
	sim_cache_touch(own, keys, local);
	m->r->blocks += n;
	m->r->hit_local += local;
	m->r->hit_remote += reuse - local;
	return xfer + sched_cost_prefill(m->cost, m->t->input[k],
					 sched_cost_block_tok(m->cost, reuse,
							      m->t->input[k]));
}

static int prefill_start(struct sim *m, uint32_t p)
{
	struct sim_pf *pf = &m->pf[p];
	uint32_t k = pf->qhead;

	pf->qhead = m->req[k].qnext;
	if (pf->qhead == SIM_NIL)
		pf->qtail = SIM_NIL;
	pf->cur = k;
	return ev_push(m, m->now + prefill_service(m, k), EV_PREFILL_END, p);
}

static void enqueue(struct sim *m, uint32_t p, uint32_t k)
{
	struct sim_pf *pf = &m->pf[p];

	m->req[k].qnext = SIM_NIL;
	if (pf->qtail != SIM_NIL)
		m->req[pf->qtail].qnext = k;
	else
		pf->qhead = k;
	pf->qtail = k;
}

static int arrive(struct sim *m, uint32_t k)
{
	struct sim_req *q = &m->req[k];
	struct sched_req sr = {
		.keys = req_keys(m, k),
		.nkeys = m->t->nkeys[k],
		.input_tokens = m->t->input[k],
		.output_tokens = m->t->output[k],
	};
	struct sched_decision d;
	int rc;

	q->arrival = m->now;
	rc = sched_schedule(m->s, &sr, m->now, &d);
	if (rc < 0)
		return rc;
	if (d.verdict != SCHED_ACCEPT) {
		m->r->rejected++;
		if (d.verdict == SCHED_REJECT_TTFT)
			m->r->rejected_ttft++;
		else
			m->r->rejected_tbt++;
		return 0;
	}
	q->id = d.id;
	q->p = d.prefill;
	q->d = d.decode;
	q->src = d.xfer_blocks ? d.src_node : SIM_NIL;
	q->plan_reuse = d.reuse_blocks;
	enqueue(m, q->p, k);
	if (m->pf[q->p].cur == SIM_NIL)
		return prefill_start(m, q->p);
	return 0;
}

/* ---- decode ------------------------------------------------------------- */

static int finish(struct sim *m, uint32_t k)
{
	struct sim_req *q = &m->req[k];

	q->tbt = sim_top_mean(m->top + q->top_off, q->nheap);
	q->served = true;
	return sched_complete(m->s, q->id, m->now);
}

static int u32_push(uint32_t **v, uint32_t *n, uint32_t *cap, uint32_t x)
{
	if (*n == *cap) {
		uint32_t c = *cap ? *cap * 2 : 64;
		uint32_t *p = realloc(*v, c * sizeof(*p));

		if (!p)
			return -ENOMEM;
		*v = p;
		*cap = c;
	}
	(*v)[(*n)++] = x;
	return 0;
}

static int step_start(struct sim *m, uint32_t j)
{
	struct sim_dc *dc = &m->dc[j];

	for (uint32_t i = 0; i < dc->nj; i++) {
		uint32_t k = dc->join[i];

		if (u32_push(&dc->batch, &dc->nb, &dc->cb, k) < 0)
			return -ENOMEM;
		dc->ctx += m->t->input[k] + m->req[k].gen;
	}
	dc->nj = 0;
	dc->stepping = true;
	return ev_push(m, m->now + sched_cost_step(m->cost, dc->nb, dc->ctx),
		       EV_STEP_END, j);
}

static int step_end(struct sim *m, uint32_t j)
{
	struct sim_dc *dc = &m->dc[j];
	uint32_t i = 0;
	int rc;

	while (i < dc->nb) {
		uint32_t k = dc->batch[i];
		struct sim_req *q = &m->req[k];

		sim_top_push(m->top + q->top_off, &q->nheap, q->ntop,
			     (float)(m->now - q->last_token));
		q->nivl++;
		q->last_token = m->now;
		q->gen++;
		dc->ctx++;
		if (q->gen < m->t->output[k]) {
			i++;
			continue;
		}
		dc->ctx -= m->t->input[k] + q->gen;
		dc->batch[i] = dc->batch[--dc->nb];
		rc = finish(m, k);
		if (rc < 0)
			return rc;
	}
	dc->stepping = false;
	return dc->nb || dc->nj ? step_start(m, j) : 0;
}

static int prefill_end(struct sim *m, uint32_t p)
{
	struct sim_pf *pf = &m->pf[p];
	uint32_t k = pf->cur;
	struct sim_req *q = &m->req[k];
	long ev;
	int rc;

	pf->cur = SIM_NIL;
	ev = sim_cache_put_chain(&m->cache[p], req_keys(m, k), m->t->nkeys[k]);
	if (ev < 0)
		return (int)ev;
	m->r->evictions += ev;
	rc = m->err ? m->err : sched_prefill_done(m->s, q->id, m->now);
	if (rc < 0)
		return rc;
	q->ttft = m->now - q->arrival;
	q->last_token = m->now;
	q->gen = 1;
	if (m->t->output[k] <= 1) {
		rc = finish(m, k);
	} else {
		struct sim_dc *dc = &m->dc[q->d];

		rc = u32_push(&dc->join, &dc->nj, &dc->cj, k);
		if (rc == 0 && !dc->stepping)
			rc = step_start(m, q->d);
	}
	if (rc == 0 && pf->qhead != SIM_NIL)
		rc = prefill_start(m, p);
	return rc;
}

/* ---- setup and results -------------------------------------------------- */

static int sim_alloc(struct sim *m)
{
	const struct sched_trace *t = m->t;
	uint32_t np = m->o->nprefill, nd = m->o->ndecode;
	size_t ntop = 0;

	m->req = calloc(t->n ? t->n : 1, sizeof(*m->req));
	m->pf = calloc(np, sizeof(*m->pf));
	m->dc = calloc(nd, sizeof(*m->dc));
	m->cache = calloc(np, sizeof(*m->cache));
	m->nodes = calloc(np, sizeof(*m->nodes));
	if (!m->req || !m->pf || !m->dc || !m->cache || !m->nodes)
		return -ENOMEM;
	/* TBT needs only each request's longest tenth of its intervals */
	for (size_t k = 0; k < t->n; k++) {
		m->req[k].top_off = ntop;
		m->req[k].ntop = (uint32_t)((t->output[k] - 1 + 9) / 10);
		ntop += m->req[k].ntop;
	}
	m->top = malloc((ntop ? ntop : 1) * sizeof(*m->top));
	if (!m->top)
		return -ENOMEM;
	for (uint32_t p = 0; p < np; p++) {
		m->pf[p].qhead = m->pf[p].qtail = m->pf[p].cur = SIM_NIL;
		m->nodes[p] = (struct sim_node){ .sim = m, .node = p };
		if (sim_cache_init(&m->cache[p], m->o->cache_blocks,
				   on_cache_event, &m->nodes[p]) < 0)
			return -ENOMEM;
	}
	return 0;
}

static void sim_free(struct sim *m)
{
	for (uint32_t j = 0; m->dc && j < m->o->ndecode; j++) {
		free(m->dc[j].batch);
		free(m->dc[j].join);
	}
	for (uint32_t p = 0; m->cache && p < m->o->nprefill; p++)
		sim_cache_release(&m->cache[p]);
	free(m->cache);
	free(m->nodes);
	free(m->req);
	free(m->pf);
	free(m->dc);
	free(m->top);
	free(m->h.v);
	sched_destroy(m->s);
}

static int sim_results(struct sim *m)
{
	struct sched_replay_result *r = m->r;
	const struct sched_config *cfg = m->o->cfg;
	size_t n = m->t->n, nt = 0, nb = 0;
	double *ttft = malloc((n ? n : 1) * sizeof(double));
	double *tbt = malloc((n ? n : 1) * sizeof(double));
	double sum = 0;

	if (!ttft || !tbt) {
		free(ttft);
		free(tbt);
		return -ENOMEM;
	}
	for (size_t k = 0; k < n; k++) {
		const struct sim_req *q = &m->req[k];

		if (!q->served)
			continue;
		ttft[nt++] = q->ttft;
		sum += q->ttft;
		if (q->nivl)
			tbt[nb++] = q->tbt;
		if (q->ttft <= cfg->slo_ttft && q->tbt <= cfg->slo_tbt)
			r->slo_met++;
	}
	r->served = nt;
	r->ttft_mean = nt ? sum / (double)nt : 0;
	r->ttft_p50 = sim_percentile(ttft, nt, 0.50);
	r->ttft_p90 = sim_percentile(ttft, nt, 0.90);
	r->ttft_p99 = sim_percentile(ttft, nt, 0.99);
	r->tbt_p50 = sim_percentile(tbt, nb, 0.50);
	r->tbt_p90 = sim_percentile(tbt, nb, 0.90);
	r->tbt_p99 = sim_percentile(tbt, nb, 0.99);
	r->hit_rate = r->blocks ? (double)(r->hit_local + r->hit_remote) /
					  (double)r->blocks
				: 0;
	r->attainment = n ? (double)r->slo_met / (double)n : 0;
	r->span = m->now;
	r->arrival_span = n ? m->t->arrival[n - 1] / m->o->speed : 0;
	r->capacity =
		r->arrival_span > 0 ? (double)r->slo_met / r->arrival_span : 0;
	free(ttft);
	free(tbt);
	return 0;
}

/* ---- the loop ----------------------------------------------------------- */

static int sim_event(struct sim *m, const struct ev *e)
{
	m->now = e->t;
	if (e->type == EV_PREFILL_END)
		return prefill_end(m, e->arg);
	return step_end(m, e->arg);
}

static int sim_loop(struct sim *m)
{
	const struct sched_trace *t = m->t;
	size_t next = 0, tick = t->n / 64 + 1;
	int rc = 0;

	while (rc == 0 && (next < t->n || m->h.n)) {
		double ta = next < t->n ? t->arrival[next] / m->o->speed : 0;
		struct ev e;

		if (m->h.n && (next == t->n || m->h.v[0].t <= ta)) {
			e = ev_pop(&m->h);
			rc = sim_event(m, &e);
		} else {
			m->now = ta;
			rc = arrive(m, (uint32_t)next++);
			if (m->o->progress && next % tick == 0)
				m->o->progress(m->o->progress_arg, next, t->n);
		}
		if (rc == 0)
			rc = m->err;
	}
	return rc;
}

static double cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int sim_sched(struct sim *m)
{
	const struct sched_trace *t = m->t;
	size_t keys = t->n ? t->first[t->n - 1] + t->nkeys[t->n - 1] : 0;
	uint64_t room = m->o->cache_blocks * m->o->nprefill;
	struct sched_setup su = {
		.nprefill = m->o->nprefill,
		.ndecode = m->o->ndecode,
		/* the index never holds more than the caches or the trace */
		.expect_blocks = room < keys ? room : keys,
		.seed = m->o->seed,
	};

	return sched_create(m->o->cfg, &su, m->o->policy, &m->s);
}

int sched_replay_run(const struct sched_trace *t,
		     const struct sched_replay_opts *o,
		     struct sched_replay_result *r)
{
	double cpu0 = cpu_now(), wall0 = wall_now();
	struct sim m;
	int rc;

	if (!t || !o || !r || !o->cfg || !o->policy || !o->nprefill ||
	    !o->ndecode || !o->cache_blocks || !(o->speed > 0) ||
	    t->n >= SIM_NIL)
		return -EINVAL;
	memset(&m, 0, sizeof(m));
	memset(r, 0, sizeof(*r));
	snprintf(r->policy, sizeof(r->policy), "%s",
		 sched_policy_name(o->policy));
	r->requests = t->n;
	m.t = t;
	m.o = o;
	m.r = r;
	m.cost = &o->cfg->cost;
	rc = sim_sched(&m);
	if (rc == 0)
		rc = sim_alloc(&m);
	if (rc == 0)
		rc = sim_loop(&m);
	if (rc == 0)
		rc = sim_results(&m);
	sim_free(&m);
	r->cpu_s = cpu_now() - cpu0;
	r->wall_s = wall_now() - wall0;
	return rc;
}
