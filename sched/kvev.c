/*
 * kvev.c - vLLM's KV event batches, decoded (kvev.h).
 *
 * Two passes over untrusted bytes.  First our own walk (scan) checks the
 * msgpack framing: every length against the bytes left, the nesting
 * depth, and the number of values, which is what msgpack-c's unpacker
 * allocates for (one msgpack_object per array element, two per map
 * entry) -- msgpack-c itself would allocate what a 5-byte array header
 * claims, gigabytes, before finding the bytes missing.  Then msgpack-c
 * builds the object tree, and the batch is checked whole (walk, apply
 * false) before its events reach the callback (walk, apply true).
 */
#include "config.h"

#include <errno.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "sched/kvev.h"

/* ---- the framing check --------------------------------------------------- */

struct scan {
	const uint8_t *p, *end;
	size_t objects;
};

static uint64_t be(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

/* n more bytes, or -EBADMSG */
static int need(struct scan *s, uint64_t n)
{
	return (uint64_t)(s->end - s->p) < n ? -EBADMSG : 0;
}

/* a container of n values: they fit in the bytes left (each takes one at
 * least) and in the object budget */
static int container(struct scan *s, uint64_t n)
{
	if (need(s, n) < 0)
		return -EBADMSG;
	if (n > KVEV_MAX_OBJECTS - s->objects)
		return -EMSGSIZE;
	s->objects += n;
	return 0;
}

static int scan_value(struct scan *s, unsigned depth);

static int scan_items(struct scan *s, uint64_t n, unsigned depth)
{
	int rc = container(s, n);

	for (uint64_t i = 0; rc == 0 && i < n; i++)
		rc = scan_value(s, depth + 1);
	return rc;
}

/* the length of a str, bin or ext of `lenbytes` length bytes (ext: one
 * type byte more), skipped */
static int scan_blob(struct scan *s, unsigned lenbytes, unsigned extra)
{
	uint64_t n;

	if (need(s, lenbytes) < 0)
		return -EBADMSG;
	n = be(s->p, lenbytes) + extra;
	s->p += lenbytes;
	if (need(s, n) < 0)
		return -EBADMSG;
	s->p += n;
	return 0;
}

/* a fixed-size value of n bytes after its type byte */
static int scan_fixed(struct scan *s, unsigned n)
{
	if (need(s, n) < 0)
		return -EBADMSG;
	s->p += n;
	return 0;
}

static int scan_value(struct scan *s, unsigned depth)
{
	uint8_t t;

	if (depth > KVEV_MAX_DEPTH)
		return -EMSGSIZE;
	if (need(s, 1) < 0)
		return -EBADMSG;
	t = *s->p++;
	if (t <= 0x7f || t >= 0xe0 || t == 0xc0 || t == 0xc2 || t == 0xc3)
		return 0;
	if (t <= 0x8f)
		return scan_items(s, 2ull * (t & 0x0f), depth);
	if (t <= 0x9f)
		return scan_items(s, t & 0x0f, depth);
	if (t <= 0xbf)
		return scan_fixed(s, t & 0x1f);
	switch (t) {
	case 0xc4:
		return scan_blob(s, 1, 0);
	case 0xc5:
		return scan_blob(s, 2, 0);
	case 0xc6:
		return scan_blob(s, 4, 0);
	case 0xc7:
		return scan_blob(s, 1, 1);
	case 0xc8:
		return scan_blob(s, 2, 1);
	case 0xc9:
		return scan_blob(s, 4, 1);
	case 0xca:
		return scan_fixed(s, 4);
	case 0xcb:
		return scan_fixed(s, 8);
	case 0xcc:
		return scan_fixed(s, 1);
	case 0xcd:
		return scan_fixed(s, 2);
	case 0xce:
		return scan_fixed(s, 4);
	case 0xcf:
		return scan_fixed(s, 8);
	case 0xd0:
		return scan_fixed(s, 1);
	case 0xd1:
		return scan_fixed(s, 2);
	case 0xd2:
		return scan_fixed(s, 4);
	case 0xd3:
		return scan_fixed(s, 8);
	case 0xd4:
		return scan_fixed(s, 2);
	case 0xd5:
		return scan_fixed(s, 3);
	case 0xd6:
		return scan_fixed(s, 5);
	case 0xd7:
		return scan_fixed(s, 9);
	case 0xd8:
		return scan_fixed(s, 17);
	case 0xd9:
		return scan_blob(s, 1, 0);
	case 0xda:
		return scan_blob(s, 2, 0);
	case 0xdb:
		return scan_blob(s, 4, 0);
	case 0xdc:
	case 0xdd: {
		unsigned w = t == 0xdc ? 2 : 4;
		uint64_t n;

		if (need(s, w) < 0)
			return -EBADMSG;
		n = be(s->p, w);
		s->p += w;
		return scan_items(s, n, depth);
	}
	case 0xde:
	case 0xdf: {
		unsigned w = t == 0xde ? 2 : 4;
		uint64_t n;

		if (need(s, w) < 0)
			return -EBADMSG;
		n = be(s->p, w);
		s->p += w;
		return scan_items(s, 2 * n, depth);
	}
	}
	return -EBADMSG; /* 0xc1: never used */
}

/* ---- the batch ----------------------------------------------------------- */

struct walk {
	bool apply;
	kvev_fn fn;
	void *arg;
	uint64_t *keys; /* room for max_keys (apply) */
	uint32_t max_keys;
	struct kvev_batch *b;
};

uint64_t kvev_key_bytes(const uint8_t *p, size_t n)
{
	uint64_t k = 0;

	/* vLLM's int.from_bytes(h, "big") & (2^64 - 1) */
	for (size_t i = n > 8 ? n - 8 : 0; i < n; i++)
		k = k << 8 | p[i];
	return k;
}

static bool is_str(const msgpack_object *o, const char *s)
{
	size_t n = strlen(s);

	return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n &&
	       !memcmp(o->via.str.ptr, s, n);
}

static bool is_nil(const msgpack_object *o)
{
	return o->type == MSGPACK_OBJECT_NIL;
}

/* a hash -> its key; -EBADMSG for anything but bytes or an integer */
static int hash_key(const msgpack_object *o, uint64_t *key)
{
	const uint8_t *p;
	size_t n;

	switch (o->type) {
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		*key = o->via.u64;
		return 0;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		*key = (uint64_t)o->via.i64;
		return 0;
	case MSGPACK_OBJECT_BIN:
		p = (const uint8_t *)o->via.bin.ptr;
		n = o->via.bin.size;
		break;
	case MSGPACK_OBJECT_STR:
		p = (const uint8_t *)o->via.str.ptr;
		n = o->via.str.size;
		break;
	default:
		return -EBADMSG;
	}
	if (n == 0 || n > KVEV_MAX_HASH_BYTES)
		return -EBADMSG;
	*key = kvev_key_bytes(p, n);
	return 0;
}

/* the fields one event carries, wherever they were */
struct fields {
	enum kvev_type type; /* 0: a type not known here */
	const msgpack_object *hashes, *block_size;
};

static int event_type(const msgpack_object *tag, enum kvev_type *t)
{
	if (tag->type != MSGPACK_OBJECT_STR)
		return -EBADMSG;
	if (is_str(tag, "BlockStored"))
		*t = KVEV_STORED;
	else if (is_str(tag, "BlockRemoved"))
		*t = KVEV_REMOVED;
	else if (is_str(tag, "AllBlocksCleared"))
		*t = KVEV_CLEARED;
	else
		*t = 0;
	return 0;
}

/* ["BlockStored", hashes, parent, token_ids, block_size, ...],
 * ["BlockRemoved", hashes, ...], ["AllBlocksCleared", ...] */
static int fields_array(const msgpack_object_array *a, struct fields *f)
{
	if (a->size < 1 || event_type(&a->ptr[0], &f->type) < 0)
		return -EBADMSG;
	switch (f->type) {
	case KVEV_STORED:
		if (a->size < 5)
			return -EBADMSG;
		f->hashes = &a->ptr[1];
		f->block_size = &a->ptr[4];
		return 0;
	case KVEV_REMOVED:
		if (a->size < 2)
			return -EBADMSG;
		f->hashes = &a->ptr[1];
		return 0;
	default:
		return 0;
	}
}

/* {"type": ..., "block_hashes": ..., "block_size": ...}; a key twice is
 * refused, as is one that is not a string */
static int fields_map(const msgpack_object_map *m, struct fields *f)
{
	const msgpack_object *type = NULL;

	for (uint32_t i = 0; i < m->size; i++) {
		const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;
		const msgpack_object **slot = NULL;

		if (k->type != MSGPACK_OBJECT_STR)
			return -EBADMSG;
		if (is_str(k, "type"))
			slot = &type;
		else if (is_str(k, "block_hashes"))
			slot = &f->hashes;
		else if (is_str(k, "block_size"))
			slot = &f->block_size;
		if (!slot)
			continue;
		if (*slot)
			return -EBADMSG;
		*slot = v;
	}
	if (!type || event_type(type, &f->type) < 0)
		return -EBADMSG;
	if ((f->type == KVEV_STORED || f->type == KVEV_REMOVED) && !f->hashes)
		return -EBADMSG;
	return 0;
}

static int walk_event(struct walk *w, const msgpack_object *o)
{
	struct fields f = { 0 };
	struct kvev_event ev = { .block_size = -1 };
	const msgpack_object_array *h;
	int rc;

	if (o->type == MSGPACK_OBJECT_ARRAY)
		rc = fields_array(&o->via.array, &f);
	else if (o->type == MSGPACK_OBJECT_MAP)
		rc = fields_map(&o->via.map, &f);
	else
		rc = -EBADMSG;
	if (rc < 0)
		return rc;
	if (!f.type) {
		w->b->unknown += !w->apply;
		return 0;
	}
	ev.type = f.type;
	if (f.block_size && !is_nil(f.block_size)) {
		if (f.block_size->type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
		    f.block_size->via.u64 > INT32_MAX)
			return -EBADMSG;
		ev.block_size = (int64_t)f.block_size->via.u64;
	}
	if (f.hashes) {
		if (f.hashes->type != MSGPACK_OBJECT_ARRAY)
			return -EBADMSG;
		h = &f.hashes->via.array;
		for (uint32_t i = 0; i < h->size; i++) {
			uint64_t k;

			if (hash_key(&h->ptr[i], &k) < 0)
				return -EBADMSG;
			if (w->apply)
				w->keys[i] = k;
		}
		if (!w->apply && h->size > w->max_keys)
			w->max_keys = h->size;
		ev.keys = w->keys;
		ev.nkeys = h->size;
	}
	if (!w->apply) {
		w->b->events++;
		return 0;
	}
	return w->fn(w->arg, &ev);
}

static int walk_batch(struct walk *w, const msgpack_object *o)
{
	const msgpack_object *ts = NULL, *events = NULL, *rank = NULL;
	int rc = 0;

	if (o->type == MSGPACK_OBJECT_ARRAY) {
		const msgpack_object_array *a = &o->via.array;

		if (a->size < 2 || a->size > 3)
			return -EBADMSG;
		ts = &a->ptr[0];
		events = &a->ptr[1];
		rank = a->size == 3 ? &a->ptr[2] : NULL;
	} else if (o->type == MSGPACK_OBJECT_MAP) {
		const msgpack_object_map *m = &o->via.map;

		for (uint32_t i = 0; i < m->size; i++) {
			const msgpack_object *k = &m->ptr[i].key;
			const msgpack_object **slot = NULL;

			if (is_str(k, "ts"))
				slot = &ts;
			else if (is_str(k, "events"))
				slot = &events;
			else if (is_str(k, "data_parallel_rank"))
				slot = &rank;
			if (!slot || *slot)
				return -EBADMSG;
			*slot = &m->ptr[i].val;
		}
		if (!ts || !events)
			return -EBADMSG;
	} else {
		return -EBADMSG;
	}
	if (!w->apply) {
		if (ts->type == MSGPACK_OBJECT_FLOAT64 ||
		    ts->type == MSGPACK_OBJECT_FLOAT32)
			w->b->ts = ts->via.f64;
		else if (ts->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
			w->b->ts = (double)ts->via.u64;
		else
			return -EBADMSG;
		if (rank && !is_nil(rank)) {
			if (rank->type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
			    rank->via.u64 > INT32_MAX)
				return -EBADMSG;
			w->b->dp_rank = (int64_t)rank->via.u64;
		}
	}
	if (events->type != MSGPACK_OBJECT_ARRAY)
		return -EBADMSG;
	for (uint32_t i = 0; rc == 0 && i < events->via.array.size; i++)
		rc = walk_event(w, &events->via.array.ptr[i]);
	return rc;
}

int kvev_decode(const void *buf, size_t len, kvev_fn fn, void *arg,
		struct kvev_batch *b)
{
	struct scan s = { .p = buf, .end = (const uint8_t *)buf + len };
	struct kvev_batch local;
	struct walk w = { .fn = fn, .arg = arg };
	msgpack_unpacked u;
	size_t off = 0;
	int rc;

	w.b = b ? b : &local;
	*w.b = (struct kvev_batch){ .dp_rank = -1 };
	if (len > KVEV_MAX_PAYLOAD)
		return -EMSGSIZE;
	if (!len)
		return -EBADMSG;
	rc = scan_value(&s, 0);
	if (rc < 0)
		return rc;
	if (s.p != s.end)
		return -EBADMSG; /* one value, nothing after it */
	msgpack_unpacked_init(&u);
	switch (msgpack_unpack_next(&u, buf, len, &off)) {
	case MSGPACK_UNPACK_SUCCESS:
		rc = off == len ? 0 : -EBADMSG;
		break;
	case MSGPACK_UNPACK_NOMEM_ERROR:
		rc = -ENOMEM;
		break;
	default:
		rc = -EBADMSG;
	}
	if (rc == 0)
		rc = walk_batch(&w, &u.data);
	if (rc == 0 && w.b->events) {
		w.keys =
			malloc((w.max_keys ? w.max_keys : 1) * sizeof(*w.keys));
		w.apply = true;
		rc = w.keys ? walk_batch(&w, &u.data) : -ENOMEM;
		free(w.keys);
	}
	msgpack_unpacked_destroy(&u);
	return rc;
}

int kvev_seq(const void *frame, size_t len, uint64_t *seq)
{
	if (len != KVEV_SEQ_LEN)
		return -EBADMSG;
	*seq = be(frame, KVEV_SEQ_LEN);
	return 0;
}
