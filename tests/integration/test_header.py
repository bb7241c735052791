"""The installed interface as a C or C++ app author meets it (issue 12,
item 4): pagi.h compiles as strict C11 and as C++11 (PAGI_EVENT_INIT is a
function there: designated initializers are C++20), keeps its printf format
check, names its log levels; a module given by a relative name without a
slash is found in the working directory (dlopen alone searched the
library path); a module gets its create argument from PATH.so:ARG or from
{module: PATH, arg: STRING}."""

import os
import shutil
import subprocess

import lib
from lib import check, check_eq, request, test

HERE = os.path.dirname(os.path.abspath(__file__))
INCLUDE = os.path.join(lib.REPO, "include")

USER = r'''
#include "pagi/pagi.h"
int use_events(pagi_loop *l)
{
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
    pagi_event ev2 = pagi_event_init(PAGI_EV_SSE_SEND);
    pagi_log(l, PAGI_LOG_INFO, "fd %d retry %lld", ev.fd, (long long)ev2.retry);
    /* Zero means "not set" in every field (ABI 2): no sentinels to fill in. */
#ifdef __cplusplus
    pagi_event ev3 = {}; /* C++'s empty braces: {0} would convert 0 to the enum */
#else
    pagi_event ev3 = {0};
#endif
    return ev.use_fd == 0 && ev.length == 0 && ev2.has_retry == 0 && ev.body.len == 0 &&
           ev3.type == PAGI_EV_NONE && pagi_abi_version() >= PAGI_ABI(2, 0);
}
static void h(pagi_scope *s, void *i) { (void)i; pagi_scope_finish(s, 0); }
#ifdef __cplusplus
extern "C" const pagi_app pagi_module;
#endif
/* names every member: no missing-initializer warning under -Wextra */
const pagi_app pagi_module = PAGI_APP_INIT("user", NULL, h, NULL);
'''


def compile_unit(ctx, compiler, std, source, name):
    path = os.path.join(ctx.tmpdir, name)
    with open(path, "w") as f:
        f.write(source)
    cmd = [compiler, "-std=" + std, "-pedantic-errors", "-Wall", "-Wextra", "-Werror",
           "-fsyntax-only", "-I", INCLUDE, path]
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)


@test(timeout=120)
def header_compiles_as_c11_and_cxx11(ctx):
    for compiler, std, name in (("cc", "c11", "user.c"), ("g++", "c++11", "user.cc")):
        if not shutil.which(compiler):
            raise lib.Skip("%s is not installed" % compiler)
        p = compile_unit(ctx, compiler, std, USER, name)
        check_eq(p.returncode, 0, "%s -std=%s on pagi.h: %s" % (compiler, std, p.stdout.decode()))


@test(timeout=120)
def header_keeps_the_printf_check(ctx):
    bad = '#include "pagi/pagi.h"\nvoid f(pagi_loop *l) { pagi_log(l, PAGI_LOG_WARN, "%d", "x"); }\n'
    p = compile_unit(ctx, "cc", "c11", bad, "bad.c")
    check(p.returncode != 0 and b"format" in p.stdout,
          "a wrong pagi_log argument is not caught: %r" % p.stdout[-400:])


@test(timeout=120)
def module_by_relative_name_is_loaded_from_the_working_directory(ctx):
    so = os.path.join(ctx.tmpdir, "sseapp.so")
    cmd = [os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared",
           "-fPIC", "-I", INCLUDE, "-o", so, os.path.join(HERE, "apps", "sseapp.c")]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    check_eq(p.returncode, 0, "building sseapp.so: %s" % p.stdout.decode())
    # pagid runs in ctx.tmpdir: "sseapp.so" names the file there.
    as_root = ["-u", "root"] if os.geteuid() == 0 else []
    t = subprocess.run([ctx.pagid, "-t", "-a", "sseapp.so", "-l", "127.0.0.1:1"] + as_root,
                       cwd=ctx.tmpdir,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    check_eq(t.returncode, 0, "pagid -t -a sseapp.so: %s" % t.stdout.decode())
    srv = ctx.start("sseapp.so", workers=1)
    r = request(srv.port, "GET", "/")
    check(r.status != 0 and r.status < 500, "a request to the relative module: %r" % (r.status,))


def build_app(ctx, name):
    so = os.path.join(ctx.tmpdir, name + ".so")
    cmd = [os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared",
           "-fPIC", "-I", INCLUDE, "-o", so, os.path.join(HERE, "apps", name + ".c")]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    check_eq(p.returncode, 0, "building %s.so: %s" % (name, p.stdout.decode()))
    return so


@test(timeout=120)
def module_gets_its_create_argument(ctx):
    so = build_app(ctx, "argapp")
    srv = ctx.start(so + ":from the command line", workers=1)
    r = request(srv.port, "GET", "/")
    check_eq((r.status, r.body), (200, b"from the command line"), "PATH.so:ARG")
    srv2 = ctx.start(None, workers=1,
                     config="app: {module: %s, arg: 'from: yaml'}\n" % so)
    r = request(srv2.port, "GET", "/")
    check_eq((r.status, r.body), (200, b"from: yaml"), "{module, arg}")
    srv3 = ctx.start(so, workers=1)
    check_eq(request(srv3.port, "GET", "/").body, b"(none)", "no argument")
    # arg belongs to modules, and the path must say .so for the split to be sure.
    for bad, want in (("app: {perl: x.pl, arg: y}\n", "applies to module apps only"),
                      ("app: {module: ./argapp, arg: y}\n", "must name a .so module")):
        path = os.path.join(ctx.tmpdir, "bad.yaml")
        with open(path, "w") as f:
            f.write("listen: [127.0.0.1:1]\n" + bad)
        p = subprocess.run([ctx.pagid, "-t", "-c", path], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=60)
        out = p.stdout.decode()
        check(p.returncode != 0 and want in out and "bad.yaml:2:" in out,
              "%r: %r" % (bad, out))
