/*
 * polls.c - a "live polls" service as a PAGI module, its state in a shared
 * dictionary (pagi_shared(3)) so that every worker sees every poll at once:
 *   POST /polls                 {"question": "...", "options": ["a", "b"]} -> 201 {"id": N}
 *   GET  /polls/ID              {"id": N, "poll": {...}, "counts": [..]}
 *   POST /polls/ID/vote/K       one vote for option K (0-based) -> {"option": K, "count": n}
 *   GET  /polls/ID/events       SSE: "counts" events after each vote, made on any worker
 *   /polls/ID/ws                WebSocket: the same counts as text messages
 * pagid.yaml needs:  shared_dicts: [{name: polls, size: 16m}]
 * Keys: "seq" (the last id), "poll:ID" (the JSON, flags = its option count),
 * "votes:ID:K" (counters). Votes are pagi_shared_incr: exact across workers.
 */
#include <pagi/pagi.h>
#include <pagi/pagi_easy.h>
#include <pagi/pagi_shared.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BODY (16 * 1024)
#define MAX_OPTIONS 16

typedef struct feed { /* the live clients of one poll in this worker */
    long id;
    int nopts;
    pagi_group *sse, *ws;
    pagi_subscription *sub; /* "poll.ID": a vote changed the counts */
    struct polls *P;
} feed;

typedef struct polls { /* one per worker, owned by the lifespan */
    pagi_shared *dict; /* the server's: lives as long as the worker */
    pagi_scope *life;  /* the lifespan scope: the feeds' subscriptions live with it */
    feed **feeds;
    size_t n_feeds;
} polls;

