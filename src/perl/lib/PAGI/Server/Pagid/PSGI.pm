# PAGI/Server/Pagid/PSGI.pm - runs a PSGI app (a .psgi file's code reference)
# as a PAGI app on pagid's Perl host: the request body is read whole, the PSGI
# env built, the app called synchronously and its response sent as PAGI events.
use strict;
use warnings;

package PAGI::Server::Pagid::PSGI;

use Future;
use Scalar::Util ();

# A request body up to this size stays in memory; a bigger one is spooled to
# an unlinked temporary file (nginx's client_body_buffer_size, 64k on 64-bit).
our $MEMORY_MAX = 64 * 1024;
# Bytes a getline or file body reads at a time ($/ = \N, as PSGI allows).
our $CHUNK = 64 * 1024;

# The request's phases are kept apart on purpose: the env (plain strings) and
# the body (bytes or a spool file) are all a PSGI app needs, so a later worker
# pool can hand exactly those two to another process and send back the
# response as the same events.

# wrap($app, $file): the PAGI app running the PSGI $app.
our %PSGI_OF;    # the PAGI app wrap made -> the PSGI app (for the worker pool)

sub wrap {
    my ($class, $app, $file) = @_;
    my $worker = {multiprocess => 0, harakiri => 0};
    my $pagi;
    $pagi = sub {
        my ($scope, $receive, $send) = @_;
        my $type = $scope->{type};
        return _lifespan($worker, $scope, $receive, $send) if $type eq 'lifespan';
        # PSGI has no WebSocket: the handshake is refused (403).
        return $send->({type => 'websocket.close'}) if $type eq 'websocket';
        # An sse scope (Accept: text/event-stream) is plain HTTP to a PSGI
        # app: its sse.http.response.* events are http.response.*'s twins.
        my $p = $type eq 'sse' ? 'sse.' : '';
        my $r = bless {
            scope => $scope, receive => $receive, send => $send, app => $app,
            worker => $worker, req_type => $type eq 'sse' ? 'sse.request' : 'http.request',
            start => "${p}http.response.start", body => "${p}http.response.body",
            done => Future->new,
        }, 'PAGI::Server::Pagid::PSGI::Request';
        $r->_read_body;
        return $r->{done};
    };
    $PSGI_OF{Scalar::Util::refaddr($pagi)} = [$app, $worker];
    return $pagi;
}

# PSGI has no lifespan; answering it keeps the worker's log quiet, and its
# scope says whether this is a pre-forked worker (multiprocess, harakiri).
sub _lifespan {
    my ($worker, $scope, $receive, $send) = @_;
    my $is_worker = $scope->{pagi}{is_worker} ? 1 : 0;
    $worker->{multiprocess} = $worker->{harakiri} = $is_worker;
    my $done = Future->new;
    my $step;
    $step = sub {
        $receive->()->on_ready(sub {
            my ($f) = @_;
            my $ev = $f->is_done ? $f->get : undef;
            if (!$ev || $ev->{type} eq 'lifespan.shutdown') {
                undef $step;
                return $done->done unless $ev;
                return $send->({type => 'lifespan.shutdown.complete'})
                    ->on_ready(sub { $done->done });
            }
            $send->({type => 'lifespan.startup.complete'})->retain
                if $ev->{type} eq 'lifespan.startup';
            $step->();
        });
    };
    $step->();
    return $done;
}

package PAGI::Server::Pagid::PSGI::Request;

use Future;
use Scalar::Util ();

# The app's Future fails with this (a disconnect is not an app error).
sub _finish {
    my ($self, $err) = @_;
    my $done = $self->{done};
    return if $done->is_ready;
    $err ? $done->fail($err) : $done->done;
}

# ---- the request body ------------------------------------------------------

