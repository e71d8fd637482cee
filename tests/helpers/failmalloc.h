/*
 * failmalloc.h - make the Nth allocation fail, after SQLite's
 * test_malloc.c.
 *
 * A test program linked with FAILMALLOC_LDFLAGS (tests/Makemodule.am) has
 * every call to malloc, calloc, realloc, strdup, strndup, posix_memalign
 * and aligned_alloc made by its own objects and by the convenience
 * libraries linked into it (libkvstore, libkvctlsrv, libkvcommon) renamed
 * by the linker (--wrap) to the __wrap_* functions of failmalloc.c.  Those
 * count the calls made while armed and make the Nth fail as the real one
 * would (NULL, errno ENOMEM); the rest go through.  Shared libraries
 * (RocksDB, libc itself, OpenSSL) keep their own allocator: what they
 * allocate never fails here.  It works under ASan too: the wrapper calls
 * the sanitizer's malloc.
 *
 * The loop a test writes:
 *
 *	for (n = 1; n < max; n++) {
 *		failmalloc_arm(n, false);
 *		rc = scenario();		  (must cope, not crash)
 *		hit = failmalloc_disarm();
 *		check the invariants, tear down
 *		if (!hit)
 *			break;			  (ran without a failure)
 *	}
 *
 * The counters are atomics: the control server's thread allocates too.
 */
#ifndef KVFS_FAILMALLOC_H
#define KVFS_FAILMALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* fail the nth allocation from now (1 is the next one); with persist,
 * every allocation after it fails as well (until disarmed) */
void failmalloc_arm(unsigned long n, bool persist);
/* stop failing; returns how many allocations failed since arming */
unsigned long failmalloc_disarm(void);
/* allocations counted since the last arm (armed or not) */
unsigned long failmalloc_count(void);

/* distinct call sites (return addresses) that were made to fail */
size_t failmalloc_nsites(void);
/* one line per site, "func+0xoff" where dladdr knows a name (link with
 * -rdynamic; static functions show as "?"), and the offset into its
 * object: addr2line -f -i -e OBJECT OFFSET-1 names the line.  The tests
 * print it when FAILMALLOC_SITES is set. */
void failmalloc_print_sites(FILE *f);

#endif /* KVFS_FAILMALLOC_H */
