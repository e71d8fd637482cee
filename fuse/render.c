/*
 * render.c - store stats as JSON and as Prometheus text.
 *
 * Both take one kv_store_stats() and one snapshot of the namespaces
 * (kv_store_ns_foreach), two separate trips under the store lock, so the
 * per-namespace counters may be a few operations ahead of the totals.
 * The snapshot is copied out first because the walk's callback runs under
 * the store lock, and formatting text there would hold up every engine.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/ctlproto.h"
#include "fuse/render.h"

struct ns_snap {
	char name[KVFS_NS_MAX + 1];
	uint32_t id;
	uint32_t block_tokens;
	struct kv_stats s;
};

struct snap {
	struct ns_snap *v;
	size_t n;
	size_t cap;
};

/* under the store lock: copy only (allocation is all it does) */
static int snap_one(const char *name, uint32_t id, uint32_t block_tokens,
		    const struct kv_stats *s, void *arg)
{
	struct snap *sn = arg;
	struct ns_snap *e;

	if (sn->n == sn->cap) {
		size_t cap = sn->cap ? sn->cap * 2 : 16;

		e = realloc(sn->v, cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		sn->v = e;
		sn->cap = cap;
	}
	e = &sn->v[sn->n++];
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->id = id;
	e->block_tokens = block_tokens;
	e->s = *s;
	return 0;
}

static int snap_take(struct kv_store *st, struct snap *sn)
{
	int rc;

	memset(sn, 0, sizeof(*sn));
	rc = kv_store_ns_foreach(st, snap_one, sn);
	if (rc < 0) {
		free(sn->v);
		sn->v = NULL;
	}
	return rc;
}

static double hit_rate(const struct kv_stats *s)
{
	uint64_t all = s->hits + s->misses;

	return all ? (double)s->hits / (double)all : 0.0;
}

/* ---- JSON ----------------------------------------------------------- */

/* the counters every level shares (totals and each namespace) */
static void json_counters(struct kvfs_buf *b, const struct kv_stats *s)
{
	kvfs_buf_printf(
		b,
		"\"blocks\":%llu,\"bytes\":%llu,\"writing\":%llu,"
		"\"hits\":%llu,\"misses\":%llu,\"hit_rate\":%.4f,"
		"\"evictions\":%llu,\"seals\":%llu,\"removed\":%llu",
		(unsigned long long)s->blocks, (unsigned long long)s->bytes,
		(unsigned long long)s->writing, (unsigned long long)s->hits,
		(unsigned long long)s->misses, hit_rate(s),
		(unsigned long long)s->evictions, (unsigned long long)s->seals,
		(unsigned long long)s->removed);
}

static void json_ns(struct kvfs_buf *b, struct kv_store *st,
		    const struct ns_snap *e)
{
	size_t len = strlen(e->name);

	kvfs_buf_puts(b, "{\"name\":");
	kvfs_buf_json_str(b, e->name, len);
	kvfs_buf_puts(b, ",\"name_pct\":\"");
	kvfs_ctlp_pct_encode(b, e->name, len);
	kvfs_buf_printf(
		b, "\",\"id\":%u,\"block_tokens\":%u,\"layout\":\"%s\",", e->id,
		e->block_tokens,
		kv_store_ns_layout(st, e->id) == KV_LAYOUT_OPEN ? "open"
								: "chain");
	json_counters(b, &e->s);
	kvfs_buf_puts(b, "}");
}

int render_ns_list_json(struct kv_store *st, struct kvfs_buf *b)
{
	struct snap sn;
	int rc;

	rc = snap_take(st, &sn);
	if (rc < 0)
		return rc;
	kvfs_buf_puts(b, "[");
	for (size_t i = 0; i < sn.n; i++) {
		if (i)
			kvfs_buf_puts(b, ",");
		json_ns(b, st, &sn.v[i]);
	}
	kvfs_buf_puts(b, "]");
	free(sn.v);
	return b->err;
}

/*
 * {"pool":{"slots":N,"slots_free":N,"slot_size":N,"bytes":N,"used":N,
 *           "spilled":N},
 *  "blocks":N,"bytes":N,"writing":N,"hits":N,"misses":N,"hit_rate":X,
 *  "evictions":N,"seals":N,"removed":N,"leases":N,"pinned":N,
 *  "recovered":N,"recovery_dropped":N,"namespaces":[NSOBJ,...]}
 *
 * hit_rate is hits / (hits + misses), 0 before the first lookup.
 */
int render_stats_json(struct kv_store *st, char **out, size_t *len)
{
	return render_stats_json_extra(st, NULL, out, len);
}

int render_stats_json_extra(struct kv_store *st, const char *extra, char **out,
			    size_t *len)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	struct kv_store_stats s;
	int rc;

	if (!st || !out)
		return -EINVAL;
	rc = kv_store_stats(st, &s);
	if (rc < 0)
		return rc;
	kvfs_buf_printf(
		&b,
		"{\"pool\":{\"slots\":%llu,\"slots_free\":%llu,"
		"\"slot_size\":%llu,\"bytes\":%llu,\"used\":%llu,"
		"\"spilled\":%llu},",
		(unsigned long long)s.slots_total,
		(unsigned long long)s.slots_free,
		(unsigned long long)s.slot_size, (unsigned long long)s.capacity,
		(unsigned long long)s.used, (unsigned long long)s.spilled);
	json_counters(&b, &s.total);
	kvfs_buf_printf(&b,
			",\"leases\":%llu,\"pinned\":%llu,\"recovered\":%llu,"
			"\"recovery_dropped\":%llu,\"namespaces\":",
			(unsigned long long)s.leases,
			(unsigned long long)s.pinned,
			(unsigned long long)s.recovered,
			(unsigned long long)s.recovery_dropped);
	rc = render_ns_list_json(st, &b);
	if (rc < 0 && rc != b.err) {
		kvfs_buf_release(&b);
		return rc;
	}
	if (extra)
		kvfs_buf_puts(&b, extra);
	kvfs_buf_puts(&b, "}\n");
	return kvfs_buf_finish(&b, out, len);
}