# Receive http.request events until the last, into memory or a spool file,
# then run the app. A client that leaves first ends the scope quietly.
sub _read_body {
    my ($self) = @_;
    my $body = '';
    my ($spool, $length) = (undef, 0);
    my $step;
    my $end = sub { undef $step; };
    $step = sub {
        $self->{receive}->()->on_ready(sub {
            my ($f) = @_;
            if (!$f->is_done) {
                $end->();
                return $self->_finish('receive failed: ' . PAGI::Server::Pagid::_message(($f->failure)[0]));
            }
            my $ev = $f->get;
            if ($ev->{type} ne $self->{req_type}) {    # http.disconnect: nobody to answer
                $end->();
                return $self->_finish;
            }
            if (defined $ev->{body} && length $ev->{body}) {
                $length += length $ev->{body};
                if ($spool) {
                    print {$spool} $ev->{body}
                        or do { $end->(); return $self->_finish("cannot spool the request body: $!") };
                } else {
                    $body .= $ev->{body};
                    if (length $body > $PAGI::Server::Pagid::PSGI::MEMORY_MAX) {
                        # An anonymous file (in TMPDIR, already unlinked): nothing to clean up.
                        open $spool, '+>', undef
                            or do { $end->(); return $self->_finish("cannot open a spool file for the request body: $!") };
                        binmode $spool;
                        print {$spool} $body
                            or do { $end->(); return $self->_finish("cannot spool the request body: $!") };
                        $body = '';
                    }
                }
            }
            return $step->() if $ev->{more};
            $end->();
            my $input;
            if ($spool) {
                $spool->flush;
                seek $spool, 0, 0;
                $input = $spool;
            } else {
                open $input, '<', \$body or return $self->_finish("cannot open psgi.input: $!");
                binmode $input;
            }
            $self->_call_app($self->_env($length), $input);
        });
    };
    $step->();
}

# ---- the env ---------------------------------------------------------------

sub _bytes {
    my ($s) = @_;
    $s //= '';
    utf8::encode($s) if utf8::is_utf8($s);
    return $s;
}

