"""The C interface's ABI 2 (issue 12): events where zero means "not set"
(a {0} body event sends that body, not stdin; an SSE event without has_retry
writes no retry: line; use_fd = 1, fd = 0 still sends stdin; length 0 sends
to EOF), and major.minor versioning: a module built against the frozen 2.0
header (tests/abi/pagi-2.0.h) loads on this server (pagi.h's minor); one claiming a newer
minor or ABI 1 is refused by pagid -t and at start, naming both versions."""

import os
import re
import shutil
import struct
import subprocess

import lib
from lib import Conn, check, check_eq, request, test

HERE = os.path.dirname(os.path.abspath(__file__))
ABI_DIR = os.path.join(lib.REPO, "tests", "abi")
INCLUDE = os.path.join(lib.REPO, "include")

def header_abi():
    """PAGI_ABI_MAJOR.PAGI_ABI_MINOR of the header the server was built with."""
    with open(os.path.join(INCLUDE, "pagi", "pagi.h")) as f:
        text = f.read()
    return "%s.%s" % (re.search(r"#define PAGI_ABI_MAJOR (\d+)", text).group(1),
                      re.search(r"#define PAGI_ABI_MINOR (\d+)", text).group(1))


SERVER_ABI = header_abi()


def build(ctx, name, source, include):
    src = os.path.join(ctx.tmpdir, name + ".c")
    if not os.path.exists(src):
        with open(src, "w") as f:
            f.write(source)
    so = os.path.join(ctx.tmpdir, name + ".so")
    cmd = [os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared",
           "-fPIC", "-I", include, "-o", so, src]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    check_eq(p.returncode, 0, "building %s.so: %s" % (name, p.stdout.decode()))
    return so


