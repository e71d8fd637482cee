/*
 * fuzz_wire.c - libFuzzer target: arbitrary bytes into the frame parser
 * (kvstore/wire.h) and, frame by frame, the auth state machine.
 *
 * Each frame the parser accepts must re-encode to a frame that parses to
 * the same message; accepted handshake frames are fed to a server and a
 * client auth state machine, which must refuse them (nobody here knows
 * the secret of the other side's nonces) without crashing.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kvstore/auth.h"
#include "kvstore/wire.h"

static const uint8_t secret[] = "fuzz-secret-0123456789";

static void roundtrip(const struct kv_wire_msg *m)
{
	uint8_t buf[KV_WIRE_HDR_LEN + KV_WIRE_META_MAX];
	struct kv_wire_hdr h;
	struct kv_wire_msg m2;
	long n;

	n = kv_wire_encode(m, buf, sizeof(buf));
	if (n < 0)
		abort(); /* what decodes must encode */
	if (kv_wire_hdr_decode(buf, (size_t)n, &h) != 0 ||
	    kv_wire_decode(&h, buf + KV_WIRE_HDR_LEN, h.meta_len, &m2) != 0)
		abort();
	if (memcmp(m, &m2, sizeof(m2)) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kv_auth srv, cli;
	struct kv_wire_msg m, out;
	const void *payload;
	size_t flen;

	kv_auth_init(&srv, KV_AUTH_SERVER, secret, sizeof(secret) - 1, NULL);
	kv_auth_init(&cli, KV_AUTH_CLIENT, secret, sizeof(secret) - 1, NULL);
	kv_auth_client_hello(&cli, NULL, &out);
	while (size > 0) {
		if (kv_wire_parse(data, size, &m, &payload, &flen) != 0)
			break;
		/* m.size is this frame's data only for types that carry
		 * data; LOCATE_OK and ALLOC describe a block elsewhere */
		if (flen > size ||
		    (kv_wire_type_has_data(m.type) &&
		     (const uint8_t *)payload + m.size > data + size))
			abort();
		roundtrip(&m);
		switch (m.type) {
		case KV_WIRE_HELLO:
			kv_auth_server_challenge(&srv, &m, &out);
			break;
		case KV_WIRE_AUTH:
			if (kv_auth_server_verify(&srv, &m) == 0)
				abort(); /* forged without the nonce */
			break;
		case KV_WIRE_CHALLENGE:
			if (kv_auth_client_answer(&cli, &m, &out) == 0)
				abort();
			break;
		case KV_WIRE_AUTH_OK:
		case KV_WIRE_AUTH_FAIL:
			kv_auth_client_finish(&cli, &m);
			break;
		default:
			break;
		}
		data += flen;
		size -= flen;
	}
	return 0;
}
