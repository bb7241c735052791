# PAGI/Server/Pagid/Pool.pm - the worker pool's Perl side (docs/psgi.md, "The
# worker pool"): in a worker, dispatching a PSGI request, or a PAGI app's
# worker_pool call, to a pool process over the pool's socket and relaying
# the answer on the worker's loop; in a pool process, serving them.
use strict;
use warnings;

package PAGI::Server::Pagid::Pool;

use Errno ();
use Future;
use Scalar::Util ();
use Socket ();
use Storable ();

our $IN_PROCESS;    # this process is a pool process (exit() then exits)
our $RELAY;         # a worker: the PSGI app's requests are relayed in C
my $INFO;           # pool_info(): {process, num, fd, processes, queue_limit, timeout, handlers}
my $ADDR;           # the pool socket's address (packed sockaddr_un)

# The wire: frames of a type byte, a 32-bit length and the payload, on one
# connection per request or call. Worker -> process: Q (a PSGI request's
# head: the scope's strings, each a 32-bit length and its bytes, in the
# order of _scope_of; written by perl_pool_relay.c), D (body bytes), Z (the
# end of the body), C (a call: {name, args}, Storable). Process -> worker:
# A (taken: its pid), S (the response's status, then header names and
# values, packed as Q's fields), B (body bytes), E (the end), X (the app
# failed: why), R (a call's result, Storable), F (a call failed: why).
sub _frame { pack('a1 N', $_[0], length $_[1]) . $_[1] }

# setup($app): called by the Perl host when the top-level app is created in
# a process of a generation with a pool; returns the app that process runs.
sub _setup {
    my ($app) = @_;
    $INFO = PAGI::Server::Pagid::XS::pool_info() or return $app;
    my $psgi = $PAGI::Server::Pagid::PSGI::PSGI_OF{Scalar::Util::refaddr($app)};
    if ($INFO->{process}) {
        $IN_PROCESS = 1;
        PAGI::Server::Pagid::Pool::Process::start($INFO, $psgi);
        return $app;    # never called: a pool process has no listeners
    }
    if ($psgi) {    # its http and sse scopes go to perl_pool_relay.c
        $RELAY = 1;
        return $app;
    }
    # (The handle closes the socket when it goes: the worker needs only its address.)
    open my $lfh, '+<&=', $INFO->{fd} or die "worker pool: the pool socket: $!\n";
    $ADDR = getsockname($lfh) or die "worker pool: getsockname: $!\n";
    return _with_extension($app);
}

# ---- the worker's side: dispatch -------------------------------------------

# 1 when a request or call may join the pool: a free process, or room in
# the queue (busy + waiting < processes + queue_limit).
sub _has_room {
    my $s = PAGI::Server::Pagid::XS::pool_stats() or return 1;
    return $s->{busy} + $s->{queue_depth} < $s->{workers} + $s->{queue_limit};
}

# A connection to the pool, non-blocking; undef with $! when refused.
sub _connect {
    socket(my $s, Socket::AF_UNIX(), Socket::SOCK_STREAM(), 0) or return;
    require IO::Handle;
    $s->blocking(0);
    connect($s, $ADDR) or return;    # EAGAIN: the backlog is full
    binmode $s;
    return $s;
}

# One exchange with a pool process: writes $out, calls $on_frame->($type,
# $payload) for each frame and $on_end->() at EOF (or on a read error). The
# reads never wait for the client: whatever the process writes is taken.
sub _exchange {
    my ($sock, $out, $on_frame, $on_end) = @_;
    my $x = bless {sock => $sock, out => $out, in => '', on_frame => $on_frame,
                   on_end => $on_end}, 'PAGI::Server::Pagid::Pool::Exchange';
    $x->_write;
    my $fd = fileno $sock;
    $x->{rw} = PAGI::Server::Pagid::Loop::io($fd, 1, sub { $x->_read });
    return $x;
}

# ---- the worker_pool extension of PAGI apps ---------------------------------

sub _with_extension {
    my ($app) = @_;
    my $ext = bless {}, 'PAGI::Server::Pagid::Pool::Extension';
    return sub {
        my ($scope) = @_;
        my $pagi = $scope->{pagi} //= {};
        if ($scope->{type} eq 'lifespan') {
            my $list = ref $pagi->{extensions} eq 'ARRAY' ? $pagi->{extensions} : [];
            push @$list, 'worker_pool';
            $pagi->{extensions} = $list;
        } else {
            $pagi->{extensions} = {} unless ref $pagi->{extensions} eq 'HASH';
            $pagi->{extensions}{worker_pool} = $ext;
        }
        return $app->(@_);
    };
}