static int respond_json(pagi_scope *s, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int respond_json(pagi_scope *s, int status, const char *fmt, ...)
{
    char out[MAX_BODY + 1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, sizeof out, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof out)
        return pagi_respond_text(s, 500, "response too large\n");
    return pagi_respond(s, status, "application/json", out, (size_t)n);
}

/* The options of a poll's JSON: how many strings the "options" array holds
 * (a deliberately small scanner: escapes are skipped, nesting refused). */
static int count_options(const char *json)
{
    const char *p = strstr(json, "\"options\"");
    if (!p || !strstr(json, "\"question\""))
        return -1;
    p += 9;
    while (*p == ' ' || *p == ':' || *p == '\n' || *p == '\t')
        p++;
    if (*p++ != '[')
        return -1;
    int n = 0;
    for (; *p && *p != ']'; p++) {
        if (*p == '[' || *p == '{')
            return -1;
        if (*p != '"')
            continue;
        for (p++; *p && *p != '"'; p++)
            if (*p == '\\' && p[1])
                p++;
        if (!*p)
            return -1;
        n++;
    }
    return *p == ']' && n >= 2 && n <= MAX_OPTIONS ? n : -1;
}

/* The poll's option count and its JSON into json (cap bytes), or -1. */
static int load_poll(polls *P, long id, char *json, size_t cap)
{
    char key[32];
    size_t len = 0;
    uint32_t nopts = 0;
    int kl = snprintf(key, sizeof key, "poll:%ld", id);
    if (pagi_shared_get(P->dict, key, (size_t)kl, json, cap - 1, &len, &nopts) != 0 || len >= cap)
        return -1;
    json[len] = '\0';
    return (int)nopts;
}

/* "[c0,c1,...]": each option's counter, read now from the shared dict. */
static void counts_json(polls *P, long id, int nopts, char *out, size_t cap)
{
    size_t n = (size_t)snprintf(out, cap, "[");
    for (int k = 0; k < nopts && n < cap; k++) {
        char key[48], num[24];
        size_t len = 0;
        int kl = snprintf(key, sizeof key, "votes:%ld:%d", id, k);
        if (pagi_shared_get(P->dict, key, (size_t)kl, num, sizeof num - 1, &len, NULL) != 0)
            len = (size_t)snprintf(num, sizeof num, "0");
        num[len < sizeof num ? len : sizeof num - 1] = '\0';
        n += (size_t)snprintf(out + n, cap - n, "%s%s", k ? "," : "", num);
    }
    if (n < cap)
        snprintf(out + n, cap - n, "]");
}

static void create_body(pagi_scope *s, const char *body, size_t len, const char *err, void *ud)
{
    polls *P = ud;
    int64_t id, zero = 0;
    char key[32];
    if (err != NULL)
        return; /* the layer finishes the scope (413 past MAX_BODY) */
    int nopts = memchr(body, '\0', len) ? -1 : count_options(body);
    if (nopts < 0) {
        respond_json(s, 400,
                     "{\"error\":\"expected {\\\"question\\\":...,\\\"options\\\":"
                     "[2 to %d strings]}\"}\n",
                     MAX_OPTIONS);
        return;
    }
    int rc = pagi_shared_incr(P->dict, "seq", 3, 1, &zero, 0, &id);
    int kl = snprintf(key, sizeof key, "poll:%" PRId64, id);
    if (rc == 0) /* add, never set: a poll once created is never overwritten */
        rc = pagi_shared_add(P->dict, key, (size_t)kl, body, len, 0, (uint32_t)nopts);
    if (rc != 0)
        respond_json(s, 503, "{\"error\":\"%s\"}\n", pagi_shared_strerror(rc));
    else
        respond_json(s, 201, "{\"id\":%" PRId64 "}\n", id);
}

static void vote(pagi_scope *s, polls *P, long id, int k)
{
    char key[48], json[MAX_BODY], channel[40];
    int64_t n, zero = 0;
    int nopts = load_poll(P, id, json, sizeof json);
    if (nopts < 0) {
        respond_json(s, 404, "{\"error\":\"no such poll\"}\n");
        return;
    }
    if (k < 0 || k >= nopts) {
        respond_json(s, 400, "{\"error\":\"no option %d\"}\n", k);
        return;
    }
    int kl = snprintf(key, sizeof key, "votes:%ld:%d", id, k);
    int rc = pagi_shared_incr(P->dict, key, (size_t)kl, 1, &zero, 0, &n);
    if (rc != 0) {
        respond_json(s, 503, "{\"error\":\"%s\"}\n", pagi_shared_strerror(rc));
        return;
    }
    /* Every worker's feeds of this poll hear that the counts changed. */
    snprintf(channel, sizeof channel, "poll.%ld", id);
    pagi_publish(s, channel, "vote", 4);
    respond_json(s, 200, "{\"option\":%d,\"count\":%" PRId64 "}\n", k, n);
}

/* A vote on some worker: send the counts as they are now. Reading them here,
 * not taking a copy from the publisher, keeps each feed in step with the
 * dict: two workers' publishes may reach this one in either order (pub/sub
 * orders per publisher only), but the last message read the last counts. */
static void poll_changed(pagi_subscription *sub, pagi_str channel, const void *d, size_t len,
                         void *ud)
{
    feed *f = ud;
    char counts[MAX_OPTIONS * 24];
    (void)sub, (void)channel, (void)d, (void)len;
    counts_json(f->P, f->id, f->nopts, counts, sizeof counts);
    pagi_group_send_event(f->sse, "counts", counts, strlen(counts));
    pagi_group_send_text(f->ws, counts, strlen(counts));
}

/* This worker's feed of poll id (made on first use, fed by pub/sub), or NULL. */
static feed *feed_of(polls *P, long id, int nopts)
{
    char channel[40];
    for (size_t i = 0; i < P->n_feeds; i++)
        if (P->feeds[i]->id == id)
            return P->feeds[i];
    feed **grown = realloc(P->feeds, (P->n_feeds + 1) * sizeof *grown);
    feed *f = grown ? calloc(1, sizeof *f) : NULL;
    if (grown)
        P->feeds = grown;
    if (!f)
        return NULL;
    *f = (feed){.id = id, .nopts = nopts, .P = P};
    f->sse = pagi_group_new(PAGI_GROUP_CONFLATE); /* a slow client gets the latest counts */
    f->ws = pagi_group_new(PAGI_GROUP_CONFLATE);
    snprintf(channel, sizeof channel, "poll.%ld", id);
    if (f->sse && f->ws)
        f->sub = pagi_subscribe(P->life, channel, poll_changed, f);
    if (!f->sub) {
        pagi_group_free(f->sse);
        pagi_group_free(f->ws);
        free(f);
        return NULL;
    }
    P->feeds[P->n_feeds++] = f;
    return f;
}

static void polls_destroy(void *obj, void *ud)
{
    polls *P = obj;
    (void)ud;
    for (size_t i = 0; i < P->n_feeds; i++) {
        pagi_unsubscribe(P->feeds[i]->sub);
        pagi_group_free(P->feeds[i]->sse);
        pagi_group_free(P->feeds[i]->ws);
        free(P->feeds[i]);
    }
    free(P->feeds);
    free(P);
}

static void *polls_create(pagi_scope *s, void *ud, const char **err)
{
    (void)ud;
    pagi_shared *dict = pagi_shared_dict(pagi_scope_loop(s), "polls");
    polls *P = dict ? calloc(1, sizeof *P) : NULL;
    if (P)
        *P = (polls){.dict = dict, .life = s};
    else
        *err = dict ? "polls: out of memory"
                    : "polls: no shared dict 'polls' (shared_dicts: [{name: polls, size: 16m}])";
    return P;
}

static void handle(pagi_scope *s, void *instance)
{
    (void)instance;
    if (pagi_scope_type_of(s) == PAGI_SCOPE_LIFESPAN) {
        pagi_lifespan_run(s, "polls", polls_create, polls_destroy, NULL);
        return;
    }
    polls *P = pagi_state_get(s, "polls");
    pagi_str path = pagi_scope_path(s);
    char p[256], json[MAX_BODY], counts[MAX_OPTIONS * 24], *rest = p;
    long id = 0;
    if (!P) {
        pagi_scope_finish(s, "polls: no state (lifespan did not run)");
        return;
    }
    snprintf(p, sizeof p, "%.*s", (int)(path.len < 255 ? path.len : 255), path.ptr);
    int is_post = strcmp(pagi_scope_method(s), "POST") == 0;
    pagi_scope_type type = pagi_scope_type_of(s);
    if (!strcmp(p, "/polls") && is_post && type == PAGI_SCOPE_HTTP) {
        pagi_read_body(s, MAX_BODY, create_body, P);
        return;
    }
    if (!strncmp(p, "/polls/", 7) && p[7] >= '1' && p[7] <= '9')
        id = strtol(p + 7, &rest, 10); /* rest: "", "/events", "/ws" or "/vote/K" */
    if (type == PAGI_SCOPE_SSE || type == PAGI_SCOPE_WEBSOCKET) {
        int sse = type == PAGI_SCOPE_SSE;
        int nopts = id > 0 && !strcmp(rest, sse ? "/events" : "/ws")
                        ? load_poll(P, id, json, sizeof json)
                        : -1;
        feed *f = nopts > 0 ? feed_of(P, id, nopts) : NULL;
        if (!f && sse)
            pagi_respond_text(s, 404, "no such poll feed\n");
        else if (!f)
            pagi_scope_finish(s, NULL); /* refused: 403 */
        else
            pagi_group_join(sse ? f->sse : f->ws, s, NULL, NULL);
        return;
    }
    if (id > 0 && is_post && !strncmp(rest, "/vote/", 6) && rest[6] >= '0' && rest[6] <= '9' &&
        strlen(rest + 6) <= 2) {
        vote(s, P, id, atoi(rest + 6));
        return;
    }
    int nopts = id > 0 && !*rest ? load_poll(P, id, json, sizeof json) : -1;
    if (nopts < 0 || is_post) {
        respond_json(s, nopts < 0 ? 404 : 405, "{\"error\":\"%s\"}\n",
                     nopts < 0 ? "no such poll" : "method not allowed");
        return;
    }
    counts_json(P, id, nopts, counts, sizeof counts);
    respond_json(s, 200, "{\"id\":%ld,\"poll\":%s,\"counts\":%s}\n", id, json, counts);
}

const pagi_app pagi_module = PAGI_APP_INIT("polls", NULL, handle, NULL);
