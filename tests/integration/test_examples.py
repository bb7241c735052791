"""The public interface is enough: install pagid into a staging prefix, build
examples/counter.c with examples/Makefile against the INSTALLED <pagi/*.h>
only, and serve requests with the resulting module."""

import os
import shutil
import subprocess

import lib
from lib import REPO, check, check_eq, request, test


def build_dir_of(pagid):
    """The build tree the binary came from (it holds the Makefile for install)."""
    d = os.path.dirname(os.path.abspath(pagid))
    return d if os.path.exists(os.path.join(d, "Makefile")) else None


def stage_examples(ctx, header):
    """Install the binary and the headers into a stage and copy examples/ beside
    it: (the stage's prefix, where header was installed; the examples' copy)."""
    build = build_dir_of(ctx.pagid)
    check(build is not None, "no build tree next to %s to install from" % ctx.pagid)
    stage = os.path.join(ctx.tmpdir, "stage")
    p = subprocess.run(["make", "-C", build, "install-sbinPROGRAMS", "install-pagiincludeHEADERS",
                        "DESTDIR=" + stage], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=180)
    check_eq(p.returncode, 0, "make install (%s)" % p.stdout.decode()[-400:])
    prefix = None
    for root, dirs, files in os.walk(stage):
        if header in files and root.endswith(os.path.join("include", "pagi")):
            prefix = os.path.dirname(os.path.dirname(root))
    check(prefix is not None, "%s was not installed under %s" % (header, stage))
    src = os.path.join(ctx.tmpdir, "examples")
    shutil.copytree(os.path.join(REPO, "examples"), src)
    return prefix, src


@test(timeout=240)
def counter_module_from_installed_header(ctx):
    prefix, src = stage_examples(ctx, "pagi.h")
    # No -I into the source tree: only the installed header is visible.
    p = subprocess.run(["make", "-C", src, "PREFIX=" + prefix, "CFLAGS=-std=c11 -O2 -Wall -Wextra -Werror"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    check_eq(p.returncode, 0, "building the example (%s)" % p.stdout.decode()[-400:])
    module = os.path.join(src, "counter.so")
    check(os.path.exists(module), "counter.so was not built")
    srv = ctx.start(module)
    r1 = request(srv.port, "GET", "/")
    r2 = request(srv.port, "POST", "/", body=b"abcdef")
    check_eq(r1.status, 200, "status")
    check_eq(r1.body, b"request #1, 0 body bytes\n", "first body")
    check_eq(r2.body, b"request #2, 6 body bytes\n", "second body")


EXAMPLE_FILES = ("counter.c", "kv.c", "polls.c", "Makefile", "README.md")


@test(timeout=240)
def examples_installed_into_docdir_build_there(ctx):
    """make install puts the examples' sources into $(docdir)/examples, where
    pagi(3) and pagi_easy(3) send app authors, and they build from there."""
    build = build_dir_of(ctx.pagid)
    check(build is not None, "no build tree next to %s to install from" % ctx.pagid)
    stage = os.path.join(ctx.tmpdir, "stage-doc")
    p = subprocess.run(["make", "-C", build, "install-dist_examplesDATA",
                        "install-pagiincludeHEADERS", "DESTDIR=" + stage],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=180)
    check_eq(p.returncode, 0, "make install (%s)" % p.stdout.decode()[-400:])
    found = {}
    for root, dirs, files in os.walk(stage):
        if root.endswith(os.path.join("share", "doc", "pagid", "examples")):
            found = {f: os.path.join(root, f) for f in files}
            examples = root
    check(sorted(found) == sorted(EXAMPLE_FILES),
          "installed examples under %s: %r" % (stage, sorted(found)))
    for f in EXAMPLE_FILES:
        with open(found[f], "rb") as a, open(os.path.join(REPO, "examples", f), "rb") as b:
            check(a.read() == b.read(), "installed %s differs from the source" % f)
    prefix = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(examples))))
    p = subprocess.run(["make", "-C", examples, "PREFIX=" + prefix,
                        "CFLAGS=-std=c11 -O2 -Wall -Wextra -Werror"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    check_eq(p.returncode, 0, "building the installed examples (%s)" % p.stdout.decode()[-400:])
    for so in ("counter.so", "kv.so"):
        check(os.path.exists(os.path.join(examples, so)), "%s was not built" % so)


@test(timeout=240)
def examples_build_with_pkg_config(ctx):
    """make install puts pagi.pc into $(datadir)/pkgconfig: the installed
    examples build with `cc -shared -fPIC $(pkg-config --cflags --libs pagi)`
    alone, and the docs the man pages cite are installed too."""
    if shutil.which("pkg-config") is None:
        raise lib.Skip("no pkg-config")
    build = build_dir_of(ctx.pagid)
    check(build is not None, "no build tree next to %s to install from" % ctx.pagid)
    stage = os.path.join(ctx.tmpdir, "stage-pc")
    p = subprocess.run(["make", "-C", build, "install-nodist_pkgconfigDATA",
                        "install-dist_examplesDATA", "install-dist_docDATA",
                        "install-pagiincludeHEADERS", "DESTDIR=" + stage],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=180)
    check_eq(p.returncode, 0, "make install (%s)" % p.stdout.decode()[-400:])
    pcdir = examples = docdir = None
    for root, dirs, files in os.walk(stage):
        if "pagi.pc" in files:
            pcdir = root
        if root.endswith(os.path.join("share", "doc", "pagid", "examples")):
            examples = root
        if root.endswith(os.path.join("share", "doc", "pagid")):
            docdir = root
    check(pcdir is not None and pcdir.endswith(os.path.join("share", "pkgconfig")),
          "pagi.pc installed at %r" % pcdir)
    for md in ("pubsub.md", "perl.md", "operations.md"):
        check(docdir is not None and os.path.exists(os.path.join(docdir, md)),
              "docs/%s (cited by the man pages) not installed" % md)
    env = dict(os.environ, PKG_CONFIG_PATH=pcdir, PKG_CONFIG_SYSROOT_DIR=stage)
    p = subprocess.run(["pkg-config", "--cflags", "--libs", "pagi"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    check_eq(p.returncode, 0, "pkg-config pagi: %s" % p.stdout.decode())
    flags = p.stdout.decode().split()
    abi = subprocess.run(["pkg-config", "--variable=abi", "pagi"], env=env,
                         stdout=subprocess.PIPE, timeout=30).stdout.decode().strip()
    v = subprocess.run([ctx.pagid, "-V"], stdout=subprocess.PIPE, timeout=30).stdout.decode()
    check("pagi ABI %s " % abi in v, "pagi.pc's abi %r vs pagid -V: %r" % (abi, v[:200]))
    for name in ("counter", "kv"):
        out = os.path.join(ctx.tmpdir, name + ".so")
        cmd = [os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared",
               "-fPIC", "-o", out, os.path.join(examples, name + ".c")] + flags
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        check_eq(p.returncode, 0, "%s: %s" % (" ".join(cmd), p.stdout.decode()[-400:]))
    srv = ctx.start(os.path.join(ctx.tmpdir, "counter.so"))
    check_eq(request(srv.port, "GET", "/").body, b"request #1, 0 body bytes\n", "counter.so")