package PAGI::Server::Pagid::Pool::Extension;

sub stats {
    my $s = PAGI::Server::Pagid::XS::pool_stats();
    return {map { $_ => $s->{$_} } qw(workers busy idle queue_depth queue_limit)};
}

sub call {
    my ($self, $name, %opts) = @_;
    my $f = Future->new;
    $self->_call($name, $opts{args} // [], $opts{timeout}, $f);
    return $f;
}

sub call_forget {
    my ($self, $name, %opts) = @_;
    my $f = Future->new;
    $self->_call($name, $opts{args} // [], $opts{timeout}, $f);
    $f->on_fail(sub {
        PAGI::Server::Pagid::XS::log(1, "perl: worker_pool call_forget('$name') failed: $_[0]");
    });
    $f->retain;
    return;
}

sub _call {
    my ($self, $name, $args, $timeout, $f) = @_;
    my $info = $INFO;
    return $f->fail("worker_pool: the args of '$name' must be an array reference\n")
        unless ref $args eq 'ARRAY';
    my $sock = PAGI::Server::Pagid::Pool::_has_room() ? PAGI::Server::Pagid::Pool::_connect() : undef;
    if (!$sock) {
        PAGI::Server::Pagid::XS::pool_count('rejected', 1);
        return $f->fail("worker_pool: queue full (backpressure): '$name' refused\n");
    }
    my $payload = eval { Storable::nfreeze({name => "$name", args => $args}) };
    return $f->fail("worker_pool: the args of '$name' cannot be serialized: $@") unless defined $payload;
    PAGI::Server::Pagid::XS::pool_count('waiting', 1);
    my $waiting = 1;
    my ($x, $timer);
    my $settle = sub {
        my ($ok, @v) = @_;
        PAGI::Server::Pagid::XS::pool_count('waiting', -1) if $waiting;
        $waiting = 0;
        undef $timer;
        $x->close if $x;
        return if $f->is_ready;
        $ok ? $f->done(@v) : $f->fail(@v);
    };
    my $limit = $timeout && $timeout > 0 ? $timeout : $info->{timeout};
    $timer = PAGI::Server::Pagid::Loop::timer($limit, 0, sub {
        PAGI::Server::Pagid::XS::pool_count('timeouts', 1);
        $settle->(0, "worker_pool: '$name' timed out after ${limit}s\n");
    }) if $limit && $limit > 0;
    $x = PAGI::Server::Pagid::Pool::_exchange($sock, PAGI::Server::Pagid::Pool::_frame('C', $payload), sub {
        my ($type, $p) = @_;
        if ($type eq 'A') {
            PAGI::Server::Pagid::XS::pool_count('waiting', -1) if $waiting;
            $waiting = 0;
        } elsif ($type eq 'R') {
            my $v = eval { Storable::thaw($p) };
            $settle->($v ? (1, @$v) : (0, "worker_pool: the result of '$name' could not be read\n"));
        } elsif ($type eq 'F') {
            $settle->(0, $p);
        }
    }, sub {
        $settle->(0, "worker_pool: the pool process died running '$name'\n");
    });
    $f->on_cancel(sub { $settle->(0, 'cancelled') });
    return;
}

package PAGI::Server::Pagid::Pool::Exchange;

sub _write {
    my ($x) = @_;
    return unless $x->{sock};
    while (length $x->{out}) {
        my $n = syswrite $x->{sock}, $x->{out};
        if (!defined $n) {
            if ($!{EAGAIN} || $!{EWOULDBLOCK}) {
                $x->{ww} //= PAGI::Server::Pagid::Loop::io(fileno $x->{sock}, 2, sub {
                    delete $x->{ww};
                    $x->_write;
                });
                return;
            }
            return;    # the process is gone: the read side sees it
        }
        substr $x->{out}, 0, $n, '';
    }
}

sub _read {
    my ($x) = @_;
    my $sock = $x->{sock} or return;
    while (1) {
        my $n = sysread $sock, my $chunk, 262144;
        $x->{in} .= $chunk if $n;
        if (!defined $n) {
            last if $!{EAGAIN} || $!{EWOULDBLOCK} || $!{EINTR};
            $n = 0;
        }
        if (!$n) {
            $x->_frames;
            my $end = $x->{on_end};
            $x->close;
            $end->() if $end;
            return;
        }
        last if $n < 262144;
    }
    $x->_frames;
}

sub _frames {
    my ($x) = @_;
    while ($x->{sock} && length $x->{in} >= 5) {
        my ($type, $len) = unpack 'a1 N', $x->{in};
        last if length $x->{in} < 5 + $len;
        my $payload = substr $x->{in}, 5, $len;
        substr $x->{in}, 0, 5 + $len, '';
        $x->{on_frame}->($type, $payload);
    }
}

