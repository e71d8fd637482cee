/*
 * etcd_conf.c - what every user of the etcd client parses the same way
 * (etcd.h): the etcd[s]:// url, the --etcd-* options, the password file.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/crypto.h>

#include "kvstore/etcd.h"
#include "src/common/json.h"
#include "src/common/log.h"
#include "src/common/node_id.h"
#include "src/common/privfile.h"

#define PASSWORD_MAX 1024

static bool host_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch >= '0' && ch <= '9') || ch == '.' || ch == '-';
}

static bool ip6_char(char ch)
{
	return (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F') ||
	       (ch >= '0' && ch <= '9') || ch == ':' || ch == '.';
}

/* one HOST:PORT at *pp (up to ',' or '/'), appended to out as
 * "SCHEME://HOST:PORT"; *pp moves past it */
static int url_endpoint(const char **pp, const char *scheme,
			struct kvfs_buf *out, const char **why)
{
	const char *host = *pp, *hend, *p;
	unsigned long port = 0;
	size_t hlen;

	if (*host == '[') {
		for (hend = host + 1; ip6_char(*hend); hend++)
			;
		*why = "bad IPv6 address";
		if (*hend != ']' || hend == host + 1)
			return -EINVAL;
		hend++;
	} else {
		for (hend = host; host_char(*hend); hend++)
			;
	}
	hlen = (size_t)(hend - host);
	*why = "no host";
	if (hlen == 0)
		return -EINVAL;
	*why = "no :PORT after the host";
	if (*hend != ':')
		return -EINVAL;
	for (p = hend + 1; *p >= '0' && *p <= '9' && port <= 65535; p++)
		port = port * 10 + (unsigned long)(*p - '0');
	*why = "bad port (1..65535)";
	if (p == hend + 1 || port == 0 || port > 65535 ||
	    (*p >= '0' && *p <= '9'))
		return -EINVAL;
	*why = "no room for the result";
	if (hlen + 20 >= ETCD_ENDPOINT_MAX)
		return -EINVAL;
	kvfs_buf_printf(out, "%s%s://%.*s:%lu", out->len ? "," : "", scheme,
			(int)hlen, host, port);
	*pp = p;
	return 0;
}

int etcd_url_parse(const char *url, char *endpoint, size_t elen, char *name,
		   size_t nlen, const char **whyp)
{
	struct kvfs_buf eps = KVFS_BUF_INIT;
	const char *p, *scheme;
	unsigned n = 0;
	size_t plen;
	const char *dummy, **why = whyp ? whyp : &dummy;
	int rc;

	*why = "it does not start with etcd:// or etcds://";
	if (url && strncmp(url, "etcd://", 7) == 0) {
		scheme = "http";
		p = url + 7;
	} else if (url && strncmp(url, "etcds://", 8) == 0) {
		scheme = "https";
		p = url + 8;
	} else {
		return -EINVAL;
	}
	for (;;) {
		rc = url_endpoint(&p, scheme, &eps, why);
		if (rc < 0)
			goto out;
		n++;
		if (*p != ',')
			break;
		p++;
	}
	rc = -EINVAL;
	*why = "more than 8 endpoints";
	if (n > ETCD_ENDPOINTS_MAX)
		goto out;
	*why = "no /NAME after the port";
	if (*p != '/')
		goto out;
	p++;
	plen = strlen(p);
	*why = "bad name (1..63 of A-Z a-z 0-9 . _ -)";
	if (kv_node_id_valid(p) < 0)
		goto out;
	*why = "no room for the result";
	if (!endpoint || !name || plen >= nlen || eps.err || eps.len >= elen)
		goto out;
	memcpy(endpoint, eps.p, eps.len + 1);
	memcpy(name, p, plen + 1);
	rc = 0;
out:
	kvfs_buf_release(&eps);
	return rc;
}

int etcd_auth_check(const struct kv_etcd_auth *a, bool tls, const char **why)
{
	/* in the options' words: kvfsd and kvconductor print them as is */
	*why = "--etcd-cert and --etcd-key go together";
	if (!a->cert_file != !a->key_file)
		return -EINVAL;
	*why = "--etcd-ca and --etcd-cert need an etcds:// url";
	if (!tls && (a->ca_file || a->cert_file))
		return -EINVAL;
	*why = "--etcd-user and --etcd-password-file go together";
	if (!a->user != !a->password_file)
		return -EINVAL;
	*why = "bad --etcd-user (1..255 bytes)";
	if (a->user && (!*a->user || strlen(a->user) > 255))
		return -EINVAL;
	return 0;
}

/*
 * The etcd password, from a file only: a command line is readable by
 * every user of the host (ps, /proc/PID/cmdline).  Refused when group or
 * others may read the file.  A trailing newline is the editor's.
 */
static int read_password(const char *path, char **out)
{
	const char *why;
	mode_t perm;
	ssize_t n = kvfs_privfile_read(path, PASSWORD_MAX, out, &perm, &why);

	if (n < 0 && n != -EFBIG) {
		kvfs_err("etcd password file %s: %s", path, why);
		return (int)n;
	}
	if (n >= 0 && (perm & 077)) {
		kvfs_err("etcd password file %s is readable by group or "
			 "others (mode %04o): chmod 600 it",
			 path, (unsigned)perm);
		kvfs_privfile_free(*out, (size_t)n);
		*out = NULL;
		return -EPERM;
	}
	if (n <= 0 || memchr(*out, '\0', (size_t)n)) {
		kvfs_err("etcd password file %s: want 1..%u bytes of text",
			 path, PASSWORD_MAX);
		kvfs_privfile_free(*out, n > 0 ? (size_t)n : 0);
		*out = NULL;
		return -EINVAL;
	}
	return 0;
}

int etcd_conf_load(struct etcd_conf *conf, const struct kv_etcd_auth *a,
		   char **password)
{
	int rc = 0;

	memset(conf, 0, sizeof(*conf));
	*password = NULL;
	conf->ca_file = a->ca_file;
	conf->cert_file = a->cert_file;
	conf->key_file = a->key_file;
	conf->user = a->user;
	if (a->password_file) {
		rc = read_password(a->password_file, password);
		conf->password = *password;
	}
	return rc;
}

void etcd_conf_release(struct etcd_conf *conf, char *password)
{
	if (password) {
		OPENSSL_cleanse(password, strlen(password));
		free(password);
	}
	if (conf)
		conf->password = NULL;
}
