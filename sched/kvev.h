/*
 * kvev.h - vLLM's KV events, engine -> conductor: the decoder of one
 * published batch, and the sequence rules a subscriber follows.
 *
 * vLLM's engines (--kv-events-config, publisher "zmq") publish what their
 * prefix cache does on a ZMQ PUB socket, and keep the last batches for a
 * ROUTER "replay" socket.  kvconductor(8) ("KV EVENTS") documents the same
 * format; this decoder never trusts it.
 *
 * LIVE MESSAGE (multipart):
 *
 *   frame  bytes  field
 *   0      any    topic (the publisher's --kv-events-config topic)
 *   1      8      seq: big-endian, 0 for the publisher's first batch, one
 *                 more per batch
 *   2      any    payload: one msgpack batch
 *
 * BATCH (msgpack), an array (or, leniently, a map of the same names):
 *
 *   [ts, events]  or  [ts, events, data_parallel_rank]
 *     ts      float (or integer) seconds since the epoch
 *     events  array of events
 *     rank    integer or nil
 *
 * EVENT: either a positional array whose first element names its type
 * (vLLM's msgspec tagged array_like structs), trailing defaults omitted:
 *
 *   ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size,
 *    lora_id, medium, ...]
 *   ["BlockRemoved", block_hashes, medium, ...]
 *   ["AllBlocksCleared"]
 *
 * or a map with the type under "type" and the fields by name (later vLLM
 * versions): {"type": "BlockStored", "block_hashes": [...],
 * "block_size": 16, ...}.  Fields past those named here are ignored, and
 * so are events of another type (counted: a newer vLLM may add some).
 *
 * BLOCK HASH: bytes (msgpack bin, or str), 1..KVEV_MAX_HASH_BYTES of
 * them, or a 64-bit integer, signed or unsigned.  The conductor's 64-bit
 * key (locality.h) is, for an integer, its 64 bits (a negative one two's
 * complement); for bytes, the integer vLLM publishes instead of them
 * when told to (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES: the bytes read
 * big-endian, modulo 2^64, i.e. their last 8).  So an engine's block
 * has one key whichever form it publishes, and a router gives it to
 * POST /v1/schedule as "block_keys".
 *
 * REPLAY: a subscriber that sees seq jump asks the publisher's ROUTER
 * socket for the batches from start on: it sends the 8-byte big-endian
 * start (after the empty delimiter frame a REQ socket adds) and receives,
 * one message each, [seq, payload] (older vLLM) or [topic, seq, payload]
 * (newer), then an end marker: seq all ones (-1) and an empty payload.
 *
 * LIMITS: a payload of at most KVEV_MAX_PAYLOAD bytes, at most
 * KVEV_MAX_OBJECTS msgpack values in it, nested at most KVEV_MAX_DEPTH
 * deep; every container length is checked against the bytes left before
 * anything is allocated, so a short message cannot claim a huge one.
 */
#ifndef KVFS_SCHED_KVEV_H
#define KVFS_SCHED_KVEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KVEV_SEQ_LEN 8
#define KVEV_MAX_PAYLOAD (16u << 20)
#define KVEV_MAX_OBJECTS (2u << 20)
#define KVEV_MAX_DEPTH 16
#define KVEV_MAX_HASH_BYTES 64

enum kvev_type {
	KVEV_STORED = 1,  /* the engine holds these blocks now */
	KVEV_REMOVED = 2, /* it dropped them */
	KVEV_CLEARED = 3, /* it dropped every block */
};

/* one decoded event, valid during the callback only */
struct kvev_event {
	enum kvev_type type;
	const uint64_t *keys; /* the blocks' keys (above), nkeys of them */
	uint32_t nkeys;
	int64_t block_size; /* BlockStored's, -1 when absent or nil */
};

/* what the whole batch said, after kvev_decode */
struct kvev_batch {
	double ts;
	int64_t dp_rank;  /* -1: absent or nil */
	uint32_t events;  /* events handed to fn */
	uint32_t unknown; /* events of a type not named above, skipped */
};

/* called for every event of a valid batch, in order; a negative return
 * stops the walk and is returned by kvev_decode */
typedef int (*kvev_fn)(void *arg, const struct kvev_event *ev);

/*
 * Decode one payload.  The batch is checked whole before its first event
 * reaches fn, so a bad one applies nothing.  Returns 0, or -EMSGSIZE
 * (past a limit above), -EBADMSG (not msgpack, bytes after the value, or
 * not the format above), -ENOMEM, or what fn returned.  b may be NULL.
 */
int kvev_decode(const void *buf, size_t len, kvev_fn fn, void *arg,
		struct kvev_batch *b);

/* the key of a hash of n bytes (1..KVEV_MAX_HASH_BYTES): big-endian,
 * the last 8 (BLOCK HASH above) */
uint64_t kvev_key_bytes(const uint8_t *p, size_t n);

/* frame 1 (or a replay's seq frame): 0, or -EBADMSG when not 8 bytes */
int kvev_seq(const void *frame, size_t len, uint64_t *seq);
#define KVEV_SEQ_END UINT64_MAX /* a replay's end marker */

/*
 * What a subscriber does with a live batch of sequence seq when the last
 * one it applied was last (have: it applied one since it subscribed, or
 * since its last reset):
 *
 *   KVEV_NEXT     seq == last + 1, or the first one: apply it
 *   KVEV_GAP      seq > last + 1: batches were lost; replay from last + 1
 *                 (without a replay socket, or when it fails: forget the
 *                 engine's blocks, then apply it)
 *   KVEV_RESTART  seq <= last: the publisher restarted (its seq began
 *                 again at 0); forget the engine's blocks, then treat it
 *                 as the first one
 */
enum kvev_seq_verdict { KVEV_NEXT, KVEV_GAP, KVEV_RESTART };

static inline enum kvev_seq_verdict kvev_seq_check(bool have, uint64_t last,
						   uint64_t seq)
{
	if (!have || seq == last + 1)
		return KVEV_NEXT;
	return seq > last ? KVEV_GAP : KVEV_RESTART;
}

#endif /* KVFS_SCHED_KVEV_H */
