/*
 * kvbench.h - what the kvbench subcommands share.
 *
 * kvbench measures kvfs beside a baseline in the same run and demonstrates
 * the store on a synthetic engine workload.  Each subcommand is one file
 * (kvbench_store.c, kvbench_demo.c, kvbench_engine.c, kvbench_io.c,
 * kvbench_engines.c, kvbench_xfer.c, kvbench_gpu.c) with one entry point
 * listed in the command table of kvbench.c.  store and demo run on the store
 * library; engine and io on a mounted kvfsd, through the file system and its
 * control socket; gpu on a mounted kvfsd, or on its control socket alone
 * (kvfsd --no-mount); engines on any directory, through the file system
 * alone.
 *
 * Exit codes, the same for every subcommand: 0 it ran, 1 it failed (one
 * line on stderr says why), 2 bad usage, or bad input given as an option
 * (engine: a trace line that is not a request, named by its number).  A
 * benchmark that misses its targets still exits 0: the numbers are the
 * result, not a test verdict.  77 (KVB_EXIT_SKIP, the test suites' SKIP):
 * the hardware it measures is not there or not built in (gpu without CUDA
 * or without a GPU).
 *
 * Temporary files: every file and directory made through kvb_tmpdir() and
 * kvb_pool_path() is registered and removed when the program ends, on
 * error paths too (kvb_cleanup_run() from main and from atexit).  The
 * first SIGINT/SIGTERM/SIGHUP only sets kvb_stop, so long loops end
 * through their normal cleanup; a second one unlinks the pool files (the
 * big ones, in shared memory) and exits at once.
 */
#ifndef KVFS_KVBENCH_H
#define KVFS_KVBENCH_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "src/common/cli.h"
#include "src/common/clock.h"
#include "src/common/hash.h"

#define KVB_EXIT_OK CLI_EXIT_OK
#define KVB_EXIT_FAIL CLI_EXIT_FAIL
#define KVB_EXIT_USAGE CLI_EXIT_USAGE
#define KVB_EXIT_SKIP 77

/* ---- subcommands --------------------------------------------------- */

/* argv[0] is the subcommand's name; returns a KVB_EXIT_* code */
int kvb_store_main(int argc, char **argv);
int kvb_demo_main(int argc, char **argv);
int kvb_engine_main(int argc, char **argv);
int kvb_io_main(int argc, char **argv);
int kvb_engines_main(int argc, char **argv);
int kvb_xfer_main(int argc, char **argv);
int kvb_gpu_main(int argc, char **argv);

/* usage text of each subcommand; kvbench(1) documents the same options */
void kvb_store_usage(FILE *f);
void kvb_demo_usage(FILE *f);
void kvb_engine_usage(FILE *f);
void kvb_io_usage(FILE *f);
void kvb_engines_usage(FILE *f);
void kvb_xfer_usage(FILE *f);
void kvb_gpu_usage(FILE *f);

/* ---- options ------------------------------------------------------- */

/*
 * Messages and numbers are src/common/cli.h's: cli_usage_error(cmd, ...)
 * for a usage error, cli_parse_u64 / cli_parse_size (K, M, G) for an
 * option's value, cli_bad_option for what getopt refused.
 */

/*
 * The option loop of a command: getopt_long() over optstr (which starts
 * with ':') and lo, -h printing usage(stdout), a refused option reported
 * by cli_bad_option(), every other one handed to opt(c, o), whose
 * nonzero return is KVB_EXIT_USAGE.  Returns 0 when the options are
 * done (optind at the first operand), -1 after --help, else
 * KVB_EXIT_USAGE.
 */
struct option;
int kvb_getopt(const char *cmd, int argc, char **argv, const char *optstr,
	       const struct option *lo, void (*usage)(FILE *f),
	       int (*opt)(int c, void *o), void *o);

/* the one operand MOUNT that a command takes after its options, and its
 * --namespace ns checked: 0 or KVB_EXIT_USAGE, with one line */
int kvb_mount_operand(const char *cmd, int argc, char **argv,
		      const char **mount, const char *ns);

/* ---- time ---------------------------------------------------------- */

static inline uint64_t kvb_now(void)
{
	return kvfs_mono_ns();
}

/* operations per second; 0 when nothing was timed */
static inline double kvb_rate(uint64_t ops, uint64_t ns)
{
	return ns ? (double)ops * 1e9 / (double)ns : 0.0;
}

/* ---- stopping and progress ----------------------------------------- */

/* set by the first SIGINT/SIGTERM/SIGHUP; loops return -EINTR on it */
extern volatile sig_atomic_t kvb_stop;

void kvb_signals_init(void);

/*
 * Progress lines are cli.h's (struct cli_progress): redrawn in place on a
 * terminal, whole lines at most every five seconds anywhere else, never
 * a '\r' or an escape sequence outside a terminal.
 */

/* cheap enough for timed loops: looks at the clock every 4096 calls */
static inline void kvb_progress(struct cli_progress *p, uint64_t done)
{
	if ((done & 4095) == 0)
		cli_progress_draw(p, done);
}

/* ---- temporary state ----------------------------------------------- */

/* mkdtemp "kvbench-XXXXXX" under $TMPDIR or /tmp, registered for removal */
int kvb_tmpdir(char *out, size_t cap);

