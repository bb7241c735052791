/*
 * http1_parser_feed.c - h1_parser_feed: our parser (h1_run) and http-parser
 * 2.9.4 as a second opinion in lockstep over the same bytes: both must
 * accept the message and agree on where it ends (a smuggling tripwire), and
 * http-parser gives the request head its own hard 80 KiB ceiling.
 *
 * The second opinion is asked only where it can differ. Our parser reads a
 * header section alone first; when that section came whole in one feed,
 * within H1_ALONE_MAX bytes, and has no field whose name begins with
 * Content-Length or Transfer-Encoding (a prefix: http-parser reads
 * "Transfer-EncodingX" as one), http-parser is not run: on bytes our parser
 * accepted (tchar names, no CR/LF/NUL/DEL in values, CRLF line ends, no
 * obs-fold), without those two fields and under its 80 KiB ceiling, it
 * reports no error and ends the message with its head, as ours does (its
 * other header errors are all about those two fields). Anything else (a
 * framing field, a head split across reads or longer, an error of ours) is
 * run in lockstep exactly as before, so which parser answers a bad request
 * never depends on how its bytes were split.
 */
#include "http1_parser_int.h"

#include <string.h>

/* ------------------------------------------------------------------ */
/* http-parser, the second opinion                                     */
/* ------------------------------------------------------------------ */

static int hp_on_message_complete(http_parser *hp)
{
    h1_parser *p = hp->data;
    p->hp_done = 1;
    http_parser_pause(hp, 1);
    return 0;
}

void h1_hp_init(h1_parser *p)
{
    memset(&p->hs, 0, sizeof p->hs);
    p->hs.on_message_complete = hp_on_message_complete;
}

void h1_hp_start(h1_parser *p)
{
    http_parser_init(&p->hp, HTTP_REQUEST);
    p->hp.data = p;
    p->hp_done = 0;
    p->hp_fed = 0;
    p->framing_field = 0;
}

/* From here on http-parser runs in lockstep. It only knows its fixed method
 * list, so it gets a neutral request line (GET never changes how a request
 * body is framed). */
static int hp_begin(h1_parser *p)
{
    const char *rl = p->req.http_minor ? "GET / HTTP/1.1\r\n" : "GET / HTTP/1.0\r\n";
    p->hp_fed = 1;
    http_parser_execute(&p->hp, &p->hs, rl, 16);
    if (HTTP_PARSER_ERRNO(&p->hp) != HPE_OK)
        return h1_fail(p, 400, "malformed request line");
    return 0;
}

static int hp_error_status(enum http_errno e)
{
    return e == HPE_HEADER_OVERFLOW ? 431 : 400;
}

/*
 * Our parser's state where a header section starts (nothing of it read):
 * what a lockstep replay starts from when reading it alone ended in an
 * error. While a section is read, the head's memory only grows (bytes
 * appended, fields pushed), so offsets taken before stay valid.
 */
typedef struct section_mark {
    size_t arena_len, nfields;
} section_mark;

static void section_restore(h1_parser *p, section_mark m)
{
    p->st = PS_HDR_LINE;
    p->arena.len = m.arena_len;
    p->nfields = m.nfields;
    p->nfields_seen = 0;
    p->head_bytes = 0;
    p->framing_field = 0;
    p->error_status = 0;
    p->error_text = NULL;
}

h1_state h1_parser_feed(h1_parser *p, const char *data, size_t len, size_t *consumed)
{
    size_t off = 0;
    *consumed = 0;
    if (len == 0 && p->st != PS_DONE && p->st != PS_ERROR)
        return H1_NEED_MORE;
    if (p->st == PS_ERROR)
        return H1_ERROR;
    if (p->st == PS_DONE)
        return H1_DONE;

    if (p->st < PS_HDR_LINE) {
        off = h1_run(p, data, len);
        *consumed = off;
        if (p->st == PS_ERROR)
            return H1_ERROR;
        if (p->st < PS_HDR_LINE)
            return H1_NEED_MORE;
    }
    size_t rest = len - off;
    if (rest == 0)
        return H1_NEED_MORE; /* a zero length tells http-parser "EOF" */

    /* The header section, alone (see the comment at the top): until
     * http-parser is fed, nothing of this section was read before. */
    size_t ahead = 0;
    if (!p->hp_fed) {
        section_mark mark = {p->arena.len, p->nfields};
        ahead = h1_run(p, data + off, rest < H1_ALONE_MAX ? rest : H1_ALONE_MAX);
        if (p->st == PS_HEAD_READ && !p->framing_field) {
            off += ahead;
            h1_run(p, data + off, 0); /* hands the head over; no body follows */
            *consumed = off;
            if (p->st == PS_ERROR)
                return H1_ERROR;
            if (p->st == PS_DONE)
                return H1_DONE;
            h1_fail(p, 400, "ambiguous message framing"); /* a body without a framing field */
            return H1_ERROR;
        }
        if (p->st == PS_ERROR) {
            section_restore(p, mark);
            ahead = 0;
        }
        if (hp_begin(p) < 0)
            return H1_ERROR;
    }

    /* http-parser goes first: it tells how far it accepts the bytes (up to
     * its message end, or its error); ours then runs only that far. */
    size_t hp_n = http_parser_execute(&p->hp, &p->hs, data + off, rest);
    enum http_errno e = HTTP_PARSER_ERRNO(&p->hp);
    int hp_err = e != HPE_OK && !(e == HPE_PAUSED && p->hp_done);
    size_t limit = hp_n;
    if (hp_err && limit < rest)
        limit++; /* let ours see the offending byte: its status is more precise */

    /* Ours already read `ahead` bytes without an error: when http-parser
     * stopped before them, ours would have accepted all it was allowed. */
    size_t n = ahead > limit ? limit : ahead + h1_run(p, data + off + ahead, limit - ahead);
    off += n;
    *consumed = off;
    if (p->st == PS_ERROR)
        return H1_ERROR;
    if (hp_err) {
        h1_fail(p, hp_error_status(e),
                e == HPE_HEADER_OVERFLOW ? "request header section too large"
                                         : "malformed request");
        return H1_ERROR;
    }
    if (p->st == PS_DONE)
        return H1_DONE;
    if (p->hp_done || n != limit || p->st == PS_HEAD_READ) {
        h1_fail(p, 400, "ambiguous message framing");
        return H1_ERROR;
    }
    return H1_NEED_MORE;
}
