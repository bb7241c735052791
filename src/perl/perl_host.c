/*
 * perl_host.c - the Perl host: one embedded interpreter per worker (made in
 * the first create, after fork), PAGI app files loaded into it, and the
 * pagi_app table that hands every scope to the Perl glue (perl_glue.c).
 */
#include "perl_int.h"
#include "perl_host.h"

#include "common/config.h"
#include "common/pool.h"
#include "worker/core/loop.h"
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

PerlInterpreter *perl_host_interp;
pagi_loop *perl_host_loop;
static int perl_instances;
static int perl_sys_inited;

/* Apps compiled by perl_host_preload, each waiting for one create. */
typedef struct preloaded_app {
    char *file;
    SV *app; /* owned until a create takes it */
} preloaded_app;
static preloaded_app *preloaded;
static size_t n_preloaded;
static int reseeded; /* this process called srand() after the fork */
int perl_preload_wanted_loop;

void perl_no_loop_yet(pTHX)
{
    perl_preload_wanted_loop = 1;
    croak("pagid's event loop does not exist yet: the app is being preloaded (it starts an event "
          "watcher while loading); it is loaded in each worker instead");
}

typedef struct perl_app {
    SV *app;    /* the app's coderef */
    SV *state;  /* the lifespan state hashref */
    int relay;  /* a PSGI app of the worker pool: http and sse scopes go to
                 * perl_pool_relay.c, no Perl runs for them in the worker */
    char *spec; /* the app's spec, which names it to the pool processes
                 * (a Q frame's app field); set with relay */
} perl_app;

EXTERN_C void boot_DynaLoader(pTHX_ CV *cv);

static void xs_init(pTHX)
{
    newXS("DynaLoader::boot_DynaLoader", boot_DynaLoader, __FILE__);
}

static const char *start_interpreter(void)
{
    static char arg0[] = "pagid", arg1[] = "-e", arg2[] = "0";
    static char *args[] = {arg0, arg1, arg2, NULL};
    static char *no_env[] = {NULL};
    if (!perl_sys_inited) {
        int argc = 3;
        char **argv = args, **env = no_env;
        PERL_SYS_INIT3(&argc, &argv, &env);
        perl_sys_inited = 1;
    }
    PerlInterpreter *my_perl = perl_alloc();
    if (!my_perl)
        return "cannot allocate the Perl interpreter";
    PERL_SET_CONTEXT(my_perl);
    perl_construct(my_perl);
    PL_exit_flags |= PERL_EXIT_DESTRUCT_END;
    if (perl_parse(my_perl, xs_init, 3, args, NULL) != 0 || perl_run(my_perl) != 0) {
        perl_destruct(my_perl);
        perl_free(my_perl);
        return "cannot start the Perl interpreter";
    }
    perl_host_interp = my_perl;
    perl_xs_boot(aTHX);
    perl_watch_boot(aTHX);
    perl_loop_boot(aTHX);
    perl_pubsub_boot(aTHX);
    perl_shared_boot(aTHX);
    perl_pool_boot(aTHX);
    perl_pool_serve_boot(aTHX);
    eval_pv(perl_glue_source, FALSE);
    if (SvTRUE(ERRSV)) {
        pagi_log(perl_host_loop, 0, "perl: the pagid glue failed to load: %s", SvPV_nolen(ERRSV));
        return "the Perl host's glue failed to load (are libfuture-perl and "
               "libfuture-io-perl installed?)";
    }
    /* The hooks for foreign event loops (require, IO::Async, AnyEvent): a
     * few assignments; their modules compile only when an app asks. */
    const char *hooks = NULL;
    for (const perl_module *m = perl_modules; m->name; m++)
        if (strcmp(m->name, "PAGI/Server/Pagid/Loops.pm") == 0)
            hooks = m->source;
    if (hooks)
        eval_pv(hooks, FALSE);
    if (!hooks || SvTRUE(ERRSV)) {
        pagi_log(perl_host_loop, 0, "perl: the pagid loop hooks failed to load: %s",
                 hooks ? SvPV_nolen(ERRSV) : "missing");
        return "the Perl host's loop hooks failed to load";
    }
    perl_xs_ready(aTHX);
    perl_pubsub_ready(aTHX);
    /* error_log.path set: the app's stderr is the log file, and its warn
     * (DBI's PrintError too) a log line tagged with this worker. */
    if (log_capture_stderr())
        eval_pv("$SIG{__WARN__} = sub { my $m = join '', @_; $m =~ s/\\n\\z//;"
                " PAGI::Server::Pagid::XS::log(1, \"perl: $m\") };",
                FALSE);
    return NULL;
}

static void stop_interpreter(void)
{
    dPERL;
    if (!my_perl)
        return;
    perl_watch_stop_all(aTHX);
    perl_loop_stop_watchers(aTHX);
    perl_pubsub_unready(aTHX);
    perl_shared_unready(aTHX);
    perl_xs_unready(aTHX);
    PL_perl_destruct_level = 1;
    perl_destruct(my_perl);
    perl_free(my_perl);
    perl_host_interp = NULL;
    perl_watch_free_all();
    perl_loop_free_watchers();
    /* The interpreter that owned the preloaded code references is gone. */
    for (size_t i = 0; i < n_preloaded; i++)
        free(preloaded[i].file);
    free(preloaded);
    preloaded = NULL;
    n_preloaded = 0;
}

