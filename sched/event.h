/*
 * event.h - block events, kvfsd -> conductor: wire format v1, encoder,
 * streaming decoder, and applying events to a scheduler.
 *
 * Each kvfsd keeps one stream (a TCP connection) to the conductor
 * and sends a frame whenever blocks are sealed or evicted (batched: one
 * frame may carry up to SCHED_EV_MAX_RECORDS records of one namespace).
 * kvconductor(8) documents the same format; kvfs(7) points there.
 *
 * FRAME (all integers little-endian):
 *
 *   offset  size         field
 *   0       4            magic "KVEV" (4b 56 45 56)
 *   4       1            version, 1
 *   5       1            flags, 0 (anything else: the frame is refused)
 *   6       2            node id of the sender
 *   8       8            seq: frames sent on this stream before this one
 *   16      4            count of records, 0..65536
 *   20      1            ns_len, 1..255
 *   21      3            reserved, 0
 *   24      ns_len       namespace name (kvfs(7) rules, no NUL)
 *   24+ns   33 * count   records: op (1 byte) and block hash (32 bytes)
 *   end     4            CRC-32C of every byte before it
 *
 * RECORD ops:
 *
 *   1 INSERT  the node sealed (or fetched) the block and holds it
 *   2 EVICT   the node dropped it
 *   3 RESET   the node holds nothing any more, in any namespace (its
 *             hash must be all zero); sent first on every new stream,
 *             followed by an INSERT of every block it holds (a resync)
 *
 * STREAM rules: seq starts at 0 and grows by one per frame; the node id
 * never changes within a stream; the first frame's first record is a
 * RESET (the conductor closes a stream that opens otherwise).  A frame of
 * no records is valid and applies nothing: kvfsd sends one (namespace
 * "-") as a keepalive after 30 s without a frame, because the conductor
 * closes a stream that completes no frame for its idle timeout
 * (kvconductor(8) --events-idle-timeout, default 120 s).  A frame that breaks a
 * rule or fails its checks ends the stream (the decoder refuses everything
 * after it). However a stream ends (such a frame, a close, a lost connection),
 * the conductor then forgets the node's blocks, unless a newer stream of the
 * node is already open, and waits for a new stream, whose RESET and
 * INSERTs rebuild them.  Events are hints: a lost or
 * stale one makes a prefill slower, never wrong (locality.h).
 *
 * AUTHENTICATION: a conductor started with --secret-file accepts only
 * authenticated streams.  The stream then opens with the transfer
 * engine's handshake (kvstore/auth.h: HELLO, CHALLENGE, AUTH, AUTH_OK in
 * wire.h's frames), the kvfsd as client with its --node-id and
 * SCHED_EV_AUTH_ID as the node it means to reach; after it every frame
 * travels as a sealed record:
 *
 *   0       4            len: the frame's length, 1..SCHED_EV_SEALED_MAX
 *   4       len          the frame
 *   4+len   16           tag over the 4 + len bytes before it, under the
 *                        client's sending key (wire.h, "Tags")
 *
 * and the node id of every frame must be the authenticated one (as a
 * number): one node id per authenticated peer.
 *
 * FETCH (conductor -> kvfsd, on the same connection, the other way): the
 * prefill-to-decode handoff (kvconductor(8) HANDOFF).  The conductor asks
 * the stream's node to pull blocks another node (src) sealed, so that a
 * decode instance there finds them local.  A kvfsd that takes FETCH
 * frames says so by sending its opening RESET in the namespace
 * SCHED_EV_NS_FETCH ("-fetch") instead of "-": a RESET applies to every
 * namespace, so a conductor that predates FETCH ignores the name, and a
 * conductor sends FETCH only to a stream that opened so (older kvfsd
 * never read what comes back).
 *
 *   offset  size         field
 *   0       4            magic "KVFE" (4b 56 46 45)
 *   4       1            version, 1
 *   5       1            flags, 0 (anything else: the frame is refused)
 *   6       2            node id of the recipient (the stream's node)
 *   8       8            seq: FETCH frames sent on this stream before
 *   16      2            src: node id of the node that holds the blocks
 *   18      2            count of hashes, 1..SCHED_FE_MAX_RECORDS (256)
 *   20      1            ns_len, 1..255
 *   21      3            reserved, 0
 *   24      ns_len       namespace name (kvfs(7) rules, no NUL)
 *   24+ns   32 * count   block hashes
 *   end     4            CRC-32C of every byte before it
 *
 * seq starts at 0 on every connection and grows by one; a kvfsd closes
 * the connection on a frame that fails its checks (and resyncs, as after
 * any break).  On an authenticated stream each FETCH frame travels as a
 * sealed record as above, tagged under the conductor's sending key (the
 * kvfsd's receiving key of the same handshake).  FETCH frames are hints
 * too: a kvfsd whose queue is full drops them and counts the drop.
 */
#ifndef KVFS_SCHED_EVENT_H
#define KVFS_SCHED_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "src/common/hash.h"

#define SCHED_EV_MAGIC "KVEV"
#define SCHED_EV_VERSION 1
#define SCHED_EV_HDR 24
#define SCHED_EV_REC 33
#define SCHED_EV_CRC 4
#define SCHED_EV_MAX_RECORDS 65536u
/* the node id a kvfsd names in its handshake with the conductor: not a
 * valid node id, so no transfer engine can take it (Authentication) */
#define SCHED_EV_AUTH_ID ":conductor"
/* the largest sealed record's frame: SCHED_EV_MAX_RECORDS of them */
#define SCHED_EV_SEALED_MAX                                                    \
	(SCHED_EV_HDR + 255 + SCHED_EV_REC * SCHED_EV_MAX_RECORDS +            \
	 SCHED_EV_CRC)

