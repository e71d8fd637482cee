/*
 * failmalloc.c - the allocation wrappers of failmalloc.h.
 *
 * The linker's --wrap=malloc sends every reference to malloc in the
 * objects it links to __wrap_malloc, and __real_malloc to the real one
 * (libc's, or the sanitizer's interceptor), so nothing here replaces the
 * allocator: each wrapper only decides whether this call fails.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/failmalloc.h"

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t size);
void *__real_aligned_alloc(size_t align, size_t size);

void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
int __wrap_posix_memalign(void **p, size_t align, size_t size);
void *__wrap_aligned_alloc(size_t align, size_t size);

#define SITES_MAX 1024

static atomic_bool armed;
static atomic_bool persist;
static atomic_ulong target; /* the count that fails */
static atomic_ulong count;  /* calls since the last arm */
static atomic_ulong failed; /* calls made to fail since the last arm */

/* distinct sites ever failed; the lock is taken on the failing path only,
 * and a pthread mutex allocates nothing */
static pthread_mutex_t sites_mu = PTHREAD_MUTEX_INITIALIZER;
static void *sites[SITES_MAX];
static size_t nsites;

void failmalloc_arm(unsigned long n, bool p)
{
	atomic_store(&armed, false);
	atomic_store(&count, 0);
	atomic_store(&failed, 0);
	atomic_store(&target, n);
	atomic_store(&persist, p);
	atomic_store(&armed, true);
}

unsigned long failmalloc_disarm(void)
{
	atomic_store(&armed, false);
	return atomic_load(&failed);
}

unsigned long failmalloc_count(void)
{
	return atomic_load(&count);
}

size_t failmalloc_nsites(void)
{
	size_t n;

	pthread_mutex_lock(&sites_mu);
	n = nsites;
	pthread_mutex_unlock(&sites_mu);
	return n;
}

void failmalloc_print_sites(FILE *f)
{
	pthread_mutex_lock(&sites_mu);
	for (size_t i = 0; i < nsites; i++) {
		Dl_info di;
		uintptr_t a = (uintptr_t)sites[i];

		if (dladdr(sites[i], &di) && di.dli_fname) {
			fprintf(f, "  %s+0x%lx (%s+0x%lx)\n",
				di.dli_sname ? di.dli_sname : "?",
				di.dli_saddr
					? (unsigned long)(a -
							  (uintptr_t)
								  di.dli_saddr)
					: 0ul,
				di.dli_fname,
				(unsigned long)(a - (uintptr_t)di.dli_fbase));
		} else {
			fprintf(f, "  %p\n", sites[i]);
		}
	}
	pthread_mutex_unlock(&sites_mu);
}

static void site_add(void *ra)
{
	pthread_mutex_lock(&sites_mu);
	for (size_t i = 0; i < nsites; i++)
		if (sites[i] == ra)
			goto out_unlock;
	if (nsites < SITES_MAX)
		sites[nsites++] = ra;
out_unlock:
	pthread_mutex_unlock(&sites_mu);
}

/* true when this call is to fail (errno is then ENOMEM, as libc sets) */
static bool should_fail(void *ra)
{
	unsigned long n, t;

	if (!atomic_load_explicit(&armed, memory_order_relaxed))
		return false;
	n = atomic_fetch_add(&count, 1) + 1;
	t = atomic_load(&target);
	if (n != t && !(n > t && atomic_load(&persist)))
		return false;
	/* disarmed meanwhile: a straggler of the last run */
	if (!atomic_load(&armed))
		return false;
	atomic_fetch_add(&failed, 1);
	site_add(ra);
	errno = ENOMEM;
	return true;
}

#define RA __builtin_return_address(0)

void *__wrap_malloc(size_t size)
{
	return should_fail(RA) ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
	return should_fail(RA) ? NULL : __real_calloc(n, size);
}

/* a failed realloc leaves the block alone, as the real one does */
void *__wrap_realloc(void *p, size_t size)
{
	return should_fail(RA) ? NULL : __real_realloc(p, size);
}

char *__wrap_strdup(const char *s)
{
	return should_fail(RA) ? NULL : __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n)
{
	return should_fail(RA) ? NULL : __real_strndup(s, n);
}

/* returns the error rather than setting errno */
int __wrap_posix_memalign(void **p, size_t align, size_t size)
{
	return should_fail(RA) ? ENOMEM : __real_posix_memalign(p, align, size);
}

void *__wrap_aligned_alloc(size_t align, size_t size)
{
	return should_fail(RA) ? NULL : __real_aligned_alloc(align, size);
}