def check_t(ctx, so):
    """pagid -t on a module: (exit status, output)."""
    p = subprocess.run([ctx.pagid, "-t", "-a", so, "-l", "127.0.0.1:1"] + lib.root_user_args(),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    return p.returncode, p.stdout.decode()


def start_refused(ctx, so):
    """pagid started on a module: it must exit non-zero; returns its output."""
    port = lib.free_port()
    p = subprocess.run([ctx.pagid, "-a", so, "-l", "127.0.0.1:%d" % port, "-w", "1"]
                       + lib.root_user_args(),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60 * lib.SLOW)
    out = p.stdout.decode()
    check(p.returncode != 0, "pagid started on a refused module: %r" % out[-600:])
    return out


@test(timeout=180)
def zero_initialised_events_mean_nothing_set(ctx):
    data = os.path.join(ctx.tmpdir, "stdin.txt")
    with open(data, "wb") as f:
        f.write(b"0123456789 from stdin\n")
    so = build(ctx, "zeroev", open(os.path.join(HERE, "apps", "zeroev.c")).read(), INCLUDE)
    srv = ctx.start(so + ":" + data, workers=1)
    r = request(srv.port, "GET", "/body")
    check_eq((r.status, r.body), (200, b"exactly this body"), "a {0} body event")
    r = request(srv.port, "GET", "/stdin")
    check_eq((r.status, r.body), (200, b"0123456789 from stdin\n"), "use_fd = 1, fd = 0")
    r = request(srv.port, "GET", "/file")
    check_eq((r.status, r.body), (200, b"0123456789 from stdin\n"), "file, length 0 = to EOF")
    r = request(srv.port, "GET", "/file?11")
    check_eq((r.status, r.body), (200, b"from stdin\n"), "file from offset 11 to EOF")
    c = Conn(srv.port)
    c.send(b"GET /sse HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n")
    raw = c.read_to_eof()
    c.close()
    check(b"data: no retry\n\n" in raw and b"retry: 0\ndata: retry zero\n\n" in raw,
          "sse events: %r" % raw[-400:])
    check_eq(raw.count(b"retry:"), 1, "retry: lines (only the has_retry event)")


@test(timeout=180)
def module_of_an_older_minor_loads(ctx):
    inc = os.path.join(ctx.tmpdir, "inc20")
    os.makedirs(os.path.join(inc, "pagi"))
    shutil.copy(os.path.join(ABI_DIR, "pagi-2.0.h"), os.path.join(inc, "pagi", "pagi.h"))
    shutil.copy(os.path.join(ABI_DIR, "old_minor.c"), os.path.join(ctx.tmpdir, "old_minor.c"))
    so = build(ctx, "old_minor", None, inc)
    rc, out = check_t(ctx, so)
    check_eq(rc, 0, "pagid -t on a 2.0 module: %s" % out)
    srv = ctx.start(so, workers=1)
    r = request(srv.port, "GET", "/")
    check_eq((r.status, r.body), (200, b"built against 2.0\n"), "the 2.0 module's response")


NEWER = r'''
#include <pagi/pagi.h>
static void h(pagi_scope *s, void *i) { (void)i; pagi_scope_finish(s, 0); }
const pagi_app pagi_module = {.abi_version = PAGI_ABI(2, 99), .name = "newer", .handle = h};
'''
ABI1 = r'''
#include <pagi/pagi.h>
static void h(pagi_scope *s, void *i) { (void)i; pagi_scope_finish(s, 0); }
const pagi_app pagi_module = {.abi_version = 1, .name = "abi1", .handle = h}; /* ABI 1's value */
'''


@test(timeout=180)
def newer_minor_and_abi1_modules_are_refused(ctx):
    for name, src, want in (
            ("newer", NEWER, "needs pagi ABI 2.99, this server speaks %s" % SERVER_ABI),
            ("abi1", ABI1, "was built against pagi ABI 1.x, this server speaks %s: rebuild against "
                           "the installed pagi.h" % SERVER_ABI)):
        so = build(ctx, name, src, INCLUDE)
        rc, out = check_t(ctx, so)
        check(rc != 0 and ("app module %s %s" % (so, want)) in out,
              "pagid -t on %s: rc %d: %r" % (name, rc, out))
        out = start_refused(ctx, so)
        check(want in out, "pagid started on %s: %r" % (name, out[-600:]))


RESERVED = r'''
#include <pagi/pagi.h>
static void h(pagi_scope *s, void *i) { (void)i; pagi_scope_finish(s, 0); }
const pagi_app pagi_module = {.abi_version = PAGI_ABI_VERSION, .name = "resv", .handle = h,
                              .reserved = {0, 0, (const void *)RESERVED_VALUE}};
'''
RESERVED_PTR = r'''
#include <pagi/pagi.h>
static int x;
static void h(pagi_scope *s, void *i) { (void)i; pagi_scope_finish(s, 0); }
const pagi_app pagi_module = {.abi_version = PAGI_ABI_VERSION, .name = "resvp", .handle = h,
                              .reserved = {[7] = &x}};
'''


@test(timeout=180)
def module_with_reserved_members_set_is_refused(ctx):
    want = "has non-zero reserved members in its pagi_app table: they must be zero (see VERSIONING"
    so = build(ctx, "resv", RESERVED.replace("RESERVED_VALUE", "0x100"), INCLUDE)
    rc, out = check_t(ctx, so)
    check(rc != 0 and ("app module %s %s" % (so, want)) in out,
          "pagid -t on a table with a reserved constant: rc %d: %r" % (rc, out))
    out = start_refused(ctx, so)
    check(want in out, "pagid started on it: %r" % out[-600:])
    # A relocated pointer is only known once loaded: the loader refuses it.
    so = build(ctx, "resvp", RESERVED_PTR, INCLUDE)
    out = start_refused(ctx, so)
    check(want in out, "pagid started on a table with a reserved pointer: %r" % out[-600:])


NEWER_CALLS = r'''
#include <fcntl.h>
#include <unistd.h>
#include <pagi/pagi.h>
void pagi_from_the_future(pagi_scope *s); /* a function of ABI 2.99: not in this server */
__attribute__((constructor)) static void ran(void)
{
    int fd = open("MARKER", O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) {
        (void)!write(fd, "x", 1);
        close(fd);
    }
}
static void h(pagi_scope *s, void *i) { (void)i; pagi_from_the_future(s); }
const pagi_app pagi_module = {.abi_version = PAGI_ABI(2, 99), .name = "future", .handle = h};
'''


@test(timeout=180)
def newer_minor_calling_a_missing_function_is_named_without_running_it(ctx):
    marker = os.path.join(ctx.tmpdir, "constructor-ran")
    so = build(ctx, "future", NEWER_CALLS.replace("MARKER", marker), INCLUDE)
    rc, out = check_t(ctx, so)
    check(rc != 0 and "needs pagi ABI 2.99, this server speaks %s" % SERVER_ABI in out,
          "pagid -t: rc %d: %r" % (rc, out))
    out = start_refused(ctx, so)
    check("needs pagi ABI 2.99, this server speaks %s" % SERVER_ABI in out,
          "the loader names the versions: %r" % out[-600:])
    # The version comes from the file, not from a second (lazy) dlopen that
    # would run the module's constructors.
    check(not os.path.exists(marker), "the module's constructor ran in pagid")


GOOD = r'''
#include <pagi/pagi.h>
static void h(pagi_scope *s, void *i) { (void)i; pagi_scope_finish(s, 0); }
const pagi_app pagi_module = PAGI_APP_INIT("good", 0, h, 0);
'''


def elf_variants(data):
    """(label, bytes) of truncated and corrupted copies of a 64-bit LE module."""
    out = [("truncated to %d" % n, data[:n])
           for n in (1, 4, 16, 63, 64, 200, len(data) // 2, len(data) - 1)]
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3a)

    def patched(at, fmt, value):
        b = bytearray(data)
        struct.pack_into(fmt, b, at, value)
        return bytes(b)

    out += [("e_shoff + 1 (unaligned)", patched(0x28, "<Q", shoff + 1)),
            ("e_shoff huge", patched(0x28, "<Q", 1 << 63)),
            ("e_shnum 0xffff", patched(0x3c, "<H", 0xffff)),
            ("32-bit class", patched(4, "B", 1)),
            ("big-endian", patched(5, "B", 2))]
    for i in range(shnum):
        sh = shoff + i * shentsize
        sh_type, = struct.unpack_from("<I", data, sh + 4)
        if sh_type != 11:  # SHT_DYNSYM
            continue
        off, size = struct.unpack_from("<QQ", data, sh + 0x18)
        link, = struct.unpack_from("<I", data, sh + 0x28)
        out += [("dynsym offset + 1 (unaligned)", patched(sh + 0x18, "<Q", off + 1)),
                ("dynsym size huge", patched(sh + 0x20, "<Q", 1 << 62)),
                ("dynsym link out of range", patched(sh + 0x28, "<I", 0xffff))]
        strs = shoff + link * shentsize
        stroff, = struct.unpack_from("<Q", data, strs + 0x18)
        for k in range(size // 24):
            sym = off + k * 24
            name, = struct.unpack_from("<I", data, sym)
            if data[stroff + name:stroff + name + 12] == b"pagi_module\0":
                value, = struct.unpack_from("<Q", data, sym + 8)
                out += [("pagi_module value + 1 (unaligned)", patched(sym + 8, "<Q", value + 1)),
                        ("pagi_module value huge", patched(sym + 8, "<Q", (1 << 64) - 8)),
                        ("pagi_module section out of range", patched(sym + 6, "<H", 0xfff0)),
                        ("pagi_module name out of range", patched(sym, "<I", 0xfffffff0))]
    check(len(out) > 15, "the module's dynamic symbols were not found (%d variants)" % len(out))
    return out


@test(timeout=180)
def truncated_and_corrupt_modules_are_not_valid_modules(ctx):
    so = build(ctx, "good", GOOD, INCLUDE)
    rc, out = check_t(ctx, so)
    check_eq(rc, 0, "pagid -t on the intact module: %s" % out)
    with open(so, "rb") as f:
        data = f.read()
    if data[4:6] != b"\x02\x01":
        ctx.note("not a 64-bit little-endian build: corrupted copies not checked")
        return
    bad = os.path.join(ctx.tmpdir, "bad.so")
    for label, variant in elf_variants(data):
        with open(bad, "wb") as f:
            f.write(variant)
        rc, out = check_t(ctx, bad)
        check(0 < rc < 128, "pagid -t on %s: rc %d (a crash?): %r" % (label, rc, out[-600:]))
        check(not any(w in out for w in ("runtime error", "AddressSanitizer", "Sanitizer")),
              "pagid -t on %s: sanitizer report: %r" % (label, out[-1500:]))
        check("app module %s is not a valid module" % bad in out
              or "app module %s does not export 'pagi_module'" % bad in out,
              "pagid -t on %s: %r" % (label, out[-600:]))


@test(timeout=60)
def build_info_prints_the_abi(ctx):
    p = subprocess.run([ctx.pagid, "-V"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=30)
    check("pagi ABI %s" % SERVER_ABI in p.stdout.decode(), "pagid -V: %r" % p.stdout)
