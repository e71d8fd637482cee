/*
 * cluster_rec.c - the MAC of the records kvfs keeps in etcd
 * (cluster_int.h says what is signed and why).
 *
 * etcd's JSON gateway is often reachable by more than the cluster's
 * nodes; without a MAC anyone who can write it could register a node of
 * their own (and get blocks replicated to it) or change a namespace's
 * block_tokens.  The MAC uses the secret the transfer engine already
 * authenticates peers with, so a cluster has one secret to manage.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "kvstore/cluster_int.h"

/* version 1; a new layout of the signed bytes is a new label */
static const char rec_label[] = "kvfs-etcd-record-v1";

/* the HMAC of cluster_int.h; -ENOMEM, -EINVAL (a NUL in key) */
static int rec_mac(const uint8_t *secret, size_t slen, const char *key,
		   int64_t lease, const char *body, size_t blen,
		   uint8_t mac[32])
{
	size_t klen = strlen(key), off = 0, len;
	uint64_t l = (uint64_t)lease;
	unsigned int maclen = 0;
	uint8_t *msg;
	int rc = 0;

	if (slen > INT32_MAX || blen > SIZE_MAX / 2)
		return -EINVAL;
	/* label NUL key NUL lease: the label and key hold no NUL, so the
	 * fields cannot run into each other */
	len = sizeof(rec_label) + klen + 1 + 8 + blen;
	msg = malloc(len);
	if (!msg)
		return -ENOMEM;
	memcpy(msg, rec_label, sizeof(rec_label));
	off += sizeof(rec_label);
	memcpy(msg + off, key, klen + 1);
	off += klen + 1;
	for (int i = 7; i >= 0; i--)
		msg[off++] = (uint8_t)(l >> (8 * i));
	memcpy(msg + off, body, blen);
	if (!HMAC(EVP_sha256(), secret, (int)slen, msg, len, mac, &maclen) ||
	    maclen != 32)
		rc = -ENOMEM;
	OPENSSL_cleanse(msg, len);
	free(msg);
	return rc;
}

int kv_cluster_rec_seal(const uint8_t *secret, size_t slen, const char *key,
			int64_t lease, const char *body, size_t blen,
			char **out, size_t *olen)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t mac[32];
	char *v;
	size_t off;
	int rc;

	rc = rec_mac(secret, slen, key, lease, body, blen, mac);
	if (rc < 0)
		return rc;
	v = malloc(blen + REC_MAC_EXTRA + 1);
	if (!v)
		return -ENOMEM;
	memcpy(v, body, blen);
	memcpy(v + blen, REC_MAC_TAG, sizeof(REC_MAC_TAG) - 1);
	off = blen + sizeof(REC_MAC_TAG) - 1;
	for (int i = 0; i < 32; i++) {
		v[off++] = hex[mac[i] >> 4];
		v[off++] = hex[mac[i] & 15];
	}
	v[off] = '\0';
	*out = v;
	*olen = off;
	return 0;
}

static int unhex(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

size_t kv_cluster_rec_body(const char *val, size_t vlen)
{
	size_t body = vlen - REC_MAC_EXTRA;

	if (vlen < REC_MAC_EXTRA ||
	    memcmp(val + body, REC_MAC_TAG, sizeof(REC_MAC_TAG) - 1) != 0)
		return vlen;
	for (size_t i = body + sizeof(REC_MAC_TAG) - 1; i < vlen; i++)
		if (unhex(val[i]) < 0)
			return vlen;
	return body;
}

int kv_cluster_rec_open(const uint8_t *secret, size_t slen, const char *key,
			int64_t lease, const char *val, size_t vlen,
			size_t *blen)
{
	uint8_t want[32], got[32];
	const char *h;
	size_t body;
	int rc;

	/* the tag at a fixed place from the end: the body may hold " mac="
	 * itself (a node's rdma string), so it is never searched for */
	if (vlen < REC_MAC_EXTRA)
		return -ENOMSG;
	body = vlen - REC_MAC_EXTRA;
	if (memcmp(val + body, REC_MAC_TAG, sizeof(REC_MAC_TAG) - 1) != 0)
		return -ENOMSG;
	h = val + body + sizeof(REC_MAC_TAG) - 1;
	for (int i = 0; i < 32; i++) {
		int hi = unhex(h[2 * i]), lo = unhex(h[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -ENOMSG;
		got[i] = (uint8_t)(hi << 4 | lo);
	}
	rc = rec_mac(secret, slen, key, lease, val, body, want);
	if (rc < 0)
		return rc;
	if (CRYPTO_memcmp(want, got, sizeof(want)) != 0)
		return -EBADMSG;
	*blen = body;
	return 0;
}
