"""Debian packaging: `dpkg-buildpackage -us -uc -b` builds pagid and pagid-dev
from a copy of the tree (HEAD when this is a git checkout); the packages hold
the binary, the packaged config (a conffile), the units of packaging/systemd,
sysusers and logrotate files, the man pages and the header; the extracted
binary accepts the extracted config with -t (which also checks this host:
before the package is installed, only the missing `pagid` user and
/var/log/pagid may be reported).

PAGID_DEBS=DIR (dev.sh sets it) names .debs already built from this tree
(tests/system/run.py --build-debs DIR): they are checked instead of building
them again. Against a sanitizer build the test is skipped: it checks the
package, which the pass against the plain build has checked already."""

import glob
import os
import re
import shutil
import subprocess

from lib import REPO, SANITIZED, Skip, check, check_eq, test

BUILD_TIMEOUT = 300  # seconds: the whole dpkg-buildpackage run


def copy_tree(dst):
    """HEAD of the checkout (what was committed), else the files as they are."""
    if os.path.isdir(os.path.join(REPO, ".git")) and shutil.which("git"):
        arch = subprocess.run(["git", "-C", REPO, "archive", "HEAD"], capture_output=True,
                              timeout=60, check=True).stdout
        subprocess.run(["tar", "-x", "-C", dst], input=arch, check=True, timeout=60)
    else:
        shutil.copytree(REPO, dst, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("build*", "*.o", "*.a", ".git"))


def deb_files(deb):
    out = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True, check=True,
                         timeout=30).stdout
    return {line.split()[5].lstrip(".") for line in out.splitlines() if len(line.split()) >= 6}


def given_debs():
    """(REPO, {name: path}) of the .debs in $PAGID_DEBS, or None when unset."""
    d = os.environ.get("PAGID_DEBS")
    if not d:
        return None
    debs = {os.path.basename(p).split("_")[0]: p for p in glob.glob(os.path.join(d, "*.deb"))}
    check("pagid" in debs and "pagid-dev" in debs,
          "PAGID_DEBS=%s holds %r, not the pagid and pagid-dev packages" % (d, sorted(debs)))
    return REPO, debs


def build_debs(ctx):
    for tool in ("dpkg-buildpackage", "dh", "dpkg-deb"):
        if not shutil.which(tool):
            raise Skip("%s is not installed (apt-get install dpkg-dev debhelper)" % tool)
    top = os.path.join(ctx.tmpdir, "pkg")
    src = os.path.join(top, "pagid")
    os.makedirs(src)
    copy_tree(src)
    shutil.copytree(os.path.join(src, "packaging", "debian"), os.path.join(src, "debian"))
    env = dict(os.environ, DEB_BUILD_OPTIONS="nocheck parallel=%d" % (os.cpu_count() or 2))
    try:
        p = subprocess.run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=src, env=env,
                           capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise AssertionError("dpkg-buildpackage took more than %ds" % BUILD_TIMEOUT)
    if p.returncode != 0:
        tail = (p.stdout + p.stderr).splitlines()[-40:]
        if any("Unmet build dependencies" in ln for ln in tail):
            raise Skip("build dependencies missing: " + " ".join(
                ln for ln in tail if "Unmet" in ln))
        raise AssertionError("dpkg-buildpackage failed (%d):\n%s" % (p.returncode, "\n".join(tail)))
    debs = {os.path.basename(d).split("_")[0]: d for d in glob.glob(os.path.join(top, "*.deb"))}
    check("pagid" in debs and "pagid-dev" in debs, "packages built: %r" % sorted(debs))
    return src, debs


