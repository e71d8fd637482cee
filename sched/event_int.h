/*
 * event_int.h - private to the event wire format (event.c, event_fetch.c):
 * what a block-event frame and a FETCH frame share (event.h's two
 * tables).  Bytes 0-15 and 20-23 of their headers have the same fields
 * at the same offsets:
 *
 *   offset  size         field
 *   0       4            magic
 *   4       1            version
 *   5       1            flags, 0
 *   6       2            node id
 *   8       8            seq
 *   16      4            the frame's own (records, or src and hashes)
 *   20      1            ns_len, 1..255
 *   21      3            reserved, 0
 *   24      ns_len       namespace name
 *   ...
 *   end     4            CRC-32C of every byte before it
 *
 * Each codec writes and checks bytes 16-19 and what follows the name
 * itself.
 */
#ifndef KVFS_SCHED_EVENT_INT_H
#define KVFS_SCHED_EVENT_INT_H

#include <stddef.h>
#include <stdint.h>

/* the shared header fields and the name (ns_len bytes, no NUL) at p */
void sched_ev_hdr_put(uint8_t *p, const char *magic, uint8_t version,
		      uint16_t node, uint64_t seq, const char *ns,
		      size_t ns_len);
/* the shared header fields' own checks: 0, -EBADMSG (magic, flags,
 * reserved, ns_len 0), -EPROTONOSUPPORT (another version) */
int sched_ev_hdr_check(const uint8_t *p, const char *magic, uint8_t version);
/* the CRC of a whole frame of size bytes, into its last 4 */
void sched_ev_crc_put(uint8_t *p, size_t size);
/* a whole frame's CRC and namespace (copied into ns, KVFS_NS_MAX + 1
 * bytes, NUL-terminated): 0 or -EBADMSG */
int sched_ev_body_check(const uint8_t *p, size_t size, char *ns);

#endif /* KVFS_SCHED_EVENT_INT_H */
