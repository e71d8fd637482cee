/*
 * locality.h - private to sched/: the global block-locality index, block ->
 * set of nodes holding it, kept from the insert/evict events every kvfsd
 * sends (event.h).
 *
 * A block is named by a 64-bit key: the first 8 bytes of its kvfs v1
 * SHA-256 name read little-endian (sched_key_from_hash, sched.h), or a
 * trace's hash_id in the replay.  Truncation is safe here because the
 * index only steers routing: a wrong answer costs a slower prefill, never
 * wrong bytes, since the engine's own prefix match on the chosen node is
 * the authority; and making a block collide with a given victim's key
 * takes a 2^64 second-preimage search.
 *
 * A holder set is a bitmap of nwords 64-bit words (nodes 0..nnodes-1,
 * nnodes <= SCHED_MAX_NODES), stored in the table slot beside its key: a
 * lookup reads one cache line.  With one word a million blocks take 32
 * MiB (16 bytes a slot, at most half full).  A block held by no node has
 * no entry.
 *
 * The decision-time call is sched_index_prefix(): it walks the request's
 * keys once, O(matched prefix + nodes), and never scans the index.
 *
 * Not thread-safe: the scheduler that owns it serialises every call.
 */
#ifndef KVFS_SCHED_LOCALITY_H
#define KVFS_SCHED_LOCALITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SCHED_MAX_NODES 256
#define SCHED_NODE_WORDS ((SCHED_MAX_NODES + 63) / 64)
#ifndef SCHED_NO_NODE
#define SCHED_NO_NODE UINT32_MAX
#endif

struct sched_index;

/* room for expect_blocks without growing; -EINVAL (nnodes 0 or too many),
 * -ENOMEM */
int sched_index_create(uint32_t nnodes, size_t expect_blocks,
		       struct sched_index **out);
void sched_index_destroy(struct sched_index *ix);

uint32_t sched_index_nodes(const struct sched_index *ix);

/* node now holds key: 1 when that is news, 0 when it held it already,
 * -EINVAL for a node out of range, -ENOMEM */
int sched_index_insert(struct sched_index *ix, uint32_t node, uint64_t key);

/* node dropped key: 1 when it held it, 0 when not (an evict for a block
 * the index never saw is not an error: events may be lost), -EINVAL */
int sched_index_evict(struct sched_index *ix, uint32_t node, uint64_t key);

/*
 * Forget every block of node (it restarted with an empty pool, or its
 * event stream had a gap).  O(table), a rare event.  Returns the number
 * of blocks dropped, -EINVAL or -ENOMEM (nothing changed).
 */
long sched_index_reset_node(struct sched_index *ix, uint32_t node);

bool sched_index_holds(const struct sched_index *ix, uint32_t node,
		       uint64_t key);

/* distinct blocks held by some node, and blocks held by one node */
size_t sched_index_blocks(const struct sched_index *ix);
uint64_t sched_index_node_blocks(const struct sched_index *ix, uint32_t node);

/*
 * Longest prefix of keys[0..n) each node holds: lens[node] for every
 * node < nnodes (lens has nnodes entries).  Returns the longest of them;
 * *best_node (may be NULL) is the lowest node that holds that longest
 * prefix, SCHED_NO_NODE when it is 0.
 */
uint32_t sched_index_prefix(const struct sched_index *ix, const uint64_t *keys,
			    uint32_t n, uint32_t *lens, uint32_t *best_node);

/*
 * The same, and in one walk over the keys also ulens[node]: the longest
 * prefix each node holds in ix or in also (same nnodes; the in-flight
 * index: blocks a queued request will have written).
 */
uint32_t sched_index_prefix2(const struct sched_index *ix,
			     const struct sched_index *also,
			     const uint64_t *keys, uint32_t n, uint32_t *lens,
			     uint32_t *ulens, uint32_t *best_node);

#endif /* KVFS_SCHED_LOCALITY_H */
