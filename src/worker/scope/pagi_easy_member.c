/*
 * pagi_easy_member.c - what a broadcast group's member holds back while it
 * cannot be sent to: the CONFLATE slot (the latest message, by reference)
 * and a websocket's messages offered before its accept; and the layer's
 * copies (headers in one block, a message in one shared pagi_buf).
 */
#include "pagi_easy_member.h"

#include <stdlib.h>
#include <string.h>

void member_pending_clear(member *m)
{
    free(m->pend_event);
    pagi_buf_unref(m->pend_buf);
    m->pend_event = NULL;
    m->pend_buf = NULL;
    m->has_pending = 0;
}

void member_early_clear(member *m)
{
    while (m->early_head != NULL) {
        early_msg *e = m->early_head;
        m->early_head = e->next;
        free(e->event);
        pagi_buf_unref(e->buf);
        free(e);
    }
    m->early_tail = NULL;
    m->early_count = 0;
}

int member_early_add(member *m, msg_kind kind, const char *event, pagi_buf *b)
{
    early_msg *e = calloc(1, sizeof *e);
    if (e == NULL || (event != NULL && (e->event = strdup(event)) == NULL)) {
        free(e);
        return -1;
    }
    e->kind = kind;
    e->buf = pagi_buf_ref(b);
    if (m->early_tail)
        m->early_tail->next = e;
    else
        m->early_head = e;
    m->early_tail = e;
    m->early_count++;
    return 0;
}

/* Everything held for the member: the CONFLATE slot and the pre-accept queue. */
void member_held_clear(member *m)
{
    member_pending_clear(m);
    member_early_clear(m);
}

/* CONFLATE holds the latest message by reference: no copy per member. */
int member_pending_set(member *m, msg_kind kind, const char *event, pagi_buf *b)
{
    char *e = event ? strdup(event) : NULL;
    if (event && e == NULL)
        return -1;
    member_pending_clear(m);
    m->has_pending = 1;
    m->pend_kind = kind;
    m->pend_event = e;
    m->pend_buf = pagi_buf_ref(b);
    return 0;
}

void member_free(member *m)
{
    free(m->accept_headers);
    free(m);
}

/* One owned block: the array, then every name and value. */
pagi_header *easy_headers_copy(const pagi_header *h, size_t n)
{
    size_t need = n * sizeof *h;
    for (size_t i = 0; i < n; i++)
        need += h[i].name.len + h[i].value.len;
    pagi_header *v = malloc(need ? need : 1);
    if (v == NULL)
        return NULL;
    char *p = (char *)(v + n);
    for (size_t i = 0; i < n; i++) {
        v[i].name = (pagi_str){p, h[i].name.len};
        if (h[i].name.len)
            memcpy(p, h[i].name.ptr, h[i].name.len);
        p += h[i].name.len;
        v[i].value = (pagi_str){p, h[i].value.len};
        if (h[i].value.len)
            memcpy(p, h[i].value.ptr, h[i].value.len);
        p += h[i].value.len;
    }
    return v;
}

static void copy_free(void *ptr, void *ud)
{
    (void)ud;
    free(ptr);
}

/* One copy of the message for every member: freed with its last reference. */
pagi_buf *easy_buf_copy(const char *data, size_t len)
{
    char *copy = malloc(len ? len : 1);
    if (copy == NULL)
        return NULL;
    if (len)
        memcpy(copy, data, len);
    pagi_buf *b = pagi_buf_wrap(copy, len, copy_free, NULL);
    if (b == NULL)
        free(copy);
    return b;
}