# The PSGI env as plain strings (no handles): psgi.input, psgi.errors and
# the psgix callbacks are added by _call_app, in the process that runs the app.
sub _env {
    my ($self, $length) = @_;
    my $scope = $self->{scope};
    my $raw = _bytes($scope->{raw_path});
    my $query = _bytes($scope->{query_string});
    my $script = _bytes($scope->{root_path});
    # PATH_INFO is the raw path %XX-decoded once (RFC 3875, as Plack's servers
    # do), not pagid's decoded path: bytes, repeated slashes kept.
    (my $path = $raw) =~ s/%([0-9A-Fa-f]{2})/chr hex $1/eg;
    if (length $script && substr($path, 0, length $script) eq $script) {
        $path = substr $path, length $script;
    } elsif (length $script) {
        $path = substr _bytes($scope->{path}), length $script;
    }
    my ($server, $client) = ($scope->{server} // [], $scope->{client} // []);
    my %env = (
        REQUEST_METHOD    => $scope->{method},
        SCRIPT_NAME       => $script,
        PATH_INFO         => $path,
        REQUEST_URI       => length $query ? "$raw?$query" : $raw,
        QUERY_STRING      => $query,
        SERVER_NAME       => defined $server->[1] ? $server->[0] : 'localhost',
        SERVER_PORT       => $server->[1] // 0,
        SERVER_PROTOCOL   => 'HTTP/' . ($scope->{http_version} // '1.1'),
        'psgi.version'      => [1, 1],
        'psgi.url_scheme'   => $scope->{scheme} eq 'https' ? 'https' : 'http',
        'psgi.multithread'  => 0,
        'psgi.multiprocess' => $self->{worker}{multiprocess},
        'psgi.run_once'     => 0,
        'psgi.nonblocking'  => 0,
        'psgi.streaming'    => 1,
        'psgix.input.buffered' => 1,
        'psgix.harakiri'    => $self->{worker}{harakiri},
    );
    if (defined $client->[0]) {    # none on a unix socket
        $env{REMOTE_ADDR} = $client->[0];
        $env{REMOTE_PORT} = $client->[1] if defined $client->[1];
    }
    for my $h (@{ $scope->{headers} }) {
        my ($name, $value) = @$h;
        # A name with '_' would alias another after the s/-/_/: dropped, as
        # nginx (underscores_in_headers off) and Apache 2.4 drop it for CGI.
        next if $name =~ /_/;
        my $key;
        if ($name eq 'content-type') {
            $key = 'CONTENT_TYPE';
        } elsif ($name eq 'content-length') {
            next;    # the body read decides, below
        } else {
            ($key = 'HTTP_' . uc $name) =~ tr/-/_/;
        }
        if (exists $env{$key}) {
            $env{$key} .= ($name eq 'cookie' ? '; ' : ', ') . $value;
        } else {
            $env{$key} = $value;
        }
    }
    # The body was read whole: its length is known even when it came chunked.
    my $declared = grep { $_->[0] eq 'content-length' } @{ $scope->{headers} };
    $env{CONTENT_LENGTH} = $length if $length || $declared;
    return \%env;
}

# ---- calling the app -------------------------------------------------------

sub _call_app {
    my ($self, $env, $input) = @_;
    _prepare_env($env, $input);
    $self->{env} = $env;
    $self->_after_response;
    my $res = eval { $self->{app}->($env) };
    my $e = $@;
    PAGI::Server::Pagid::PSGI::Errors::flush_pending();    # a last line without its newline
    $self->_result($res, $e);
}

# What the env gets in the process that runs the app (PSGI 1.1).
sub _prepare_env {
    my ($env, $input) = @_;
    $env->{'psgi.input'} = $input;
    $env->{'psgi.errors'} = PAGI::Server::Pagid::PSGI::Errors::handle();
    $env->{'psgix.cleanup'} = 1;
    $env->{'psgix.cleanup.handlers'} = [];
}

# The app returned $res, or died with $e.
sub _result {
    my ($self, $res, $e) = @_;
    if ($e) {
        return $self->_gone if Scalar::Util::blessed($e) && $e->isa('PAGI::Server::Pagid::PSGI::Gone');
        return $self->_fail("died: " . PAGI::Server::Pagid::_message($e));
    }
    if (ref $res eq 'CODE') {
        my $responder = $self->_responder;
        # A writer dropped while the app runs may be dropped by its die
        # unwinding: it ends the body only once the app returned normally.
        local $self->{in_app} = 1;
        my $ok = eval { $res->($responder); 1 };
        $self->{in_app} = 0;
        PAGI::Server::Pagid::PSGI::Errors::flush_pending();
        if (!$ok) {
            my $e = $@;
            delete $self->{writer_dropped};
            return $self->_gone if Scalar::Util::blessed($e) && $e->isa('PAGI::Server::Pagid::PSGI::Gone');
            return $self->_fail("died in its delayed response: " . PAGI::Server::Pagid::_message($e));
        }
        $self->_send({type => $self->{body}}, 1) if delete $self->{writer_dropped};
        return;
    }
    # Outside the app's eval: a header or body object whose stringification
    # dies would leave the request unanswered (a pool process claimed for
    # ever), so it fails the request instead.
    eval { $self->_respond($res, 0); 1 }
        or $self->_fail("returned a response that could not be sent: " . PAGI::Server::Pagid::_message($@));
}

# psgix.cleanup.handlers run once the response is written (or the client
# left), each with the env; then psgix.harakiri.commit ends the worker.
sub _after_response {
    my ($self) = @_;
    my $conn = $self->{scope}{'pagi.connection'} or return;
    my $env = $self->{env};
    my $ran = 0;
    my $run = sub { _cleanup($env) unless $ran++ };
    $conn->on_complete($run);
    $conn->on_disconnect($run);
}

sub _cleanup {
    my ($env) = @_;
    for my $handler (@{ $env->{'psgix.cleanup.handlers'} || [] }) {
        eval { $handler->($env); 1 }
            or PAGI::Server::Pagid::XS::log(0, "perl: a psgix.cleanup handler died on "
                . "$env->{REQUEST_METHOD} $env->{REQUEST_URI}: " . PAGI::Server::Pagid::_message($@));
    }
    if ($env->{'psgix.harakiri.commit'} && $env->{'psgix.harakiri'}) {
        PAGI::Server::Pagid::XS::psgi_harakiri(
            "$env->{REQUEST_METHOD} $env->{REQUEST_URI} set psgix.harakiri.commit");
    }
}

# The client left while the app streamed: nothing to report.
sub _gone { $_[0]->_finish; return }

sub _fail {
    my ($self, $why) = @_;
    $self->_finish("PSGI app $why");
    return;
}

# ---- the response ----------------------------------------------------------

my %NO_BODY = map { $_ => 1 } 204, 304;

# [status, headers] checked as Plack::Middleware::Lint does; the PAGI headers, or undef.
sub _start_event {
    my ($self, $res) = @_;
    my ($status, $headers) = @$res;
    if (!defined $status || $status !~ /\A[0-9]{3}\z/ || $status < 100) {
        $self->_fail("returned a malformed response: the status is not a 3-digit code >= 100 ("
            . ($status // 'undef') . ")");
        return;
    }
    if (ref $headers ne 'ARRAY' || @$headers % 2) {
        $self->_fail('returned a malformed response: the headers are not an array reference '
            . 'of name/value pairs');
        return;
    }
    my @h;
    for (my $i = 0; $i < @$headers; $i += 2) {
        my ($n, $v) = @$headers[$i, $i + 1];
        if (!defined $n || !defined $v) {
            $self->_fail('returned a malformed response: header ' . ($n // 'undef')
                . ' has an undefined ' . (defined $n ? 'value' : 'name'));
            return;
        }
        if ("$n" !~ /\A[!#\$%&'*+.^_`|~0-9A-Za-z-]+\z/ || "$v" =~ /[\r\n\0]/) {
            $self->_fail("returned a malformed response: header '" . _printable($n) . "' "
                . ("$n" =~ /\A[!#\$%&'*+.^_`|~0-9A-Za-z-]+\z/ ? 'has CR, LF or NUL in its value' : 'is not a valid header name'));
            return;
        }
        push @h, [lc _bytes("$n"), _bytes("$v")];
    }
    # A body the app chunked itself (Mojo::Server::PSGI does): pagid frames
    # the body (HTTP/1.1 chunks, HTTP/2 frames), so the app's framing comes
    # off, as Starman and Twiggy do.
    if (grep { $_->[0] eq 'transfer-encoding' && $_->[1] =~ /\bchunked\b/i } @h) {
        @h = grep { $_->[0] ne 'transfer-encoding' } @h;
        $self->{dechunk} = _dechunker();
    }
    return {type => $self->{start}, status => 0 + $status, headers => \@h};
}

# A decoder of the chunked framing: fed bytes as they come, returns the data
# they complete (trailers are dropped).
sub _dechunker {
    my $buf = '';
    my ($left, $crlf, $end) = (0, 0, 0);    # data bytes due; a CRLF due after them; saw 0
    return sub {
        $buf .= $_[0];
        my $out = '';
        while (!$end && length $buf) {
            if ($left) {
                my $n = $left < length $buf ? $left : length $buf;
                $out .= substr $buf, 0, $n, '';
                $left -= $n;
            } elsif ($crlf) {
                last if length $buf < 2;
                substr $buf, 0, 2, '';
                $crlf = 0;
            } else {
                last unless $buf =~ s/\A([0-9a-fA-F]+)[^\r\n]*\r\n//;    # a whole size line
                $left = hex $1;
                $left ? ($crlf = 1) : ($end = 1);
            }
        }
        $buf = '' if $end;
        return $out;
    };
}

sub _printable {
    my ($s) = @_;
    $s = substr _bytes("$s"), 0, 60;
    $s =~ s/([^\x20-\x7e])/sprintf '\\x%02x', ord $1/ge;
    return $s;
}

# The response arrayref: [status, headers, body], or [status, headers] when
# $streaming (a delayed responder's; a writer is returned).
sub _respond {
    my ($self, $res, $streaming) = @_;
    return $self->_fail('returned a malformed response: not an array reference or a code reference ('
        . (defined $res ? $res : 'undef') . ')')
        if ref $res ne 'ARRAY';
    return $self->_fail('returned a malformed response: ' . scalar(@$res)
        . ' elements, not 3' . ($streaming ? ' (or 2 to stream)' : ''))
        unless @$res == 3 || ($streaming && @$res == 2);
    my $start = $self->_start_event($res) or return;
    if (@$res == 2) {
        $self->_send($start);
        return PAGI::Server::Pagid::PSGI::Writer->_new($self);
    }
    my $body = $res->[2];
    if (ref $body eq 'ARRAY') {
        my $bytes = '';
        for my $chunk (@$body) {
            next unless defined $chunk;
            return $self->_fail('returned a body with wide characters (encode it to bytes)')
                if utf8::is_utf8($chunk) && $chunk =~ /[^\x00-\xff]/;
            $bytes .= $chunk;
        }
        utf8::downgrade($bytes);
        $bytes = $self->{dechunk}->($bytes) if $self->{dechunk};
        # The whole body is known: a content-length rather than chunks (as
        # Plack's servers add with Plack::Util::content_length).
        my $h = $start->{headers};
        push @$h, ['content-length', length $bytes]
            unless $NO_BODY{$start->{status}} || $start->{status} < 200
            || grep { $_->[0] eq 'content-length' || $_->[0] eq 'transfer-encoding' } @$h;
        $self->_send($start);
        return $self->_send({type => $self->{body}, body => $bytes}, 1);
    }
    return $self->_fail('returned a malformed response: the body is not an array reference, '
        . 'a file handle or an object with getline (' . (defined $body ? $body : 'undef') . ')')
        unless _is_handle($body);
    $self->_send($start);
    return if $self->{done}->is_ready;
    # A real file with a path (Plack::Util::set_io_path): the server sends
    # it itself (sendfile) from where the handle stands.
    if (Scalar::Util::blessed($body) && $body->can('path') && !$NO_BODY{$start->{status}}) {
        my $fd = eval { fileno $body };
        my $path = eval { $body->path };
        if (defined $fd && $fd >= 0 && defined $path && -f $path) {
            my $at = tell $body;
            my $sent = $self->_send({type => $self->{body}, fh => $body,
                                     ($at > 0 ? (offset => $at) : ())}, 1);
            eval { $body->close };    # the server has its own copy of the descriptor
            return $sent;
        }
    }
    $self->_pull($body);
}

sub _is_handle {
    my ($body) = @_;
    return 1 if Scalar::Util::blessed($body) && $body->can('getline');
    return ref $body eq 'GLOB' && *{$body}{IO};
}

# A getline body: one chunk per send, the next read once the send completed
# (so a client that reads slowly paces the app's body, nothing piles up).
sub _pull {
    my ($self, $body) = @_;
    require IO::Handle;    # getline on a plain glob
    my $step;
    my $end = sub {
        undef $step;
        eval { $body->close; 1 }
            or PAGI::Server::Pagid::XS::log(1, "perl: PSGI body close died: " . PAGI::Server::Pagid::_message($@));
    };
    $step = sub {
        while (1) {
            my $chunk = eval { local $/ = \$PAGI::Server::Pagid::PSGI::CHUNK; $body->getline };
            if (my $e = $@) {
                $end->();
                return $self->_fail("died in its body's getline: " . PAGI::Server::Pagid::_message($e));
            }
            if (!defined $chunk) {
                $end->();
                return $self->_send({type => $self->{body}}, 1);
            }
            next unless length $chunk;
            if (utf8::is_utf8($chunk) && !utf8::downgrade($chunk, 1)) {
                $end->();
                return $self->_fail('returned a body whose getline gave wide characters (encode it to bytes)');
            }
            $chunk = $self->{dechunk}->($chunk) if $self->{dechunk};
            next unless length $chunk;
            my $f = $self->_send({type => $self->{body}, body => $chunk, more => 1})
                or return $end->();
            return $f->on_done(sub { $step->() if $step }) unless $f->is_ready;
            return $end->() if !$self->{scope}{'pagi.connection'}->is_connected;
        }
    };
    $step->();
}

# $send with failure handling: a refused send fails the scope (the server
# logs it with the request), the last one finishes it. Returns the send's
# Future, or undef when it failed at once.
sub _send {
    my ($self, $event, $last) = @_;
    return if $self->{done}->is_ready;
    my $f = eval { $self->{send}->($event) };
    if (!$f) {
        $self->_fail("response refused: " . PAGI::Server::Pagid::_message($@));
        return;
    }
    if ($f->is_ready) {
        if ($f->is_failed) {
            $self->_fail("response refused: " . PAGI::Server::Pagid::_message(($f->failure)[0]));
            return;
        }
        $self->_finish if $last;
        return $f;
    }
    # The server holds $f until it completes; $f's callback holds the request.
    $f->on_ready(sub {
        if ($_[0]->is_failed) {
            $self->_fail("response refused: " . PAGI::Server::Pagid::_message(($_[0]->failure)[0]));
        } elsif ($last) {
            $self->_finish;
        }
    });
    return $f;
}

# The delayed response's responder: called once, with [status, headers,
# body] or [status, headers] (then a writer comes back).
sub _responder {
    my ($self) = @_;
    # The app may keep the responder and call it later (from a timer): it
    # holds the request until then.
    my $guard = bless {r => $self}, 'PAGI::Server::Pagid::PSGI::Guard';
    return sub {
        my ($res) = @_;
        die "the PSGI responder was called twice\n" if $guard->{called}++;
        return $guard->{r}->_respond($res, 1);
    };
}

package PAGI::Server::Pagid::PSGI::Guard;

# The responder was dropped without being called: a 500 rather than a
# request that waits for ever.
sub DESTROY {
    my ($self) = @_;
    return if ${^GLOBAL_PHASE} eq 'DESTRUCT';
    my $r = $self->{r};
    $r->_fail('dropped its responder without calling it') if $r && !$self->{called};
}

package PAGI::Server::Pagid::PSGI::Writer;

# The streaming writer. A PSGI app is synchronous: it holds the worker's
# loop while it writes, so each write() is written to the socket at once
# (scope_write_now) instead of when the app returns; past the high
# watermark the write waits for the client in poll(2), as a blocking server
# would, for at most min(timeouts.write, timeouts.heartbeat / 2). Nothing
# else runs meanwhile: no other callback, so no re-entrancy (running the
# loop here would start other requests inside this app's call). Over
# HTTP/2 the bytes wait in the stream's buffer until the app returns.
# close() ends the body. A write after the client left dies with a
# PAGI::Server::Pagid::PSGI::Gone, so a streaming loop stops; the adapter
# takes that die as the end of the scope, not as an app error.
sub _new {
    my ($class, $r) = @_;
    return bless {r => $r, h => $r->{scope}{'pagi.connection'}{h}}, $class;
}

sub write {
    my ($self, $chunk) = @_;
    my $r = $self->{r} or die "write after close on a PSGI writer\n";
    return 1 unless defined $chunk && length $chunk;
    die "PSGI writer: wide characters (encode the body to bytes)\n"
        if utf8::is_utf8($chunk) && !utf8::downgrade(my $copy = $chunk, 1);
    $chunk = $r->{dechunk}->(PAGI::Server::Pagid::PSGI::Request::_bytes($chunk)) if $r->{dechunk};
    return 1 unless length $chunk;
    my $f = $r->_send({type => $r->{body}, body => PAGI::Server::Pagid::PSGI::Request::_bytes($chunk),
                       more => 1});
    $f && $self->{h} && PAGI::Server::Pagid::XS::write_now($self->{h}, !$f->is_ready);
    die PAGI::Server::Pagid::PSGI::Gone->new($r) unless $r->{scope}{'pagi.connection'}->is_connected;
    return 1;
}

sub close {
    my ($self) = @_;
    my $r = delete $self->{r} or return;
    $r->_send({type => $r->{body}}, 1);
    return;
}

# Dropped without close: the body ends here, as if closed; dropped inside
# the app's call, only if that call returns (a die that unwinds past the
# writer is an error, not the end of the body: _call_app decides).
sub DESTROY {
    my ($self) = @_;
    return if ${^GLOBAL_PHASE} eq 'DESTRUCT';
    my $r = $self->{r} or return;
    if ($r->{in_app}) {
        delete $self->{r};
        $r->{writer_dropped} = 1;
        return;
    }
    $self->close;
}

package PAGI::Server::Pagid::PSGI::Gone;
use overload '""' => sub { "the client went away ($_[0]{reason})\n" }, fallback => 1;

sub new {
    my ($class, $r) = @_;
    return bless {reason => $r->{scope}{'pagi.connection'}->disconnect_reason // 'client_closed'}, $class;
}

package PAGI::Server::Pagid::PSGI::Errors;

# psgi.errors: a real (tied) file handle, so both $err->print(...) and
# print {$err} ... work; each line printed goes to pagid's error log at the
# warn level. One handle per interpreter serves every request.
my $handle;

sub handle {
    return $handle if $handle;
    require IO::Handle;    # ->print on the glob
    require Symbol;
    $handle = Symbol::gensym();
    tie *$handle, __PACKAGE__;
    return $handle;
}

sub TIEHANDLE { my $buf = ''; return bless \$buf, $_[0] }

sub PRINT {
    my $self = shift;
    $$self .= join defined $, ? $, : '', map { defined $_ ? $_ : '' } @_;
    $$self .= $\ if defined $\;
    $self->_lines;
    return 1;
}

sub PRINTF {
    my ($self, $fmt, @args) = @_;
    $$self .= sprintf $fmt, @args;
    $self->_lines;
    return 1;
}

sub WRITE {
    my ($self, $buf, $len, $off) = @_;
    $len //= length $buf;
    $$self .= substr $buf, $off // 0, $len;
    $self->_lines;
    return $len;
}

sub CLOSE   { $_[0]->_flush; 1 }
sub FILENO  { 2 }
sub BINMODE { 1 }
sub OPEN    { 1 }
sub EOF     { 1 }

sub flush_pending {
    return unless $handle;
    my $tie = tied *$handle;
    return $tie->_flush if ref $tie eq __PACKAGE__;
    # An app untied the shared handle (or tied it to its own class): it is
    # ours again for the next request, which would otherwise die here.
    eval { untie *$handle } if $tie;
    tie *$handle, __PACKAGE__;
}

sub _flush {
    my ($self) = @_;
    PAGI::Server::Pagid::XS::log(1, "perl: psgi.errors: $$self") if length $$self;
    $$self = '';
}

sub _lines {
    my ($self) = @_;
    while ($$self =~ s/\A([^\n]*)\n//) {
        PAGI::Server::Pagid::XS::log(1, "perl: psgi.errors: $1") if length $1;
    }
    # A line that never ends is not kept for ever.
    $self->_flush if length $$self > 8192;
}

1;
