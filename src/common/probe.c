#include "config.h"

#include "src/common/probe.h"

const char *kvfs_features_built(void)
{
	return KVFS_FEATURES; /* composed by configure */
}