/*
 * Create an empty, unique pool file /dev/shm/kvbench-<pid>-<rand>.pool
 * (in fallback_dir when /dev/shm is missing), registered for removal.
 * Open the store on it with reformat set: an empty file is not a pool.
 */
int kvb_pool_path(const char *fallback_dir, char *out, size_t cap);

/* mkdtemp "kvbench-XXXXXX" in /dev/shm (tmpfs), registered for removal;
 * -ENOENT when there is no /dev/shm */
int kvb_shm_dir(char *out, size_t cap);

/* stop removing path at exit (--keep) */
void kvb_cleanup_forget(const char *path);
/* remove every registered path, last first; safe to call twice */
void kvb_cleanup_run(void);

/* rm -r path (does not follow symlinks); 0 or a negative errno */
int kvb_rmtree(const char *path);

/*
 * Fault in every page of the pool file at path through a mapping of our
 * own, so that the timed loops find the pages a running kvfsd would have:
 * a fresh tmpfs file allocates and zeroes each page on first touch, a
 * cost paid once per slot in a node's life, not per seal.
 */
int kvb_pool_prefault(const char *path);

/* -ENOSPC (with one line printed) when dir's file system has less than
 * bytes free; for the pool, whose tmpfs pages are allocated on first touch
 * and would otherwise fail later with SIGBUS */
int kvb_check_space(const char *cmd, const char *dir, uint64_t bytes);

/* ---- synthetic data ------------------------------------------------ */

/* splitmix64: small, fast, and good enough for workloads and test bytes */
static inline uint64_t kvb_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* uniform in 0..n-1 (n > 0); the modulo bias is below 2^-32 for our n */
static inline uint64_t kvb_rand_below(uint64_t *state, uint64_t n)
{
	return kvb_rand(state) % n;
}

/*
 * The synthetic KV bytes of a block: a splitmix64 stream seeded by the
 * block's hash, so any block's expected contents follow from its name
 * alone.  kvb_kv_check returns the offset of the first differing byte, or
 * len when all match.
 */
void kvb_kv_fill(const uint8_t hash[KVFS_HASH_LEN], void *buf, size_t len);
size_t kvb_kv_check(const uint8_t hash[KVFS_HASH_LEN], const void *buf,
		    size_t len);

/* ---- a kvfs mount (engine, io) ------------------------------------ */

/* what MOUNT/.kvfs/stats says about the pool and one namespace */
struct kvb_mount {
	uint64_t slot_size;
	uint64_t slots;
	uint64_t slots_free;
	uint64_t evictions; /* of the namespace; 0 when it is absent */
	bool ns_found;
};

/* read and parse MOUNT/.kvfs/stats (ns may be NULL); one line printed
 * on error */
int kvb_mount_stats(const char *cmd, const char *mount, const char *ns,
		    struct kvb_mount *m);

/*
 * The namespace directory MOUNT/NS, made (mkdir) when absent: returns an
 * O_DIRECTORY descriptor for openat() of its blocks, and its tokens per
 * block (user.kvfs.block_tokens) in *bt; or a negative errno with one
 * line printed.
 */
int kvb_mount_ns(const char *cmd, const char *mount, const char *ns,
		 uint32_t *bt);

/* ---- a kvfsd's control socket (gpu on kvfsd --no-mount) ----------- */

struct kvfs_ctl;

/* path is a unix socket (kvfsd's control socket) rather than a mount */
bool kvb_is_socket(const char *path);

/* kvfs_ctl_connect(path): 0, or a negative errno with one line printed */
int kvb_ctl_open(const char *cmd, const char *path, struct kvfs_ctl **c);

/* kvb_mount_stats through the socket: the "stats" of its "status", which
 * are MOUNT/.kvfs/stats; one line printed on error */
int kvb_ctl_stats(const char *cmd, struct kvfs_ctl *c, const char *ns,
		  struct kvb_mount *m);

/*
 * kvb_mount_ns through the socket: "ns create NS 512 chain" (-EEXIST is
 * success: then its entry in "ns list"), its block_tokens in *bt.  A
 * namespace with the open layout is refused.  0, or a negative errno with
 * one line printed.
 */
int kvb_ctl_ns(const char *cmd, struct kvfs_ctl *c, const char *ns,
	       uint32_t *bt);

/* remove one block through the socket ("evict NS HASH"): 0, or the
 * daemon's negative errno (-ENOENT absent, -EBUSY referenced); quiet */
int kvb_ctl_evict(struct kvfs_ctl *c, const char *ns,
		  const uint8_t h[KVFS_HASH_LEN]);

/* "model name" of the first CPU ("unknown" when /proc does not say) */
void kvb_cpu_model(char *buf, size_t cap);

/* ---- output -------------------------------------------------------- */

/* "  key            value": the summary lines both subcommands print */
void kvb_line(FILE *f, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* 1536000000 -> "1.54 GB" (decimal units, as for rates); returns buf */
char *kvb_fmt_bytes(char *buf, size_t cap, double bytes);

/* a size in binary units: 4096 -> "4 KiB", 2097152 -> "2 MiB", 1000 ->
 * "1000 B" (whole units only, else bytes); returns buf */
char *kvb_fmt_size(char *buf, size_t cap, uint64_t bytes);

/* cli_fail(), except that -EINTR after a stop signal says only
 * "interrupted" */
void kvb_fail(const char *cmd, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif /* KVFS_KVBENCH_H */
