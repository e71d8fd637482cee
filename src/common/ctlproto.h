/*
 * ctlproto.h - the control protocol between kvfsd and its clients (kvctl,
 * kvbench, libkvfs).  The server is fuse/ctl.c, the client ctl_client.c.
 *
 * Transport: a unix stream socket (kvfsd(8) says where; the mount root's
 * "user.kvfs.socket" xattr names it).  A client sends one request line and
 * reads one response line, as often as it likes on one connection.  The
 * server answers requests in the order they came; it reads the next request
 * of a connection only after the previous response went out, so a client
 * that pipelines is served, but its responses are never reordered.
 *
 * REQUEST: one line, at most CTLP_LINE_MAX bytes including the final "\n"
 * (one "\r" before it is ignored).  Words are separated by exactly one
 * space; an empty word (two spaces, a leading or trailing space) is a
 * malformed request.  Control bytes (0x00-0x1f, 0x7f) are refused
 * anywhere in the line, so an embedded NUL cannot cut a name short.
 *
 *   word        form
 *   NAME, NS    a namespace name, percent-encoded: every byte outside
 *               [A-Za-z0-9._~-] is sent as %XX (two hex digits, either
 *               case).  The server also takes other printable bytes as
 *               they are, but '%' always starts an escape.  The decoded
 *               name must pass kvfs_ns_valid() (hash.h): %00, %2F and a
 *               leading '.' are refused.
 *   HASH        a block name: 64 lowercase hex digits
 *   B, MAX      decimal digits only (no sign), bounds below
 *   MS          a lease length: decimal 1..CTLP_LEASE_MS_MAX
 *   CURSOR      decimal 0..2^64-1 (0 starts a listing)
 *   LEASE       decimal 1..2^64-1, as returned by match or pin
 *
 * Commands (responses below; every one is answered with "ok" first):
 *
 *   status                    {"daemon":INFO,"stats":STATS,"ctl":CTL}
 *   ns list                   {"namespaces":[NSOBJ,...]}
 *   ns create NAME B          {"name":..,"name_pct":..,"id":N,
 *                              "block_tokens":B}   B in 1..2^20
 *   ns rm NAME                {}               -ENOTEMPTY while it has blocks
 *   ls NS [CURSOR [MAX]]      {"blocks":[BLK,...],"next":"C","end":bool}
 *                             MAX 1..CTLP_LS_MAX, default CTLP_LS_DEFAULT;
 *                             pass "next" back as CURSOR until "end"
 *   stat NS HASH              BLK with "checksum" and "parent" added
 *   lookup NS HASH...         {"count":K,"n":N}  longest cached prefix,
 *                             nothing pinned; zero hashes is count 0
 *   match NS MS HASH...       {"count":K,"n":N,"lease":"L","lease_ms":MS}
 *                             pins the K blocks under lease L ("0" when
 *                             K is 0) for MS ms; L is released when this
 *                             connection closes (see LEASES)
 *   pin NS MS HASH...         the same, but L outlives the connection
 *   unpin LEASE               {}               -ENOENT unknown or expired,
 *                             -EPERM another uid's (see LEASES)
 *   renew LEASE MS            {"lease":"L","lease_ms":MS}  MS from now;
 *                             -EPERM another uid's
 *   lease list [CURSOR [MAX]] {"leases":[LEASE,...],"next":"C","end":bool}
 *                             every live lease, in id order; MAX 1..1000,
 *                             default 1000; pass "next" back as CURSOR
 *                             until "end"
 *   lease revoke LEASE        {}  as unpin
 *   evict NS HASH             {}               -EBUSY while referenced
 *
 * Zero-copy access for libkvfs, which maps the pool file ("pool" in
 * INFO) itself; REF is a decimal id 1..2^64-1 that belongs to the
 * connection that took it (see MAPS AND WRITERS):
 *
 *   map NS HASH               {"ref":"R","slot":N,"offset":N,"size":N,
 *                              "checksum":"%08x"}  the block's bytes are
 *                             at offset..offset+size-1 of the pool file,
 *                             held (not evicted, not reused) until unmap
 *   mapv NS HASH...           {"maps":[MAP,...],"count":K,"n":N}  the
 *                             longest cached prefix (as lookup), each
 *                             block mapped as by map; MAP is map's
 *                             object.  Past the maps one connection may
 *                             hold (below): -EAGAIN and
 *                             nothing mapped
 *   unmap REF...              {}  all or none: -ENOENT when a REF is not
 *                             this conn's map (or is named twice), and
 *                             then nothing is unmapped; at most
 *                             CTLP_HASHES_MAX refs
 *   alloc NS HASH [PARENT]    {"ref":"W","slot":N,"offset":N,"cap":N}
 *                             a fresh slot of cap bytes at offset, for the
 *                             client to write through its own read-write
 *                             mapping; invisible until commit.  -EEXIST,
 *                             -ENOSPC as a create of the mount
 *   commit REF SIZE [CRC]     {}  seal the first SIZE (0..cap) bytes;
 *                             CRC (8 hex digits), their CRC-32C when the
 *                             writer knows it, spares kvfsd reading them
 *   abort REF                 {}  drop it, nothing becomes visible
 *
 * Cluster (kvfsd --cluster; -ENOTSUP on a node without one):
 *
 *   nodes                     {"self":"ID","replicas":R,"transport":..,
 *                              "epoch":N,"queued":N,"nodes":[{"id":..,
 *                              "addr":..,"transports":..,"slot_size":N,
 *                              "slots":N},...]}  the live members
 *   prefetch NODE NS HASH...  {"count":K,"n":N,"errors":[E,...]}  fetch
 *                             each block into this node, then, NODE not
 *                             being "-", push it to node NODE; E is block
 *                             i's errno (0: it is there), K how many are.
 *                             -ENXIO NODE is no live node.  It runs off
 *                             the control thread: other clients are
 *                             served meanwhile, this one when it ends; at
 *                             most 4 run at once (-EAGAIN)
 *
 *   INFO   the daemon's own JSON object (mountpoint, pid, version, ...)
 *   STATS  render_stats_json() (fuse/render.h): pool, counters, and
 *          "namespaces":[NSOBJ,...]
 *   CTL    {"clients":N,"requests":N,"conn_leases":N,"conn_maps":N,
 *           "conn_writers":N}  held by all connections together
 *   LEASE  {"lease":"L","kind":"match"|"pin","blocks":N,"expires_ms":N,
 *           "uid":N|null,"pid":N|null}  uid and pid: the peer credentials
 *          of the connection that took it
 *   NSOBJ  {"name":..,"name_pct":..,"id":N,"block_tokens":B,"blocks":N,
 *           "bytes":N,"writing":N,"hits":N,"misses":N,"hit_rate":X,
 *           "evictions":N,"seals":N,"removed":N}
 *   BLK    {"hash":"HEX","slot":N,"size":N,"refs":N,"seal_ns":N}
 *          stat adds "checksum":"%08x" (CRC-32C) and "parent":"HEX"|null
 *
 * Hashes past the first miss are not probed: count K means hashes 0..K-1
 * are cached and hash K (if any) is not.  At most CTLP_HASHES_MAX hashes
 * go in one request, which is what fits in CTLP_LINE_MAX.
 *
 * RESPONSE: one line of JSON (RFC 8259, UTF-8) ending in "\n":
 *
 *   {"ok":true, ...fields above...}
 *   {"ok":false,"errno":N,"error":"ENOENT","message":"..."}
 *
 * errno is the Linux number (the socket is local, so both ends share it),
 * error its name, message one human-readable line.  Malformed requests are
 * -EINVAL, an unknown command -ENOSYS, an overlong line -E2BIG (and the
 * connection is then closed: there is no telling where the next request
 * starts), too many clients -EMFILE (then closed).
 *
 * Names in responses: "name" is the namespace as a JSON string, with bytes
 * that are not valid UTF-8 shown as U+FFFD; "name_pct" is the exact bytes,
 * percent-encoded as in requests.  Lease ids and cursors are decimal
 * strings: they use all 64 bits, and many JSON readers keep numbers in
 * doubles.  Counters are plain numbers.
 *
 * LEASES: a match lease belongs to the connection that took it and is
 * released when that connection closes, so an engine that dies pins
 * nothing (the lease's own expiry is only the backstop).  A pin lease is
 * not tied to any connection: it lives until unpin or its expiry, which is
 * what a command-line tool needs, since its connection ends with it.  A
 * lease belongs to the uid of the connection that took it (SO_PEERCRED):
 * only that uid, or root, may unpin, renew or revoke it (-EPERM).  MS
 * past the daemon's lease_max_ms (kvfsd(8), default 1 h) is granted as
 * lease_max_ms, and "lease_ms" in the answer is what was granted.  One
 * connection holds at most ctl_leases live match leases (default 4096),
 * one uid at most ctl_uid_leases leases of both kinds over all its
 * connections (default 32768), and the store 65536 in all: -EAGAIN past
 * any of them, with a message naming which.
 *
 * MAPS AND WRITERS: maps and writers are always the connection's own:
 * only it may unmap, commit or abort them (another connection's REF is
 * -ENOENT), and its close drops every map and aborts every writer left,
 * so a dead engine neither pins slots nor leaves half-written blocks.
 * One connection holds at most ctl_maps maps (default 65536) and 1024
 * writers (-EAGAIN).
 *
 * CONNECTIONS: the daemon serves 256 at once, at most ctl_uid_clients
 * (default 128) of one uid.  A connection that has made no request for
 * ctl_idle seconds (default 60) and holds no lease, map or writer is
 * closed; a client that must sit idle longer keeps something, or
 * reconnects (ctl_client.c does, for a request answered by a close).  Past
 * either cap, the longest-idle connection holding nothing (idle 1 s at least)
 * is closed for the newcomer; only when there is none is the newcomer told
 * -EMFILE and closed.
 */
