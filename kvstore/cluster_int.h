/*
 * cluster_int.h - private to kvstore/cluster*.c: the record format.
 * The etcd client the cluster uses is kvstore/etcd.h.
 */
#ifndef KVFS_CLUSTER_INT_H
#define KVFS_CLUSTER_INT_H

#include "kvstore/cluster.h"
#include "kvstore/etcd.h"

_Static_assert(KV_CLUSTER_EPS_MAX == ETCD_URLS_MAX, "one url size");

/* the value format of signed records: kv_cluster_rec_seal in cluster.h */
#define REC_MAC_TAG " mac="
#define REC_MAC_HEX 64
#define REC_MAC_EXTRA (sizeof(REC_MAC_TAG) - 1 + REC_MAC_HEX)

#endif /* KVFS_CLUSTER_INT_H */
