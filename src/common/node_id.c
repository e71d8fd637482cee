/*
 * node_id.c - node names (node_id.h).
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "src/common/node_id.h"

static bool id_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
}

int kv_node_id_valid(const char *id)
{
	size_t n;

	if (!id)
		return -EINVAL;
	n = strnlen(id, KV_NODE_ID_MAX + 1);
	if (n == 0 || n > KV_NODE_ID_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!id_char(id[i]))
			return -EINVAL;
	return 0;
}
