/*
 * proctitle.h - process titles as ps(1) and /proc/PID/cmdline show them:
 * "pagid: master process /usr/sbin/pagid -c /etc/pagid/pagid.yaml",
 * "pagid: worker 2 (generation 3, draining)". The comm name stays "pagid",
 * so pkill -x pagid, pidof pagid and logrotate keep finding the processes.
 */
#ifndef PAGID_PROCTITLE_H
#define PAGID_PROCTITLE_H

/**
 * Claim the memory of argv's strings and of the environment strings that
 * follow them as the title area. Call first thing in main(), before
 * anything keeps a pointer into argv: the strings are copied to the heap
 * and argv[i], environ and program_invocation_name are pointed at the
 * copies, so the rest of pagid (getopt results, the re-exec of an upgrade,
 * getenv/setenv) sees the original values. 0, or -1 when out of memory
 * (then titles are simply never changed).
 */
int proctitle_init(int argc, char **argv);

/** The title, printf-style; truncated to the area. A no-op before init. */
void proctitle_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/**
 * "pagid: master process ARGS", or with a state
 * "pagid: master process (STATE) ARGS"; ARGS is the original command line.
 */
void proctitle_master(const char *state);

/** "pagid: worker N (generation G)", with ", draining" inside the parentheses. */
void proctitle_worker(int num, unsigned generation, int draining);

/** "pagid: zygote (generation G)": the process that preloads the apps and forks workers. */
void proctitle_zygote(unsigned generation);
/** "pagid: pool process N (generation G, idle|busy)". */
void proctitle_pool(int num, unsigned generation, const char *state);

#endif
