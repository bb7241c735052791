/*
 * pagi_easy_policy.h - what a broadcast group does with one message for one
 * member, given its policy and whether the member is slow: a pure function,
 * kept apart so the unit tests can check the table without a server.
 */
#ifndef PAGID_PAGI_EASY_POLICY_H
#define PAGID_PAGI_EASY_POLICY_H

#include <pagi/pagi_easy.h>

typedef enum easy_action {
    EASY_SEND, /* write it now */
    EASY_HOLD, /* keep it as the member's one pending message (replacing any) */
    EASY_DROP, /* lose it */
    EASY_CLOSE /* close the member */
} easy_action;

/* slow: the member's send buffer is at or above its high water mark;
 * pending: a conflated message is already held for it. */
static inline easy_action easy_policy_decide(pagi_group_policy policy, int slow, int pending)
{
    if (!slow && !pending)
        return EASY_SEND;
    switch (policy) {
    case PAGI_GROUP_CONFLATE:
        return EASY_HOLD; /* behind a held message: newer replaces it, order kept */
    case PAGI_GROUP_DISCONNECT:
        return slow ? EASY_CLOSE : EASY_SEND;
    case PAGI_GROUP_DROP:
    default:
        return slow ? EASY_DROP : EASY_SEND;
    }
}

#endif
