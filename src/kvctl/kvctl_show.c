/*
 * kvctl_show.c - kvctl's views for people of the daemon's responses:
 * aligned tables, sizes in KiB/MiB/GiB, times in UTC, names with control
 * bytes shown as '?' so that a namespace cannot drive the terminal.
 *
 * Every field is read with a default (0, ""), so a daemon that adds or
 * lacks a field changes the view, never crashes it.
 */
#include "config.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/common/json.h"
#include "src/kvctl/kvctl.h"
#include "src/common/log.h"

uint64_t kvctl_jnum(const struct kvfs_json *j, const char *key)
{
	uint64_t v = 0;

	kvfs_json_u64(kvfs_json_get(j, key), &v);
	return v;
}

static double jdbl(const struct kvfs_json *j, const char *key)
{
	double v = 0;

	kvfs_json_double(kvfs_json_get(j, key), &v);
	return v;
}

const char *kvctl_jstr(const struct kvfs_json *j, const char *key)
{
	const char *s = kvfs_json_str(kvfs_json_get(j, key));

	return s ? s : "";
}

static void human_size(uint64_t v, char *out, size_t len)
{
	static const char *const unit[] = { "KiB", "MiB", "GiB",
					    "TiB", "PiB", "EiB" };
	double d = (double)v;
	int u = -1;

	if (v < 1024) {
		snprintf(out, len, "%llu B", (unsigned long long)v);
		return;
	}
	while (d >= 1024 && u < 5) {
		d /= 1024;
		u++;
	}
	snprintf(out, len, "%.1f %s", d, unit[u]);
}

static void utc_time(uint64_t ns, char *out, size_t len)
{
	time_t t = (time_t)(ns / 1000000000ull);
	struct tm tm;

	if (!ns || !gmtime_r(&t, &tm) ||
	    !strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(out, len, "-");
}

/* a name fit for a terminal: control bytes shown as '?' */
char *kvctl_printable(const char *s)
{
	char *p = strdup(s);

	if (!p)
		return NULL;
	for (char *q = p; *q; q++)
		if ((unsigned char)*q < 0x20 || *q == 0x7f)
			*q = '?';
	return p;
}

/* columns on a terminal: UTF-8 code points, near enough */
static size_t width(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

/* rows of cells printed with aligned columns; align: 'l' or 'r' each */
struct table {
	const char *align;
	size_t ncol;
	char **cell;
	size_t n;
	size_t cap;
	bool nomem;
};

static void table_add(struct table *t, char **row)
{
	if (t->n + t->ncol > t->cap) {
		size_t cap = t->cap ? t->cap * 2 : t->ncol * 16;
		char **p = realloc(t->cell, cap * sizeof(*p));

		if (!p) {
			t->nomem = true;
			for (size_t i = 0; i < t->ncol; i++)
				free(row[i]);
			return;
		}
		t->cell = p;
		t->cap = cap;
	}
	for (size_t i = 0; i < t->ncol; i++) {
		t->cell[t->n++] = row[i];
		t->nomem |= !row[i];
	}
}

static void table_print(struct table *t)
{
	size_t w[16] = { 0 };

	for (size_t i = 0; i < t->n; i++)
		if (t->cell[i] && width(t->cell[i]) > w[i % t->ncol])
			w[i % t->ncol] = width(t->cell[i]);
	for (size_t i = 0; i < t->n; i++) {
		const char *s = t->cell[i] ? t->cell[i] : "?";
		size_t col = i % t->ncol, pad = w[col] - width(s);
		bool last = col == t->ncol - 1;

		if (t->align[col] == 'r')
			printf("%*s%s", (int)pad, "", s);
		else
			printf("%s%*s", s, last ? 0 : (int)pad, "");
		fputs(last ? "\n" : "  ", stdout);
	}
}

static void table_free(struct table *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->cell[i]);
	free(t->cell);
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));

