#include "config.h"

#include "probe.h"

const char *kvfs_features_built(void)
{
	return KVFS_FEATURES; /* composed by configure */
}
