/*
 * shdicts.h - the master's side of `shared_dicts`: give each generation's
 * config its mappings before the generation forks (kept from a live
 * generation when name and size match, so a reload keeps the data), and
 * let go of them when a generation is freed.
 */
#ifndef PAGID_MASTER_SHDICTS_H
#define PAGID_MASTER_SHDICTS_H

#include "common/config.h"
#include "generation.h"

/**
 * Fill every cfg->shared_dicts[i].dict: the mapping of an entry with the
 * same name and size in a generation of all (may be NULL), else a new one.
 * 0, or -1 after logging (what was made for cfg is released).
 */
int shdicts_attach(pagid_config *cfg, const generation *all);
/**
 * Unmap, in this process, cfg's mappings that no generation of others
 * (cfg's own excluded) uses; the memory goes with the last process that
 * has it mapped. Each entry's dict becomes NULL.
 */
void shdicts_detach(pagid_config *cfg, const generation *others);

#endif
