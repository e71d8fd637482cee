/*
 * inode.c - the inode table: two chained hash tables over one set of
 * entries, one by ino and one by key.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "fuse/inode.h"
#include "src/common/clock.h"

#define MIN_BUCKETS 1024u

struct entry {
	uint64_t ino;
	uint64_t nlookup;
	char *path;		/* open namespaces: the entry's path */
	struct entry *next_ino; /* chain in by_ino */
	struct entry *next_key; /* chain in by_key, while hashed */
	struct inode_info info;
	int32_t backing_id;	/* FUSE passthrough, or 0 (inode.h) */
	uint32_t backing_opens; /* opens using it */
};

struct inode_table {
	pthread_mutex_t lock;
	pthread_cond_t written; /* broadcast when a block stops writing */
	struct entry **by_ino;
	struct entry **by_key;
	size_t nbuckets; /* power of two, same for both tables */
	size_t count;
	uint64_t next_ino;
	uint64_t seed[4]; /* keys the key hash, see key_hash() */
};

/*
 * Names are chosen by clients, so the bucket of a key must not be: the
 * words of the hash are mixed with a random per-table seed through a
 * 64-bit finalizer, which an attacker who cannot read the seed cannot aim
 * at one bucket.  Not a MAC, but only mount users choose names and the
 * kernel bounds the inodes it holds.
 */
static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static size_t key_hash(const struct inode_table *t, enum inode_kind kind,
		       uint32_t ns, const uint8_t *hash)
{
	uint64_t h = mix64(((uint64_t)kind << 32 | ns) ^ t->seed[0]);

	if (kind != INODE_NS) {
		for (int i = 0; i < KVFS_HASH_LEN; i += 8) {
			uint64_t w;

			memcpy(&w, hash + i, sizeof(w));
			h = mix64(h ^ w ^ t->seed[1 + (i / 8) % 3]);
		}
	}
	return (size_t)h & (t->nbuckets - 1);
}

/* inos come from a counter: consecutive values spread over buckets */
static size_t ino_hash(const struct inode_table *t, uint64_t ino)
{
	return (size_t)mix64(ino) & (t->nbuckets - 1);
}

static bool key_eq(const struct entry *e, enum inode_kind kind, uint32_t ns,
		   const uint8_t *hash)
{
	return e->info.kind == kind && e->info.ns == ns &&
	       (kind == INODE_NS ||
		memcmp(e->info.hash, hash, KVFS_HASH_LEN) == 0);
}

int inode_table_new(struct inode_table **out)
{
	struct inode_table *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->nbuckets = MIN_BUCKETS;
	t->by_ino = calloc(t->nbuckets, sizeof(*t->by_ino));
	t->by_key = calloc(t->nbuckets, sizeof(*t->by_key));
	if (!t->by_ino || !t->by_key)
		goto out_free;
	if (getrandom(t->seed, sizeof(t->seed), 0) != sizeof(t->seed))
		goto out_free;
	if (pthread_mutex_init(&t->lock, NULL))
		goto out_free;
	if (pthread_cond_init(&t->written, NULL)) {
		pthread_mutex_destroy(&t->lock);
		goto out_free;
	}
	t->next_ino = INODE_FIRST;
	*out = t;
	return 0;

out_free:
	free(t->by_ino);
	free(t->by_key);
	free(t);
	return -ENOMEM;
}

void inode_table_free(struct inode_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct entry *e = t->by_ino[i];

		while (e) {
			struct entry *next = e->next_ino;

			free(e->path);
			free(e);
			e = next;
		}
	}
	free(t->by_ino);
	free(t->by_key);
	pthread_cond_destroy(&t->written);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* ---- lookups under the lock ---------------------------------------- */

static struct entry *by_ino(struct inode_table *t, uint64_t ino)
{
	struct entry *e = t->by_ino[ino_hash(t, ino)];

	while (e && e->ino != ino)
		e = e->next_ino;
	return e;
}

static struct entry *by_key(struct inode_table *t, enum inode_kind kind,
			    uint32_t ns, const uint8_t *hash)
{
	struct entry *e = t->by_key[key_hash(t, kind, ns, hash)];

	while (e && !key_eq(e, kind, ns, hash))
		e = e->next_key;
	return e;
}

