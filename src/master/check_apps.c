/*
 * check_apps.c - pagid -t's load of the Perl apps: in a child process that
 * became the workers' user, as a zygote would load them, so a compile error,
 * a missing module or a file that returns no code reference fails the check.
 */
#include "check_apps.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/strtab.h"
#include "privileges.h"
#include "worker/preload.h"

#define CHECK_APPS_TIMEOUT_S 60

static int check_view(const pagid_config *c, FILE *err);

static int has_perl_app(const pagid_config *c)
{
    if (c->app && config_perl_app_kind(c->app))
        return 1;
    for (size_t i = 0; i < c->n_mounts; i++)
        if (config_perl_app_kind(c->mounts[i].app))
            return 1;
    return 0;
}

/* "perl: cannot load FILE: FILE:LINE: message" says FILE twice: keep the
 * part from the position on. */
static const char *without_prefix(const pagid_config *c, const char *msg)
{
    static const char pre[] = "perl: cannot load ";
    if (strncmp(msg, pre, sizeof pre - 1) != 0)
        return msg;
    const char *rest = msg + sizeof pre - 1;
    for (size_t i = 0; i <= c->n_mounts; i++) {
        const char *app = i == 0 ? c->app : c->mounts[i - 1].app;
        size_t n = app ? strlen(app) : 0;
        if (n && strncmp(rest, app, n) == 0 && rest[n] == ':' && rest[n + 1] == ' ')
            return rest + n + 2;
    }
    return msg;
}

/*
 * A view of c with each Perl app file once (a generated config mounts one
 * app under thousands of paths: loading it once says all). Shallow: it
 * borrows c's strings; free only view->mounts. 0, or -1 out of memory.
 */
static int unique_perl_apps(const pagid_config *c, pagid_config *view)
{
    *view = *c;
    view->app = NULL;
    view->mounts = calloc(c->n_mounts + 1, sizeof *view->mounts);
    view->n_mounts = 0;
    if (!view->mounts)
        return -1;
    strtab seen = STRTAB_INIT;
    for (size_t i = 0; i <= c->n_mounts; i++) {
        const char *app = i == 0 ? c->app : c->mounts[i - 1].app;
        int added = 1;
        if (!app || !config_perl_app_kind(app))
            continue;
        if (!strtab_get(&seen, app, strlen(app), 1, &added))
            added = 1; /* out of memory: loaded again, no harm */
        if (!added)
            continue;
        if (!view->app) /* the first is the top-level app of the view */
            view->app = (char *)app;
        else
            view->mounts[view->n_mounts++] = i == 0 ? (pagid_mount){.app = c->app}
                                                    : c->mounts[i - 1];
    }
    strtab_free(&seen);
    return 0;
}

int check_apps_load(const pagid_config *c, FILE *err)
{
    if (!has_perl_app(c))
        return 0;
    pagid_config view;
    if (unique_perl_apps(c, &view) < 0) {
        fprintf(err, "pagid: out of memory\n");
        return 1;
    }
    int rc = check_view(&view, err);
    free(view.mounts);
    return rc;
}

static int check_view(const pagid_config *c, FILE *err)
{
    priv_identity id;
    priv_problem problem;
    char why[2048];
    if (priv_resolve(c, geteuid(), &id, &problem, why, sizeof why) < 0)
        return 0; /* preflight_check reported it */
    fflush(stdout);
    fflush(err);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(err, "pagid: cannot load the apps to check them: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        /* The app's own output at load time is not -T's YAML. */
        dup2(fileno(err), 1);
        alarm(CHECK_APPS_TIMEOUT_S);
        if (id.change && priv_drop(&id) < 0) {
            fprintf(err, "pagid: cannot switch to the workers' user %s: %s\n", id.user,
                    strerror(errno));
            _exit(1);
        }
        int rc = worker_preload(c, why, sizeof why);
        if (rc == -1) {
            const char *msg = without_prefix(c, why);
            size_t len = strlen(msg);
            while (len && msg[len - 1] == '\n')
                len--;
            fprintf(err, "%s%.*s\n", msg == why ? "pagid: " : "", (int)len, msg);
            fflush(err);
            _exit(1);
        }
        fflush(err);
        _exit(0); /* -2 (loads, but not before fork) is fine for the workers */
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
        fprintf(err, "pagid: the apps did not finish loading within %d s\n", CHECK_APPS_TIMEOUT_S);
        return 1;
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
