/*
 * listeners_inherit.c - listening sockets this process did not bind: the
 * ones an upgrading master hands over across exec (PAGID_INHERITED_FDS) and
 * the ones systemd passes with socket activation (LISTEN_FDS). Both end up
 * in an inherited_set that listeners_open_with() matches to listen entries.
 */
#include "listeners.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "common/log.h"
#include "common/hexdigit.h"

/* Append spec to out at *j: ';' separates entries and '%' escapes, so both
 * are written %XX. 0, or -1 when out is too small. */
static int put_escaped(const char *spec, char *out, size_t outlen, size_t *j)
{
    for (const char *p = spec; *p; p++) {
        if (*p == ';' || *p == '%') {
            if (*j + 3 >= outlen)
                return -1;
            *j += (size_t)snprintf(out + *j, outlen - *j, "%%%02X", (unsigned char)*p);
        } else {
            if (*j + 1 >= outlen)
                return -1;
            out[(*j)++] = *p;
        }
    }
    return 0;
}

int listeners_env_format(const listener_set *ls, char *out, size_t outlen)
{
    size_t j = 0;
    for (size_t i = 0; i < ls->n; i++) {
        if (ls->items[i].fd < 0)
            continue;
        char num[16];
        int k = snprintf(num, sizeof num, "%s%d:", j ? ";" : "", ls->items[i].fd);
        if (j + (size_t)k >= outlen)
            return -1;
        memcpy(out + j, num, (size_t)k);
        j += (size_t)k;
        const char *spec =
            ls->items[i].conf && ls->items[i].conf->spec ? ls->items[i].conf->spec : "";
        if (put_escaped(spec, out, outlen, &j) < 0)
            return -1;
    }
    if (j >= outlen)
        return -1;
    out[j] = '\0';
    return (int)j;
}

/* Ours from now on: close-on-exec, and non-blocking like the sockets we
 * bind (workers accept in batches until EAGAIN; systemd's are blocking). */
static void adopt_fd(int fd)
{
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0 && !(fl & O_NONBLOCK))
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static int is_listening_socket(int fd)
{
    int v = 0;
    socklen_t len = sizeof v;
    return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) == 0 && v;
}

/* The %-escaped s[0..n) decoded into a new string; NULL (err set) on a bad escape. */
static char *unescape(const char *s, size_t n, char *err, size_t errlen)
{
    char *name = malloc(n + 1);
    if (!name) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            int hi = i + 2 < n ? hex_digit_value((unsigned char)s[i + 1]) : -1;
            int lo = i + 2 < n ? hex_digit_value((unsigned char)s[i + 2]) : -1;
            if (hi < 0 || lo < 0) {
                free(name);
                snprintf(err, errlen, "bad %%-escape in '%.*s'", (int)n, s);
                return NULL;
            }
            name[k++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            name[k++] = s[i];
        }
    }
    name[k] = '\0';
    return name;
}

/* One "FD:SPEC" entry of length n into f; 0 or -1 with err. */
static int parse_entry(const char *s, size_t n, inherited_fd *f, char *err, size_t errlen)
{
    size_t i = 0;
    long fd = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9' && fd < 1000000)
        fd = fd * 10 + (s[i++] - '0');
    if (i == 0 || i >= n || s[i] != ':') {
        snprintf(err, errlen, "malformed entry '%.*s' (expected FD:SPEC)", (int)n, s);
        return -1;
    }
    char *name = unescape(s + i + 1, n - i - 1, err, errlen);
    if (!name)
        return -1;
    if (!is_listening_socket((int)fd)) {
        snprintf(err, errlen, "fd %ld (%s) is not a listening socket", fd, name);
        free(name);
        return -1;
    }
    f->fd = (int)fd;
    f->name = name;
    return 0;
}

int listeners_env_parse(const char *value, inherited_set *out, char *err, size_t errlen)
{
    *out = (inherited_set){.origin = "inherited"};
    if (!value || !*value)
        return 0;
    size_t cap = 1;
    for (const char *p = value; *p; p++)
        cap += *p == ';';
    out->items = calloc(cap, sizeof *out->items);
    if (!out->items) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    const char *p = value;
    while (*p) {
        size_t n = strcspn(p, ";");
        if (parse_entry(p, n, &out->items[out->n], err, errlen) < 0) {
            for (size_t i = 0; i < out->n; i++)
                free(out->items[i].name);
            free(out->items);
            *out = (inherited_set){.origin = "inherited"};
            return -1;
        }
        adopt_fd(out->items[out->n].fd);
        out->n++;
        p += n;
        if (*p == ';')
            p++;
    }
    return 0;
}

