/*
 * perl_int.h - private declarations shared by the Perl host's files: the
 * embedded interpreter, the per-scope handle Perl code holds, and the
 * event conversions between Perl hashes and pagi_event.
 */
#ifndef PAGID_PERL_INT_H
#define PAGID_PERL_INT_H

#define PERL_NO_GET_CONTEXT
#include <EXTERN.h>
#include <perl.h>
#include <XSUB.h>

#include <stdint.h>

#include "common/buf.h"
#include "pagi/pagi.h"

extern PerlInterpreter *perl_host_interp;
extern pagi_loop *perl_host_loop;
#define dPERL                                                                                      \
    PerlInterpreter *my_perl = perl_host_interp;                                                   \
    PERL_UNUSED_VAR(my_perl)

/* An SV the C side holds for a scope until its callback runs or the scope is released. */
typedef struct perl_hold {
    struct perl_hold *prev, *next;
    struct perl_handle *h;
    SV *sv;
} perl_hold;

/* The C half of a scope as Perl sees it (a blessed ref holding this pointer). */
typedef struct perl_handle {
    pagi_scope *s;    /* NULL once released */
    int finished;     /* pagi_scope_finish called */
    int perl_alive;   /* the Perl handle object still exists */
    int releasing;    /* handle_release is dropping the holds */
    perl_hold *holds; /* futures and callbacks the server may still call */
    int nrefused;     /* distinct refused sends seen, each logged once (at most 8) */
    /* The app's end waits for its sends' callbacks (the at-once ones are
     * queued still): pagi_scope_finish comes after the last, so a scope
     * never finishes with send callbacks pending (what -D reports). */
    unsigned sends_pending;
    int finish_owed;
    char *finish_err;    /* its error (owned), or NULL */
    uint32_t refused[8]; /* their messages' hashes */
} perl_handle;

perl_hold *perl_hold_add(perl_handle *h, SV *sv);
void perl_hold_drop(perl_hold *n);

/* perl_events.c */
/* Once the glue has loaded, and before perl_destruct: the shared keys and classes. */
void perl_events_init(pTHX);
void perl_events_fini(pTHX);
SV *perl_event_to_hv(pTHX_ const pagi_event *ev);
/* Fill *ev from a Perl hashref; *hdrs gets a malloc'd array to free after pagi_send.
 * Returns NULL or a static/err-buffer message. */
const char *perl_event_from_sv(pTHX_ SV *ref, pagi_event *ev, pagi_header **hdrs,
                               pagi_header **hdrs2, char *err, size_t errlen);
SV *perl_scope_hv(pTHX_ pagi_scope *s, SV *handle, SV *state);

/* perl_xs.c */
void perl_xs_boot(pTHX);
/* Call $cb->($arg) (arg mortalised; G_EVAL: a die is logged, not fatal). */
void perl_call_cb(pTHX_ SV *cb, SV *arg);
SV *perl_handle_new(pTHX_ pagi_scope *s, perl_handle **out);
/* pagi_scope_finish once, if the scope is still there. */
void perl_handle_finish(perl_handle *h, const char *err);
/* Whether $f is a done Future that can be seen without a Perl call. */
int perl_future_done(pTHX_ SV *f);
/* The scope's $receive and $send (code refs, owned by the caller). */
void perl_scope_subs(pTHX_ SV *hsv, perl_handle *h, SV **receive, SV **send);
/* After the glue loaded: the shared done Future; before perl_destruct: let it go. */
void perl_xs_ready(pTHX);
void perl_xs_unready(pTHX);
/* For perl_pubsub.c: the handle of a handle object (croaks when it is not
 * one); a failed Future with err, and a done one (both owned by the caller). */
perl_handle *perl_xs_handle(pTHX_ SV *sv);
SV *perl_xs_failed_future(pTHX_ const char *err);
SV *perl_xs_done_future(pTHX);

/* perl_watch_xs.c: timers and fd watches behind Future::IO. */
void perl_watch_boot(pTHX);
/* Stop every timer and fd watch still running (the host's teardown). */
void perl_watch_stop_all(pTHX);
/** After perl_destruct: free every watch entry left (stopping the live ones). */
void perl_watch_free_all(void);

/* perl_shared_xs.c: the pagi.shared extension (shared dictionaries): its
 * methods, and the per-worker object scopes carry (NULL: none configured). */
void perl_shared_boot(pTHX);
SV *perl_shared_ext(pTHX);
void perl_shared_unready(pTHX);
/* perl_pubsub.c: the pagi.pubsub extension (publish, subscription objects). */
void perl_pubsub_boot(pTHX);
/* After the glue loaded / before perl_destruct. */
void perl_pubsub_ready(pTHX);
void perl_pubsub_unready(pTHX);