static void unlink_key(struct inode_table *t, struct entry *e)
{
	struct entry **p;

	if (!e->info.hashed)
		return;
	p = &t->by_key[key_hash(t, e->info.kind, e->info.ns, e->info.hash)];
	while (*p && *p != e)
		p = &(*p)->next_key;
	if (*p)
		*p = e->next_key;
	e->next_key = NULL;
	e->info.hashed = false;
}

static void unlink_ino(struct inode_table *t, struct entry *e)
{
	struct entry **p = &t->by_ino[ino_hash(t, e->ino)];

	while (*p && *p != e)
		p = &(*p)->next_ino;
	if (*p)
		*p = e->next_ino;
}

/* double both tables at load 1; a failed grow only costs speed */
static void maybe_grow(struct inode_table *t)
{
	size_t n = t->nbuckets * 2, old = t->nbuckets;
	struct entry **bi, **bk, **oi = t->by_ino;

	if (t->count < t->nbuckets || n < old)
		return;
	bi = calloc(n, sizeof(*bi));
	bk = calloc(n, sizeof(*bk));
	if (!bi || !bk) {
		free(bi);
		free(bk);
		return;
	}
	free(t->by_key);
	t->by_ino = bi;
	t->by_key = bk;
	t->nbuckets = n;
	for (size_t i = 0; i < old; i++) {
		struct entry *e = oi[i];

		while (e) {
			struct entry *next = e->next_ino;
			size_t b = ino_hash(t, e->ino);

			e->next_ino = bi[b];
			bi[b] = e;
			if (e->info.hashed) {
				b = key_hash(t, e->info.kind, e->info.ns,
					     e->info.hash);
				e->next_key = bk[b];
				bk[b] = e;
			}
			e = next;
		}
	}
	free(oi);
}

static int add_entry(struct inode_table *t, enum inode_kind kind, uint32_t ns,
		     const uint8_t *hash, struct entry **out)
{
	struct entry *e;
	size_t b;

	if (t->next_ino == UINT64_MAX)
		return -EOVERFLOW;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->ino = t->next_ino++;
	e->info.kind = kind;
	e->info.ns = ns;
	if (kind != INODE_NS)
		memcpy(e->info.hash, hash, KVFS_HASH_LEN);
	e->info.hashed = true;
	b = ino_hash(t, e->ino);
	e->next_ino = t->by_ino[b];
	t->by_ino[b] = e;
	b = key_hash(t, kind, ns, hash);
	e->next_key = t->by_key[b];
	t->by_key[b] = e;
	t->count++;
	maybe_grow(t);
	*out = e;
	return 0;
}

static void drop_entry(struct inode_table *t, struct entry *e)
{
	unlink_key(t, e);
	unlink_ino(t, e);
	t->count--;
	free(e->path);
	free(e);
}

/* ---- the API ------------------------------------------------------- */