int listeners_from_systemd(inherited_set *out)
{
    *out = (inherited_set){.origin = "systemd"};
    char **names = NULL;
    int n = sd_listen_fds_with_names(1, &names);
    if (n <= 0) {
        if (n < 0)
            log_error("socket activation: %s", strerror(-n));
        return n < 0 ? -1 : 0;
    }
    out->items = calloc((size_t)n, sizeof *out->items);
    if (!out->items) {
        for (int i = 0; names && names[i]; i++)
            free(names[i]);
        free(names);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        int fd = SD_LISTEN_FDS_START + i;
        adopt_fd(fd);
        out->items[i].fd = fd;
        out->items[i].systemd = 1;
        /* systemd names every fd (by default after the unit, "unknown" when
         * nothing says): a name is only useful when it is a listen spec. */
        out->items[i].name = names ? names[i] : NULL;
        if (!is_listening_socket(fd)) {
            log_warn("socket activation: fd %d is not a listening socket; ignored", fd);
            close(fd);
            out->items[i].fd = -1;
        }
    }
    free(names);
    out->n = (size_t)n;
    return n;
}

int listeners_specs_format(char *const *specs, size_t n, char *out, size_t outlen)
{
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (i) {
            if (j + 1 >= outlen)
                return -1;
            out[j++] = ';';
        }
        if (put_escaped(specs[i], out, outlen, &j) < 0)
            return -1;
    }
    if (j >= outlen)
        return -1;
    out[j] = '\0';
    return (int)j;
}

int listeners_specs_parse(const char *value, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    char err[128];
    for (const char *p = value; p && *p;) {
        size_t len = strcspn(p, ";");
        char **v = realloc(*out, (*n + 1) * sizeof *v);
        char *spec = v ? unescape(p, len, err, sizeof err) : NULL;
        if (v)
            *out = v;
        if (!spec) {
            for (size_t i = 0; i < *n; i++)
                free((*out)[i]);
            free(*out);
            *out = NULL;
            *n = 0;
            return -1;
        }
        (*out)[(*n)++] = spec;
        p += len;
        if (*p == ';')
            p++;
    }
    return 0;
}

/* The listen spec of a socket's local address: "A.B.C.D:PORT", "[V6]:PORT",
 * "unix:/PATH"; NULL for what a spec cannot name (abstract or unnamed unix
 * sockets) or when out of memory. */
static char *spec_of(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char host[INET6_ADDRSTRLEN], buf[sizeof(struct sockaddr_un) + 16];
    memset(&ss, 0, sizeof ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return NULL;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const void *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        snprintf(buf, sizeof buf, "%s:%u", host, (unsigned)ntohs(a->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const void *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        snprintf(buf, sizeof buf, "[%s]:%u", host, (unsigned)ntohs(a->sin6_port));
    } else if (ss.ss_family == AF_UNIX) {
        const struct sockaddr_un *a = (const void *)&ss;
        size_t plen = len > offsetof(struct sockaddr_un, sun_path)
                          ? len - offsetof(struct sockaddr_un, sun_path)
                          : 0;
        if (plen == 0 || a->sun_path[0] != '/')
            return NULL;
        snprintf(buf, sizeof buf, "unix:%.*s", (int)strnlen(a->sun_path, plen), a->sun_path);
    } else {
        return NULL;
    }
    return strdup(buf);
}

int listeners_inherited_specs(const inherited_set *inh, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    for (size_t i = 0; i < inh->n; i++) {
        int fd = inh->items[i].fd;
        if (fd < 0)
            continue;
        char *spec = spec_of(fd);
        if (!spec) {
            log_warn("%s socket fd %d has no address a listen entry can name (an abstract or "
                     "unnamed unix socket?); not used",
                     inh->origin, fd);
            continue;
        }
        char **v = realloc(*out, (*n + 1) * sizeof *v);
        if (!v) {
            free(spec);
            return -1;
        }
        *out = v;
        (*out)[(*n)++] = spec;
    }
    return 0;
}

void inherited_set_free(inherited_set *inh, int warn_unused)
{
    for (size_t i = 0; i < inh->n; i++) {
        if (inh->items[i].fd >= 0) {
            if (warn_unused)
                log_warn("%s socket fd %d (%s) matches no listen entry; closing it", inh->origin,
                         inh->items[i].fd, inh->items[i].name ? inh->items[i].name : "unnamed");
            close(inh->items[i].fd);
        }
        free(inh->items[i].name);
    }
    free(inh->items);
    inh->items = NULL;
    inh->n = 0;
}
