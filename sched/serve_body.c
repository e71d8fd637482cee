/*
 * serve_body.c - the fields of `kvconductor serve`'s request bodies, out
 * of json-c objects (serve_int.h, "request bodies"): pure, so that the
 * fuzzer (fuzz/fuzz_body.c) drives exactly what the daemon runs.
 */
#include "config.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "sched/serve_int.h"

#define JSON_DEPTH 16

struct json_object *srv_body_json(const char *buf, size_t len, const char **msg)
{
	struct json_tokener *tok = json_tokener_new_ex(JSON_DEPTH);
	struct json_object *o;
	size_t end;

	*msg = "out of memory";
	if (!tok)
		return NULL;
	o = json_tokener_parse_ex(tok, buf ? buf : "", (int)len);
	end = json_tokener_get_parse_end(tok);
	if (!o || json_tokener_get_error(tok) != json_tokener_success) {
		*msg = "body is not JSON";
		goto out_put;
	}
	/* one value and nothing after it but white space */
	if (strspn(buf + end, " \t\r\n") != len - end) {
		*msg = "body has bytes after its JSON value";
		goto out_put;
	}
	if (!json_object_is_type(o, json_type_object)) {
		*msg = "body is not a JSON object";
		goto out_put;
	}
	json_tokener_free(tok);
	return o;

out_put:
	json_object_put(o);
	json_tokener_free(tok);
	return NULL;
}

/* a whole number min..max; -ENOENT when absent, -EINVAL when not one */
int srv_body_u64(struct json_object *o, const char *key, uint64_t min,
		 uint64_t max, uint64_t *out)
{
	struct json_object *v;
	uint64_t x;

	if (!json_object_object_get_ex(o, key, &v))
		return -ENOENT;
	if (!json_object_is_type(v, json_type_int) ||
	    json_object_get_int64(v) < 0)
		return -EINVAL;
	x = json_object_get_uint64(v);
	if (x < min || x > max)
		return -EINVAL;
	*out = x;
	return 0;
}

struct json_object *srv_body_array(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_array))
		return NULL;
	return v;
}

/* [{"node": N}, ...] -> nodes; 0, or -EINVAL with *msg */
int srv_body_nodes(struct json_object *arr, uint32_t *nodes, uint32_t *n,
		   const char **msg)
{
	size_t len = arr ? json_object_array_length(arr) : 0;
	uint64_t node;

	*msg = "prefill and decode: arrays of 1..256 {\"node\": 0..65535}";
	if (!len || len > SCHED_MAX_INSTANCES)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		struct json_object *e = json_object_array_get_idx(arr, i);

		if (!json_object_is_type(e, json_type_object) ||
		    srv_body_u64(e, "node", 0, UINT16_MAX, &node) < 0)
			return -EINVAL;
		nodes[i] = (uint32_t)node;
	}
	*n = (uint32_t)len;
	return 0;
}

/* the names are kept too: the handoff's FETCH carries them */
static int keys_from_hashes(struct json_object *arr, struct sched_body *q)
{
	for (uint32_t i = 0; i < q->nkeys; i++) {
		struct json_object *e = json_object_array_get_idx(arr, i);

		if (!json_object_is_type(e, json_type_string) ||
		    kvfs_hash_from_hex(json_object_get_string(e), q->hash[i]) <
			    0)
			return -EINVAL;
		q->keys[i] = sched_key_from_hash(q->hash[i]);
	}
	return 0;
}

/* json-c saturates an integer past 64 bits to UINT64_MAX without a
 * word, so that value is refused: a key is 0 to 2^64 - 2 */
static int keys_from_ints(struct json_object *arr, struct sched_body *q)
{
	for (uint32_t i = 0; i < q->nkeys; i++) {
		struct json_object *e = json_object_array_get_idx(arr, i);

		if (!json_object_is_type(e, json_type_int) ||
		    json_object_get_int64(e) < 0 ||
		    json_object_get_uint64(e) == UINT64_MAX)
			return -EINVAL;
		q->keys[i] = json_object_get_uint64(e);
	}
	return 0;
}

