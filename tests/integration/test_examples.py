"""The public interface is enough: install pagid into a staging prefix, build
examples/counter.c with examples/Makefile against the INSTALLED <pagi/*.h>
only, and serve requests with the resulting module."""

import os
import shutil
import subprocess

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
