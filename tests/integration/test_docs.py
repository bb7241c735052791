"""The documentation names only things that exist (issue 28): every
repository path in docs/*.md, README.md and the man pages is a file or
directory of the tree; every bare `name.c` / `name.h` in backticks is a
file somewhere under src/, include/, tests/ or examples/; and every
function or C identifier that the architecture pages name in backticks is
found in src/ or include/. A file renamed or a function gone without its
docs following fails here, naming the page and line. Needs no server."""

import glob
import os
import re

import lib
from lib import test

REPO = lib.REPO

# Top-level folders whose paths the docs name.
TOP = ("src", "tests", "include", "man", "conf", "packaging", "bench", "docs", "examples")
# Where a bare file name, or a partial path such as `apps/metrics.c`, may live.
SEARCH_ROOTS = ("src", "include", "tests", "examples")

# Names in backticks that are not files of this tree (a library's header,
# a file of the reader's own) go here; none do today.
NOT_OURS = set()
# The architecture pages also name identifiers of the libraries pagid uses;
# those are found in src/ too (pagid calls them). Names of other programs
# go here.
NOT_OUR_IDENTIFIERS = {"accept_disabled"}  # nginx's, which the accept gate makes exact
# The pages whose identifiers are checked.
IDENTIFIER_PAGES = ("docs/ARCHITECTURE.md", "docs/MEASUREMENTS.md", "docs/HISTORY.md")

PATH_RE = re.compile(r"(?<![\w./~$-])((?:%s)/[\w./*+-]*)" % "|".join(TOP))
BARE_RE = re.compile(r"(?<![\w./~$*-])([\w*+-]+\.[ch])(?![\w])")
PARTIAL_RE = re.compile(r"(?<![\w./~$-])((?:[\w*+-]+/)+[\w*+-]+\.[ch])(?![\w])")
BACKTICK_RE = re.compile(r"`([^`\n]+)`")
IDENT_CALL_RE = re.compile(r"^([A-Za-z_]\w*)\(.*\)$")
IDENT_RE = re.compile(r"^[A-Za-z_]\w*_\w*$")


def doc_files():
    files = sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))
    files.append(os.path.join(REPO, "README.md"))
    files += sorted(f for f in glob.glob(os.path.join(REPO, "man", "*"))
                    if re.search(r"\.[1-8]$", f))
    return files


def rel(path):
    return os.path.relpath(path, REPO)


def unroff(text):
    """Enough of roff's escapes removed that paths read as in markdown."""
    text = re.sub(r"\\f[BIRP]|\\f\([A-Z]{2}", "", text)
    return text.replace("\\-", "-").replace("\\&", "").replace("\\(em", " ")


