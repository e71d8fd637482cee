/*
 * render.h - the store's state as text: JSON for MOUNT/.kvfs/stats and the
 * control socket's "status", Prometheus text for MOUNT/.kvfs/metrics.
 */
#ifndef KVFS_RENDER_H
#define KVFS_RENDER_H

#include <stddef.h>

#include "src/common/json.h"
#include "kvstore/store.h"

/* malloc'd NUL-terminated text in *out (caller frees), its length in
 * *len; 0 or a negative errno */
int render_stats_json(struct kv_store *st, char **out, size_t *len);
/* the same with extra (NULL: none), members of the top object beginning
 * with ',', added at its end: .kvfs/stats's "replication" */
int render_stats_json_extra(struct kv_store *st, const char *extra, char **out,
			    size_t *len);
int render_metrics(struct kv_store *st, char **out, size_t *len);

/*
 * Append the namespaces as a JSON array of objects (src/ctlproto.h,
 * NSOBJ) to b: the "namespaces" of the stats, also served by the control
 * socket's "ns list".  0 or a negative errno (b's own -ENOMEM is left in
 * b->err).
 */
int render_ns_list_json(struct kv_store *st, struct kvfs_buf *b);

#endif /* KVFS_RENDER_H */