@test(timeout=BUILD_TIMEOUT + 60)
def debian_packages(ctx):
    if SANITIZED:
        raise Skip("checks the package, not the binary under test: run against the plain build")
    src, debs = given_debs() or build_debs(ctx)

    files = deb_files(debs["pagid"])
    for f in ("/usr/sbin/pagid", "/etc/pagid/pagid.yaml", "/etc/logrotate.d/pagid",
              "/usr/lib/sysusers.d/pagid.conf", "/usr/share/man/man8/pagid.8.gz",
              "/usr/share/man/man5/pagid.yaml.5.gz", "/usr/lib/pagid/pagid-hot-upgrade"):
        check(f in files, "%s not in the pagid package: %r" % (f, sorted(files)))
    # Every unit in packaging/systemd is shipped (/lib or /usr/lib per debhelper version).
    units = [os.path.basename(u) for u in glob.glob(os.path.join(src, "packaging", "systemd", "*"))
             if u.endswith((".service", ".socket"))]
    for u in units:
        check("/lib/systemd/system/" + u in files or "/usr/lib/systemd/system/" + u in files,
              "unit %s not in the pagid package: %r" % (u, sorted(files)))
    if not units:
        ctx.note("packaging/systemd holds no units yet: none checked")

    conffiles = subprocess.run(["dpkg-deb", "-I", debs["pagid"], "conffiles"], capture_output=True,
                               text=True, timeout=30).stdout.split()
    check("/etc/pagid/pagid.yaml" in conffiles, "pagid.yaml is not a conffile: %r" % conffiles)
    control = subprocess.run(["dpkg-deb", "-I", debs["pagid"], "postinst"], capture_output=True,
                             text=True, timeout=30).stdout
    check("/var/log/pagid" in control, "postinst does not create the log directory")

    # lintian: no error, no warning but the one every package outside Debian has.
    if shutil.which("lintian"):
        p = subprocess.run(["lintian", "--tag-display-limit", "0", debs["pagid"], debs["pagid-dev"]],
                           capture_output=True, text=True, timeout=300)
        tags = [ln for ln in p.stdout.splitlines() if re.match(r"[EW]: ", ln)
                and "initial-upload-closes-no-bugs" not in ln]
        check(not tags, "lintian:\n" + "\n".join(tags))
    else:
        ctx.note("lintian is not installed: not run")
    # Man pages: mandoc finds no warning (a .TH date it cannot parse was one).
    if shutil.which("mandoc"):
        for page in glob.glob(os.path.join(src, "man", "*.[1-8]")):
            p = subprocess.run(["mandoc", "-T", "lint", "-W", "warning", page],
                               capture_output=True, text=True, timeout=30)
            check(p.returncode == 0 and not p.stdout.strip(),
                  "mandoc %s:\n%s%s" % (os.path.basename(page), p.stdout, p.stderr))

    dev = deb_files(debs["pagid-dev"])
    # The examples pagi(3) and pagi_easy(3) point at, as plain source (dh_compress
    # leaves a package's own examples/ alone).
    for f in ("/usr/include/pagi/pagi.h", "/usr/share/man/man3/pagi.3.gz",
              "/usr/include/pagi/pagi_easy.h", "/usr/share/man/man3/pagi_easy.3.gz",
              "/usr/share/man/man3/pagi_router.3.gz",
              "/usr/share/doc/pagid-dev/examples/kv.c",
              "/usr/share/doc/pagid-dev/examples/counter.c",
              "/usr/share/doc/pagid-dev/examples/Makefile",
              "/usr/share/doc/pagid-dev/examples/README.md", "/usr/share/pkgconfig/pagi.pc"):
        check(f in dev, "%s not in pagid-dev: %r" % (f, sorted(dev)))

    root = os.path.join(ctx.tmpdir, "root")
    for deb in (debs["pagid"], debs["pagid-dev"]):
        subprocess.run(["dpkg-deb", "-x", deb, root], check=True, timeout=60)
    pagid = os.path.join(root, "usr", "sbin", "pagid")
    conf = os.path.join(root, "etc", "pagid", "pagid.yaml")
    p = subprocess.run([pagid, "--version"], capture_output=True, text=True, timeout=10)
    check(p.returncode == 0 and p.stdout.startswith("pagid "), "--version: %r" % (p.stdout,))
    p = subprocess.run([pagid, "-t", "-c", conf], capture_output=True, text=True, timeout=10)
    # What postinst creates may be missing here; the file itself must be valid.
    env_only = re.compile(r"unknown user 'pagid'|/var/log/pagid|directory /run/pagid|"
                          r"is invalid \(\d+ errors?\)")
    others = [ln for ln in p.stderr.splitlines() if ln.strip() and not env_only.search(ln)
              and ": warning: " not in ln]
    check(p.returncode in (0, 1) and not others,
          "pagid -t on the packaged config: exit %d, stderr %r" % (p.returncode, p.stderr))
    # The package carries the Perl host, and depends on what its glue loads.
    hello_pl = os.path.join(REPO, "tests", "integration", "perl", "hello.pl")
    p = subprocess.run([pagid, "-t", "-a", hello_pl, "-l", "127.0.0.1:8080"], capture_output=True,
                       text=True, timeout=10)
    check_eq(p.returncode, 0, "packaged pagid -t -a hello.pl (stderr %r)" % p.stderr)
    depends = subprocess.run(["dpkg-deb", "-f", debs["pagid"], "Depends"], capture_output=True,
                             text=True, timeout=30).stdout
    for mod in ("libperl5", "libfuture-perl", "libfuture-io-perl", "libfuture-asyncawait-perl"):
        check(mod in depends, "pagid does not depend on %s: %s" % (mod, depends))
    with open(conf) as f:
        text = f.read()
    for want in ("user: pagid", "/var/log/pagid/access.log", "127.0.0.1:8080"):
        check(want in text, "packaged config lacks %r" % want)
