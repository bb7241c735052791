/*
 * test_accept_gate.c - Check suite for src/worker/accept_gate.c: the share
 * test over the shared region (who counts as a peer, the 1.1 x average
 * + 1 bound, bursts simulated one accept at a time) and the peers' accept
 * count the stall guard watches, and which gated peers an accept wakes.
 */
#include <check.h>
#include <stdlib.h>

#include "common/pool.h"
#include "common/shm.h"
#include "worker/core/accept_gate.h"

#define NOW 100000u

static shm_worker *peer(shm_region *r, int pid, int64_t open)
{
    shm_worker *w = shm_claim(r, pid, pid, 1);
    ck_assert_ptr_nonnull(w);
    atomic_store(&w->ready, 1);
    atomic_store(&w->heartbeat_ms, NOW);
    atomic_store(&w->open_connections, open);
    return w;
}

START_TEST(test_alone_always_open)
{
    ck_assert_int_eq(accept_gate_open(NULL, NULL, 1000, 10000, NOW), 1);
    shm_region *r = shm_create(4);
    shm_worker *me = peer(r, 10, 0);
    ck_assert_int_eq(accept_gate_open(r, NULL, 1000, 10000, NOW), 1);
    for (size_t mine = 0; mine < 5000; mine += 7)
        ck_assert_int_eq(accept_gate_open(r, me, mine, 10000, NOW), 1);
    shm_destroy(r);
}
END_TEST

START_TEST(test_share_bound)
{
    shm_region *r = shm_create(4);
    shm_worker *me = peer(r, 10, 0);
    peer(r, 11, 0);
    /* Two workers, the peer idle: one connection, not a second. */
    ck_assert_int_eq(accept_gate_open(r, me, 0, 10000, NOW), 1);
    ck_assert_int_eq(accept_gate_open(r, me, 1, 10000, NOW), 1);
    ck_assert_int_eq(accept_gate_open(r, me, 2, 10000, NOW), 0);
    /* Peer at 40: taking one more while mine <= 1.1 * (mine + 41) / 2,
     * i.e. up to mine = 50 (then 51 held of 91: 1.1 x 45.5 + 1 = 51.05). */
    atomic_store(&r->slots[1].open_connections, 40);
    ck_assert_int_eq(accept_gate_open(r, me, 50, 10000, NOW), 1);
    ck_assert_int_eq(accept_gate_open(r, me, 51, 10000, NOW), 0);
    shm_destroy(r);
}
END_TEST

/* A worker pool's processes have slots but take no client: a lone worker
 * beside four of them accepts as if alone. */
START_TEST(test_pool_processes_are_not_peers)
{
    shm_region *r = shm_create(8);
    shm_worker *me = peer(r, 10, 0);
    for (int i = 1; i <= 4; i++) {
        shm_worker *p = shm_claim(r, 20 + i, POOL_NUM_BASE + i, 1);
        ck_assert_ptr_nonnull(p);
        atomic_store(&p->ready, 1);
        atomic_store(&p->heartbeat_ms, NOW);
    }
    for (size_t mine = 0; mine < 500; mine += 7)
        ck_assert_int_eq(accept_gate_open(r, me, mine, 10000, NOW), 1);
    shm_destroy(r);
}
END_TEST

/* Peers that cannot take a connection do not count. */
START_TEST(test_peers_that_cannot_accept)
{
    shm_region *r = shm_create(8);
    shm_worker *me = peer(r, 10, 0);
    shm_worker *p = peer(r, 11, 0);
    ck_assert_int_eq(accept_gate_open(r, me, 5, 100, NOW), 0);
    atomic_store(&p->ready, 0); /* starting or draining */
    ck_assert_int_eq(accept_gate_open(r, me, 5, 100, NOW), 1);
    atomic_store(&p->ready, 1);
    atomic_store(&p->heartbeat_ms, NOW - ACCEPT_GATE_STALE_MS - 1); /* loop stuck */
    ck_assert_int_eq(accept_gate_open(r, me, 5, 100, NOW), 1);
    atomic_store(&p->heartbeat_ms, NOW - ACCEPT_GATE_STALE_MS);
    ck_assert_int_eq(accept_gate_open(r, me, 5, 100, NOW), 0);
    atomic_store(&p->open_connections, 100); /* at limits.max_connections */
    ck_assert_int_eq(accept_gate_open(r, me, 150, 100, NOW), 1);
    atomic_store(&p->open_connections, 0);
    shm_release(r, 11); /* exited and reaped */
    ck_assert_int_eq(accept_gate_open(r, me, 5, 100, NOW), 1);
    shm_destroy(r);
}
END_TEST

/* C connections taken one at a time by whichever worker the gate lets,
 * worker 0 asked first (a burst that lands on one loop, the worst order):
 * someone may always take it, and nobody ends over 1.1 C/N + 1. */
