/*
 * master_timing.h - the master's clock constants and the upgrade deadline,
 * apart from supervisor.h so that the pagid -s client (signal_cli.c), which
 * waits on an upgrade, shares them without including the supervisor.
 */
#ifndef PAGID_MASTER_TIMING_H
#define PAGID_MASTER_TIMING_H

#include "common/config.h"

/* Grace added to timeouts.shutdown before stragglers are SIGKILLed. */
#define SUPERVISOR_DRAIN_GRACE_S 5.0
/* How long a fast stop (SIGQUIT) waits before SIGKILL. */
#define SUPERVISOR_FAST_STOP_S 1.0
/* A new generation (or new master) not ready this long after
 * timeouts.lifespan_startup is given up. */
#define SUPERVISOR_START_GRACE_S 10.0
/* The variable that tells a re-executed master who its predecessor is. */
#define SUPERVISOR_UPGRADE_ENV "PAGID_UPGRADE_PARENT"

/**
 * How long after SIGUSR2 the old master waits for the new one to be ready
 * before it gives up on the upgrade: timeouts.lifespan_startup (60 s when
 * 0) + 30 s for exec, config and the start grace. pagid -s upgrade waits
 * a little longer, so it hears the master's verdict.
 */
static inline double master_upgrade_timeout(const pagid_config *cfg)
{
    double t = cfg->timeouts.lifespan_startup;
    return (t > 0 ? t : 60.0) + SUPERVISOR_START_GRACE_S + 20.0;
}

#endif
