/* clock.h - monotonic and wall time in nanoseconds */
#ifndef KVFS_CLOCK_H
#define KVFS_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t kvfs_now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* for durations and lease expiry: never jumps */
static inline uint64_t kvfs_mono_ns(void)
{
	return kvfs_now_ns(CLOCK_MONOTONIC);
}

/* for seal times shown to people and kept across restarts */
static inline uint64_t kvfs_wall_ns(void)
{
	return kvfs_now_ns(CLOCK_REALTIME);
}

#endif /* KVFS_CLOCK_H */
