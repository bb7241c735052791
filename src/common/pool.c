/*
 * pool.c - the worker pool's figures, summed from the shared region: pool
 * processes publish whether they are busy, workers how many of their
 * requests wait for a process and how many were refused (pool.h).
 */
#include "pool.h"

#include <string.h>

void pool_figures_read(const shm_region *shm, unsigned gen, pool_figures *out)
{
    memset(out, 0, sizeof *out);
    if (!shm)
        return;
    size_t n = shm_slots_used(shm);
    for (size_t i = 0; i < n; i++) {
        const shm_worker *s = &shm->slots[i];
        if (!atomic_load_explicit(&s->pid, memory_order_acquire) ||
            atomic_load_explicit(&s->generation, memory_order_relaxed) != gen)
            continue;
        if (pool_is_process_num(atomic_load_explicit(&s->worker_num, memory_order_relaxed))) {
            out->workers++;
            out->busy += atomic_load_explicit(&s->pool_busy, memory_order_relaxed) != 0;
            out->served += atomic_load_explicit(&s->pool_served, memory_order_relaxed);
        } else {
            int64_t w = atomic_load_explicit(&s->pool_waiting, memory_order_relaxed);
            out->queue_depth += w > 0 ? w : 0;
            out->rejected += atomic_load_explicit(&s->pool_rejected, memory_order_relaxed);
            out->timeouts += atomic_load_explicit(&s->pool_timeouts, memory_order_relaxed);
        }
    }
    out->idle = out->workers - out->busy;
}

int pool_claim(shm_region *shm, unsigned gen, unsigned *cursor, shm_worker **slot)
{
    size_t n = shm_slots_used(shm);
    if (!n)
        return 0;
    size_t first = *cursor % n;
    for (size_t k = 0; k < n; k++) {
        shm_worker *s = &shm->slots[(first + k) % n];
        if (atomic_load_explicit(&s->pool_state, memory_order_relaxed) != POOL_IDLE ||
            atomic_load_explicit(&s->generation, memory_order_relaxed) != gen)
            continue;
        int num = atomic_load_explicit(&s->worker_num, memory_order_relaxed);
        int expected = POOL_IDLE;
        if (!pool_is_process_num(num) ||
            !atomic_compare_exchange_strong(&s->pool_state, &expected, POOL_CLAIMED))
            continue;
        /* A slot reused by another process between the reads: its number
         * and generation are read again now that the claim holds it. */
        if (atomic_load(&s->generation) != gen || atomic_load(&s->worker_num) != num) {
            atomic_store(&s->pool_state, POOL_IDLE);
            continue;
        }
        *cursor = (unsigned)((first + k + 1) % n);
        *slot = s;
        return num - POOL_NUM_BASE;
    }
    return 0;
}

int64_t pool_queued(const shm_region *shm, unsigned gen)
{
    int64_t q = 0;
    size_t n = shm_slots_used(shm);
    for (size_t i = 0; i < n; i++) {
        const shm_worker *s = &shm->slots[i];
        if (atomic_load_explicit(&s->generation, memory_order_relaxed) != gen ||
            pool_is_process_num(atomic_load_explicit(&s->worker_num, memory_order_relaxed)))
            continue;
        int64_t w = atomic_load(&s->pool_waiting);
        q += w > 0 ? w : 0;
    }
    return q;
}
