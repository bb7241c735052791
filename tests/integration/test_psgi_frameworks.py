"""Real PSGI frameworks from Debian on pagid (-w 2), driven with http.client:
Dancer2, Mojolicious (Mojo::Server::PSGI) and Catalyst apps under
tests/integration/psgi/, each with routes, a form POST, a 1 MiB multipart
upload, cookies, a redirect, JSON, HEAD and a streamed response. A framework
that is not installed skips its test (dev.sh installs all three)."""

import hashlib
import http.client
import json
import os
import subprocess
import uuid

import lib
from lib import SLOW, check, check_eq, test

HERE = os.path.dirname(os.path.abspath(__file__))
PSGI_DIR = os.path.join(HERE, "psgi")


def start(ctx, name, module, args=()):
    p = subprocess.run(["perl", "-M" + module, "-e", "1"], capture_output=True, timeout=30)
    if p.returncode != 0:
        raise lib.Skip("%s is not installed" % module)
    h = subprocess.run([ctx.pagid, "-V"], capture_output=True, timeout=30)
    if b"perl" not in h.stdout:
        raise lib.Skip("pagid was built without the Perl host")
    srv = ctx.start(os.path.join(PSGI_DIR, name + ".psgi"), workers=2, args=list(args))
    return srv


def call(srv, method, path, body=None, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=20 * SLOW)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r, r.read()
    finally:
        c.close()


def exercise(srv, name):
    r, body = call(srv, "GET", "/")
    check_eq((r.status, body), (200, ("%s home" % name).encode()), "GET /")
    r, body = call(srv, "GET", "/hello/bob")
    check_eq(body, b"hello bob", "a route with a parameter")
    r, body = call(srv, "POST", "/form", body="name=al+b&age=3",
                   headers={"Content-Type": "application/x-www-form-urlencoded"})
    check_eq(body, b"form name=al b age=3", "form POST")
    data = os.urandom(1024 * 1024)
    boundary = uuid.uuid4().hex
    multipart = (("--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"up.bin\"\r\n"
                  "Content-Type: application/octet-stream\r\n\r\n" % boundary).encode() + data
                 + ("\r\n--%s--\r\n" % boundary).encode())
    r, body = call(srv, "POST", "/upload", body=multipart,
                   headers={"Content-Type": "multipart/form-data; boundary=" + boundary})
    check_eq(body.decode(), "upload up.bin %d %s" % (len(data), hashlib.md5(data).hexdigest()),
             "1 MiB upload")
    r, body = call(srv, "GET", "/cookie/set")
    cookie = r.getheader("set-cookie") or ""
    check(cookie.startswith("flavour=oatmeal"), "Set-Cookie: %r" % cookie)
    r, body = call(srv, "GET", "/cookie/get", headers={"Cookie": "other=1; flavour=oatmeal"})
    check_eq(body, b"cookie=oatmeal", "the cookie comes back")
    r, body = call(srv, "GET", "/redirect")
    check_eq(r.status, 302, "redirect status")
    check((r.getheader("location") or "").endswith("/hello/redirected"), "Location")
    r, body = call(srv, "GET", "/json")
    check((r.getheader("content-type") or "").startswith("application/json"), "JSON type")
    check_eq(json.loads(body), {"framework": {"dancer2": "Dancer2", "mojolicious": "Mojolicious",
                                              "catalyst": "Catalyst"}[name], "list": [1, 2, 3]},
             "JSON body")
    r, body = call(srv, "HEAD", "/")
    check_eq((r.status, body), (200, b""), "HEAD: status, no body")
    r, body = call(srv, "GET", "/stream")
    check_eq(body, b"part 1\npart 2\npart 3\n", "streamed body")
    check_eq(r.getheader("transfer-encoding"), "chunked", "streamed, so chunked")
    r, body = call(srv, "GET", "/no/such/route")
    check_eq(r.status, 404, "unknown route")
    check(not srv.crash_reports(), "no crash")


@test(timeout=90)
def dancer2(ctx):
    exercise(start(ctx, "dancer2", "Dancer2"), "dancer2")


@test(timeout=90)
def mojolicious(ctx):
    exercise(start(ctx, "mojolicious", "Mojo::Server::PSGI"), "mojolicious")


@test(timeout=120)
def catalyst(ctx):
    exercise(start(ctx, "catalyst", "Catalyst", ["-I", os.path.join(PSGI_DIR, "lib")]),
             "catalyst")
