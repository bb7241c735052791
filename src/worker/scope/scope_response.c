/*
 * scope_response.c - timeouts.response: a timer per http (and not yet
 * started sse) scope from the app's call to its response start; when it
 * fires the scope's driver answers 504 and the exchange ends with
 * x-response-timeout, logged with the app and the request.
 */
#include "scope_internal.h"

#include <string.h>

#include "common/log.h"
#include "common/shm.h"

/* The app the scope went to: the mount's under its root_path, else the top one. */
static const char *scope_app_spec(const pagi_scope *s, const char **mount)
{
    const pagid_config *c = s->w->cfg;
    *mount = NULL;
    for (size_t i = 0; s->mount_len && i < c->n_mounts; i++) {
        const char *p = c->mounts[i].path;
        if (strlen(p) == s->mount_len && !memcmp(p, s->req.path.ptr, s->mount_len)) {
            *mount = p;
            return c->mounts[i].app;
        }
    }
    return c->app;
}

static void on_response_timeout(struct ev_loop *ev, ev_timer *t, int revents)
{
    pagi_scope *s = t->data;
    if (s->started || !s->connected || !s->proto)
        return; /* stopped at each of these; never trusted blindly */
    const char *mount, *app = scope_app_spec(s, &mount);
    int plen = s->req.raw_path.len > 200 ? 200 : (int)s->req.raw_path.len;
    log_error("app %s%s%s did not start a response to %s %.*s within timeouts.response (%gs); "
              "sent 504",
              app ? app : "?", mount ? " mounted at " : "", mount ? mount : "", s->req.method, plen,
              s->req.raw_path.ptr, s->w->cfg->timeouts.response);
    if (s->w->stats)
        shm_add(&s->w->stats->response_timeouts, 1);
    scope_ref(s); /* the driver ends the exchange: the scope outlives the call */
    s->ops->response_timeout(s);
    scope_unref(s);
}

void scope_response_timer_arm(pagi_scope *s)
{
    double limit = s->w->cfg->timeouts.response;
    if (limit > 0 && s->ops->response_timeout && !s->started && s->connected) {
        ev_timer_init(&s->resp_timer, on_response_timeout, limit, 0.);
        s->resp_timer.data = s;
        ev_timer_start(s->w->loop.ev, &s->resp_timer);
    }
}

void scope_response_timer_stop(pagi_scope *s)
{
    if (ev_is_active(&s->resp_timer))
        ev_timer_stop(s->w->loop.ev, &s->resp_timer);
}