def lines_of(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if not path.endswith(".md"):
        text = unroff(text)
    return text.split("\n")


def exists(path):
    """A repository path exists: a file, a directory, or a glob that matches.
    A sentence's full stop is not part of it; a path cut at a placeholder
    (`src/worker/<room>/`) or a brace list is checked up to its folder."""
    path = path.rstrip(".")
    full = os.path.join(REPO, path)
    if "*" in path:
        return bool(glob.glob(full))
    return os.path.exists(full)


_tree_cache = []


def tree_files():
    """Every file under SEARCH_ROOTS, as paths relative to the repository."""
    if not _tree_cache:
        for root in SEARCH_ROOTS:
            for d, dirs, files in os.walk(os.path.join(REPO, root)):
                dirs[:] = [x for x in dirs if not x.startswith(".")]
                _tree_cache.extend(rel(os.path.join(d, f)) for f in files)
    return _tree_cache


_generated_cache = []


def generated_files():
    """Sources the build makes (BUILT_SOURCES, nodist_*_SOURCES of any
    local.mk or Makefile.am): they exist only in a build tree."""
    if not _generated_cache:
        names = set()
        mks = glob.glob(os.path.join(REPO, "**", "local.mk"), recursive=True)
        for mk in mks + [os.path.join(REPO, "Makefile.am")]:
            with open(mk, encoding="utf-8") as f:
                text = f.read().replace("\\\n", " ")
            for m in re.finditer(r"^(?:BUILT_SOURCES|nodist_\w+_SOURCES)\s*\+?=(.*)$", text, re.M):
                names.update(m.group(1).split())
        _generated_cache.append(sorted(names))
    return _generated_cache[0]


def names_a_tree_file(name):
    """A bare name, glob or partial path (`conn.c`, `config_yaml*.c`,
    `apps/metrics.c`) that ends the path of some file under SEARCH_ROOTS, or
    of a source the build generates."""
    pat = re.compile(r"(^|/)" + re.escape(name).replace(r"\*", r"[^/]*") + "$")
    return any(pat.search(f) for f in tree_files() + generated_files())


def missing_paths():
    """(page:line, path) for each repository path that does not exist."""
    bad = []
    for page in doc_files():
        for n, line in enumerate(lines_of(page), 1):
            for m in PATH_RE.finditer(line):
                path = m.group(1)
                if not exists(path):
                    bad.append(("%s:%d" % (rel(page), n), path))
    return bad


def missing_backticked_files():
    """(page:line, name) for each backticked `x.c` / `x.h`, bare or partial
    (`apps/static.c`, `common/shm.c`), that names no file of the tree."""
    bad = []
    for page in doc_files():
        if not page.endswith(".md"):
            continue
        for n, line in enumerate(lines_of(page), 1):
            for span in BACKTICK_RE.findall(line):
                names = [m.group(1) for m in PARTIAL_RE.finditer(span)]
                names += [m.group(1) for m in BARE_RE.finditer(span)]
                for name in names:
                    if name.split("/")[0] in TOP or name in NOT_OURS:
                        continue  # a full path: missing_paths checks it
                    if not names_a_tree_file(name):
                        bad.append(("%s:%d" % (rel(page), n), name))
    return bad


_src_cache = []


def source_text():
    if not _src_cache:
        parts = []
        for root in ("src", "include"):
            for d, dirs, files in os.walk(os.path.join(REPO, root)):
                for f in files:
                    if f.endswith((".c", ".h", ".xs", ".pm", ".pl", ".mk")):
                        with open(os.path.join(d, f), encoding="utf-8", errors="replace") as fh:
                            parts.append(fh.read())
        _src_cache.append("\n".join(parts))
    return _src_cache[0]


def missing_identifiers():
    """(page:line, identifier) for each backticked `name()` or C identifier
    with an underscore in the architecture pages that src/ and include/ do
    not contain."""
    words = set(re.findall(r"\w+", source_text()))
    bad = []
    for page in IDENTIFIER_PAGES:
        full = os.path.join(REPO, page)
        if not os.path.exists(full):
            continue
        for n, line in enumerate(lines_of(full), 1):
            for span in BACKTICK_RE.findall(line):
                span = span.strip()
                m = IDENT_CALL_RE.match(span)
                name = m.group(1) if m else span if IDENT_RE.match(span) else None
                if name and name not in words and name not in NOT_OUR_IDENTIFIERS:
                    bad.append(("%s:%d" % (page, n), name))
    return bad


def report(what, bad):
    if bad:
        raise lib.TestFailure("%d %s: %s" % (len(bad), what,
                                              "; ".join("%s %s" % b for b in bad)))


@test(timeout=60)
def every_path_exists(ctx):
    report("paths in the docs name nothing in the tree", missing_paths())


@test(timeout=60)
def every_backticked_file_exists(ctx):
    report("backticked file names name no file under %s" % ", ".join(SEARCH_ROOTS),
           missing_backticked_files())


@test(timeout=60)
def every_identifier_exists(ctx):
    report("identifiers of the architecture pages are not in src/ or include/",
           missing_identifiers())
