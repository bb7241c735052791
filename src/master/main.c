/*
 * main.c - pagid's entry point: parse the command line, build the config,
 * then either check it (-t), run one worker in this process (--workers 0),
 * or become the master that supervises N workers.
 */
#include <config.h> /* autoconf's, from the build directory: PACKAGE_VERSION */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/exitcodes.h"
#include "../common/log.h"
#include "../worker/worker.h"
#include "cli.h"
#include "listeners.h"
#include "supervisor.h"

/* Startup errors go to the terminal (or the journal) as "pagid: ...", and
 * also to the error log when that is a file an operator may be watching. */
static void startup_error(const pagid_config *cfg, const char *msg)
{
    fprintf(stderr, "pagid: %s\n", msg);
    if (cfg->error_log_path && *cfg->error_log_path && strcmp(cfg->error_log_path, "stderr"))
        log_error("%s", msg);
}

static int write_pid_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%d\n", (int)getpid());
    ssize_t w = write(fd, buf, (size_t)n);
    int saved = errno;
    if (close(fd) < 0 && w == n)
        return -1;
    errno = saved;
    return w == n ? 0 : -1;
}

static int resolve_workers(const pagid_config *cfg)
{
    if (cfg->workers != CONFIG_WORKERS_AUTO)
        return cfg->workers;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Everything after a valid config: log, sockets, pid file, processes. */
static int serve(const pagid_config *cfg)
{
    if (log_open(cfg->error_log_path, cfg->error_log_level) < 0) {
        fprintf(stderr, "pagid: cannot open error log %s: %s\n", cfg->error_log_path,
                strerror(errno));
        return EXIT_STARTUP;
    }
    /* A peer that resets a connection must never kill a process. */
    signal(SIGPIPE, SIG_IGN);

    listener_set ls;
    char err[512];
    if (listeners_open(cfg, &ls, err, sizeof err) < 0) {
        startup_error(cfg, err);
        return EXIT_STARTUP;
    }
    if (cfg->pid_file && *cfg->pid_file && write_pid_file(cfg->pid_file) < 0) {
        snprintf(err, sizeof err, "cannot write pid file %s: %s", cfg->pid_file, strerror(errno));
        startup_error(cfg, err);
        listeners_destroy(&ls);
        return EXIT_STARTUP;
    }

    int rc;
    int nworkers = resolve_workers(cfg);
    if (nworkers == 0) {
        /* Development mode: no master, this process is the only worker. */
        rc = supervisor_drop_privileges(cfg) < 0 ? EXIT_STARTUP
                                                 : worker_run(cfg, ls.items, ls.n, 1, 0, NULL, 1);
        /* Without a master "do not respawn me" means "could not start". */
        if (rc == EXIT_WORKER_FATAL)
            rc = EXIT_STARTUP;
    } else {
        log_set_role("master");
        rc = supervisor_run(cfg, &ls, nworkers);
    }

    listeners_destroy(&ls);
    if (cfg->pid_file && *cfg->pid_file)
        unlink(cfg->pid_file);
    if (nworkers > 0)
        log_info("exiting (status %d)", rc);
    return rc;
}

int main(int argc, char **argv)
{
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

    pagid_config cfg;
    memset(&cfg, 0, sizeof cfg);
    int errors = cli_build_config(&o, &cfg, stderr);
    int rc;
    if (o.test_only) {
        /* "configuration FILE is valid", or without -c "configuration is valid" */
        const char *file = o.config_file ? o.config_file : "";
        const char *sep = o.config_file ? " " : "";
        if (errors == 0)
            printf("pagid: configuration%s%s is valid\n", sep, file);
        else
            fprintf(stderr, "pagid: configuration%s%s is invalid (%d error%s)\n", sep, file, errors,
                    errors == 1 ? "" : "s");
        rc = errors ? EXIT_CONFIG : EXIT_OK;
    } else if (errors) {
        fprintf(stderr, "pagid: invalid configuration, not starting\n");
        rc = EXIT_CONFIG;
    } else {
        rc = serve(&cfg);
    }
    config_free(&cfg);
    cli_options_free(&o);
    return rc;
}
