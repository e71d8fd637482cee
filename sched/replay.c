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
	/* held policies: prompt tokens computed, the current chunk's end,
	 * the pipeline's size */
	bool started;
	uint64_t pos, chunk_end;
	uint32_t ninst;
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
	bool held;	/* the policy holds the queues: sched_next */
	uint32_t *slot; /* held: scheduler id slot -> request */
	uint32_t nslot;
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

/* what the request reuses, read from the caches as it starts: blocks
 * reused, *xfer the fetch's time */
static uint32_t prefill_reuse(struct sim *m, uint32_t k, double *xfer_s)
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
	*xfer_s = xfer;
	return reuse;
}

static double prefill_service(struct sim *m, uint32_t k)
{
	double xfer;
	uint32_t reuse = prefill_reuse(m, k, &xfer);

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

static int held_arrive(struct sim *m, uint32_t k);

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
	if (m->held)
		return held_arrive(m, k);
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

/* k's prefill on p ended: its blocks are cached there, it decodes */
static int prefill_finish(struct sim *m, uint32_t p, uint32_t k)
{
	struct sim_req *q = &m->req[k];
	long ev;
	int rc;

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
	return rc;
}

static int prefill_end(struct sim *m, uint32_t p)
{
	struct sim_pf *pf = &m->pf[p];
	uint32_t k = pf->cur;
	int rc;

	pf->cur = SIM_NIL;
	rc = prefill_finish(m, p, k);
	if (rc == 0 && pf->qhead != SIM_NIL)
		rc = prefill_start(m, p);
	return rc;
}

/* ---- held queues: the scheduler says what an idle instance runs --------- */

/*
 * The instance serves the prompt in chunks of d->chunk_tokens (one piece
 * when 0, or for a CPP pipeline), reporting each boundary with
 * sched_progress; a yield frees it.  The fetch runs before the first
 * chunk; the fixed prefill overhead is paid once.  A CPP pipeline of k
 * instances computes the prefill in prefill / (k * cpp_eff), all k busy.
 */
static int held_chunk(struct sim *m, uint32_t p, uint32_t k, double xfer,
		      uint32_t chunk)
{
	const struct sched_cost *c = m->cost;
	struct sim_req *q = &m->req[k];
	uint64_t n = m->t->input[k], to = n;
	double t;

	if (chunk && q->ninst <= 1) {
		to = (q->pos / chunk + 1) * chunk;
		to = to < n ? to : n;
	}
	t = sched_cost_prefill(c, to, q->pos);
	if (q->started)
		t -= c->pf_const;
	if (q->ninst > 1)
		t /= (double)q->ninst * m->o->cfg->cpp_eff;
	q->started = true;
	q->chunk_end = to;
	return ev_push(m, m->now + xfer + t, EV_PREFILL_END, p);
}

static int held_start(struct sim *m, const struct sched_dispatch *d)
{
	uint32_t slot = (uint32_t)d->id - 1, k, p = d->prefill;
	struct sim_req *q;
	uint64_t n;
	double xfer = 0;

	if (slot >= m->nslot)
		return -EINVAL;
	k = m->slot[slot];
	q = &m->req[k];
	n = m->t->input[k];
	q->p = p;
	q->ninst = d->ninst;
	for (uint32_t i = 0; i < d->ninst; i++)
		m->pf[d->inst[i]].cur = k;
	if (!q->started) {
		q->src = d->xfer_blocks ? d->src_node : SIM_NIL;
		q->plan_reuse = d->reuse_blocks;
		q->pos = sched_cost_block_tok(m->cost,
					      prefill_reuse(m, k, &xfer), n);
	} else {
		uint32_t local = sim_cache_prefix(&m->cache[p], req_keys(m, k),
						  m->t->nkeys[k]);
		uint64_t tok = sched_cost_block_tok(m->cost, local, n);

		sim_cache_touch(&m->cache[p], req_keys(m, k), local);
		q->pos = tok > q->pos ? tok : q->pos;
	}
	return held_chunk(m, p, k, xfer, d->chunk_tokens);
}

/* instance p is idle: run what the scheduler dispatches there */
static int held_kick(struct sim *m, uint32_t p)
{
	struct sched_dispatch d;
	int rc;

	if (m->pf[p].cur != SIM_NIL)
		return 0;
	rc = sched_next(m->s, p, m->now, &d);
	return rc == 1 ? held_start(m, &d) : rc;
}

/* every idle instance, p first */
static int held_kick_all(struct sim *m, uint32_t p)
{
	int rc = held_kick(m, p);

	for (uint32_t i = 0; rc == 0 && i < m->o->nprefill; i++)
		rc = held_kick(m, i);
	return rc;
}

static int held_chunk_end(struct sim *m, uint32_t p)
{
	uint32_t k = m->pf[p].cur;
	struct sim_req *q = &m->req[k];
	int rc;

	q->pos = q->chunk_end;
	if (q->pos < m->t->input[k]) {
		rc = sched_progress(m->s, q->id, q->pos, m->now);
		if (rc < 0)
			return rc;
		if (rc == 0)
			return held_chunk(m, p, k, 0, m->o->cfg->chunk_tokens);
		m->pf[p].cur = SIM_NIL;
		return held_kick_all(m, p);
	}
	for (uint32_t i = 0; i < m->o->nprefill; i++)
		if (m->pf[i].cur == k)
			m->pf[i].cur = SIM_NIL;
	rc = prefill_finish(m, p, k);
	return rc == 0 ? held_kick_all(m, p) : rc;
}

static int held_arrive(struct sim *m, uint32_t k)
{
	uint32_t slot = (uint32_t)m->req[k].id - 1;

	if (slot >= m->nslot) {
		uint32_t n = m->nslot ? m->nslot : 256;
		uint32_t *v;

		while (n <= slot)
			n *= 2;
		v = realloc(m->slot, n * sizeof(*v));
		if (!v)
			return -ENOMEM;
		m->slot = v;
		m->nslot = n;
	}
	m->slot[slot] = k;
	return held_kick_all(m, m->req[k].p);
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
	free(m->slot);
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
	r->ttft_max = nt ? ttft[nt - 1] : 0; /* sorted by the percentiles */
	r->speed = m->o->speed;
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
		return m->held ? held_chunk_end(m, e->arg)
			       : prefill_end(m, e->arg);
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
	m.held = sched_policy_held(o->policy);
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
