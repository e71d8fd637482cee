/*
 * store_tab.c - the in-memory block table: (namespace, hash) -> slot.
 *
 * Open addressing with linear probing over an array of 8-byte entries, at
 * most half full (capacity >= 2 * nslots, fixed at open: a block needs a
 * slot, so the table can never outgrow it).  Each entry keeps the low 32
 * bits of the block's keyed hash beside its slot: the home bucket comes
 * from them and they act as a tag, so probing a cluster compares tags in
 * one cache line and a block is touched only when its tag matches.  A
 * miss therefore costs one cache line, a hit two.  Removal shifts the
 * following entries back (no tombstones), so probe lengths do not grow
 * with churn.
 *
 * The hash is SipHash-1-3 keyed at open: block names come from clients,
 * and a client that could predict buckets could pile every name into one.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "kvstore/store_int.h"

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static inline void sip_round(uint64_t v[4])
{
	v[0] += v[1];
	v[1] = ROTL(v[1], 13);
	v[1] ^= v[0];
	v[0] = ROTL(v[0], 32);
	v[2] += v[3];
	v[3] = ROTL(v[3], 16);
	v[3] ^= v[2];
	v[0] += v[3];
	v[3] = ROTL(v[3], 21);
	v[3] ^= v[0];
	v[2] += v[1];
	v[1] = ROTL(v[1], 17);
	v[1] ^= v[2];
	v[2] = ROTL(v[2], 32);
}

static inline void sip_word(uint64_t v[4], uint64_t m)
{
	v[3] ^= m;
	sip_round(v);
	v[0] ^= m;
}

static uint32_t tab_hash(const struct kv_store *st, uint32_t ns,
			 const uint8_t h[KVFS_HASH_LEN])
{
	uint64_t v[4] = {
		st->sip_k0 ^ 0x736f6d6570736575ull,
		st->sip_k1 ^ 0x646f72616e646f6dull,
		st->sip_k0 ^ 0x6c7967656e657261ull,
		st->sip_k1 ^ 0x7465646279746573ull,
	};

	for (int i = 0; i < KVFS_HASH_LEN; i += 8) {
		uint64_t m;

		memcpy(&m, h + i, 8);
		sip_word(v, m);
	}
	/* last word: ns and the message length, as SipHash pads */
	sip_word(v, (uint64_t)ns | (uint64_t)(KVFS_HASH_LEN + 4) << 56);
	v[2] ^= 0xff;
	for (int i = 0; i < 3; i++)
		sip_round(v);
	return (uint32_t)(v[0] ^ v[1] ^ v[2] ^ v[3]);
}

uint32_t store_sip(const struct kv_store *st, uint32_t ns, const void *p,
		   size_t len)
{
	const uint8_t *b = p;
	uint64_t v[4] = {
		st->sip_k0 ^ 0x736f6d6570736575ull,
		st->sip_k1 ^ 0x646f72616e646f6dull,
		st->sip_k0 ^ 0x6c7967656e657261ull,
		st->sip_k1 ^ 0x7465646279746573ull,
	};
	uint64_t m;
	size_t i;

	sip_word(v, ns);
	for (i = 0; i + 8 <= len; i += 8) {
		memcpy(&m, b + i, 8);
		sip_word(v, m);
	}
	m = (uint64_t)(len & 0xff) << 56;
	for (size_t k = 0; i + k < len; k++)
		m |= (uint64_t)b[i + k] << (8 * k);
	sip_word(v, m);
	v[2] ^= 0xff;
	for (int r = 0; r < 3; r++)
		sip_round(v);
	return (uint32_t)(v[0] ^ v[1] ^ v[2] ^ v[3]);
}

void *tab_map(size_t len)
{
	void *p;

	if (len == 0)
		return NULL;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	/* random access over up to hundreds of MB: spare the TLB */
	madvise(p, len, MADV_HUGEPAGE);
	return p;
}

void tab_unmap(void *p, size_t len)
{
	if (p)
		munmap(p, len);
}

static size_t tab_bytes(const struct kv_store *st)
{
	return sizeof(*st->tab) * ((size_t)st->tab_mask + 1);
}

int tab_alloc(struct kv_store *st)
{
	uint64_t cap = 16;

	while (cap < 2 * (uint64_t)st->nslots)
		cap <<= 1;
	st->tab_mask = (uint32_t)(cap - 1);
	st->tab = tab_map(tab_bytes(st));
	if (!st->tab)
		return -ENOMEM;
	for (uint64_t i = 0; i < cap; i++)
		st->tab[i].slot = NIL;
	return 0;
}

void tab_free(struct kv_store *st)
{
	if (st->tab)
		tab_unmap(st->tab, tab_bytes(st));
	st->tab = NULL;
}

uint32_t tab_find(struct kv_store *st, uint32_t ns,
		  const uint8_t hash[KVFS_HASH_LEN])
{
	uint32_t h = tab_hash(st, ns, hash);

	for (uint32_t i = h & st->tab_mask;; i = (i + 1) & st->tab_mask) {
		const struct tab_ent *e = &st->tab[i];
		const struct blk *b;

		if (e->slot == NIL)
			return NIL;
		if (e->h != h)
			continue;
		b = &st->blk[e->slot];
		if (b->ns == ns && memcmp(b->hash, hash, KVFS_HASH_LEN) == 0)
			return e->slot;
	}
}

void tab_insert(struct kv_store *st, uint32_t slot)
{
	const struct blk *b = &st->blk[slot];
	uint32_t h = tab_hash(st, b->ns, b->hash);
	uint32_t i = h & st->tab_mask;

	/* never full: at most nslots entries in >= 2 * nslots places */
	while (st->tab[i].slot != NIL)
		i = (i + 1) & st->tab_mask;
	st->tab[i].h = h;
	st->tab[i].slot = slot;
}

/* is home k outside the cyclic range (i, j]?  Then j's entry may move to i */
static int may_fill(uint32_t i, uint32_t j, uint32_t k)
{
	return i <= j ? (k <= i || k > j) : (k <= i && k > j);
}

void tab_remove(struct kv_store *st, uint32_t slot)
{
	const struct blk *b = &st->blk[slot];
	uint32_t h = tab_hash(st, b->ns, b->hash);
	uint32_t i = h & st->tab_mask, j;

	while (st->tab[i].slot != slot) {
		if (st->tab[i].slot == NIL)
			return; /* not in the table */
		i = (i + 1) & st->tab_mask;
	}
	/* backward shift: pull later entries of the cluster into the hole */
	for (j = (i + 1) & st->tab_mask; st->tab[j].slot != NIL;
	     j = (j + 1) & st->tab_mask) {
		if (may_fill(i, j, st->tab[j].h & st->tab_mask)) {
			st->tab[i] = st->tab[j];
			i = j;
		}
	}
	st->tab[i].slot = NIL;
}
