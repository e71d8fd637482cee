/*
 * probe.h - optional hardware: what was built in, what is present.
 *
 * Each probe has two bodies, chosen by configure: the real one
 * (probe_rdma.c, probe_cuda.c) and a stub (probe_*_none.c), so no
 * .c file carries an #ifdef.
 *
 * Probes return the number of devices found (> 0), 0 when the support is
 * built in but no device is present, or -ENOTSUP when kvfs was built
 * without it.  why (len bytes) always receives one human-readable line.
 */
#ifndef KVFS_PROBE_H
#define KVFS_PROBE_H

#include <stddef.h>

int kvfs_rdma_probe(char *why, size_t len);
int kvfs_cuda_probe(char *why, size_t len);

/* space-separated optional parts compiled in, "" when none */
const char *kvfs_features_built(void);

#endif /* KVFS_PROBE_H */
