/*
 * accept_gate.c - the load share test behind fair accepting (see
 * accept_gate.h). Pure reads of the shared region: no state of its own.
 */
#include "accept_gate.h"

#include "common/pool.h"

static int peer_can_accept(const shm_worker *p, size_t max_conns, uint64_t now_ms)
{
    /* A pool process (common/pool.h) has a slot, a heartbeat and no client
     * connections, but no listener either: counted as a peer it would make
     * a lone worker hold back its accepts for it (200 ms each). */
    if (atomic_load_explicit(&p->pid, memory_order_relaxed) <= 0 ||
        !atomic_load_explicit(&p->ready, memory_order_relaxed) ||
        pool_is_process_num(atomic_load_explicit(&p->worker_num, memory_order_relaxed)))
        return 0;
    uint64_t hb = atomic_load_explicit(&p->heartbeat_ms, memory_order_relaxed);
    if (now_ms > hb && now_ms - hb > ACCEPT_GATE_STALE_MS)
        return 0;
    int64_t open = atomic_load_explicit(&p->open_connections, memory_order_relaxed);
    return open >= 0 && (size_t)open < max_conns;
}

int accept_gate_open(const shm_region *r, const shm_worker *self, size_t mine, size_t max_conns,
                     uint64_t now_ms)
{
    if (!r || !self)
        return 1;
    uint64_t total = mine, n = 1;
    size_t used = shm_slots_used(r);
    for (size_t i = 0; i < used; i++) {
        const shm_worker *p = &r->slots[i];
        if (p == self || !peer_can_accept(p, max_conns, now_ms))
            continue;
        total += (uint64_t)atomic_load_explicit(&p->open_connections, memory_order_relaxed);
        n++;
    }
    /* mine + 1 <= SHARE * (total + 1) / n + 1, in integers. Alone (n == 1)
     * this always holds. Two workers deciding at once each see the other's
     * count from before, which is lower: the bound only gets tighter. */
    return ACCEPT_GATE_SHARE_DEN * (uint64_t)mine * n <= ACCEPT_GATE_SHARE_NUM * (total + 1);
}

size_t accept_gate_to_wake(shm_region *r, const shm_worker *self, size_t max_conns, uint64_t now_ms,
                           int *pids, size_t cap)
{
    size_t n = 0;
    if (!r)
        return 0;
    size_t used = shm_slots_used(r);
    for (size_t i = 0; i < used && n < cap; i++) {
        shm_worker *p = &r->slots[i];
        if (p == self || atomic_load(&p->gated) != ACCEPT_GATE_CLOSED)
            continue;
        int64_t open = atomic_load_explicit(&p->open_connections, memory_order_relaxed);
        int pid = atomic_load_explicit(&p->pid, memory_order_relaxed);
        if (pid <= 0 || open < 0 || !accept_gate_open(r, p, (size_t)open, max_conns, now_ms))
            continue;
        int expected = ACCEPT_GATE_CLOSED;
        if (atomic_compare_exchange_strong(&p->gated, &expected, ACCEPT_GATE_WOKEN))
            pids[n++] = pid;
    }
    return n;
}

uint64_t accept_gate_peer_accepts(const shm_region *r, const shm_worker *self)
{
    uint64_t sum = 0;
    if (!r)
        return 0;
    size_t used = shm_slots_used(r);
    for (size_t i = 0; i < used; i++) {
        const shm_worker *p = &r->slots[i];
        if (p != self && atomic_load_explicit(&p->pid, memory_order_relaxed) > 0)
            sum += atomic_load_explicit(&p->accepted, memory_order_relaxed);
    }
    return sum;
}
