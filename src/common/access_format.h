/*
 * access_format.h - the access log's line formats: the built-in clf,
 * combined and json, and custom format strings of %-atoms (Apache style),
 * compiled once into a list of atoms and rendered per request into a
 * caller's buffer. Pure: no I/O, no clock, so it is unit-tested alone.
 */
#ifndef PAGID_ACCESS_FORMAT_H
#define PAGID_ACCESS_FORMAT_H

#include <stddef.h>
#include <stdint.h>

typedef enum af_kind {
    AF_LITERAL,     /* text between atoms */
    AF_CLIENT,      /* %h %a: client address ("-" for a unix socket peer) */
    AF_TIME_CLF,    /* %t: [10/Oct/2000:13:55:36 +0000] */
    AF_TIME_ISO,    /* %{iso}t: 2000-10-10T13:55:36.123+00:00 */
    AF_TIME_MSEC,   /* %{msec}t: seconds since the epoch with milliseconds */
    AF_REQUEST,     /* %r: METHOD raw-path[?query] HTTP/1.x */
    AF_METHOD,      /* %m */
    AF_PATH,        /* %U: the raw path, as the client sent it */
    AF_QUERY,       /* %q: "?query" or nothing */
    AF_PROTOCOL,    /* %H: HTTP/1.1 */
    AF_STATUS,      /* %s %>s: status sent (0 when none) */
    AF_BYTES_CLF,   /* %b: body bytes sent, "-" for none */
    AF_BYTES,       /* %B: body bytes sent */
    AF_DURATION_US, /* %D %{us}T */
    AF_DURATION_MS, /* %{ms}T */
    AF_DURATION_S,  /* %T %{s}T: whole seconds */
    AF_REQ_HEADER,  /* %{name}i */
    AF_RESP_HEADER, /* %{name}o */
    AF_PID,         /* %P */
    AF_REASON,      /* %X: how the exchange ended: "-" or the disconnect reason */
    AF_TYPE,        /* %y: scope type: http, websocket, sse */
    AF_TLS_VERSION, /* %{tls_version}x: TLSv1.3, "-" on cleartext */
    AF_TLS_CIPHER,  /* %{tls_cipher}x: the cipher's OpenSSL name, "-" on cleartext */
    AF_TLS_REUSED,  /* %{tls_session_reused}x: "r" resumed, "." full handshake, "-" cleartext */
} af_kind;

typedef struct af_atom {
    af_kind kind;
    const char *text; /* literal bytes or the header name (lower-cased); owned by the format */
    size_t len;
    size_t index; /* AF_RESP_HEADER: which captured response header */
} af_atom;

/* What the caller must supply in a record (so it skips the work otherwise). */
#define AF_NEED_TIME_CLF 1u
#define AF_NEED_TIME_ISO 2u
#define AF_NEED_RESP_HEADERS 4u

typedef struct access_format {
    af_atom *atoms;
    size_t n;
    int json;                /* the built-in json format (atoms unused) */
    unsigned needs;          /* AF_NEED_* */
    size_t n_resp;           /* response headers to capture, in index order */
    const char **resp_names; /* their lower-case names (point into atoms) */
} access_format;

/** One finished (or aborted) request, as the renderer sees it. */
typedef struct access_record {
    const char *client;              /* NULL: "-" */
    const char *time_clf, *time_iso; /* preformatted when needed (see needs) */
    double time;                     /* epoch seconds when the request arrived */
    double duration;                 /* seconds */
    const char *method;              /* NULL: no request line (parse error) */
    const char *path;
    size_t path_len;
    const char *query;
    size_t query_len;
    const char *protocol; /* "HTTP/1.1" */
    int status;
    uint64_t bytes;
    const char *reason; /* NULL: completed */
    const char *type;   /* "http", "websocket", "sse" */
    const char *tls_version, *tls_cipher; /* NULL on a cleartext connection */
    int tls_reused; /* the handshake resumed a session */
    int pid;
    /* Request header by lower-case name; 1 found (value/len set) or 0. */
    int (*req_header)(void *ud, const char *name, const char **value, size_t *len);
    void *ud;
    /* Captured response header values, '\0'-separated in atom index order (may be NULL). */
    const char *resp_values;
    size_t resp_values_len;
} access_record;

/**
 * Compile spec ("clf", "combined", "json" or a custom string with %-atoms).
 * 0, or -1 with *msg (static string) and *err_off (byte offset in spec of
 * the problem). On success f owns its memory: access_format_free.
 */
int access_format_compile(access_format *f, const char *spec, const char **msg, size_t *err_off);
void access_format_free(access_format *f);

/* A buffer this large always holds a whole json line (fields are capped). */
#define ACCESS_FORMAT_LINE_MAX 32768

/**
 * Render one line, newline included, into out (cap bytes, at least 2). A
 * line that would not fit is cut and still ends with a newline. Returns
 * the number of bytes written.
 */
size_t access_format_render(const access_format *f, const access_record *r, char *out, size_t cap);

#endif