/* FETCH frames (above) */
#define SCHED_FE_MAGIC "KVFE"
#define SCHED_FE_VERSION 1
#define SCHED_FE_HDR 24
#define SCHED_FE_MAX_RECORDS 256u
/* the namespace of the RESET frame of a stream that takes FETCH */
#define SCHED_EV_NS_FETCH "-fetch"
/* the largest FETCH frame */
#define SCHED_FE_FRAME_MAX                                                     \
	(SCHED_FE_HDR + 255 + KVFS_HASH_LEN * SCHED_FE_MAX_RECORDS +           \
	 SCHED_EV_CRC)

enum sched_ev_op {
	SCHED_EV_INSERT = 1,
	SCHED_EV_EVICT = 2,
	SCHED_EV_RESET = 3,
};

struct sched_ev_rec {
	uint8_t op;
	uint8_t hash[KVFS_HASH_LEN];
};

/* one decoded record, valid during the callback only */
struct sched_ev {
	enum sched_ev_op op;
	uint16_t node;
	uint64_t seq;	/* of its frame */
	const char *ns; /* ns_len bytes, not NUL-terminated */
	uint8_t ns_len;
	const uint8_t *hash; /* KVFS_HASH_LEN bytes */
};

/* bytes of a frame of count records in a namespace of ns_len bytes */
static inline size_t sched_ev_frame_size(size_t ns_len, uint32_t count)
{
	return SCHED_EV_HDR + ns_len + (size_t)count * SCHED_EV_REC +
	       SCHED_EV_CRC;
}

/*
 * Write one frame into buf (cap bytes).  Returns its size, -ENOSPC when
 * cap is short, -EINVAL for an invalid namespace, too many records, an
 * unknown op or a RESET with a non-zero hash.
 */
long sched_ev_encode(void *buf, size_t cap, uint16_t node, uint64_t seq,
		     const char *ns, const struct sched_ev_rec *recs,
		     uint32_t count);

/* called for every record of every valid frame, in order; a negative
 * return stops the feed and is returned by sched_ev_feed */
typedef int (*sched_ev_fn)(void *arg, const struct sched_ev *ev);

struct sched_ev_decoder {
	/* set by the caller after init: the stream's first frame must open
	 * with a RESET record (the conductor's rule, below); tests and
	 * tools that read a stream's middle leave it false */
	bool reset_first;
	uint8_t *buf; /* bytes of a frame not complete yet */
	size_t len, cap;
	bool started; /* a frame was accepted: node and seq set */
	uint16_t node;
	uint64_t next_seq;
	int err; /* sticky: the stream is over */
	uint64_t frames, records;
};

void sched_ev_decoder_init(struct sched_ev_decoder *d);
void sched_ev_decoder_release(struct sched_ev_decoder *d);

/*
 * Feed the next len bytes of a stream, cut anywhere.  Complete frames are
 * checked whole before any of their records reaches fn, so a bad frame
 * applies nothing.  Returns 0, or (sticky) -EBADMSG (bad magic, CRC,
 * flags, reserved bytes, op, count, namespace), -EPROTONOSUPPORT (another
 * version), -EPROTO (seq out of order, node changed), -ENOMSG (reset_first
 * and the first frame does not open with a RESET), -ENOMEM, or what fn
 * returned.
 */
int sched_ev_feed(struct sched_ev_decoder *d, const void *data, size_t len,
		  sched_ev_fn fn, void *arg);

/* ---- FETCH frames (event_fetch.c) -------------------------------------- */

/* one decoded FETCH frame; ns and hashes point into the frame's bytes */
struct sched_fe {
	uint16_t node, src;
	uint64_t seq;
	const char *ns; /* ns_len bytes, not NUL-terminated */
	uint8_t ns_len;
	uint32_t count;
	const uint8_t *hashes; /* count * KVFS_HASH_LEN bytes */
};

static inline size_t sched_fe_frame_size(size_t ns_len, uint32_t count)
{
	return SCHED_FE_HDR + ns_len + (size_t)count * KVFS_HASH_LEN +
	       SCHED_EV_CRC;
}

/*
 * Write one FETCH frame of count hashes (count * KVFS_HASH_LEN bytes)
 * into buf (cap bytes).  Returns its size, -ENOSPC when cap is short,
 * -EINVAL for an invalid namespace or a count out of
 * 1..SCHED_FE_MAX_RECORDS.
 */
long sched_fe_encode(void *buf, size_t cap, uint16_t node, uint64_t seq,
		     uint16_t src, const char *ns, const uint8_t *hashes,
		     uint32_t count);
/*
 * The size of the frame whose first SCHED_FE_HDR bytes are at hdr, from
 * its header's own checks: -EBADMSG (magic, flags, reserved, count,
 * ns_len), -EPROTONOSUPPORT (another version).
 */
long sched_fe_frame_len(const void *hdr);
/*
 * Check the whole frame of len bytes at buf (its header, CRC and
 * namespace) and describe it in *out.  0, -EBADMSG (a bad frame, or len
 * not its size), -EPROTONOSUPPORT.
 */
int sched_fe_decode(const void *buf, size_t len, struct sched_fe *out);

struct sched;

/* an sched_ev_fn applying events to the struct sched *arg: INSERT and
 * EVICT by sched_key_from_hash, RESET with sched_node_reset; -EINVAL for
 * a node the scheduler does not have.  Defined in event_apply.c, part of
 * the scheduler (libkvsched), not of the encoder kvfsd links. */
int sched_ev_apply(void *sched, const struct sched_ev *ev);

#endif /* KVFS_SCHED_EVENT_H */
