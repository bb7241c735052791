"""The static app (static:DIR) and mounts: GET/HEAD with types and
validators, 304/412, single ranges and If-Range, directories (301, index,
listings), traversal and symlink containment, a sparse file past 4 GiB, a
20 MiB download through curl, static mounted beside echo (root_path), fds."""

import hashlib
import os
import re
import subprocess
import time

from lib import (Conn, TestFailure, app_events, check, check_eq, request, test, wait_for,
                 write_config)

HTTP_DATE = re.compile(r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|"
                       r"Sep|Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT$")


def make_tree(ctx):
    """A served directory with files, a subdirectory with an index, links in and out."""
    root = os.path.join(ctx.tmpdir, "www")
    outside = os.path.join(ctx.tmpdir, "outside")
    os.makedirs(os.path.join(root, "sub"))
    os.makedirs(os.path.join(root, "empty"))
    os.makedirs(os.path.join(root, "evil.example"))
    os.makedirs(outside)
    files = {
        "a.txt": b"hello, static\n",
        "page.html": b"<!doctype html><p>hi</p>\n",
        "img.png": b"\x89PNG\r\n\x1a\n" + bytes(range(256)),
        "data.json": b'{"a": 1}\n',
        "noext": b"\x00\x01\x02",
        "digits.txt": b"0123456789",
        "sub/index.html": b"<p>index of sub</p>\n",
        "sub/b.txt": b"bee\n",
        ".hidden": b"secret dotfile\n",
        "a b&c.txt": b"spaces\n",
    }
    for name, data in files.items():
        with open(os.path.join(root, name), "wb") as f:
            f.write(data)
    with open(os.path.join(outside, "secret.txt"), "wb") as f:
        f.write(b"outside secret\n")
    os.symlink("a.txt", os.path.join(root, "inside_link.txt"))
    os.symlink(os.path.join(outside, "secret.txt"), os.path.join(root, "outside_link.txt"))
    os.symlink("/etc", os.path.join(root, "etc_link"))
    os.symlink("../outside/secret.txt", os.path.join(root, "rel_out.txt"))
    return root, files


def raw_get(port, target, headers=None, method="GET"):
    """A request whose target goes out byte for byte (no client normalisation)."""
    c = Conn(port)
    try:
        h = "%s %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" % (method, target)
        for k, v in (headers or {}).items():
            h += "%s: %s\r\n" % (k, v)
        c.send(h + "\r\n")
        return c.read_response(method)
    finally:
        c.close()


def start_static(ctx, root, opts=""):
    if opts:
        return ctx.start(app=None, config="app: {static: '%s', %s}\n" % (root, opts))
    return ctx.start("static:" + root)