static void burst(size_t n, size_t c)
{
    shm_region *r = shm_create(n);
    shm_worker *w[16];
    for (size_t i = 0; i < n; i++)
        w[i] = peer(r, (int)(100 + i), 0);
    for (size_t k = 0; k < c; k++) {
        size_t taker = n;
        for (size_t i = 0; i < n && taker == n; i++) {
            size_t mine = (size_t)atomic_load(&w[i]->open_connections);
            if (accept_gate_open(r, w[i], mine, 100000, NOW))
                taker = i;
        }
        ck_assert_msg(taker < n, "nobody may accept connection %zu of %zu", k, c);
        atomic_fetch_add(&w[taker]->open_connections, 1);
    }
    for (size_t i = 0; i < n; i++) {
        double held = (double)atomic_load(&w[i]->open_connections);
        ck_assert_msg(held <= 1.1 * (double)c / (double)n + 1,
                      "%zu workers, %zu connections: "
                      "worker %zu holds %.0f",
                      n, c, i, held);
    }
    shm_destroy(r);
}

START_TEST(test_bursts)
{
    size_t ns[] = {2, 3, 4, 8, 16}, cs[] = {1, 2, 10, 50, 200, 1000};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
        for (size_t j = 0; j < sizeof cs / sizeof *cs; j++)
            burst(ns[i], cs[j]);
}
END_TEST

/* Scans stop at the slots ever claimed, not at the region's thousands. */
START_TEST(test_scan_bound)
{
    shm_region *r = shm_create(64);
    ck_assert_uint_eq(shm_slots_used(r), 0);
    shm_worker *me = peer(r, 10, 0);
    peer(r, 11, 0);
    ck_assert_uint_eq(shm_slots_used(r), 2);
    ck_assert_int_eq(accept_gate_open(r, me, 2, 100, NOW), 0);
    shm_release(r, 11);
    ck_assert_uint_eq(shm_slots_used(r), 2); /* a freed slot is taken again first */
    peer(r, 12, 0);
    ck_assert_uint_eq(shm_slots_used(r), 2);
    ck_assert_int_eq(accept_gate_open(r, me, 2, 100, NOW), 0);
    shm_destroy(r);
}
END_TEST

START_TEST(test_peer_accepts)
{
    shm_region *r = shm_create(4);
    shm_worker *me = peer(r, 10, 0), *a = peer(r, 11, 0), *b = peer(r, 12, 0);
    ck_assert_uint_eq(accept_gate_peer_accepts(NULL, me), 0);
    shm_add(&me->accepted, 5); /* our own do not count */
    shm_add(&a->accepted, 2);
    shm_add(&b->accepted, 3);
    ck_assert_uint_eq(accept_gate_peer_accepts(r, me), 5);
    shm_release(r, 12);
    ck_assert_uint_eq(accept_gate_peer_accepts(r, me), 2);
    shm_destroy(r);
}
END_TEST

/* A gated peer is woken once, and only when the waker's count lets it in. */
START_TEST(test_to_wake)
{
    shm_region *r = shm_create(4);
    shm_worker *me = peer(r, 10, 0), *a = peer(r, 11, 6), *b = peer(r, 12, 1);
    int pids[4];
    atomic_store(&a->gated, ACCEPT_GATE_CLOSED);
    ck_assert_uint_eq(accept_gate_to_wake(NULL, me, 100, NOW, pids, 4), 0);
    /* 6 of 7: a's gate stays closed, nobody to wake. */
    ck_assert_uint_eq(accept_gate_to_wake(r, me, 100, NOW, pids, 4), 0);
    ck_assert_int_eq(atomic_load(&a->gated), ACCEPT_GATE_CLOSED);
    atomic_store(&me->open_connections, 9); /* 6 of 16 over 3: 10 * 6 * 3 = 180 <= 11 * 17 */
    ck_assert_uint_eq(accept_gate_to_wake(r, me, 100, NOW, pids, 4), 1);
    ck_assert_int_eq(pids[0], 11);
    ck_assert_int_eq(atomic_load(&a->gated), ACCEPT_GATE_WOKEN);
    ck_assert_uint_eq(accept_gate_to_wake(r, me, 100, NOW, pids, 4), 0); /* woken once */
    /* A watching peer is never signalled; the cap holds. */
    ck_assert_int_eq(atomic_load(&b->gated), ACCEPT_GATE_WATCHING);
    atomic_store(&a->gated, ACCEPT_GATE_CLOSED);
    atomic_store(&b->gated, ACCEPT_GATE_CLOSED);
    ck_assert_uint_eq(accept_gate_to_wake(r, me, 100, NOW, pids, 1), 1);
    ck_assert_uint_eq(accept_gate_to_wake(r, me, 100, NOW, pids, 4), 1);
    shm_destroy(r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("accept_gate");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_alone_always_open);
    tcase_add_test(tc, test_share_bound);
    tcase_add_test(tc, test_pool_processes_are_not_peers);
    tcase_add_test(tc, test_peers_that_cannot_accept);
    tcase_add_test(tc, test_bursts);
    tcase_add_test(tc, test_peer_accepts);
    tcase_add_test(tc, test_to_wake);
    tcase_add_test(tc, test_scan_bound);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