/* perl_pool_xs.c: the worker pool's facts and counters for Pool.pm. */
void perl_pool_boot(pTHX);
/* perl_pool_serve.c: a pool process's per-request I/O and PSGI env. */
void perl_pool_serve_boot(pTHX);
/* perl_pool_env.c: the env of a Q frame (n bytes at p), without
 * psgi.input, psgi.errors and psgix.cleanup*, and in *app the spec of the
 * app it is for (pointing into p); NULL when malformed. */
HV *perl_pool_env_of_head(pTHX_ const char *p, size_t n, const char **app, size_t *app_len);
/* Its keys, made once for each interpreter (perl_pool_serve_boot). */
void perl_pool_env_boot(pTHX);
/* psgi.input ($input), psgi.errors and psgix.cleanup* put in env, as
 * PSGI.pm's _prepare_env does. */
void perl_pool_env_complete(pTHX_ HV *env, SV *input, SV *errors);
/* Whether PSGI.pm's _cleanup has work after the response (handlers, or a
 * psgix.harakiri.commit). */
int perl_pool_env_needs_cleanup(pTHX_ HV *env);
/* An unlinked temporary file in TMPDIR for a spooled body, or -1. */
int perl_pool_spool_open(void);
/* A pool process's psgix.harakiri.commit: 1 when it may leave now (its slot
 * OFF: no worker can claim it any more), 0 when a worker claimed it
 * meanwhile (it leaves after that request; pool_finish says so). 1 outside
 * a pool process. */
int perl_pool_retire(void);

/* perl_glue.c: the Perl half, evaluated once after the interpreter starts. */
extern const char perl_glue_source[];

/* perl_modules.c (generated from src/perl/lib/): modules served to `require`. */
typedef struct perl_module {
    const char *name; /* as require sees it: "IO/Async/Loop/Pagid.pm" */
    const char *source;
} perl_module;
extern const perl_module perl_modules[]; /* ends with a NULL name */

/* perl_loop_xs.c: watchers for IO::Async/AnyEvent on the worker's loop. */
void perl_loop_boot(pTHX);
/* Set when app code asked for the loop while being preloaded (no loop yet). */
extern int perl_preload_wanted_loop;
/* Croaks: app code wants a watcher while the app is preloaded. Noted, so the
 * preload is refused even if the app caught the error. */
void perl_no_loop_yet(pTHX) __attribute__((noreturn));
/* The calling process runs the loop (a worker forked from the preloading zygote). */
void perl_loop_adopt_process(void);
/* The host's teardown: stop every watcher still running, drop its callback. */
void perl_loop_stop_watchers(pTHX);
/* After perl_destruct: free the watchers left. */
void perl_loop_free_watchers(void);
/* Set in a process forked from the worker (pthread_atfork). */
extern int perl_forked_child;
void perl_child_exit(void);
/* After Perl code returns into pagid's: a process the app forked that got
 * here (a die or a return in the child) must not go on as a second worker
 * on the same connections and listeners. A flag test: no syscall. */
#define perl_child_guard()                                                                         \
    do {                                                                                           \
        if (perl_forked_child)                                                                     \
            perl_child_exit();                                                                     \
    } while (0)

/* perl_pool_link.c: a worker's kept links to the pool's processes and its
 * queue. A job is one request or call: its owner embeds it and says what
 * to do with the frames that come back. */
typedef struct pool_job pool_job;
typedef struct pool_job_ops {
    /* A frame of the process for the job: -1 for one it never sends. End
     * frames (E, X, R, F) come after the job left its link. */
    int (*on_frame)(pool_job *j, char type, const char *p, size_t n);
    /* The process was lost before the job's end frame (it died). */
    void (*on_lost)(pool_job *j);
    /* A process took the job: its frames are being written. */
    void (*on_started)(pool_job *j);
    /* More frames into j->out (a spooled body); set j->out_done with the
     * last; -1 on an error. */
    int (*refill)(pool_job *j);
    /* Optional: the frames of one read were handed over (the job is still
     * on its link): a response can go on in one send, not one per frame. */
    void (*after_read)(pool_job *j);
} pool_job_ops;
struct pool_job {
    const pool_job_ops *ops;
    buf out;      /* frames still to write to the process */
    int out_done; /* out holds the last of them */
    /* the link's */
    pool_job *next;
    struct pool_link *link;
    int queued, sent;
    int num;  /* the pool process's number, once one took it */
    long pid; /* and its pid (0: unknown), for the log */
};
/* 1: a process took it; 0: it waits in the queue; -1: the queue is full. */
int pool_job_submit(pagi_loop *loop, pool_job *j);
/* The job's owner leaves: out of the queue, or its link cut (the process's
 * next write fails). Nothing is called back. */
void pool_job_cancel(pool_job *j);

/* perl_pool_relay.c: an http or sse scope of PSGI app `app` (its spec,
 * which names it to the pool process) served by the worker pool, relayed to
 * a pool process (loop->pool) without Perl. */
void perl_pool_relay_handle(pagi_scope *s, pagi_loop *loop, const char *app);

#endif