/* well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing
 * past U+10FFFF) without NUL: JSON text may carry neither raw bytes nor,
 * in a kvfs name, a \u0000 */
static bool utf8_name(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + n;

	while (p < end) {
		unsigned c = *p++, more, min;
		uint32_t cp;

		if (c == 0)
			return false;
		if (c < 0x80)
			continue;
		if (c >= 0xc2 && c <= 0xdf)
			more = 1, min = 0x80, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			more = 2, min = 0x800, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			more = 3, min = 0x10000, cp = c & 0x07;
		else
			return false;
		if ((size_t)(end - p) < more)
			return false;
		while (more--) {
			if ((*p & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (*p++ & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
	}
	return true;
}

/* the prompt's block keys: "hashes" (64 hex each) or "block_keys" */
static int parse_keys(struct json_object *o, struct sched_body *q,
		      const char **msg)
{
	struct json_object *h = srv_body_array(o, "hashes");
	struct json_object *k = srv_body_array(o, "block_keys");
	struct json_object *arr = h ? h : k;
	size_t len;

	*msg = "give one of hashes (64 lowercase hex each) or block_keys "
	       "(whole numbers), at most 65536";
	if ((h && k) || !arr)
		return -EINVAL;
	len = json_object_array_length(arr);
	if (len > SRV_MAX_KEYS)
		return -EINVAL;
	q->nkeys = (uint32_t)len;
	q->keys = calloc(len ? len : 1, sizeof(*q->keys));
	if (h)
		q->hash = calloc(len ? len : 1, sizeof(*q->hash));
	if (!q->keys || (h && !q->hash)) {
		*msg = "out of memory";
		return -ENOMEM;
	}
	return h ? keys_from_hashes(arr, q) : keys_from_ints(arr, q);
}

int srv_body_schedule(struct json_object *o, uint32_t block_tokens,
		      struct sched_body *q, const char **msg)
{
	struct json_object *ns = NULL;
	int rc;

	if (json_object_object_get_ex(o, "namespace", &ns) &&
	    (!json_object_is_type(ns, json_type_string) ||
	     !utf8_name(json_object_get_string(ns),
			(size_t)json_object_get_string_len(ns)) ||
	     kvfs_ns_valid(json_object_get_string(ns)) < 0)) {
		*msg = "namespace: not a kvfs namespace name";
		return -EINVAL;
	}
	if (ns)
		strcpy(q->ns, json_object_get_string(ns));
	rc = parse_keys(o, q, msg);
	if (rc < 0)
		return rc;
	if (srv_body_u64(o, "input_length", 1, UINT32_MAX, &q->input) < 0 ||
	    q->input < (uint64_t)q->nkeys * block_tokens) {
		*msg = "input_length: a whole number >= blocks * block_tokens";
		return -EINVAL;
	}
	if (srv_body_u64(o, "output_length", 1, UINT32_MAX, &q->output) < 0) {
		*msg = "output_length: a whole number >= 1";
		return -EINVAL;
	}
	return 0;
}

int srv_body_complete(struct json_object *o, uint64_t *id, bool *prefill,
		      const char **msg)
{
	struct json_object *ph;
	const char *phase = "decode";
	size_t len = 6;

	if (srv_body_u64(o, "id", 1, UINT64_MAX, id) < 0) {
		*msg = "id: a whole number from /v1/schedule";
		return -EINVAL;
	}
	if (json_object_object_get_ex(o, "phase", &ph)) {
		if (!json_object_is_type(ph, json_type_string)) {
			*msg = "phase: prefill or decode";
			return -EINVAL;
		}
		phase = json_object_get_string(ph);
		len = (size_t)json_object_get_string_len(ph);
	}
	/* the length too: "prefill\u0000x" is not "prefill" */
	if (!((len == 7 && !strcmp(phase, "prefill")) ||
	      (len == 6 && !strcmp(phase, "decode")))) {
		*msg = "phase: prefill or decode";
		return -EINVAL;
	}
	*prefill = len == 7;
	return 0;
}
