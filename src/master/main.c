/*
 * main.c - pagid's entry point: parse the command line, build the config,
 * then either check it and the host (-t), run one worker in this process
 * (--workers 0), or become the master that supervises N workers.
 */
#include <config.h> /* autoconf's, from the build directory: PACKAGE_VERSION */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/exitcodes.h"
#include "common/log.h"
#include "common/pidfile.h"
#include "common/proctitle.h"
#include "worker/worker.h"
#include "cli.h"
#include "check_apps.h"
#include "cli_print.h"
#include "listeners.h"
#include "shdicts.h"
#include "signal_cli.h"
#include "preflight.h"
#include "privileges.h"
#include "supervisor.h"

/* Startup errors go to the terminal (or the journal) as "pagid: ...", and
 * also to the error log when that is a file an operator may be watching. */
static void startup_error(const pagid_config *cfg, const char *msg)
{
    fprintf(stderr, "%s%s\n", config_msg_has_pos(msg) ? "" : "pagid: ", msg);
    if (cfg->error_log_path && *cfg->error_log_path && strcmp(cfg->error_log_path, "stderr"))
        log_error("%s", msg);
}

/*
 * Sockets handed to us: by the old master of a binary upgrade, else by
 * systemd socket activation. Taken before the config is built, because
 * with no listener configured anywhere the sockets systemd passed are the
 * listeners: their addresses go to o->activated (an upgrade passes on the
 * list it was started with). The variables are consumed here so that
 * nothing we start later sees them. 0, or -1 with err set.
 */
