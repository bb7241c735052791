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

my ($LISTEN, $WATCH, $INFO_P, $PSGI, $HANDLERS, $STATE, $SERVED);
# What every send that went out returns: one done Future, shared (the
# adapter only asks it is_ready and is_failed).
my $SENT = Future->done;

sub start {
    my ($info, $psgi) = @_;
    $INFO_P = $info;
    $PSGI = $psgi;
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
    open $LISTEN, '+<&=', $info->{fd} or die "worker pool: the pool socket: $!\n";
    require IO::Handle;
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

# Blocking I/O on the accepted connection: this process does nothing else.
# Reads are buffered: the worker writes a request's frames at once, so one
# read usually brings them all.
my $RBUF = '';

sub _read_frame {
    my ($c) = @_;
    while (1) {
        if (length $RBUF >= 5) {
            my ($type, $len) = unpack 'a1 N', $RBUF;
            if (length $RBUF >= 5 + $len) {
                my $payload = substr $RBUF, 5, $len;
                substr $RBUF, 0, 5 + $len, '';
                return ($type, $payload);
            }
        }
        my $n = sysread $c, $RBUF, 262144, length $RBUF;
        return if !$n;
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
sub _take_one {
    my $c;
    accept($c, $LISTEN) or return 0;    # another process took it, or none waits
    my $cred = getsockopt($c, Socket::SOL_SOCKET(), Socket::SO_PEERCRED());
    my (undef, $uid) = $cred ? unpack('i I I', $cred) : (0, -1);
    if ($uid != $<) {    # not one of our workers
        close $c;
        return 1;
    }
    # (On Linux the accepted socket is blocking: O_NONBLOCK is not inherited.)
    $RBUF = '';
    $INFLIGHT = 1;
    PAGI::Server::Pagid::XS::pool_count('busy', 1);
    my $done = sub {
        close $c;
        $INFLIGHT = 0;
        PAGI::Server::Pagid::XS::pool_count('busy', 0);
        PAGI::Server::Pagid::XS::pool_count('served', 1);
        my $max = $INFO_P->{max_requests};
        if ($max && ++$SERVED >= $max) {
            _watch(0);
            PAGI::Server::Pagid::XS::psgi_harakiri("served $SERVED requests (max_requests)");
            return;
        }
        _watch(1);
    };
    _send($c, 'A', $$);
    my ($type, $payload) = _read_frame($c);
    if (!defined $type) {
        $done->();
    } elsif ($type eq 'C') {
        _serve_call($c, $payload, $done);
    } elsif ($type eq 'Q' && $PSGI) {
        _serve_psgi($c, $payload, $done);
    } else {
        $done->();
    }
    # A response still under way (a delayed responder called later, from a
    # timer): no other request is taken until it ends.
    if ($INFLIGHT) {
        _watch(0);
        return 0;
    }
    return $WATCH ? 1 : 0;    # not after a harakiri
}

sub _send {
    my ($c, $type, $payload) = @_;
    my $out = PAGI::Server::Pagid::Pool::_frame($type, $payload);
    while (length $out) {
        my $n = syswrite $c, $out;
        return 0 unless $n;
        substr $out, 0, $n, '';
    }
    return 1;
}

sub _serve_call {
    my ($c, $payload, $done) = @_;
    my $job = eval { Storable::thaw($payload) } || {};
    my $name = $job->{name} // '';
    my $h = $HANDLERS->{$name};
    if (!$h) {
        _send($c, 'F', "worker_pool: no handler named '$name'\n");
        return $done->();
    }
    my @ret = eval { ($h->($STATE, @{ $job->{args} || [] })) };
    if (my $e = $@) {
        _send($c, 'F', ref $e ? "$e" : $e);
    } else {
        my $frozen = eval { Storable::nfreeze([@ret == 1 ? $ret[0] : @ret]) };
        defined $frozen
            ? _send($c, 'R', $frozen)
            : _send($c, 'F', "worker_pool: the result of '$name' cannot be serialized: $@");
    }
    $done->();
}

# The scope the worker's Q frame describes, as PSGI.pm's _env reads it.
sub _scope_of {
    my ($head) = @_;
    my ($method, $scheme, $version, $raw, $query, $root, $path, $sh, $sp, $ch, $cp, $len, @h)
        = unpack '(N/a)*', $head;
    my @headers;
    push @headers, [splice @h, 0, 2] while @h >= 2;
    return ({
        method => $method, scheme => $scheme, http_version => $version, raw_path => $raw,
        query_string => $query, root_path => $root, path => $path, headers => \@headers,
        server => length $sh ? [$sh, length $sp ? $sp : undef] : [],
        client => length $ch ? [$ch, $cp] : [],
    }, $len);
}

sub _serve_psgi {
    my ($c, $head, $done) = @_;
    # The body, spooled past PSGI.pm's memory bound as the worker would.
    my ($body, $spool) = ('', undef);
    while (1) {
        my ($type, $payload) = _read_frame($c);
        return $done->() unless defined $type;
        last if $type eq 'Z';
        if ($spool) {
            print {$spool} $payload;
        } else {
            $body .= $payload;
            if (length $body > $PAGI::Server::Pagid::PSGI::MEMORY_MAX) {
                open $spool, '+>', undef or return $done->();
                binmode $spool;
                print {$spool} $body;
                $body = '';
            }
        }
    }
    my $input;
    if ($spool) {
        $spool->flush;
        seek $spool, 0, 0;
        $input = $spool;
    } else {
        open $input, '<', \$body;
        binmode $input;
    }
    my ($scope, $len) = _scope_of($head);
    my $conn = bless {ok => 1, complete => [], gone => []}, 'PAGI::Server::Pagid::Pool::Conn';
    $scope->{'pagi.connection'} = $conn;
    # Frames wait in $out and go in one write: a start and a whole body
    # with the end frame; a streamed body part goes at once (each write of
    # a streaming app reaches the client as it is written).
    my $out = '';
    my $flush = sub {
        while ($conn->{ok} && length $out) {
            my $n = syswrite $c, $out;
            if (!$n) {
                $conn->{ok} = 0;
                last;
            }
            substr $out, 0, $n, '';
        }
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
        scope => $scope, send => $send, app => $PSGI->[0],
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
        $done->();
    });
    $r->_call_app($r->_env(length $len ? $len : 0), $input);
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
