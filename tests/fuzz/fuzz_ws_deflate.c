/*
 * fuzz_ws_deflate.c - libFuzzer harness for permessage-deflate (RFC 7692):
 * offer negotiation and the inflate path a client's compressed messages take.
 *
 * Input: [flags][offer length][offer bytes][records...]; a record is
 * [2-byte length][bytes][end-of-message byte]. The offer goes through
 * ws_deflate_negotiate (an accepted offer's response must itself negotiate
 * to the same parameters); the records are fed to ws_inflate_feed /
 * ws_inflate_end under a size cap, which must hold however the data
 * expands. Every message that inflated is compressed again with
 * ws_deflate_message and inflated by a peer with the matching context
 * takeover: it must come back byte for byte. Built by run.sh only.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "worker/ws/ws_deflate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint8_t flags = data[0];
    size_t olen = data[1];
    const uint8_t *p = data + 2;
    size_t n = size - 2;
    if (olen > n)
        olen = n;

    ws_deflate_params prm = {0, 0, 15, 0};
    if (olen) {
        ws_deflate_params got;
        if (ws_deflate_negotiate((const char *)p, olen, &got)) {
            char resp[256];
            int rn = ws_deflate_response(&got, resp, sizeof resp);
            if (rn <= 0 || (size_t)rn >= sizeof resp)
                abort();
            ws_deflate_params again;
            if (!ws_deflate_negotiate(resp, (size_t)rn, &again))
                abort(); /* our own response is an acceptable offer */
            if (again.server_no_context_takeover != got.server_no_context_takeover ||
                again.client_no_context_takeover != got.client_no_context_takeover ||
                again.server_max_window_bits != got.server_max_window_bits)
                abort();
            if (got.server_max_window_bits < 9 || got.server_max_window_bits > 15)
                abort();
            prm = got;
        }
    } else {
        prm.server_no_context_takeover = flags & 1;
        prm.client_no_context_takeover = (flags >> 1) & 1;
        prm.server_max_window_bits = 9 + (flags >> 2) % 7;
    }
    p += olen;
    n -= olen;
    /* The cap: small ones make the too-big path likely. */
    static const size_t caps[4] = {0, 100, 4096, 1 << 20};
    size_t max = caps[(flags >> 5) & 3];

    ws_deflate *srv = ws_deflate_new(&prm);
    /* the peer that inflates what the server compresses */
    ws_deflate_params peer_prm = {0, prm.server_no_context_takeover, 15, 0};
    ws_deflate *peer = ws_deflate_new(&peer_prm);
    if (!srv || !peer)
        abort();

    buf msg = BUF_INIT, z = BUF_INIT, back = BUF_INIT;
    int failed = 0;
    while (n >= 3 && !failed) {
        size_t rl = ((size_t)p[0] << 8 | p[1]);
        p += 2;
        n -= 2;
        if (rl > n)
            rl = n;
        int rc = ws_inflate_feed(srv, p, rl, &msg, max);
        p += rl;
        n -= rl;
        int end = n > 0 ? p[0] & 1 : 1;
        if (n > 0)
            p++, n--;
        if (rc == WS_INFLATE_OK && end)
            rc = ws_inflate_end(srv, &msg, max);
        if (rc != WS_INFLATE_OK && rc != WS_INFLATE_CORRUPT && rc != WS_INFLATE_TOO_BIG)
            abort();
        /* The cap held: a message within it, or at most one byte past it on TOO_BIG. */
        if (buf_size(&msg) > max + (rc == WS_INFLATE_TOO_BIG))
            abort();
        if (rc != WS_INFLATE_OK) {
            failed = 1; /* the connection fails: 1007 / 1009 */
            break;
        }
        if (!end)
            continue;
        /* round trip: server compresses, the peer inflates, same bytes */
        buf_reset(&z);
        if (ws_deflate_message(srv, buf_head(&msg), buf_size(&msg), &z) < 0)
            abort();
        buf_reset(&back);
        size_t bmax = buf_size(&msg) + 1;
        int r2 = ws_inflate_feed(peer, buf_head(&z), buf_size(&z), &back, bmax);
        if (r2 == WS_INFLATE_OK)
            r2 = ws_inflate_end(peer, &back, bmax);
        if (r2 != WS_INFLATE_OK || buf_size(&back) != buf_size(&msg) ||
            memcmp(buf_head(&back), buf_head(&msg), buf_size(&msg)) != 0) {
            fprintf(stderr, "round trip: rc %d, %zu bytes in, %zu back\n", r2, buf_size(&msg),
                    buf_size(&back));
            abort();
        }
        buf_reset(&msg);
    }
    buf_free(&msg);
    buf_free(&z);
    buf_free(&back);
    ws_deflate_free(srv);
    ws_deflate_free(peer);
    return 0;
}
