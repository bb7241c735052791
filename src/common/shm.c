/*
 * shm.c - the master/worker shared region (see shm.h).
 */
#include "shm.h"

#include <string.h>
#include <sys/mman.h>
#include <time.h>

static size_t region_size(size_t n_slots)
{
    return sizeof(shm_region) + n_slots * sizeof(shm_worker);
}

shm_region *shm_create(size_t n_slots)
{
    shm_region *r =
        mmap(NULL, region_size(n_slots), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED)
        return NULL;
    /* A fresh anonymous mapping is zeroed: every atomic starts at 0. */
    r->n_slots = n_slots;
    return r;
}

void shm_destroy(shm_region *r)
{
    if (r)
        munmap(r, region_size(r->n_slots));
}

shm_worker *shm_claim(shm_region *r, int pid, int worker_num, unsigned generation)
{
    if (!r)
        return NULL;
    for (size_t i = 0; i < r->n_slots; i++) {
        shm_worker *w = &r->slots[i];
        int expected = 0;
        /* Workers claim their own slots concurrently: take it with a CAS. */
        if (!atomic_compare_exchange_strong(&w->pid, &expected, -1))
            continue;
        size_t used = atomic_load(&r->n_used);
        while (used < i + 1 && !atomic_compare_exchange_weak(&r->n_used, &used, i + 1))
            ;
        memset((char *)w + sizeof w->pid, 0, sizeof *w - sizeof w->pid);
        atomic_store(&w->generation, generation);
        atomic_store(&w->worker_num, worker_num);
        atomic_store(&w->heartbeat_ms, shm_now_ms());
        atomic_store(&w->pid, pid);
        return w;
    }
    return NULL;
}

shm_worker *shm_find(shm_region *r, int pid)
{
    if (!r || pid <= 0)
        return NULL;
    for (size_t i = 0; i < r->n_slots; i++)
        if (atomic_load(&r->slots[i].pid) == pid)
            return &r->slots[i];
    return NULL;
}

void shm_release(shm_region *r, int pid)
{
    shm_worker *w = shm_find(r, pid);
    if (w)
        atomic_store(&w->pid, 0);
}

uint64_t shm_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void shm_count_request(shm_worker *slot, int status)
{
    if (!slot)
        return;
    int cls = status / 100;
    shm_add(&slot->requests[(cls >= 1 && cls <= 5) ? cls : 0], 1);
}

static const char *const reason_words[SHM_R__COUNT] = {
    "client_closed",      "client_timeout", "idle_timeout",   "keepalive_timeout",
    "write_timeout",      "write_error",    "read_error",     "protocol_error",
    "server_shutdown",    "server_error",   "body_too_large", "queue_overflow",
    "x-response-timeout", "other",
};

void shm_count_disconnect(shm_worker *slot, const char *reason)
{
    if (!slot || !reason)
        return;
    int i = 0;
    while (i < SHM_R_OTHER && strcmp(reason_words[i], reason) != 0)
        i++;
    shm_add(&slot->disconnects[i], 1);
}

/* The worker escapes what it writes, but the slot is the worker's memory,
 * which the app may scribble over: what the master logs from it is kept to
 * printable ASCII here, so no bytes of the worker's become a fake log line
 * (CR/LF) or a terminal's escape sequence. */
static void printable_only(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
            *s = '?';
}

int shm_app_call_read(const shm_app_call *rec, shm_app_call *out)
{
    for (int tries = 0; tries < 100; tries++) {
        uint32_t before = atomic_load_explicit(&rec->seq, memory_order_acquire);
        if (before & 1u)
            continue;
        uint64_t started = atomic_load_explicit(&rec->started_ms, memory_order_relaxed);
        /* Byte by byte through volatile: the writer may be changing them;
         * a torn copy is thrown away when seq moved. */
        const volatile char *src = rec->kind;
        for (size_t i = 0; i < sizeof out->kind; i++)
            out->kind[i] = src[i];
        src = rec->method;
        for (size_t i = 0; i < sizeof out->method; i++)
            out->method[i] = src[i];
        src = rec->target;
        for (size_t i = 0; i < sizeof out->target; i++)
            out->target[i] = src[i];
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&rec->seq, memory_order_relaxed) != before)
            continue;
        atomic_store_explicit(&out->started_ms, started, memory_order_relaxed);
        out->kind[sizeof out->kind - 1] = '\0';
        out->method[sizeof out->method - 1] = '\0';
        out->target[sizeof out->target - 1] = '\0';
        printable_only(out->kind);
        printable_only(out->method);
        printable_only(out->target);
        return 0;
    }
    return -1;
}
