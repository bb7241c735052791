/*
 * counter.c - a small but complete PAGI application module for pagid, built
 * only against the installed <pagi/pagi.h> and <pagi/pagi_easy.h> (see
 * README.md, pagi(3) and pagi_easy(3)). It counts requests per worker and
 * reports how many body bytes it read.
 *
 * Shape of the module:
 *   lifespan  pagi_lifespan_run: startup publishes a pointer to the worker's
 *             counter in the lifespan state, shutdown logs the total.
 *   http      pagi_read_body collects the body (up to 16 MiB, else 413),
 *             pagi_respond_text answers "request #N, M body bytes" and
 *             finishes the scope.
 *   other     declined with pagi_scope_finish(s, "unsupported scope type").
 *
 * The same module written against pagi.h alone needs a callback per step
 * (receive, response start, response body, each lifespan reply) and a
 * failure check after every call: pagi_easy.h does those.
 */
#include <pagi/pagi.h>
#include <pagi/pagi_easy.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* The state key under which the lifespan publishes the shared counter. */
#define COUNTER_KEY "counter.hits"
#define MAX_BODY (16u << 20)

/* One per worker: created by create(), freed by destroy(). */
typedef struct counter_app {
    uint64_t hits;   /* shared with every request through the lifespan state */
    pagi_loop *loop; /* for logging */
} counter_app;

/* ------------------------------------------------------------------ */
/* lifespan                                                            */
/* ------------------------------------------------------------------ */

/* The "object" of this lifespan is the instance's counter: nothing to allocate. */
static void *counter_start(pagi_scope *s, void *ud, const char **err)
{
    counter_app *app = ud;
    (void)err;
    int is_worker = 0;
    int num = pagi_scope_worker_num(s, &is_worker);
    pagi_log(app->loop, PAGI_LOG_INFO, "counter: started (worker %d%s)", num,
             is_worker ? "" : ", single process");
    return &app->hits;
}

static void counter_stop(void *obj, void *ud)
{
    counter_app *app = ud;
    pagi_log(app->loop, PAGI_LOG_INFO, "counter: shutting down after %" PRIu64 " requests",
             *(uint64_t *)obj);
}

/* ------------------------------------------------------------------ */
/* http                                                                */
/* ------------------------------------------------------------------ */

/* The whole body arrived (body valid during this call only), or err says why not. */
static void body_read(pagi_scope *s, const char *body, size_t len, const char *err, void *ud)
{
    counter_app *app = ud;
    (void)body;
    if (err != NULL) {
        /* 413 or a disconnect: the layer answers and finishes the scope. */
        pagi_log(app->loop, PAGI_LOG_INFO, "counter: request %s not served: %s",
                 pagi_scope_method(s), err);
        return;
    }
    /* The state copy holds the pointer stored at startup; without a lifespan
     * (or with state unsupported) fall back to the instance's counter. */
    uint64_t *hits = pagi_state_get(s, COUNTER_KEY);
    if (hits == NULL)
        hits = &app->hits;
    char text[96];
    snprintf(text, sizeof text, "request #%" PRIu64 ", %zu body bytes\n", ++*hits, len);
    pagi_respond_text(s, 200, text); /* copies text, finishes the scope */
}

/* ------------------------------------------------------------------ */
/* module                                                              */
/* ------------------------------------------------------------------ */

static void *create(const char *arg, pagi_loop *loop, const char **err)
{
    (void)arg;
    counter_app *app = calloc(1, sizeof *app);
    if (app == NULL) {
        *err = "counter: out of memory";
        return NULL;
    }
    app->loop = loop;
    return app;
}

static void handle(pagi_scope *s, void *instance)
{
    switch (pagi_scope_type_of(s)) {
    case PAGI_SCOPE_LIFESPAN:
        pagi_lifespan_run(s, COUNTER_KEY, counter_start, counter_stop, instance);
        return;
    case PAGI_SCOPE_HTTP:
        pagi_read_body(s, MAX_BODY, body_read, instance);
        return;
    default:
        /* The spec: an app must refuse scope types it does not support. */
        pagi_scope_finish(s, "unsupported scope type");
        return;
    }
}

static void destroy(void *instance)
{
    free(instance);
}

const pagi_app pagi_module = PAGI_APP_INIT("counter", create, handle, destroy);