/* Call a glue function in list context with string args; returns its first result (owned). */
static SV *call_glue(pTHX_ const char *fn, SV **args, int nargs, char *err, size_t errlen)
{
    dSP;
    SV *ret = NULL;
    ENTER;
    SAVETMPS;
    PUSHMARK(SP);
    for (int i = 0; i < nargs; i++)
        XPUSHs(args[i]);
    PUTBACK;
    int n = call_pv(fn, G_SCALAR | G_EVAL);
    perl_child_guard();
    SPAGAIN;
    if (SvTRUE(ERRSV)) {
        if (err)
            snprintf(err, errlen, "%s", SvPV_nolen(ERRSV));
        if (n > 0)
            (void)POPs;
    } else if (n > 0) {
        ret = SvREFCNT_inc(POPs);
    }
    PUTBACK;
    FREETMPS;
    LEAVE;
    return ret;
}

/* The app's code reference from the glue's _load (owned), or NULL with msg set. */
static SV *load_app(pTHX_ const char *file, char *msg, size_t msglen)
{
    ENTER;
    SAVETMPS;
    SV *sv_file = sv_2mortal(newSVpv(file, 0));
    SV *lib = sv_2mortal(newSVpv(getenv("PAGID_PERL_LIB") ? getenv("PAGID_PERL_LIB") : "", 0));
    SV *args[2] = {sv_file, lib};
    msg[0] = 0;
    SV *app = call_glue(aTHX_ "PAGI::Server::Pagid::_load", args, 2, msg, msglen);
    FREETMPS;
    LEAVE;
    if (app && !SvROK(app)) {
        SvREFCNT_dec(app);
        app = NULL;
    }
    if (!app) {
        if (!msg[0])
            snprintf(msg, msglen, "%s did not return a code reference", file);
        size_t l = strlen(msg);
        while (l && msg[l - 1] == '\n')
            msg[--l] = 0;
    }
    return app;
}

