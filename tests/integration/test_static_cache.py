"""The static app's open-file cache (apps/static_cache.c): what it remembers
never outlives a change the next loop turn can see (a rewrite, a rename over
the file, a deletion, a symlink swapped to lead out of the root), its
memory and descriptors stay within cache_entries/cache_bytes, and
cache_valid trusts a lookup for that long, as documented."""

import os
import time

from lib import Conn, check, check_eq, request, test, wait_for
from test_static import make_tree, start_static


def get(srv, path):
    return request(srv.port, "GET", path)


@test()
def a_rename_over_the_file_is_seen(ctx):
    """Same size, same mtime, new inode: the next request has the new bytes."""
    root, files = make_tree(ctx)
    srv = start_static(ctx, root)
    path = os.path.join(root, "a.txt")
    check_eq(get(srv, "/a.txt").body, files["a.txt"], "first GET")
    check_eq(get(srv, "/a.txt").body, files["a.txt"], "a GET the cache answers")
    st = os.stat(path)
    tmp = os.path.join(root, "a.txt.new")
    with open(tmp, "wb") as f:
        f.write(b"HELLO, STATIC\n")  # the same length
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.rename(tmp, path)
    r = get(srv, "/a.txt")
    check_eq(r.body, b"HELLO, STATIC\n", "GET after the rename")


@test()
def a_deleted_file_is_gone(ctx):
    root, files = make_tree(ctx)
    srv = start_static(ctx, root)
    check_eq(get(srv, "/sub/b.txt").status, 200, "first GET")
    check_eq(get(srv, "/sub/").body, files["sub/index.html"], "the index, cached")
    os.unlink(os.path.join(root, "sub", "b.txt"))
    os.unlink(os.path.join(root, "sub", "index.html"))
    check_eq(get(srv, "/sub/b.txt").status, 404, "GET after the unlink")
    check_eq(get(srv, "/sub/").status, 404, "the index after its unlink")


@test()
def a_symlink_swapped_out_of_the_root_is_refused(ctx):
    """The cached file replaced by a link to a file outside: 404, never the
    cached bytes and never the outside file."""
    root, files = make_tree(ctx)
    srv = start_static(ctx, root)
    check_eq(get(srv, "/digits.txt").body, files["digits.txt"], "first GET")
    path = os.path.join(root, "digits.txt")
    os.unlink(path)
    os.symlink(os.path.join(ctx.tmpdir, "outside", "secret.txt"), path)
    r = get(srv, "/digits.txt")
    check_eq(r.status, 404, "GET through a link out of the root")
    check(b"secret" not in r.body, "the outside file leaked: %r" % r.body)


@test()
def a_rewrite_in_place_changes_body_and_validators(ctx):
    root, files = make_tree(ctx)
    srv = start_static(ctx, root)
    c = Conn(srv.port)
    etags = set()
    for i in range(5):
        with open(os.path.join(root, "page.html"), "wb") as f:
            f.write(b"<p>version %d</p>\n" % i)
        c.send("GET /page.html HTTP/1.1\r\nHost: t\r\n\r\n")
        r = c.read_response()
        check_eq(r.body, b"<p>version %d</p>\n" % i, "version %d" % i)
        etags.add(r.header("etag"))
    c.close()
    check_eq(len(etags), 5, "one etag per version")


@test()
def descriptors_are_bounded(ctx):
    """Files past the in-memory size are kept open only with cache_valid
    above 0, at most cache_entries of them; the default keeps none."""
    root, _ = make_tree(ctx)
    for i in range(12):
        with open(os.path.join(root, "big%d.bin" % i), "wb") as f:
            f.write(bytes([i]) * (200 * 1024))
    srv = start_static(ctx, root, "cache_entries: 4, cache_valid: 60s")
    base = srv.fd_count()
    for i in range(12):
        r = get(srv, "/big%d.bin" % i)
        check_eq(len(r.body), 200 * 1024, "big%d" % i)
        check_eq(r.body[:1], bytes([i]), "big%d content" % i)
    check(wait_for(lambda: (srv.fd_count() or 0) <= base + 4, 5),
          "%s fds held for 4 cache entries (%d before)" % (srv.fd_count(), base))
    check((srv.fd_count() or 0) >= base + 3, "the cache keeps its descriptors open")
    srv.fd_baseline = srv.fd_count()  # what the cache holds is not a leak

    srv2 = start_static(ctx, root)
    base2 = srv2.fd_count()
    for i in range(12):
        check_eq(get(srv2, "/big%d.bin" % i).status, 200, "big%d" % i)
    check(wait_for(lambda: (srv2.fd_count() or 0) <= base2, 5),
          "the default cache holds descriptors: %s, %d before" % (srv2.fd_count(), base2))