@test()
def get_and_head(ctx):
    root, files = make_tree(ctx)
    srv = start_static(ctx, root)
    types = {"a.txt": "text/plain; charset=utf-8", "page.html": "text/html; charset=utf-8",
             "img.png": "image/png", "data.json": "application/json",
             "noext": "application/octet-stream"}
    for name, ctype in types.items():
        r = request(srv.port, "GET", "/" + name)
        check_eq(r.status, 200, "GET /%s status" % name)
        check_eq(r.body, files[name], "GET /%s body" % name)
        check_eq(r.header("content-type"), ctype, "GET /%s content-type" % name)
        check_eq(r.header("content-length"), str(len(files[name])), "content-length")
        check_eq(r.header("accept-ranges"), "bytes", "accept-ranges")
        check(re.match(r'^"[0-9a-f]+-[0-9a-f]+"$', r.header("etag", "")), "etag %r" % r.header("etag"))
        check(HTTP_DATE.match(r.header("last-modified", "")), "last-modified %r" % r.header("last-modified"))
        h = request(srv.port, "HEAD", "/" + name)
        check_eq(h.status, 200, "HEAD status")
        check_eq(h.body, b"", "HEAD body")
        check_eq(h.header("content-length"), str(len(files[name])), "HEAD content-length")
        check_eq(h.header("etag"), r.header("etag"), "HEAD etag")
    r = request(srv.port, "GET", "/a%20b%26c.txt")
    check_eq((r.status, r.body), (200, files["a b&c.txt"]), "percent-encoded name")
    for method in ("POST", "PUT", "DELETE", "OPTIONS"):
        r = request(srv.port, method, "/a.txt", body=b"x" if method in ("POST", "PUT") else b"")
        check_eq(r.status, 405, "%s status" % method)
        check_eq(r.header("allow"), "GET, HEAD", "%s allow" % method)
    r = request(srv.port, "GET", "/a.txt", headers={"Accept": "text/event-stream"})
    check_eq(r.status, 406, "an event stream asked of a file")
    r = request(srv.port, "GET", "/a.txt", headers={
        "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
    check_eq(r.status, 403, "a WebSocket handshake to a file")
    r = request(srv.port, "GET", "/missing.txt")
    check_eq(r.status, 404, "missing file")
    check_eq(r.header("content-type"), "text/plain; charset=utf-8", "404 type")
    # Keep-alive: several files on one connection.
    c = Conn(srv.port)
    for name in ("a.txt", "img.png", "digits.txt"):
        c.send("GET /%s HTTP/1.1\r\nHost: t\r\n\r\n" % name)
        r = c.read_response()
        check_eq(r.body, files[name], "keep-alive body of %s" % name)
    c.close()


@test()
def conditional_requests(ctx):
    root, files = make_tree(ctx)
    srv = start_static(ctx, root)
    r = request(srv.port, "GET", "/a.txt")
    etag, lm = r.header("etag"), r.header("last-modified")

    def status(headers, method="GET"):
        return request(srv.port, method, "/a.txt", headers=headers)

    r = status({"If-None-Match": etag})
    check_eq(r.status, 304, "If-None-Match: etag")
    check_eq(r.body, b"", "304 body")
    check_eq(r.header("etag"), etag, "304 etag")
    check_eq(status({"If-None-Match": etag}, "HEAD").status, 304, "HEAD If-None-Match")
    check_eq(status({"If-None-Match": "*"}).status, 304, "If-None-Match: *")
    check_eq(status({"If-None-Match": '"x", %s' % etag}).status, 304, "If-None-Match list")
    check_eq(status({"If-None-Match": "W/" + etag}).status, 304, "If-None-Match weak")
    check_eq(status({"If-None-Match": '"other"'}).status, 200, "If-None-Match other")
    check_eq(status({"If-Modified-Since": lm}).status, 304, "If-Modified-Since = Last-Modified")
    check_eq(status({"If-Modified-Since": "Sun, 06 Nov 1994 08:49:37 GMT"}).status, 200,
             "If-Modified-Since old")
    check_eq(status({"If-Modified-Since": "garbage"}).status, 200, "If-Modified-Since invalid")
    # If-None-Match wins over If-Modified-Since.
    check_eq(status({"If-None-Match": '"other"', "If-Modified-Since": lm}).status, 200,
             "If-Modified-Since ignored beside If-None-Match")
    check_eq(status({"If-Match": '"other"'}).status, 412, "If-Match mismatch")
    check_eq(status({"If-Match": etag}).status, 200, "If-Match match")
    check_eq(status({"If-Unmodified-Since": "Sun, 06 Nov 1994 08:49:37 GMT"}).status, 412,
             "If-Unmodified-Since old")
    # A changed file has a new validator.
    with open(os.path.join(root, "a.txt"), "ab") as f:
        f.write(b"more\n")
    r = status({"If-None-Match": etag})
    check_eq(r.status, 200, "If-None-Match after a change")
    check(r.header("etag") != etag, "etag changed with the file")
    # Same size, same second: the strong tag still changes (nanosecond mtime).
    etag2 = r.header("etag")
    time.sleep(0.05)
    with open(os.path.join(root, "a.txt"), "r+b") as f:
        f.write(b"J")
    r = status({"If-None-Match": etag2})
    check_eq(r.status, 200, "If-None-Match after a same-size rewrite")


@test()
def ranges(ctx):
    root, files = make_tree(ctx)
    # A Last-Modified under a second old is a weak validator (no If-Range by date): age it.
    os.utime(os.path.join(root, "digits.txt"), (1700000000, 1700000000))
    srv = start_static(ctx, root)
    data = files["digits.txt"]
    n = len(data)

    def get(rng, extra=None, method="GET"):
        h = {"Range": rng}
        h.update(extra or {})
        return request(srv.port, method, "/digits.txt", headers=h)

    for rng, first, last in (("bytes=0-4", 0, 4), ("bytes=5-", 5, n - 1), ("bytes=-3", n - 3, n - 1),
                             ("bytes=8-100", 8, n - 1), ("bytes=-100", 0, n - 1)):
        r = get(rng)
        check_eq(r.status, 206, "%s status" % rng)
        check_eq(r.body, data[first:last + 1], "%s body" % rng)
        check_eq(r.header("content-range"), "bytes %d-%d/%d" % (first, last, n), "%s content-range" % rng)
        check_eq(r.header("content-length"), str(last - first + 1), "%s content-length" % rng)
    for rng in ("bytes=10-", "bytes=100-200", "bytes=-0"):
        r = get(rng)
        check_eq(r.status, 416, "%s status" % rng)
        check_eq(r.header("content-range"), "bytes */%d" % n, "%s content-range" % rng)
    for rng in ("bytes=0-1,4-5", "bytes=5-2", "items=0-1", "bytes=x"):
        r = get(rng)
        check_eq((r.status, r.body), (200, data), "%s: the whole file" % rng)
        check_eq(r.header("content-range"), None, "%s: no content-range" % rng)
    r = get("bytes=0-1", method="HEAD")
    check_eq((r.status, r.header("content-length")), (200, str(n)), "HEAD ignores Range")
    full = request(srv.port, "GET", "/digits.txt")
    etag, lm = full.header("etag"), full.header("last-modified")
    check_eq(get("bytes=0-1", {"If-Range": etag}).status, 206, "If-Range etag matches")
    r = get("bytes=0-1", {"If-Range": '"stale-1"'})
    check_eq((r.status, r.body), (200, data), "If-Range etag stale: whole file")
    check_eq(get("bytes=0-1", {"If-Range": lm}).status, 206, "If-Range date matches")
    r = get("bytes=0-1", {"If-Range": "Sun, 06 Nov 1994 08:49:37 GMT"})
    check_eq((r.status, r.body), (200, data), "If-Range date stale: whole file")
    check_eq(get("bytes=0-1", {"If-None-Match": etag}).status, 304, "304 before Range")


@test()
def directories(ctx):
    root, files = make_tree(ctx)
    srv = start_static(ctx, root)
    r = request(srv.port, "GET", "/sub")
    check_eq(r.status, 301, "directory without slash")
    check_eq(r.header("location"), "/sub/", "location")
    r = request(srv.port, "GET", "/sub?x=1&y=%2F")
    check_eq(r.header("location"), "/sub/?x=1&y=%2F", "location keeps the query")
    r = request(srv.port, "GET", "/sub/")
    check_eq((r.status, r.body), (200, files["sub/index.html"]), "index.html")
    check_eq(r.header("content-type"), "text/html; charset=utf-8", "index type")
    check_eq(request(srv.port, "GET", "/").status, 404, "root without index.html, no listing")
    check_eq(request(srv.port, "GET", "/empty/").status, 404, "no listing by default")
    check_eq(request(srv.port, "GET", "/a.txt/").status, 404, "a file with a trailing slash")
    # "//evil.example" names a local directory: the redirect must stay on this host.
    r = raw_get(srv.port, "//evil.example")
    check_eq(r.status, 301, "double-slash directory")
    check_eq(r.header("location"), "/evil.example/", "no protocol-relative location")


@test()
def listing_when_enabled(ctx):
    root, files = make_tree(ctx)
    with open(os.path.join(root, "empty", '<script>alert("x")&\'y\'.txt'), "wb") as f:
        f.write(b"x")
    os.makedirs(os.path.join(root, "empty", "dir one"))
    with open(os.path.join(root, "empty", ".dot"), "wb") as f:
        f.write(b"x")
    srv = start_static(ctx, root, "listing: true")
    r = request(srv.port, "GET", "/empty/")
    check_eq(r.status, 200, "listing status")
    check_eq(r.header("content-type"), "text/html; charset=utf-8", "listing type")
    body = r.body.decode()
    check("<script>" not in body, "names are escaped: %r" % body)
    check("&lt;script&gt;alert(&quot;x&quot;)&amp;&#39;y&#39;.txt" in body, "escaped name in %r" % body)
    check('href="%3Cscript%3Ealert%28%22x%22%29%26%27y%27.txt"' in body, "encoded href in %r" % body)
    check('href="dir%20one/"' in body, "directory link with a slash in %r" % body)
    check(".dot" not in body, "dotfiles are not listed")
    r = request(srv.port, "GET", "/sub/")
    check_eq(r.body, files["sub/index.html"], "index.html still wins over the listing")
    r = request(srv.port, "GET", "/")
    check_eq(r.status, 200, "root listing")
    check('href="a.txt"' in r.body.decode() and ".hidden" not in r.body.decode(), "root entries")


@test()
def traversal_and_symlinks(ctx):
    root, files = make_tree(ctx)
    srv = start_static(ctx, root)
    for target in ("/../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/a/%2e%2e/%2e%2e/",
                   "/sub/../../etc/passwd", "/%2E%2E/outside/secret.txt", "/..%2f..%2fetc/passwd",
                   "/a.txt%00.png", "/%00"):
        r = raw_get(srv.port, target)
        check(r.status == 400, "%s: expected 400, got %r" % (target, r))
        check(b"root:" not in r.body and b"secret" not in r.body, "%s leaked %r" % (target, r.body))
    for target in ("/outside_link.txt", "/rel_out.txt", "/etc_link/passwd", "/etc_link/",
                   "/etc_link", "/.hidden", "/sub/../.hidden", "/..%5c..%5cetc%5cpasswd",
                   "/%5c..%5c..%5cetc%5cpasswd"):
        r = raw_get(srv.port, target)
        check(r.status == 404, "%s: expected 404, got %r" % (target, r))
        check(b"root:" not in r.body and b"secret" not in r.body, "%s leaked %r" % (target, r.body))
    os.mkfifo(os.path.join(root, "fifo"))
    r = raw_get(srv.port, "/fifo")
    check_eq(r.status, 404, "a FIFO is not served (and does not block the worker)")
    r = raw_get(srv.port, "/inside_link.txt")
    check_eq((r.status, r.body), (200, files["a.txt"]), "a link inside the root")
    r = raw_get(srv.port, "/sub/%2e%2e/a.txt")
    check_eq((r.status, r.body), (200, files["a.txt"]), "dot segments that stay inside")
    r = raw_get(srv.port, "/sub/./b.txt")
    check_eq((r.status, r.body), (200, files["sub/b.txt"]), "a '.' segment")


@test()
def follow_symlinks_option(ctx):
    root, files = make_tree(ctx)
    srv = start_static(ctx, root, "follow_symlinks: true")
    r = request(srv.port, "GET", "/outside_link.txt")
    check_eq((r.status, r.body), (200, b"outside secret\n"), "follow_symlinks: true")
    check_eq(raw_get(srv.port, "/../outside/secret.txt").status, 400, "still no '..' above the root")


def add_hidden_links(ctx, root):
    """Links whose names are not hidden but whose targets are: a dotfile in
    the root, a file in a hidden directory, a directory, a dotfile outside."""
    os.makedirs(os.path.join(root, ".git"))
    with open(os.path.join(root, ".git", "config"), "wb") as f:
        f.write(b"[core] secret\n")
    with open(os.path.join(root, ".env"), "wb") as f:
        f.write(b"SECRET=env\n")
    with open(os.path.join(ctx.tmpdir, "outside", ".netrc"), "wb") as f:
        f.write(b"machine secret\n")
    os.symlink(".env", os.path.join(root, "env.txt"))
    os.symlink("../.env", os.path.join(root, "sub", "up_env.txt"))
    os.symlink(".git/config", os.path.join(root, "gitconfig.txt"))
    os.symlink(".git", os.path.join(root, "gitdir"))
    os.symlink(os.path.join(ctx.tmpdir, "outside", ".netrc"), os.path.join(root, "netrc.txt"))
    os.symlink("sub", os.path.join(root, "sub_link"))


def check_hidden_links(srv, files, what):
    for target in ("/env.txt", "/sub/up_env.txt", "/gitconfig.txt", "/gitdir/config",
                   "/gitdir/", "/netrc.txt", "/.env"):
        r = raw_get(srv.port, target)
        check(r.status == 404, "%s (%s): expected 404, got %r" % (target, what, r))
        check(b"secret" not in r.body.lower(), "%s leaked %r" % (target, r.body))
    # A link inside the root to a file that is not hidden is served (nginx's
    # default, disable_symlinks off, does the same), by file and by directory.
    r = raw_get(srv.port, "/inside_link.txt")
    check_eq((r.status, r.body), (200, files["a.txt"]), "a link to a visible file (%s)" % what)
    r = raw_get(srv.port, "/sub_link/b.txt")
    check_eq((r.status, r.body), (200, files["sub/b.txt"]), "through a linked dir (%s)" % what)


@test()
def symlinks_to_hidden_files(ctx):
    """The dotfile rule applies to what is opened: a link named env.txt to
    .env is as hidden as .env (it was served with 200)."""
    root, files = make_tree(ctx)
    add_hidden_links(ctx, root)
    srv = start_static(ctx, root, "listing: true")
    check_hidden_links(srv, files, "default")
    r = raw_get(srv.port, "/outside_link.txt")
    check_eq(r.status, 404, "a link out of the root")
    # follow_symlinks lets links lead out of the root, but not to hidden files.
    srv2 = start_static(ctx, root, "follow_symlinks: true")
    check_hidden_links(srv2, files, "follow_symlinks")
    r = raw_get(srv2.port, "/outside_link.txt")
    check_eq((r.status, r.body), (200, b"outside secret\n"), "follow_symlinks still follows")


@test(timeout=60)
def sparse_file_past_4gib(ctx):
    root, _ = make_tree(ctx)
    path = os.path.join(root, "big.bin")
    size = 5 * 1024 ** 3 + 123
    subprocess.run(["truncate", "-s", str(size), path], check=True)
    marker = b"END-MARKER"
    with open(path, "r+b") as f:
        f.seek(size - len(marker))
        f.write(marker)
        f.seek(4 * 1024 ** 3 + 7)
        f.write(b"4G")
    srv = start_static(ctx, root)
    r = request(srv.port, "HEAD", "/big.bin")
    check_eq(r.header("content-length"), str(size), "HEAD content-length past 4 GiB")
    r = request(srv.port, "GET", "/big.bin", headers={"Range": "bytes=-%d" % len(marker)})
    check_eq(r.status, 206, "suffix range status")
    check_eq(r.body, marker, "the last bytes")
    check_eq(r.header("content-range"), "bytes %d-%d/%d" % (size - len(marker), size - 1, size),
             "content-range past 4 GiB")
    off = 4 * 1024 ** 3 + 7
    r = request(srv.port, "GET", "/big.bin", headers={"Range": "bytes=%d-%d" % (off, off + 1)})
    check_eq((r.status, r.body), (206, b"4G"), "a range just past 4 GiB")
    r = request(srv.port, "GET", "/big.bin", headers={"Range": "bytes=%d-" % size})
    check_eq(r.status, 416, "unsatisfiable past the end")
    check_eq(r.header("content-range"), "bytes */%d" % size, "416 content-range")


@test(timeout=60)
def curl_download_20mib(ctx):
    root, _ = make_tree(ctx)
    data = os.urandom(20 * 1024 * 1024)
    with open(os.path.join(root, "blob.bin"), "wb") as f:
        f.write(data)
    srv = start_static(ctx, root)
    out = os.path.join(ctx.tmpdir, "download.bin")
    p = subprocess.run(["curl", "-sS", "--fail", "-o", out, "-w", "%{http_code} %{size_download}",
                        "http://127.0.0.1:%d/blob.bin" % srv.port],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    check_eq(p.returncode, 0, "curl exit (%s)" % p.stderr.decode(errors="replace"))
    check_eq(p.stdout.decode(), "200 %d" % len(data), "curl status and size")
    with open(out, "rb") as f:
        got = hashlib.sha256(f.read()).hexdigest()
    check_eq(got, hashlib.sha256(data).hexdigest(), "sha256 of the download")
    # curl resuming a partial download uses a Range request.
    with open(out, "r+b") as f:
        f.truncate(7 * 1024 * 1024)
    p = subprocess.run(["curl", "-sS", "--fail", "-C", "-", "-o", out,
                        "http://127.0.0.1:%d/blob.bin" % srv.port],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    check_eq(p.returncode, 0, "curl -C - exit (%s)" % p.stderr.decode(errors="replace"))
    with open(out, "rb") as f:
        check_eq(hashlib.sha256(f.read()).hexdigest(), hashlib.sha256(data).hexdigest(),
                 "sha256 after a resumed download")


@test()
def mount_beside_echo(ctx):
    root, files = make_tree(ctx)
    srv = ctx.start(app=None, config=(
        "app: echo\n"
        "mounts:\n"
        "  - path: /static\n"
        "    app: static:%s\n"
        "  - {path: /static/listed, app: {static: '%s', listing: true}}\n"
        "  - path: /api/v1/\n"
        "    app: echo\n" % (root, os.path.join(root, "empty"))))
    r = request(srv.port, "GET", "/static/a.txt")
    check_eq((r.status, r.body), (200, files["a.txt"]), "file under the mount")
    r = request(srv.port, "GET", "/static")
    check_eq((r.status, r.header("location")), (301, "/static/"), "the mount point itself")
    r = request(srv.port, "GET", "/static/sub")
    check_eq(r.header("location"), "/static/sub/", "redirects keep the mount prefix")
    r = request(srv.port, "GET", "/static/sub/")
    check_eq(r.body, files["sub/index.html"], "index under the mount")
    r = request(srv.port, "GET", "/static/listed/")
    check_eq(r.status, 200, "longest prefix: the listing mount")
    check("Index of /static/listed/" in r.body.decode(), "listing title shows the full path")
    r = request(srv.port, "GET", "/staticx/a.txt")
    check_eq((r.status, r.header("x-echo-path"), r.header("x-echo-root-path")),
             (200, "/staticx/a.txt", ""), "/staticx is not under /static")
    r = request(srv.port, "POST", "/api/v1/items?q=1", body=b"payload")
    check_eq((r.status, r.body), (200, b"payload"), "echo under /api/v1")
    check_eq(r.header("x-echo-path"), "/api/v1/items", "raw_path stays whole")
    check_eq(r.header("x-echo-root-path"), "/api/v1", "root_path is the prefix")
    check_eq(r.header("x-echo-query"), "q=1", "query")
    r = request(srv.port, "GET", "/api/v1")
    check_eq(r.header("x-echo-root-path"), "/api/v1", "the mount point itself")
    r = request(srv.port, "GET", "/other")
    check_eq((r.header("x-echo-path"), r.header("x-echo-root-path")), ("/other", ""), "default app")
    r = raw_get(srv.port, "/static/../etc/passwd")
    check_eq(r.status, 400, "no climbing out of a mount")
    r = raw_get(srv.port, "/static/%2e%2e/api/v1")
    check_eq(r.status, 400, "encoded dots under a mount")


@test()
def config_check_mounts(ctx):
    root, _ = make_tree(ctx)
    good = write_config(ctx, "app: echo\nmounts:\n  - {path: /s, app: {static: '%s', listing: true}}\n"
                        % root, "good.yaml")
    p = subprocess.run([ctx.pagid, "-t", "-c", good], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check_eq(p.returncode, 0, "valid mounts (%s)" % p.stderr.decode(errors="replace"))
    bad = write_config(ctx, ("mounts:\n"
                             "  - {path: /s, app: static:/nonexistent-pagid}\n"
                             "  - {path: nope, app: echo}\n"
                             "  - {path: /t, app: echo}\n"
                             "  - {path: /t/, app: hello}\n"), "bad.yaml")
    p = subprocess.run([ctx.pagid, "-t", "-c", bad], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check_eq(p.returncode, 1, "invalid mounts")
    err = p.stderr.decode(errors="replace")
    for want in ("bad.yaml:2:21: static directory '/nonexistent-pagid'",
                 "bad.yaml:3:12: mount path 'nope' must start with '/'",
                 "bad.yaml:5:12: mount path '/t/' is mounted twice"):
        check(want in err, "missing %r in:\n%s" % (want, err))


@test(timeout=60)
def fds_back_to_baseline(ctx):
    root, files = make_tree(ctx)
    srv = start_static(ctx, root, "listing: true")
    base = srv.fd_count()
    targets = [("/a.txt", {}), ("/digits.txt", {"Range": "bytes=2-3"}),
               ("/digits.txt", {"Range": "bytes=99-"}), ("/missing", {}), ("/sub", {}),
               ("/sub/", {}), ("/empty/", {}), ("/outside_link.txt", {}),
               ("/a.txt", {"If-None-Match": "*"}), ("/../x", {})]
    c = Conn(srv.port)
    for i in range(30):
        for path, headers in targets:
            h = "".join("%s: %s\r\n" % kv for kv in headers.items())
            c.send("GET %s HTTP/1.1\r\nHost: t\r\n%s\r\n" % (path, h))
            r = c.read_response()
            check(r.status in (200, 206, 301, 304, 400, 404, 416), "%s: %r" % (path, r))
            if r.status == 400:  # a parse-level 400 may close the connection
                c.close()
                c = Conn(srv.port)
    c.close()
    # Clients that vanish in the middle of a big body.
    with open(os.path.join(root, "big.bin"), "wb") as f:
        f.write(os.urandom(8 * 1024 * 1024))
    for _ in range(10):
        c = Conn(srv.port)
        c.send("GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        c.read_head()
        c.reset()
    for _ in range(20):
        r = request(srv.port, "HEAD", "/big.bin")
        check_eq(r.status, 200, "HEAD big")
    ok = ctx.lib.wait_for(lambda: (srv.fd_count() or 0) <= base + 1, 5)
    if not ok:
        raise TestFailure("fds %s after the requests, %d before" % (srv.fd_count(), base))


@test()
def mounted_apps_get_lifespan(ctx):
    root, files = make_tree(ctx)
    so = ctx.lifecycle_so
    srv = ctx.start(app=None, config=("app: %s\nmounts:\n  - {path: /lc, app: %s}\n"
                                      "  - {path: /s, app: 'static:%s'}\n" % (so, so, root)))

    def count(what):
        return sum(1 for e in app_events(ctx, "lifespan") if e == what)

    check(wait_for(lambda: count("lifespan startup") == 2, 5),
          "two lifespan.startup (top-level and /lc): %r" % app_events(ctx, "lifespan"))
    r = request(srv.port, "GET", "/s/a.txt")
    check_eq((r.status, r.body), (200, files["a.txt"]), "static beside two lifecycle apps")
    check_eq(srv.stop(), 0, "exit status after SIGTERM")
    check(wait_for(lambda: count("lifespan shutdown") == 2, 2),
          "two lifespan.shutdown: %r" % app_events(ctx, "lifespan"))