static int take_inherited(inherited_set *inh, cli_options *o, char *err, size_t errlen)
{
    const char *env = getenv(LISTENERS_ENV);
    if (env) {
        char *copy = strdup(env);
        unsetenv(LISTENERS_ENV);
        int rc = copy ? listeners_env_parse(copy, inh, err, errlen) : -1;
        if (!copy)
            snprintf(err, errlen, "out of memory");
        free(copy);
        const char *act = getenv(LISTENERS_ACTIVATED_ENV);
        if (rc == 0 && act && listeners_specs_parse(act, &o->activated, &o->n_activated) < 0) {
            snprintf(err, errlen, "malformed %s", LISTENERS_ACTIVATED_ENV);
            rc = -1;
        }
        unsetenv(LISTENERS_ACTIVATED_ENV);
        /* Sockets systemd once passed stay systemd's (their files too). */
        for (size_t i = 0; rc == 0 && i < inh->n; i++)
            for (size_t k = 0; inh->items[i].name && k < o->n_activated; k++)
                if (strcmp(inh->items[i].name, o->activated[k]) == 0)
                    inh->items[i].systemd = 1;
        return rc;
    }
    unsetenv(LISTENERS_ACTIVATED_ENV);
    if (listeners_from_systemd(inh) < 0) {
        snprintf(err, errlen, "socket activation: unusable LISTEN_FDS");
        return -1;
    }
    if (inh->n && listeners_inherited_specs(inh, &o->activated, &o->n_activated) < 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

/* The binary a SIGUSR2 re-executes: this one, by its absolute path. */
static const char *resolve_exe(const char *argv0, char *buf, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", buf, len - 1);
    if (n > 0) {
        buf[n] = '\0';
        return buf;
    }
    char tmp[PATH_MAX];
    if (argv0 && strchr(argv0, '/') && realpath(argv0, tmp) && strlen(tmp) < len) {
        memcpy(buf, tmp, strlen(tmp) + 1);
        return buf;
    }
    return NULL;
}

/* Everything after a valid config: log, sockets, pid file, processes.
 * inh (the sockets handed to us) is consumed. */
static int serve(const pagid_config *cfg, master_opts *mo, inherited_set *inh)
{
    if (log_open(cfg->error_log_path, cfg->error_log_level) < 0) {
        fprintf(stderr, "pagid: cannot open error log %s: %s\n", cfg->error_log_path,
                log_open_strerror(errno));
        inherited_set_free(inh, 0);
        return EXIT_STARTUP;
    }
    if (inh->n && strcmp(inh->origin, "systemd") == 0)
        log_info("socket activation: %zu socket%s from systemd", inh->n, inh->n == 1 ? "" : "s");
    /* A peer that resets a connection must never kill a process. */
    signal(SIGPIPE, SIG_IGN);
    /* The role from the first line on: what is said before the fork
     * (who the workers run as, a bind error) is the master's. */
    int nworkers = supervisor_resolve_workers(cfg);
    if (nworkers > 0)
        log_set_role("master");

    listener_set ls;
    char err[2048];
    /* Before any socket or fork: an unknown user is one clear error, not
     * N dead workers. */
    priv_identity id;
    priv_problem problem;
    if (priv_resolve(cfg, geteuid(), &id, &problem, err, sizeof err) < 0) {
        startup_error(cfg, err);
        inherited_set_free(inh, 0);
        return EXIT_STARTUP;
    }
    int warn;
    priv_describe(&id, err, sizeof err, &warn);
    if (*err)
        log_msg(warn ? LOG_LVL_WARN : LOG_LVL_INFO, "%s", err);
    if (nworkers > 0)
        supervisor_block_signals();
    int rc = listeners_open_with(cfg, &ls, NULL, 0, inh, err, sizeof err);
    inherited_set_free(inh, 1);
    if (rc < 0) {
        startup_error(cfg, err);
        return EXIT_STARTUP;
    }
    char why[256];
    if (cfg->pid_file && *cfg->pid_file &&
        pidfile_write(cfg->pid_file, getpid(), why, sizeof why) < 0) {
        snprintf(err, sizeof err, "cannot write pid file %s: %s", cfg->pid_file, why);
        startup_error(cfg, err);
        for (size_t i = 0; mo->upgrade_parent && ls.unix_ino && i < ls.n; i++)
            ls.unix_ino[i] = 0; /* the old master's files: it still serves them */
        listeners_destroy(&ls);
        return EXIT_STARTUP;
    }

    if (nworkers == 0) {
        if (cfg->pubsub.backend != PUBSUB_BACKEND_LOCAL)
            log_warn("pubsub.backend is served by the master: with workers: 0 (no master) "
                     "pub/sub stays within this process");
        /* Development mode: no master, this process is the only worker. */
        /* The access log is opened before the switch of user, as the
         * master would (a reopen on SIGUSR1 is by path, as that user). */
        worker_logs logs = {.chan = -1, .access_fd = -1};
        if (cfg->access_log_path && *cfg->access_log_path &&
            !config_path_is_stderr(cfg->access_log_path)) /* else by path, as that user */
            logs.access_fd = log_open_append(cfg->access_log_path, 1, O_NONBLOCK);
        rc = shdicts_attach((pagid_config *)cfg, NULL) < 0 || priv_drop(&id) < 0
                 ? EXIT_STARTUP
                 : worker_run(cfg, ls.items, ls.n, 1, 0, NULL, 1, -1, &logs);
        shdicts_detach((pagid_config *)cfg, NULL);
        /* Without a master "do not respawn me" means "could not start". */
        if (rc == EXIT_WORKER_FATAL)
            rc = EXIT_STARTUP;
    } else {
        rc = supervisor_run(cfg, &ls, nworkers, mo);
    }

    listeners_destroy(&ls);
    if (cfg->pid_file && *cfg->pid_file) /* after an upgrade the files may be the new master's */
        pidfile_remove_own(cfg->pid_file, getpid());
    if (nworkers > 0)
        log_info("exiting (status %d)", rc);
    return rc;
}

int main(int argc, char **argv)
{
    proctitle_init(argc, argv); /* before anything keeps a pointer into argv */
    cli_options o = {0};
    if (cli_parse(argc, argv, &o, stderr) < 0) {
        cli_options_free(&o);
        return EXIT_USAGE;
    }
    if (o.show_help) {
        cli_usage(stdout);
        cli_options_free(&o);
        return EXIT_OK;
    }
    if (o.show_version) {
        printf("pagid %s\n", PACKAGE_VERSION);
        cli_options_free(&o);
        return EXIT_OK;
    }
    if (o.show_build || o.signal_name) {
        int code = EXIT_OK;
        if (o.show_build)
            cli_print_build(stdout);
        else
            code = signal_cli_run(&o, stdout, stderr);
        cli_options_free(&o);
        return code;
    }

    inherited_set inh = {.origin = "inherited"};
    if (!o.test_only) {
        char err[512];
        if (take_inherited(&inh, &o, err, sizeof err) < 0) {
            fprintf(stderr, "pagid: %s\n", err);
            inherited_set_free(&inh, 0);
            cli_options_free(&o);
            return EXIT_STARTUP;
        }
    }
    /* A person reads a terminal and --dev's output; journald and files get
     * what they always did. */
    if (cli_dev_mode(&o) || (isatty(2) && !getenv("JOURNAL_STREAM")))
        log_set_human(isatty(2) && !getenv("NO_COLOR"));
    pagid_config cfg;
    memset(&cfg, 0, sizeof cfg);
    int errors = cli_build_config(&o, &cfg, stderr);
    int rc;
    if (o.test_only) {
        /* What would still stop it on this host: users, addresses, files.
         * Its notes go to stderr under -T, whose stdout is the YAML alone. */
        errors += preflight_check(&cfg, o.dump_config ? stderr : stdout, stderr);
        /* The Perl apps compile, find their modules and return their code. */
        if (errors == 0)
            errors += check_apps_load(&cfg, stderr);
        /* "configuration FILE is valid", or without -c "configuration is valid" */
        const char *file = o.config_file ? o.config_file : "";
        const char *sep = o.config_file ? " " : "";
        if (errors == 0 && o.dump_config) {
            if (cli_print_config(&o, &cfg, stdout) < 0) {
                fprintf(stderr, "pagid: cannot print the configuration: %s\n", strerror(errno));
                errors = -1; /* valid, but the output is not */
            }
        } else if (errors == 0) {
            printf("pagid: configuration%s%s is valid\n", sep, file);
        } else {
            fprintf(stderr, "pagid: configuration%s%s is invalid (%d error%s)\n", sep, file, errors,
                    errors == 1 ? "" : "s");
        }
        rc = errors < 0 ? EXIT_STARTUP : errors ? EXIT_CONFIG : EXIT_OK;
    } else if (errors) {
        fprintf(stderr, "pagid: invalid configuration, not starting\n");
        inherited_set_free(&inh, 0);
        rc = EXIT_CONFIG;
    } else {
        char exe[PATH_MAX];
        master_opts mo = {.cli = &o,
                          .argv = argv,
                          .exe = resolve_exe(argv[0], exe, sizeof exe),
                          .pid_file = cfg.pid_file};
        const char *parent = getenv(SUPERVISOR_UPGRADE_ENV);
        if (parent) {
            mo.upgrade_parent = (pid_t)atoi(parent);
            unsetenv(SUPERVISOR_UPGRADE_ENV);
        }
        rc = serve(&cfg, &mo, &inh);
    }
    config_free(&cfg);
    cli_options_free(&o);
    return rc;
}