#ifndef KVFS_CTLPROTO_H
#define KVFS_CTLPROTO_H

#include <stddef.h>
#include <stdint.h>

#include "src/common/json.h"

#define CTLP_LINE_MAX (1u << 20)    /* request bytes, "\n" included */
#define CTLP_HASHES_MAX 16000u	    /* hashes in one lookup/match/pin */
#define CTLP_LS_DEFAULT 1000u	    /* blocks per ls page by default */
#define CTLP_LS_MAX 10000u	    /* most blocks per ls page */
#define CTLP_LEASE_MS_MAX 86400000u /* 24 h: longest lease or renewal */
#define CTLP_RESP_MAX (64u << 20)   /* longest response a client reads */
#define CTLP_NS_PCT_MAX (3 * 255)   /* longest encoded namespace */

/* append s[0..len-1] percent-encoded (bytes outside [A-Za-z0-9._~-]) */
void kvfs_ctlp_pct_encode(struct kvfs_buf *b, const char *s, size_t len);

/*
 * Decode word w[0..wlen-1] into out (outsz bytes, NUL added), decoded
 * length in *outlen.  -EINVAL for a bad escape, -ENAMETOOLONG when the
 * result does not fit.  A decoded NUL is kept (and *outlen counts it):
 * callers that want C strings must check *outlen == strlen(out).
 */
int kvfs_ctlp_pct_decode(const char *w, size_t wlen, char *out, size_t outsz,
			 size_t *outlen);

/* "ENOENT" for ENOENT (positive), "EUNKNOWN" for one not in the table */
const char *kvfs_ctlp_errno_name(int err);

#endif /* KVFS_CTLPROTO_H */
