/*
 * fuse_stress - concurrent writers and readers on one kvfs namespace.
 *
 *   fuse_stress writer DIR ID NWRITERS NBLOCKS MAXSIZE
 *       creates the blocks of set 0 that are ID's (k % NWRITERS == ID)
 *       and every block with k % 5 == 0, which all writers race for:
 *       exactly one create may win, the others must get EEXIST.  Writes
 *       go in uneven pieces.  Prints "written=N exists=M".
 *   fuse_stress reader DIR NBLOCKS MAXSIZE SECONDS
 *       until every block was read whole and checked, or SECONDS pass:
 *       picks blocks, and reads them by read(2), pread(2) or mmap(2);
 *       a block not there yet (ENOENT) is fine, a wrong size or byte is
 *       not.  Prints "verified=N reads=M".
 *
 * Names and bytes follow fuse_pattern.h, so a reader checks what any
 * writer wrote.  Exit 0 on success, 1 on any wrong byte, size or errno.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/helpers/fuse_pattern.h"

#define SET 0x6b7666732d7374ull

static uint64_t block_size(uint64_t k, uint64_t max)
{
	return 1 + pat_mix(k ^ 0x5a5a) % max;
}

static void block_path(const char *dir, uint64_t k, char *out, size_t len)
{
	char name[65];

	pat_name(SET, k, name);
	snprintf(out, len, "%s/%s", dir, name);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* 0 written, 1 EEXIST, -1 failure (printed) */
static int write_block(const char *path, uint64_t size, uint64_t rnd)
{
	uint64_t seed = pat_seed(path), off = 0;
	uint8_t *buf = malloc(size);
	int fd, rc = 0;

	if (!buf)
		return -1;
	pat_fill(seed, 0, buf, size);
	fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0444);
	if (fd < 0) {
		free(buf);
		if (errno == EEXIST)
			return 1;
		fprintf(stderr, "writer: create %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	while (off < size && rc == 0) {
		uint64_t n = 1 + pat_mix(rnd++) % (256u << 10);
		ssize_t w;

		if (n > size - off)
			n = size - off;
		w = write(fd, buf + off, n);
		if (w <= 0) {
			fprintf(stderr, "writer: write %s: %s\n", path,
				strerror(errno));
			rc = -1;
		} else {
			off += (uint64_t)w;
		}
	}
	if (close(fd) < 0) {
		fprintf(stderr, "writer: close %s: %s\n", path,
			strerror(errno));
		rc = -1;
	}
	free(buf);
	return rc;
}

static int writer(const char *dir, uint64_t id, uint64_t nw, uint64_t n,
		  uint64_t max)
{
	char path[4096];
	int written = 0, exists = 0;

	for (uint64_t k = 0; k < n; k++) {
		int rc;

		if (k % nw != id && k % 5 != 0)
			continue;
		block_path(dir, k, path, sizeof(path));
		rc = write_block(path, block_size(k, max), pat_mix(id + k));
		if (rc < 0)
			return 1;
		if (rc == 0)
			written++;
		else
			exists++;
	}
	printf("written=%d exists=%d\n", written, exists);
	return 0;
}

/* 1 checked, 0 not there yet, -1 wrong (printed) */
static int read_block(const char *path, uint64_t size, int how)
{
	uint64_t seed = pat_seed(path);
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 1;
	long long bad = -1;
	struct stat st;
	uint8_t *buf;

	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		fprintf(stderr, "reader: open %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != size) {
		fprintf(stderr, "reader: %s: size %lld, want %llu\n", path,
			(long long)st.st_size, (unsigned long long)size);
		close(fd);
		return -1;
	}
	if (how == 2) {
		buf = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
		if (buf == MAP_FAILED) {
			perror("reader: mmap");
			rc = -1;
		} else {
			bad = pat_check(seed, 0, buf, size);
			munmap(buf, size);
		}
	} else {
		ssize_t got = 0;

		buf = malloc(size);
		if (!buf) {
			close(fd);
			return -1;
		}
		if (how == 1) {
			/* back to front, in two preads */
			uint64_t half = size / 2;

			got = pread(fd, buf + half, size - half, (off_t)half);
			if (got == (ssize_t)(size - half))
				got += pread(fd, buf, half, 0);
		} else {
			ssize_t r;

			while ((uint64_t)got < size &&
			       (r = read(fd, buf + got, size - got)) > 0)
				got += r;
		}
		if (got != (ssize_t)size) {
			fprintf(stderr, "reader: %s: short read\n", path);
			rc = -1;
		} else {
			bad = pat_check(seed, 0, buf, size);
		}
		free(buf);
	}
	close(fd);
	if (bad >= 0) {
		fprintf(stderr, "reader: %s: wrong byte at %lld\n", path, bad);
		rc = -1;
	}
	return rc;
}

static int reader(const char *dir, uint64_t n, uint64_t max, double secs)
{
	struct timespec nap = { 0, 10 * 1000 * 1000 };
	char *seen = calloc(n, 1), path[4096];
	uint64_t left = n, reads = 0, r = pat_mix((uint64_t)getpid());
	double end = now() + secs;

	if (!seen)
		return 1;
	while (left && now() < end) {
		/* one round over all blocks from a random start: each unseen
		 * one, and one in eight of the others again */
		uint64_t start = pat_mix(r++) % n;

		for (uint64_t i = 0; i < n; i++) {
			uint64_t k = (start + i) % n;
			int rc;

			if (seen[k] && pat_mix(r++) % 8)
				continue;
			block_path(dir, k, path, sizeof(path));
			rc = read_block(path, block_size(k, max),
					(int)(pat_mix(r++) % 3));
			if (rc < 0)
				return 1;
			reads++;
			if (rc == 1 && !seen[k]) {
				seen[k] = 1;
				left--;
			}
		}
		/* the writers need the CPUs more than we do */
		if (left)
			nanosleep(&nap, NULL);
	}
	printf("verified=%llu reads=%llu\n", (unsigned long long)(n - left),
	       (unsigned long long)reads);
	free(seen);
	return left ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 7 && strcmp(argv[1], "writer") == 0)
		return writer(argv[2], strtoull(argv[3], NULL, 0),
			      strtoull(argv[4], NULL, 0),
			      strtoull(argv[5], NULL, 0),
			      strtoull(argv[6], NULL, 0));
	if (argc == 6 && strcmp(argv[1], "reader") == 0)
		return reader(argv[2], strtoull(argv[3], NULL, 0),
			      strtoull(argv[4], NULL, 0),
			      strtod(argv[5], NULL));
	fputs("usage: fuse_stress writer DIR ID NWRITERS NBLOCKS MAXSIZE\n"
	      "       fuse_stress reader DIR NBLOCKS MAXSIZE SECONDS\n",
	      stderr);
	return 2;
}