int inode_lookup(struct inode_table *t, enum inode_kind kind, uint32_t ns,
		 const uint8_t *hash, uint64_t *ino)
{
	struct entry *e;
	int rc = 0;

	if (kind != INODE_NS && !hash)
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	e = by_key(t, kind, ns, hash);
	if (!e)
		rc = add_entry(t, kind, ns, hash, &e);
	if (rc == 0) {
		e->nlookup++;
		*ino = e->ino;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int inode_lookup_private(struct inode_table *t, enum inode_kind kind,
			 uint32_t ns, const uint8_t *hash, uint64_t *ino)
{
	struct entry *e;
	int rc;

	if (kind == INODE_NS || !hash)
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	rc = add_entry(t, kind, ns, hash, &e);
	if (rc == 0) {
		unlink_key(t, e);
		e->nlookup++;
		*ino = e->ino;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int inode_lookup_ino(struct inode_table *t, uint64_t ino)
{
	struct entry *e;

	pthread_mutex_lock(&t->lock);
	e = by_ino(t, ino);
	if (e)
		e->nlookup++;
	pthread_mutex_unlock(&t->lock);
	return e ? 0 : -ENOENT;
}

int inode_rekey(struct inode_table *t, uint64_t ino, const uint8_t *hash)
{
	struct entry *e, *old;
	size_t b;
	int rc;

	if (!hash)
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	e = by_ino(t, ino);
	if (!e || e->info.kind == INODE_NS) {
		pthread_mutex_unlock(&t->lock);
		return e ? -EINVAL : -ENOENT;
	}
	unlink_key(t, e);
	old = by_key(t, e->info.kind, e->info.ns, hash);
	if (old)
		unlink_key(t, old);
	rc = old != NULL;
	memcpy(e->info.hash, hash, KVFS_HASH_LEN);
	b = key_hash(t, e->info.kind, e->info.ns, hash);
	e->next_key = t->by_key[b];
	t->by_key[b] = e;
	e->info.hashed = true;
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int inode_set_path(struct inode_table *t, uint64_t ino, const char *path)
{
	char *p = strdup(path ? path : "");
	struct entry *e;

	if (!p)
		return -ENOMEM;
	pthread_mutex_lock(&t->lock);
	e = by_ino(t, ino);
	if (e) {
		free(e->path);
		e->path = p;
		p = NULL;
	}
	pthread_mutex_unlock(&t->lock);
	free(p);
	return e ? 0 : -ENOENT;
}

long inode_path(struct inode_table *t, uint64_t ino, char *buf, size_t cap)
{
	struct entry *e;
	long rc = -ENOENT;

	pthread_mutex_lock(&t->lock);
	e = by_ino(t, ino);
	if (e) {
		const char *p = e->path ? e->path : "";

		rc = (long)strlen(p);
		if ((size_t)rc < cap)
			memcpy(buf, p, (size_t)rc + 1);
		else
			rc = -ERANGE;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

void inode_forget(struct inode_table *t, uint64_t ino, uint64_t n)
{
	struct entry *e;

	if (ino < INODE_FIRST)
		return;
	pthread_mutex_lock(&t->lock);
	e = by_ino(t, ino);
	if (e) {
		e->nlookup = n < e->nlookup ? e->nlookup - n : 0;
		if (e->nlookup == 0)
			drop_entry(t, e);
	}
	pthread_mutex_unlock(&t->lock);
}

void inode_unlookup(struct inode_table *t, uint64_t ino)
{
	inode_forget(t, ino, 1);
}

int inode_get(struct inode_table *t, uint64_t ino, struct inode_info *out)
{
	struct entry *e;

	pthread_mutex_lock(&t->lock);
	e = by_ino(t, ino);
	if (e)
		*out = e->info;
	pthread_mutex_unlock(&t->lock);
	return e ? 0 : -ENOENT;
}

uint64_t inode_find(struct inode_table *t, enum inode_kind kind, uint32_t ns,
		    const uint8_t *hash)
{
	struct entry *e;
	uint64_t ino;

	if (kind != INODE_NS && !hash)
		return 0;
	pthread_mutex_lock(&t->lock);
	e = by_key(t, kind, ns, hash);
	ino = e ? e->ino : 0;
	pthread_mutex_unlock(&t->lock);
	return ino;
}

void inode_unhash(struct inode_table *t, uint64_t ino)
{
	struct entry *e;

	pthread_mutex_lock(&t->lock);
	e = by_ino(t, ino);
	if (e)
		unlink_key(t, e);
	pthread_mutex_unlock(&t->lock);
}

/* the block entry of ino under the lock, or NULL with *rc set */
static struct entry *block_entry(struct inode_table *t, uint64_t ino, int *rc)
{
	struct entry *e = by_ino(t, ino);

	*rc = !e ? -ENOENT : e->info.kind != INODE_BLOCK ? -EINVAL : 0;
	return *rc ? NULL : e;
}

int inode_set_writing(struct inode_table *t, uint64_t ino, bool writing)
{
	struct entry *e;
	int rc;

	pthread_mutex_lock(&t->lock);
	e = block_entry(t, ino, &rc);
	if (e) {
		e->info.writing = writing;
		e->info.closing_ns = 0;
		if (writing)
			e->info.missed = false;
		else
			pthread_cond_broadcast(&t->written);
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

void inode_note_miss(struct inode_table *t, uint32_t ns,
		     const uint8_t hash[KVFS_HASH_LEN])
{
	struct entry *e;

	pthread_mutex_lock(&t->lock);
	e = by_key(t, INODE_BLOCK, ns, hash);
	if (e && e->info.writing)
		e->info.missed = true;
	pthread_mutex_unlock(&t->lock);
}

bool inode_take_missed(struct inode_table *t, uint64_t ino)
{
	struct entry *e;
	bool missed = false;
	int rc;

	pthread_mutex_lock(&t->lock);
	e = block_entry(t, ino, &rc);
	if (e) {
		missed = e->info.missed;
		e->info.missed = false;
	}
	pthread_mutex_unlock(&t->lock);
	return missed;
}

int inode_set_closing(struct inode_table *t, uint64_t ino, bool closing)
{
	struct entry *e;
	int rc;

	pthread_mutex_lock(&t->lock);
	e = block_entry(t, ino, &rc);
	if (e && closing) {
		e->info.closing_ns = kvfs_mono_ns();
	} else if (e) {
		e->info.closing_ns = 0;
		pthread_cond_broadcast(&t->written);
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int inode_wait_written(struct inode_table *t, uint64_t ino, unsigned ms)
{
	struct timespec dl;
	struct entry *e;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += ms / 1000;
	dl.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&t->lock);
	/* the entry may go (forgotten) while we wait: look it up each time */
	while ((e = by_ino(t, ino)) && e->info.closing_ns && rc == 0)
		rc = pthread_cond_timedwait(&t->written, &t->lock, &dl);
	pthread_mutex_unlock(&t->lock);
	return rc == ETIMEDOUT ? -ETIMEDOUT : 0;
}

int inode_set_attr(struct inode_table *t, uint64_t ino, uint64_t size,
		   uint64_t seal_ns)
{
	struct entry *e;
	int rc;

	pthread_mutex_lock(&t->lock);
	e = block_entry(t, ino, &rc);
	if (e) {
		e->info.size = size;
		e->info.seal_ns = seal_ns;
		e->info.have_attr = true;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int inode_open(struct inode_table *t, uint64_t ino, int delta)
{
	struct entry *e;
	int rc;

	pthread_mutex_lock(&t->lock);
	e = block_entry(t, ino, &rc);
	if (e) {
		if (delta > 0)
			e->info.nopen++;
		else if (e->info.nopen)
			e->info.nopen--;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int32_t inode_backing_get(struct inode_table *t, uint64_t ino)
{
	struct entry *e;
	int32_t id = 0;
	int rc;

	pthread_mutex_lock(&t->lock);
	e = block_entry(t, ino, &rc);
	if (e && e->backing_id > 0) {
		e->backing_opens++;
		id = e->backing_id;
	}
	pthread_mutex_unlock(&t->lock);
	return id;
}

int inode_backing_set(struct inode_table *t, uint64_t ino, int32_t id)
{
	struct entry *e;
	int rc;

	pthread_mutex_lock(&t->lock);
	e = block_entry(t, ino, &rc);
	if (e) {
		e->backing_id = id;
		e->backing_opens = 1;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int32_t inode_backing_put(struct inode_table *t, uint64_t ino)
{
	struct entry *e;
	int32_t id = 0;
	int rc;

	pthread_mutex_lock(&t->lock);
	e = block_entry(t, ino, &rc);
	if (e && e->backing_id > 0 && e->backing_opens &&
	    --e->backing_opens == 0) {
		id = e->backing_id;
		e->backing_id = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return id;
}

long inode_blocks(struct inode_table *t, struct inode_ref **out)
{
	struct inode_ref *v = NULL;
	size_t n = 0, cap;

	pthread_mutex_lock(&t->lock);
	cap = t->count;
	if (cap) {
		v = malloc(cap * sizeof(*v));
		if (!v) {
			pthread_mutex_unlock(&t->lock);
			return -ENOMEM;
		}
	}
	for (size_t i = 0; i < t->nbuckets && n < cap; i++) {
		for (struct entry *e = t->by_ino[i]; e; e = e->next_ino) {
			if (e->info.kind != INODE_BLOCK || !e->info.hashed ||
			    e->info.writing)
				continue;
			v[n].ino = e->ino;
			v[n].ns = e->info.ns;
			memcpy(v[n].hash, e->info.hash, KVFS_HASH_LEN);
			n++;
		}
	}
	pthread_mutex_unlock(&t->lock);
	if (n == 0) {
		free(v);
		v = NULL;
	}
	*out = v;
	return (long)n;
}

size_t inode_count(struct inode_table *t)
{
	size_t n;

	pthread_mutex_lock(&t->lock);
	n = t->count;
	pthread_mutex_unlock(&t->lock);
	return n;
}