@test(serial=True)
def cache_valid_trusts_for_that_long(ctx):
    """cache_valid: 2s serves the remembered bytes for up to 2 s after a
    change (nginx's open_file_cache_valid), then the new ones;
    cache_entries: 0 turns the cache off."""
    root, files = make_tree(ctx)
    srv = start_static(ctx, root, "cache_valid: 2s")
    check_eq(get(srv, "/a.txt").body, files["a.txt"], "first GET")
    with open(os.path.join(root, "a.txt"), "wb") as f:
        f.write(b"changed\n")
    t0 = time.monotonic()
    check_eq(get(srv, "/a.txt").body, files["a.txt"], "within cache_valid")
    check(wait_for(lambda: get(srv, "/a.txt").body == b"changed\n", 10),
          "the change is never seen")
    check(time.monotonic() - t0 >= 1.5, "the change was seen before cache_valid passed")

    srv = start_static(ctx, root, "cache_entries: 0")
    with open(os.path.join(root, "a.txt"), "wb") as f:
        f.write(b"again\n")
    check_eq(get(srv, "/a.txt").body, b"again\n", "no cache")


@test()
def config_keys_checked_and_shown(ctx):
    root, _ = make_tree(ctx)
    conf = os.path.join(ctx.tmpdir, "bad.yaml")
    with open(conf, "w") as f:
        f.write("app:\n  static: %s\n  cache_entries: lots\n" % root)
    import subprocess
    p = subprocess.run([ctx.pagid, "-t", "-c", conf], capture_output=True, text=True, timeout=20)
    check_eq(p.returncode, 1, "exit of -t on a bad cache_entries")
    check("bad.yaml:3:" in p.stderr and "cache_entries" in p.stderr,
          "error names FILE:LINE and the key: %r" % p.stderr)
    with open(conf, "w") as f:
        f.write("app:\n  static: %s\n  cache_bytes: 1m\n  cache_valid: 250ms\n" % root)
    p = subprocess.run([ctx.pagid, "-T", "-c", conf], capture_output=True, text=True, timeout=20)
    check_eq(p.returncode, 0, "-T: %s" % p.stderr)
    for want in ("cache_entries: 256", "cache_bytes: 1m", "cache_valid: 250ms"):
        check(want in p.stdout, "-T shows %r: %s" % (want, p.stdout))


@test()
def a_kept_descriptor_is_checked_before_use(ctx):
    """Under cache_valid a large file is kept open; rewritten in place
    (shorter, or the same size), the next response has its new length, its
    new bytes and a new ETag, never the old length over new bytes."""
    root, _ = make_tree(ctx)
    path = os.path.join(root, "big.bin")
    with open(path, "wb") as f:
        f.write(b"a" * 100000)
    srv = start_static(ctx, root, "cache_valid: 30s")
    r = get(srv, "/big.bin")
    check_eq(len(r.body), 100000, "first GET")
    etag = r.header("etag")
    with open(path, "r+b") as f:  # still past 64 KiB: kept open, not in memory
        f.write(b"b" * 80000)
        f.truncate(80000)
    r = get(srv, "/big.bin")
    check_eq((r.status, len(r.body), r.header("content-length")), (200, 80000, "80000"),
             "after a shorter rewrite")
    check_eq(r.body, b"b" * 80000, "new bytes")
    check(r.header("etag") != etag, "the ETag changed")
    time.sleep(0.01)
    with open(path, "r+b") as f:
        f.write(b"c" * 80000)
    r = get(srv, "/big.bin")
    check_eq(r.body, b"c" * 80000, "after a same-size rewrite")
