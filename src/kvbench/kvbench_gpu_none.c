/*
 * kvbench_gpu_none.c - "kvbench gpu" in a build without CUDA.
 *
 * kvbench_gpu.c measures copies between the pool and a GPU through the
 * CUDA runtime; configure found none (or was told --with-cuda=no), so
 * this one says so and exits KVB_EXIT_SKIP, as on a machine without a
 * GPU.
 */
#include "config.h"

#include <string.h>

#include "src/kvbench/kvbench.h"

void kvb_gpu_usage(FILE *f)
{
	fputs("usage: kvbench gpu MOUNT [--blocks N] [--rounds N] "
	      "[--device N]\n"
	      "                   [--namespace NS] [--json]\n"
	      "\n"
	      "Copies between the pool of MOUNT and GPU memory through "
	      "libkvfs, against\ncudaMemcpy.  This kvbench was built without "
	      "CUDA: it exits 77.\n",
	      f);
}

int kvb_gpu_main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			kvb_gpu_usage(stdout);
			return KVB_EXIT_OK;
		}
	fprintf(stderr, "kvbench gpu: built without CUDA "
			"(configure --with-cuda)\n");
	return KVB_EXIT_SKIP;
}