sub close {
    my ($x) = @_;
    delete @$x{qw(rw ww on_frame on_end)};
    my $s = delete $x->{sock};
    close $s if $s;
}

package PAGI::Server::Pagid::Pool::Process;

# ---- a pool process: serving --------------------------------------------------

use Socket ();

my $PID;    # $$ read once ($$ is a getpid(2) call)
my ($LISTEN, $WATCH, $INFO_P, $PSGI, $HANDLERS, $STATE, $SERVED);
# What every send that went out returns: one done Future, shared (the
# adapter only asks it is_ready and is_failed).
my $SENT = Future->done;

sub start {
    my ($info, $psgi) = @_;
    $INFO_P = $info;
    $PSGI = $psgi;
    $PID = $$;
    if (!$psgi) {
        my $file = $info->{handlers} or die "worker pool: no handlers file\n";
        $file = "./$file" unless $file =~ m{^\.{0,2}/};
        my $spec = do $file;
        die "worker pool: cannot load $file: $@" if $@;
        die "worker pool: cannot read $file: $!\n" if !defined $spec && !-r $file;
        die "worker pool: $file must return {init => sub {...}, handlers => {name => sub {...}}}\n"
            unless ref $spec eq 'HASH' && ref $spec->{handlers} eq 'HASH';
        $HANDLERS = $spec->{handlers};
        $STATE = $spec->{init} ? $spec->{init}->() : {};
    }
    # The socket is non-blocking (pool_take's accept4 returns at once when
    # another process took the request).
    require IO::Handle;
    open $LISTEN, '+<&=', $info->{fd} or die "worker pool: the pool socket: $!\n";
    $LISTEN->blocking(0);
    _watch(1);
}

sub _watch {
    my ($on) = @_;
    if ($on) {
        $WATCH //= PAGI::Server::Pagid::Loop::io($INFO_P->{fd}, 1, \&_accept);
    } else {
        undef $WATCH;
    }
}

my $INFLIGHT;    # the request accepted last has not finished yet

# The listening socket is readable: requests waiting in the backlog are
# taken one after another (at most 64, so the loop still turns for signals)
# without a loop turn between them.
sub _accept {
    for (1 .. 64) {
        _take_one() or last;
    }
}

# One request or call from the backlog, served; 1 when another may be taken.
# The connection is a bare descriptor, read and written blocking in C
# (perl_pool_serve.c): this process does nothing else meanwhile.
sub _take_one {
    my ($fd, $type, @req) = PAGI::Server::Pagid::XS::pool_take($PID);
    return 0 unless defined $fd;    # another process took it, or none waits
    return 1 if $fd < 0;            # not one of our workers: refused
    $INFLIGHT = 1;
    if ($type eq 'C') {
        _serve_call($fd, $req[0]);
    } elsif ($type eq 'Q' && $PSGI) {
        _serve_psgi($fd, @req);
    } else {
        _done($fd);
    }
    # A response still under way (a delayed responder called later, from a
    # timer): no other request is taken until it ends.
    if ($INFLIGHT) {
        _watch(0);
        return 0;
    }
    return $WATCH ? 1 : 0;    # not after a harakiri
}

# The request on $fd is over: the connection closed, this process idle
# again (or replaced after max_requests).
sub _done {
    my ($fd) = @_;
    PAGI::Server::Pagid::XS::pool_close($fd);
    $INFLIGHT = 0;
    my $max = $INFO_P->{max_requests};
    if ($max && ++$SERVED >= $max) {
        _watch(0);
        PAGI::Server::Pagid::XS::psgi_harakiri("served $SERVED requests (max_requests)");
        return;
    }
    _watch(1);
}

sub _send {
    my ($fd, $type, $payload) = @_;
    return PAGI::Server::Pagid::XS::pool_write($fd, PAGI::Server::Pagid::Pool::_frame($type, $payload));
}

sub _serve_call {
    my ($fd, $payload) = @_;
    my $job = eval { Storable::thaw($payload) } || {};
    my $name = $job->{name} // '';
    my $h = $HANDLERS->{$name};
    if (!$h) {
        _send($fd, 'F', "worker_pool: no handler named '$name'\n");
        return _done($fd);
    }
    my @ret = eval { ($h->($STATE, @{ $job->{args} || [] })) };
    if (my $e = $@) {
        _send($fd, 'F', ref $e ? "$e" : $e);
    } else {
        my $frozen = eval { Storable::nfreeze([@ret == 1 ? $ret[0] : @ret]) };
        defined $frozen
            ? _send($fd, 'R', $frozen)
            : _send($fd, 'F', "worker_pool: the result of '$name' cannot be serialized: $@");
    }
    _done($fd);
}

