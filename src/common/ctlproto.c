#include "config.h"

#include <errno.h>
#include <string.h>

#include "src/common/ctlproto.h"

static int pct_plain(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '~' ||
	       c == '-';
}

void kvfs_ctlp_pct_encode(struct kvfs_buf *b, const char *s, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *p = (const unsigned char *)s;

	for (size_t i = 0; i < len; i++) {
		char esc[3] = { '%', hex[p[i] >> 4], hex[p[i] & 15] };

		if (pct_plain(p[i]))
			kvfs_buf_add(b, &p[i], 1);
		else
			kvfs_buf_add(b, esc, sizeof(esc));
	}
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int kvfs_ctlp_pct_decode(const char *w, size_t wlen, char *out, size_t outsz,
			 size_t *outlen)
{
	size_t n = 0;

	for (size_t i = 0; i < wlen; i++) {
		char c = w[i];

		if (c == '%') {
			int hi, lo;

			if (wlen - i < 3)
				return -EINVAL;
			hi = hexval(w[i + 1]);
			lo = hexval(w[i + 2]);
			if (hi < 0 || lo < 0)
				return -EINVAL;
			c = (char)(hi << 4 | lo);
			i += 2;
		}
		if (n + 1 >= outsz)
			return -ENAMETOOLONG;
		out[n++] = c;
	}
	if (outsz == 0)
		return -ENAMETOOLONG;
	out[n] = '\0';
	*outlen = n;
	return 0;
}

#define E(x)                                                                   \
	{                                                                      \
		x, #x                                                          \
	}
static const struct {
	int err;
	const char *name;
} errno_names[] = {
	E(EPERM),      E(ENOENT),	E(EINTR),      E(EIO),
	E(E2BIG),      E(EBADF),	E(EAGAIN),     E(ENOMEM),
	E(EACCES),     E(EFAULT),	E(EBUSY),      E(EEXIST),
	E(EINVAL),     E(EMFILE),	E(EFBIG),      E(ENOSPC),
	E(EROFS),      E(EPIPE),	E(ERANGE),     E(ENAMETOOLONG),
	E(ENOSYS),     E(ENOTEMPTY),	E(EPROTO),     E(EMSGSIZE),
	E(ENOTSOCK),   E(ECONNREFUSED), E(ECONNRESET), E(ETIMEDOUT),
	E(EADDRINUSE), E(ENOTSUP),	E(EOVERFLOW),  E(ENODATA),
};
#undef E

const char *kvfs_ctlp_errno_name(int err)
{
	for (size_t i = 0; i < sizeof(errno_names) / sizeof(errno_names[0]);
	     i++)
		if (errno_names[i].err == err)
			return errno_names[i].name;
	return "EUNKNOWN";
}
