/*
 * node_id.h - the name of a kvfs node, shared by the cluster (etcd
 * records, placement), kvfsd's options and kvctl, so that every program
 * accepts exactly the same ids.
 */
#ifndef KVFS_COMMON_NODE_ID_H
#define KVFS_COMMON_NODE_ID_H

#define KV_NODE_ID_MAX 63

/* node ids: 1..KV_NODE_ID_MAX of [A-Za-z0-9._-]; 0 or -EINVAL (NULL too) */
int kv_node_id_valid(const char *id);

#endif /* KVFS_COMMON_NODE_ID_H */