/* ---- Prometheus ----------------------------------------------------- */

enum metric_type { GAUGE, COUNTER };

struct metric {
	const char *name; /* after "kvfs_"; counters end in _total */
	enum metric_type type;
	const char *help;
};

static void metric_head(struct kvfs_buf *b, const struct metric *m)
{
	kvfs_buf_printf(b, "# HELP kvfs_%s %s\n# TYPE kvfs_%s %s\n", m->name,
			m->help, m->name,
			m->type == COUNTER ? "counter" : "gauge");
}

static void metric_one(struct kvfs_buf *b, const struct metric *m, uint64_t v)
{
	metric_head(b, m);
	kvfs_buf_printf(b, "kvfs_%s %llu\n", m->name, (unsigned long long)v);
}

/*
 * A label value: backslash, double quote and newline escaped, as the
 * exposition format asks; bytes that are not valid UTF-8 become U+FFFD,
 * since the format is UTF-8 text.
 */
static void label_value(struct kvfs_buf *b, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t left = strlen(s);

	while (left) {
		size_t n = kvfs_utf8_len(p, left);

		if (n == 0) {
			kvfs_buf_puts(b, "\xef\xbf\xbd");
			n = 1;
		} else if (*p == '\\') {
			kvfs_buf_puts(b, "\\\\");
		} else if (*p == '"') {
			kvfs_buf_puts(b, "\\\"");
		} else if (*p == '\n') {
			kvfs_buf_puts(b, "\\n");
		} else {
			kvfs_buf_add(b, p, n);
		}
		p += n;
		left -= n;
	}
}

static const struct metric m_slots = { "pool_slots", GAUGE,
				       "Block slots in the pool." };
static const struct metric m_free = {
	"pool_slots_free", GAUGE, "Slots holding no sealed or written block."
};
static const struct metric m_slot = { "pool_slot_size_bytes", GAUGE,
				      "Bytes per slot: the largest block." };
static const struct metric m_leases = { "leases", GAUGE,
					"Live prefix-match leases." };
static const struct metric m_pinned = { "pinned_blocks", GAUGE,
					"Sealed blocks with references." };
static const struct metric m_recov = { "recovered_blocks", GAUGE,
				       "Sealed blocks found valid at open." };