# A PSGI request: its env built from the Q frame in C, its body in memory
# or, past 64 KiB, in the unlinked file $spool_fd.
sub _serve_psgi {
    my ($fd, $env, $body, $spool_fd) = @_;
    my $input;
    if ($spool_fd >= 0) {
        open $input, '+<&=', $spool_fd or do { require POSIX; POSIX::close($spool_fd); return _done($fd) };
    } else {
        open $input, '<', \$body;
    }
    binmode $input;
    PAGI::Server::Pagid::PSGI::Request::_prepare_env($env, $input);
    my $res = eval { $PSGI->[0]->($env) };
    my $e = $@;
    PAGI::Server::Pagid::PSGI::Errors::flush_pending();    # a last line without its newline
    # The common response, [status, [headers], [strings]], goes out in C at
    # once; the cleanup handlers run after it, as after any response.
    if (!$e && ref $res eq 'ARRAY' && PAGI::Server::Pagid::XS::pool_respond($fd, $res)) {
        PAGI::Server::Pagid::PSGI::Request::_cleanup($env);
        return _done($fd);
    }
    my $conn = bless {ok => 1, complete => [], gone => []}, 'PAGI::Server::Pagid::Pool::Conn';
    my $scope = {'pagi.connection' => $conn};
    # Frames wait in $out and go in one write: a start and a whole body
    # with the end frame; a streamed body part goes at once (each write of
    # a streaming app reaches the client as it is written).
    my $out = '';
    my $flush = sub {
        $conn->{ok} = 0
            if $conn->{ok} && length $out && !PAGI::Server::Pagid::XS::pool_write($fd, $out);
        $out = '';
        return $conn->{ok};
    };
    my $send = sub {
        my ($ev) = @_;
        return Future->fail("the worker went away\n") unless $conn->{ok};
        if ($ev->{type} =~ /response\.start\z/) {
            $out .= PAGI::Server::Pagid::Pool::_frame('S',
                pack('N (N/a)*', $ev->{status}, map { @$_ } @{ $ev->{headers} }));
        } elsif ($ev->{fh}) {    # a file body: read here, sent as bytes
            my $fh = $ev->{fh};
            seek $fh, $ev->{offset}, 0 if $ev->{offset};
            while (1) {
                my $n = read $fh, my $chunk, 262144;
                last unless $n;
                $out .= PAGI::Server::Pagid::Pool::_frame('B', $chunk);
                $flush->() or last;
            }
        } elsif (defined $ev->{body} && length $ev->{body}) {
            # In frames of 256 KiB: the worker relays each as it comes.
            for (my $at = 0; $conn->{ok} && $at < length $ev->{body}; $at += 262144) {
                $out .= PAGI::Server::Pagid::Pool::_frame('B', substr $ev->{body}, $at, 262144);
                $flush->() if length $out > 262144;
            }
            $flush->() if $ev->{more};
        }
        return $conn->{ok} ? $SENT : Future->fail("the worker went away\n");
    };
    my $r = bless {
        scope => $scope, send => $send, app => $PSGI->[0], env => $env,
        worker => {multiprocess => 1, harakiri => 1}, req_type => 'http.request',
        start => 'http.response.start', body => 'http.response.body', done => Future->new,
    }, 'PAGI::Server::Pagid::PSGI::Request';
    $r->{done}->on_ready(sub {
        my ($f) = @_;
        $out .= $f->is_failed
            ? PAGI::Server::Pagid::Pool::_frame('X', PAGI::Server::Pagid::_message(($f->failure)[0]))
            : PAGI::Server::Pagid::Pool::_frame('E', '');
        $flush->();
        $conn->_ended;
        _done($fd);
    });
    $r->_after_response;
    $r->_result($res, $e);
}

package PAGI::Server::Pagid::Pool::Conn;

# pagi.connection as the PSGI adapter uses it in a pool process.
sub is_connected      { $_[0]{ok} }
sub disconnect_reason { $_[0]{ok} ? undef : 'client_closed' }
sub on_complete       { push @{ $_[0]{complete} }, $_[1]; return }
sub on_disconnect     { push @{ $_[0]{gone} }, $_[1]; return }

sub _ended {
    my ($self) = @_;
    my $list = $self->{ok} ? $self->{complete} : $self->{gone};
    $self->{complete} = $self->{gone} = [];
    $_->() for @$list;
}

1;
