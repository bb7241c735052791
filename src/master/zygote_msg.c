/*
 * zygote_msg.c - encoding and strict decoding of the master/zygote
 * messages. Both ends are the same binary on the same host, so the fields
 * travel in host order; the checks are against a peer that crashed
 * mid-write or a stray datagram, not against another architecture.
 */
#include "zygote_msg.h"

#include <string.h>

static const unsigned char zmsg_magic[4] = {'P', 'Z', 'G', '1'};

static int valid(const zygote_msg *m)
{
    if (m->num < 1 || m->num > ZMSG_MAX_NUM)
        return 0;
    switch (m->type) {
    case ZMSG_SPAWN:
        return m->pid == 0 && m->err == 0;
    case ZMSG_SPAWNED:
        return m->pid > 0 && m->err == 0;
    case ZMSG_FAILED:
        return m->pid == 0 && m->err > 0;
    }
    return 0;
}

static void put32(unsigned char *p, uint32_t v)
{
    memcpy(p, &v, sizeof v);
}

static uint32_t get32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

size_t zmsg_encode(const zygote_msg *m, unsigned char out[ZMSG_SIZE])
{
    if (!valid(m))
        return 0;
    memcpy(out, zmsg_magic, sizeof zmsg_magic);
    put32(out + 4, (uint32_t)m->type);
    put32(out + 8, m->seq);
    put32(out + 12, (uint32_t)m->num);
    put32(out + 16, (uint32_t)m->pid);
    put32(out + 20, (uint32_t)m->err);
    return ZMSG_SIZE;
}

int zmsg_decode(const unsigned char *buf, size_t len, zygote_msg *out)
{
    if (len != ZMSG_SIZE || memcmp(buf, zmsg_magic, sizeof zmsg_magic) != 0)
        return -1;
    uint32_t type = get32(buf + 4), num = get32(buf + 12), pid = get32(buf + 16),
             err = get32(buf + 20);
    if (type < ZMSG_SPAWN || type > ZMSG_FAILED || num > ZMSG_MAX_NUM || pid > 0x7fffffffu ||
        err > 0x7fffffffu)
        return -1;
    zygote_msg m = {.type = (zmsg_type)type,
                    .seq = get32(buf + 8),
                    .num = (int)num,
                    .pid = (int)pid,
                    .err = (int)err};
    if (!valid(&m))
        return -1;
    *out = m;
    return 0;
}