int perl_host_preload(const char *file, char *err, size_t errlen)
{
    if (!perl_host_interp) {
        const char *e = start_interpreter();
        if (e) {
            snprintf(err, errlen, "%s", e);
            return -1;
        }
    }
    dPERL;
    preloaded_app *v = realloc(preloaded, (n_preloaded + 1) * sizeof *v);
    if (!v) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    preloaded = v;
    char msg[1024];
    SV *app = load_app(aTHX_ file, msg, sizeof msg);
    if (perl_preload_wanted_loop) {
        /* A timer or watcher at load time cannot be shared by forked
         * workers (their loops do not exist yet): not preloadable. */
        if (app)
            SvREFCNT_dec(app);
        snprintf(err, errlen, "%s starts event watchers while it loads", file);
        return -2;
    }
    if (!app) {
        snprintf(err, errlen, "perl: cannot load %s: %s", file, msg);
        return -1;
    }
    if (!(v[n_preloaded].file = strdup(file))) {
        SvREFCNT_dec(app);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    v[n_preloaded++].app = app;
    return 0;
}

/* The preloaded code reference of file, taken (owned by the caller), or NULL. */
static SV *take_preloaded(pTHX_ const char *file)
{
    for (size_t i = 0; i < n_preloaded; i++) {
        if (preloaded[i].app && strcmp(preloaded[i].file, file) == 0) {
            SV *app = preloaded[i].app;
            preloaded[i].app = NULL;
            if (!reseeded) {
                /* rand() seeded at load time would give every worker the
                 * same sequence: each worker draws its own seed. */
                eval_pv("srand(); 1", FALSE);
                reseeded = 1;
            }
            return app;
        }
    }
    return NULL;
}

/* Does the generation's pool serve app spec? Every PSGI app of the config
 * (the top-level one and the mounted ones: the pool processes load them
 * all), and a PAGI app whose worker_pool names its handlers. */
static int pooled_app(const pool_info *pool, const char *spec)
{
    if (!pool)
        return 0;
    if (config_perl_app_kind(spec) == CONFIG_PERL_PSGI)
        return 1;
    return pool->handlers && pool->app && strcmp(spec, pool->app) == 0;
}

static void *perl_create(const char *arg, pagi_loop *loop, const char **err)
{
    static char msg[1024];
    if (!arg || !*arg) {
        *err = "the Perl host needs an app file";
        return NULL;
    }
    perl_host_loop = loop;
    perl_loop_adopt_process();
    if (!perl_host_interp) {
        const char *e = start_interpreter();
        if (e) {
            *err = e;
            return NULL;
        }
    }
    dPERL;
    perl_app *pa = calloc(1, sizeof *pa);
    if (!pa) {
        *err = "out of memory";
        return NULL;
    }
    pa->app = take_preloaded(aTHX_ arg);
    if (!pa->app)
        pa->app = load_app(aTHX_ arg, msg, sizeof msg);
    if (!pa->app) {
        free(pa);
        pagi_log(loop, 0, "perl: cannot load %s: %s", arg, msg);
        *err = msg;
        if (!perl_instances)
            stop_interpreter();
        return NULL;
    }
    if (pooled_app(loop->pool, arg)) {
        /* The generation's worker pool serves this app (Pool.pm): a worker
         * gets the app that dispatches to it, a pool process serves it. */
        SV *args[2] = {pa->app, newSVpv(arg, 0)};
        SV *pooled = call_glue(aTHX_ "PAGI::Server::Pagid::Pool::setup", args, 2, msg, sizeof msg);
        SvREFCNT_dec(args[1]);
        if (!pooled || !SvROK(pooled)) {
            if (pooled)
                SvREFCNT_dec(pooled);
            SvREFCNT_dec(pa->app);
            free(pa);
            pagi_log(loop, 0, "perl: worker pool: %s", msg[0] ? msg : "setup failed");
            *err = msg;
            if (!perl_instances)
                stop_interpreter();
            return NULL;
        }
        SvREFCNT_dec(pa->app);
        pa->app = pooled;
        SV *relay = get_sv("PAGI::Server::Pagid::Pool::RELAY", 0);
        pa->relay = !loop->pool->process && relay && SvTRUE(relay) &&
                    config_perl_app_kind(arg) == CONFIG_PERL_PSGI;
        if (pa->relay && !(pa->spec = strdup(arg))) {
            SvREFCNT_dec(pa->app);
            free(pa);
            *err = "out of memory";
            if (!perl_instances)
                stop_interpreter();
            return NULL;
        }
    }
    pa->state = newRV_noinc((SV *)newHV());
    perl_instances++;
    return pa;
}

/* What the app died with, as a scope's error: trailing white space trimmed. */
static const char *app_error(pTHX_ SV *e)
{
    STRLEN len;
    const char *p = SvPV(e, len);
    while (len && isSPACE(p[len - 1]))
        len--;
    if (!len)
        return "died";
    return SvPVX(sv_2mortal(newSVpvn(p, len)));
}

static void perl_handle_scope(pagi_scope *s, void *instance)
{
    dPERL;
    perl_app *pa = instance;
    if (pa->relay) {
        pagi_scope_type type = pagi_scope_type_of(s);
        if (type == PAGI_SCOPE_HTTP || type == PAGI_SCOPE_SSE) {
            perl_pool_relay_handle(s, perl_host_loop, pa->spec);
            return;
        }
    }
    perl_handle *h = NULL;
    SV *hsv = perl_handle_new(aTHX_ s, &h);
    if (!hsv) {
        pagi_scope_finish(s, "perl: out of memory");
        return;
    }
    ENTER;
    SAVETMPS; /* this runs from the loop, outside any Perl statement: free our temps here */
    SV *scope = perl_scope_hv(aTHX_ s, hsv, pa->state);
    SV *receive, *send;
    perl_scope_subs(aTHX_ hsv, h, &receive, &send);
    sv_2mortal(hsv);
    dSP;
    PUSHMARK(SP);
    XPUSHs(sv_2mortal(scope));
    XPUSHs(sv_2mortal(receive));
    XPUSHs(sv_2mortal(send));
    PUTBACK;
    int n = call_sv(pa->app, G_SCALAR | G_EVAL);
    perl_child_guard(); /* an app that forked: only the worker goes on */
    SPAGAIN;
    SV *f = n > 0 ? POPs : &PL_sv_undef;
    PUTBACK;
    if (SvTRUE(ERRSV)) {
        perl_handle_finish(h, app_error(aTHX_ ERRSV));
    } else if (perl_future_done(aTHX_ f)) {
        perl_handle_finish(h, NULL); /* the common case: no Perl call to see it */
    } else {
        /* Not a Future, failed, or pending: the glue's _settle finishes it now or later. */
        char err[512];
        err[0] = 0;
        SV *args[2] = {hsv, f};
        SV *r = call_glue(aTHX_ "PAGI::Server::Pagid::_settle", args, 2, err, sizeof err);
        if (r)
            SvREFCNT_dec(r);
        if (err[0]) /* the glue itself failed: still finish the scope once */
            perl_handle_finish(h, err);
    }
    FREETMPS;
    LEAVE;
}

static void perl_destroy(void *instance)
{
    perl_app *pa = instance;
    if (!pa)
        return;
    {
        dPERL;
        SvREFCNT_dec(pa->app);
        SvREFCNT_dec(pa->state);
    }
    free(pa->spec);
    free(pa);
    if (--perl_instances == 0)
        stop_interpreter();
}

const pagi_app app_perl = {
    .abi_version = PAGI_ABI_VERSION,
    .name = "perl",
    .create = perl_create,
    .handle = perl_handle_scope,
    .destroy = perl_destroy,
};

void perl_host_flush_output(void)
{
    if (!perl_host_interp)
        return;
    dPERL;
    PerlIO_flush(NULL);
}