static char *fmt(const char *f, ...)
{
	va_list ap;
	char *s;

	va_start(ap, f);
	if (vasprintf(&s, f, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

static char *fmt_size(uint64_t v)
{
	char buf[32];

	human_size(v, buf, sizeof(buf));
	return strdup(buf);
}

/* the namespace table of status and ns list */
int kvctl_show_namespaces(const struct kvfs_json *l)
{
	struct table t = { .align = "lrlrrrrrr", .ncol = 9 };
	char *head[9] = {
		strdup("NAMESPACE"), strdup("BLOCK_TOKENS"),
		strdup("LAYOUT"),    strdup("BLOCKS"),
		strdup("BYTES"),     strdup("HITS"),
		strdup("MISSES"),    strdup("HIT_RATE"),
		strdup("EVICTIONS"),
	};

	if (!l || !l->n) {
		puts("no namespaces");
		for (int i = 0; i < 9; i++)
			free(head[i]);
		return 0;
	}
	table_add(&t, head);
	for (size_t i = 0; i < l->n; i++) {
		const struct kvfs_json *e = &l->kid[i];
		const char *layout = kvctl_jstr(e, "layout");
		char *row[9] = {
			kvctl_printable(kvctl_jstr(e, "name")),
			fmt("%llu",
			    (unsigned long long)kvctl_jnum(e, "block_tokens")),
			fmt("%s", layout ? layout : "chain"),
			fmt("%llu",
			    (unsigned long long)kvctl_jnum(e, "blocks")),
			fmt_size(kvctl_jnum(e, "bytes")),
			fmt("%llu", (unsigned long long)kvctl_jnum(e, "hits")),
			fmt("%llu",
			    (unsigned long long)kvctl_jnum(e, "misses")),
			fmt("%.1f%%", 100 * jdbl(e, "hit_rate")),
			fmt("%llu",
			    (unsigned long long)kvctl_jnum(e, "evictions")),
		};

		table_add(&t, row);
	}
	if (!t.nomem)
		table_print(&t);
	table_free(&t);
	if (t.nomem)
		cli_fail(kvctl_cmd, 0, "out of memory");
	return t.nomem;
}

/* the daemon's own object, flat: key=value ... */
static void print_daemon(const struct kvfs_json *d)
{
	fputs("daemon    ", stdout);
	for (size_t i = 0; d && d->type == KVFS_JSON_OBJ && i < d->n; i++) {
		const struct kvfs_json *v = &d->kid[i];
		char *k = kvctl_printable(v->key), *s = NULL;

		if (v->type == KVFS_JSON_STR || v->type == KVFS_JSON_NUM)
			s = kvctl_printable(v->str);
		printf("%s%s=%s", i ? " " : "", k ? k : "?",
		       v->type == KVFS_JSON_BOOL   ? (v->b ? "true" : "false")
		       : v->type == KVFS_JSON_NULL ? "-"
		       : s			   ? s
						   : "...");
		free(k);
		free(s);
	}
	putchar('\n');
}

/* where the pool lives and how big its file is, when the daemon says */
static void print_pool_file(const struct kvfs_json *d)
{
	const char *path = kvfs_json_str(kvfs_json_get(d, "pool"));
	char size[32], *p;

	if (!path)
		return;
	p = kvctl_printable(path);
	printf("pool file %s", p ? p : "?");
	if (kvfs_json_get(d, "pool_bytes")) {
		human_size(kvctl_jnum(d, "pool_bytes"), size, sizeof(size));
		printf(", %s (%llu bytes)", size,
		       (unsigned long long)kvctl_jnum(d, "pool_bytes"));
	}
	putchar('\n');
	free(p);
}

void kvctl_show_status(const struct kvfs_json *j)
{
	const struct kvfs_json *s = kvfs_json_get(j, "stats");
	const struct kvfs_json *pool = kvfs_json_get(s, "pool");
	const struct kvfs_json *ctl = kvfs_json_get(j, "ctl");
	char a[32], b[32], c[32];

	print_daemon(kvfs_json_get(j, "daemon"));
	print_pool_file(kvfs_json_get(j, "daemon"));
	human_size(kvctl_jnum(pool, "slot_size"), a, sizeof(a));
	human_size(kvctl_jnum(pool, "bytes"), b, sizeof(b));
	printf("pool      %llu slots of %s (%s), %llu free\n",
	       (unsigned long long)kvctl_jnum(pool, "slots"), a, b,
	       (unsigned long long)kvctl_jnum(pool, "slots_free"));
	human_size(kvctl_jnum(s, "bytes"), c, sizeof(c));
	printf("blocks    %llu (%s), %llu being written\n",
	       (unsigned long long)kvctl_jnum(s, "blocks"), c,
	       (unsigned long long)kvctl_jnum(s, "writing"));
	printf("lookups   %llu hits, %llu misses, hit rate %.1f%%\n",
	       (unsigned long long)kvctl_jnum(s, "hits"),
	       (unsigned long long)kvctl_jnum(s, "misses"),
	       100 * jdbl(s, "hit_rate"));
	printf("evicted   %llu\nsealed    %llu\nremoved   %llu\n",
	       (unsigned long long)kvctl_jnum(s, "evictions"),
	       (unsigned long long)kvctl_jnum(s, "seals"),
	       (unsigned long long)kvctl_jnum(s, "removed"));
	printf("leases    %llu live, %llu blocks pinned\n",
	       (unsigned long long)kvctl_jnum(s, "leases"),
	       (unsigned long long)kvctl_jnum(s, "pinned"));
	printf("recovery  %llu blocks recovered, %llu dropped\n",
	       (unsigned long long)kvctl_jnum(s, "recovered"),
	       (unsigned long long)kvctl_jnum(s, "recovery_dropped"));
	printf("control   %llu clients, %llu requests\n\n",
	       (unsigned long long)kvctl_jnum(ctl, "clients"),
	       (unsigned long long)kvctl_jnum(ctl, "requests"));
}

void kvctl_show_blocks(const struct kvfs_json *bl, bool longfmt)
{
	char size[32], when[32];

	for (size_t i = 0; bl && i < bl->n; i++) {
		const struct kvfs_json *e = &bl->kid[i];
		/* an open namespace's file: its path, else its hash */
		const char *path = kvfs_json_str(kvfs_json_get(e, "path"));
		char *name =
			kvctl_printable(path ? path : kvctl_jstr(e, "hash"));

		if (!longfmt) {
			puts(name ? name : "?");
			free(name);
			continue;
		}
		human_size(kvctl_jnum(e, "size"), size, sizeof(size));
		utc_time(kvctl_jnum(e, "seal_ns"), when, sizeof(when));
		printf("%s  %10s  %4llu  %s\n", name ? name : "?", size,
		       (unsigned long long)kvctl_jnum(e, "refs"), when);
		free(name);
	}
}

/* one page: 0 and the next cursor (0 at the end), or the exit status */

void kvctl_show_block(const char *ns, const struct kvfs_json *j)
{
	char size[32], when[32], *name = kvctl_printable(ns);

	human_size(kvctl_jnum(j, "size"), size, sizeof(size));
	utc_time(kvctl_jnum(j, "seal_ns"), when, sizeof(when));
	printf("namespace %s\nhash      %s\nsize      %s (%llu bytes)\n"
	       "slot      %llu\nchecksum  %s\nrefs      %llu\nsealed    %s\n"
	       "parent    %s\n",
	       name ? name : "?", kvctl_jstr(j, "hash"), size,
	       (unsigned long long)kvctl_jnum(j, "size"),
	       (unsigned long long)kvctl_jnum(j, "slot"),
	       kvctl_jstr(j, "checksum"),
	       (unsigned long long)kvctl_jnum(j, "refs"), when,
	       kvfs_json_str(kvfs_json_get(j, "parent"))
		       ? kvctl_jstr(j, "parent")
		       : "none recorded");
	free(name);
	name = kvfs_json_str(kvfs_json_get(j, "path"))
		       ? kvctl_printable(kvctl_jstr(j, "path"))
		       : NULL;
	if (name)
		printf("path      %s\n", name);
	free(name);
}
