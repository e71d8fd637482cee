/*
 * kvfsd_bdi.c - the mount's backing device info in sysfs
 * (/sys/class/bdi/MAJOR:MINOR/), where root tunes what the FUSE handshake
 * cannot: read-ahead (kvfsd.c, raise_readahead) and the dirty-page limit
 * the write-back cache needs lifted (kvfsd_bdi_lift).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuse/kvfsd.h"

/* mountinfo escapes blanks, tabs, newlines and backslashes as \ooo */
static void unescape(char *s)
{
	char *out = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
					(s[3] - '0'));
			s += 4;
		} else {
			*out++ = *s++;
		}
	}
	*out = '\0';
}

int kvfsd_bdi_of(const char *mnt, char *bdi, size_t len)
{
	FILE *fp = fopen("/proc/self/mountinfo", "re");
	char *line = NULL, *save, *f[5];
	size_t cap = 0;
	int rc = -ENOENT;

	if (!fp)
		return -errno;
	/* "ID PARENT MAJOR:MINOR ROOT MOUNTPOINT ...": the last mount on
	 * mnt is ours, just made */
	while (getline(&line, &cap, fp) > 0) {
		int i;

		f[0] = strtok_r(line, " \n", &save);
		for (i = 1; i < 5 && f[i - 1]; i++)
			f[i] = strtok_r(NULL, " \n", &save);
		if (i < 5 || !f[4])
			continue;
		unescape(f[4]);
		if (strcmp(f[4], mnt) != 0)
			continue;
		rc = snprintf(bdi, len, "%s", f[2]) < (int)len ? 0
							       : -ENAMETOOLONG;
	}
	free(line);
	fclose(fp);
	return rc;
}

int kvfsd_bdi_set(const char *bdi, const char *knob, const char *val)
{
	char path[128];
	size_t n = strlen(val);
	ssize_t w;
	int fd, rc = 0;

	snprintf(path, sizeof(path), "/sys/class/bdi/%s/%s", bdi, knob);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	w = write(fd, val, n);
	if (w < 0)
		rc = -errno;
	else if ((size_t)w != n)
		rc = -EIO;
	close(fd);
	return rc;
}

/*
 * The kernel holds each FUSE mount to 1% of the machine's dirty-page
 * limit, and strictly: a writer is slowed down by its own mount's dirty
 * pages even when the machine has few.  Under the write-back cache a
 * 2 MiB file's write(2) then sleeps in the kernel's throttle, and large
 * writers store at half the speed they have without the cache.  kvfsd's
 * write-back takes a memory copy, not a disk, so the limit is lifted: the
 * whole machine-wide limit may be this mount's, and the strict rule goes
 * (strict_limit, Linux 6.2 on); where it cannot go, a 5% share of the
 * limit is reserved for the mount instead (min_ratio).
 */
int kvfsd_bdi_lift(const char *bdi)
{
	int rc = kvfsd_bdi_set(bdi, "max_ratio", "100");

	if (rc < 0)
		return rc;
	if (kvfsd_bdi_set(bdi, "strict_limit", "0") < 0)
		kvfsd_bdi_set(bdi, "min_ratio", "5"); /* best effort */
	return 0;
}
