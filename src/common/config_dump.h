/*
 * config_dump.h - a pagid_config written back as YAML (pagid -T), in forms
 * the loader reads back to the same model.
 */
#ifndef PAGID_CONFIG_DUMP_H
#define PAGID_CONFIG_DUMP_H

#include <stdio.h>

#include "config.h"

/**
 * Write every key of c to out as one YAML document (no comments, no
 * "---"). Loading the output with config_load_* and finalizing gives a
 * config equal to c (the status listener is shown under status, not in
 * listen). 0, or -1 on a write or emitter error.
 */
int config_dump(const pagid_config *c, FILE *out);

/** A size in the largest exact unit: 65536 -> "64k", 1000 -> "1000". */
void config_format_size(size_t v, char *buf, size_t len);
/** A duration the loader reads back exactly: 60 -> "60s", 300 -> "5m", 0.5 -> "500ms". */
void config_format_duration(double v, char *buf, size_t len);

#endif
