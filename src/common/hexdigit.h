/*
 * hexdigit.h - the value of one hexadecimal digit, for the %XX decoders of
 * request paths, router parameters, PSGI's PATH_INFO, systemd's escaped
 * socket names and redis:// URLs. Inline: it sits on the request path.
 */
#ifndef PAGID_HEXDIGIT_H
#define PAGID_HEXDIGIT_H

/** 0..15 for '0'-'9', 'a'-'f' and 'A'-'F'; -1 for any other byte. */
static inline int hex_digit_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20; /* fold 'A'-'F' onto 'a'-'f'; no other byte lands there */
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

#endif