static const struct metric m_dropped = {
	"recovery_dropped_blocks", GAUGE,
	"Block records dropped at open (bad checksum, lost slot)."
};
static const struct metric m_nns = { "namespaces", GAUGE, "Namespaces." };

/* the kv_stats fields, once for the store and once per namespace */
enum field {
	F_BLOCKS,
	F_BYTES,
	F_WRITING,
	F_HITS,
	F_MISSES,
	F_EVICT,
	F_SEALS,
	F_REMOVED,
	F_NFIELDS
};
/* per namespace only: not a kv_stats field */
#define F_BLOCK_TOKENS F_NFIELDS

static const struct metric m_fields[F_NFIELDS] = {
	[F_BLOCKS] = { "blocks", GAUGE, "Sealed blocks cached." },
	[F_BYTES] = { "block_bytes", GAUGE, "Bytes of the sealed blocks." },
	[F_WRITING] = { "blocks_writing", GAUGE, "Blocks being written." },
	[F_HITS] = { "hits_total", COUNTER, "Block lookups that hit." },
	[F_MISSES] = { "misses_total", COUNTER, "Block lookups that missed." },
	[F_EVICT] = { "evictions_total", COUNTER, "Blocks evicted." },
	[F_SEALS] = { "seals_total", COUNTER, "Blocks sealed." },
	[F_REMOVED] = { "removed_total", COUNTER, "Blocks unlinked." },
};

static uint64_t field(const struct kv_stats *s, enum field f)
{
	switch (f) {
	case F_BLOCKS:
		return s->blocks;
	case F_BYTES:
		return s->bytes;
	case F_WRITING:
		return s->writing;
	case F_HITS:
		return s->hits;
	case F_MISSES:
		return s->misses;
	case F_EVICT:
		return s->evictions;
	case F_SEALS:
		return s->seals;
	case F_REMOVED:
		return s->removed;
	default:
		return 0;
	}
}

/* one family per field, labelled by namespace: kvfs_namespace_<field> */
static void metric_ns(struct kvfs_buf *b, const struct metric *m,
		      const struct snap *sn, enum field f)
{
	kvfs_buf_printf(b,
			"# HELP kvfs_namespace_%s %s (per namespace)\n"
			"# TYPE kvfs_namespace_%s %s\n",
			m->name, m->help, m->name,
			m->type == COUNTER ? "counter" : "gauge");
	for (size_t i = 0; i < sn->n; i++) {
		kvfs_buf_printf(b, "kvfs_namespace_%s{namespace=\"", m->name);
		label_value(b, sn->v[i].name);
		kvfs_buf_printf(
			b, "\"} %llu\n",
			(unsigned long long)(f == F_BLOCK_TOKENS
						     ? sn->v[i].block_tokens
						     : field(&sn->v[i].s, f)));
	}
}

static const struct metric m_btok = { "block_tokens", GAUGE,
				      "Tokens per block." };

int render_metrics(struct kv_store *st, char **out, size_t *len)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	struct kv_store_stats s;
	struct snap sn;
	int rc;

	if (!st || !out)
		return -EINVAL;
	rc = kv_store_stats(st, &s);
	if (rc < 0)
		return rc;
	rc = snap_take(st, &sn);
	if (rc < 0)
		return rc;
	metric_one(&b, &m_slots, s.slots_total);
	metric_one(&b, &m_free, s.slots_free);
	metric_one(&b, &m_slot, s.slot_size);
	for (int f = 0; f < F_NFIELDS; f++)
		metric_one(&b, &m_fields[f], field(&s.total, (enum field)f));
	metric_one(&b, &m_leases, s.leases);
	metric_one(&b, &m_pinned, s.pinned);
	metric_one(&b, &m_recov, s.recovered);
	metric_one(&b, &m_dropped, s.recovery_dropped);
	metric_one(&b, &m_nns, sn.n);
	metric_ns(&b, &m_btok, &sn, F_BLOCK_TOKENS);
	for (int f = 0; f < F_NFIELDS; f++)
		metric_ns(&b, &m_fields[f], &sn, (enum field)f);
	free(sn.v);
	return kvfs_buf_finish(&b, out, len);
}
