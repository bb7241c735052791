# PAGI/Server/Pagid/Pool.pm - the worker pool's Perl side (docs/psgi.md, "The
# worker pool"): in a worker, a PAGI app's worker_pool calls (sent to a pool
# process by perl_pool_link.c, as PSGI requests are by perl_pool_relay.c);
# in a pool process, serving both on the links its workers keep to it.
use strict;
use warnings;

package PAGI::Server::Pagid::Pool;

use Errno ();
use Future;
use Scalar::Util ();
use Socket ();
use Storable ();

our $IN_PROCESS;    # this process is a pool process (exit() then exits)
our $RELAY;         # a worker: its PSGI apps' requests are relayed in C
my $INFO;           # pool_info(): {process, num, fd, processes, queue_limit, timeout, handlers}

# The wire: frames of a type byte, a 32-bit length and the payload, on the
# connection each worker keeps to each pool process, one request or call at
# a time (a worker sends one only to a process it claimed idle in the
# shared region). Worker -> process: Q (a PSGI request's head: the scope's
# strings, each a 32-bit length and its bytes, in the order of _scope_of,
# the last the spec of the app it is for (every PSGI app is served here);
# written by perl_pool_relay.c), D (body bytes), Z (the end of the body), C
# (a call: {name, args}, Storable). Process -> worker: S (the response's
# status, then header names and values, packed as Q's fields), B (body
# bytes), E (the end), X (the app failed: why), R (a call's result,
# Storable), F (a call failed: why), and I (idle: to a worker whose
# requests wait, outside any request).
sub _frame { pack('a1 N', $_[0], length $_[1]) . $_[1] }

# setup($app, $spec): called by the Perl host when an app the pool serves
# (every PSGI app of the config, top-level or mounted, and a PAGI app with
# worker_pool handlers) is created in a process of a generation with a
# pool; returns the app that process runs. $spec names the app in a Q frame.
sub _setup {
    my ($app, $spec) = @_;
    ($INFO //= PAGI::Server::Pagid::XS::pool_info()) or return $app;
    my $psgi = $PAGI::Server::Pagid::PSGI::PSGI_OF{Scalar::Util::refaddr($app)};
    if ($INFO->{process}) {
        $IN_PROCESS = 1;
        PAGI::Server::Pagid::Pool::Process::serve($INFO, $spec, $psgi);
        return $app;    # never called: a pool process has no listeners
    }
    if ($psgi) {    # its http and sse scopes go to perl_pool_relay.c
        $RELAY = 1;
        return $app;
    }
    return _with_extension($app);
}

# ---- the worker's side: dispatch -------------------------------------------

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
    return $f->fail("worker_pool: the args of '$name' must be an array reference\n")
        unless ref $args eq 'ARRAY';
    my $payload = eval { Storable::nfreeze({name => "$name", args => $args}) };
    return $f->fail("worker_pool: the args of '$name' cannot be serialized: $@") unless defined $payload;
    my $limit = $timeout && $timeout > 0 ? $timeout : $INFO->{timeout};
    my $sent = PAGI::Server::Pagid::XS::pool_call($payload, $limit || 0, sub {
        my ($type, $p) = @{ $_[0] };
        return if $f->is_ready;
        if ($type eq 'R') {
            my $v = eval { Storable::thaw($p) };
            $v ? $f->done(@$v) : $f->fail("worker_pool: the result of '$name' could not be read\n");
        } elsif ($type eq 'F') {
            $f->fail($p);
        } elsif ($type eq 'T') {
            $f->fail("worker_pool: '$name' timed out after ${limit}s\n");
        } else {
            $f->fail("worker_pool: the pool process died running '$name'\n");
        }
    });
    if (!$sent) {
        PAGI::Server::Pagid::XS::pool_count('rejected', 1);
        return $f->fail("worker_pool: queue full (backpressure): '$name' refused\n");
    }
    return;
}

package PAGI::Server::Pagid::Pool::Process;

# ---- a pool process: serving --------------------------------------------------

use Socket ();

my $PID;    # $$ read once ($$ is a getpid(2) call)
my ($WATCH, $INFO_P, $HANDLERS, $STATE, $STARTED);
my %PSGI;     # an app's spec (a Q frame's app field) => [$app, $worker] (PSGI.pm's)
my %LINKS;    # fd => the watcher of a worker's link
# What every send that went out returns: one done Future, shared (the
# adapter only asks it is_ready and is_failed).
my $SENT = Future->done;

# serve($info, $spec, $psgi): app $spec is served here (its requests, when
# $psgi); the first call starts the process.
sub serve {
    my ($info, $spec, $psgi) = @_;
    $PSGI{$spec} = $psgi if $psgi;
    start($info) unless $STARTED++;
}

sub start {
    my ($info) = @_;
    $INFO_P = $info;
    $PID = $$;
    if ($info->{handlers}) {
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
    # Its own listener, where its workers make their links (once each).
    $WATCH = PAGI::Server::Pagid::Loop::io($info->{fd}, 1, \&_accept);
    PAGI::Server::Pagid::XS::pool_ready();
}

sub _accept {
    while (defined(my $fd = PAGI::Server::Pagid::XS::pool_accept())) {
        next if $fd < 0;    # not one of our workers: refused
        $LINKS{$fd} = PAGI::Server::Pagid::Loop::io($fd, 1, sub { _take_one($fd) });
    }
}

# The psgi.input of every request without a body (pool_serve checks that an
# app left it as it was, else this makes another), and psgi.errors.
my $EMPTY_INPUT = _empty_input();
my $ERRORS;
sub _empty_input { open my $in, '<', \(my $empty = ''); binmode $in; return $in }

# A request or call on a worker's link, read whole and served. The link is
# a bare descriptor, read and written blocking in C (perl_pool_serve.c):
# this process does nothing else meanwhile. A response still under way when
# this returns (a delayed responder called later, from a timer) keeps the
# process claimed: no worker sends it another request until it ends. The
# common request (no body, the app's response an array of strings) is
# served whole in C (pool_serve: 'D').
sub _take_one {
    my ($fd) = @_;
    $ERRORS //= PAGI::Server::Pagid::PSGI::Errors::handle() if %PSGI;    # (PSGI.pm's: loaded then)
    my ($type, @req) = PAGI::Server::Pagid::XS::pool_serve($fd, \%PSGI, $ERRORS, $EMPTY_INPUT);
    if (!defined $type) {    # the worker left, or cut the link
        delete $LINKS{$fd};
        PAGI::Server::Pagid::XS::pool_drop($fd);
        return;
    }
    if ($type eq 'D') {    # served; retire: this process leaves now
        _done($req[0]) if $req[0];
        return;
    }
    if ($type eq 'R') {    # the app ran (pool_serve); its response is answered here
        my ($env, $res, $e, $spec) = @req;
        return _answer($fd, $PSGI{$spec}, $env, $res, $e);
    }
    if ($type eq 'C') {
        _serve_call($fd, $req[0]);
    } else {
        _serve_psgi($fd, @req);
    }
}

sub _frame_x { PAGI::Server::Pagid::Pool::_frame('X', $_[0]) }

# The request is over (pool_finish wrote its last frames and made this
# process idle again); $retire: it leaves now (1 max_requests, 2 a
# harakiri asked while a worker claimed it).
sub _done {
    my ($retire) = @_;
    return unless $retire;
    undef $WATCH;
    PAGI::Server::Pagid::XS::psgi_harakiri($retire == 1
        ? "served $INFO_P->{max_requests} requests (max_requests)"
        : "psgix.harakiri.commit");
}

sub _last {
    my ($fd, $type, $payload) = @_;
    return _done(PAGI::Server::Pagid::XS::pool_finish($fd, PAGI::Server::Pagid::Pool::_frame($type, $payload)));
}

sub _serve_call {
    my ($fd, $payload) = @_;
    my $job = eval { Storable::thaw($payload) } || {};
    my $name = $job->{name} // '';
    my $h = $HANDLERS->{$name};
    return _last($fd, 'F', "worker_pool: no handler named '$name'\n") if !$h;
    my @ret = eval { ($h->($STATE, @{ $job->{args} || [] })) };
    if (my $e = $@) {
        return _last($fd, 'F', ref $e ? "$e" : $e);
    }
    my $frozen = eval { Storable::nfreeze([@ret == 1 ? $ret[0] : @ret]) };
    defined $frozen
        ? _last($fd, 'R', $frozen)
        : _last($fd, 'F', "worker_pool: the result of '$name' cannot be serialized: $@");
}

# A PSGI request for app $spec: its env built from the Q frame in C, its
# body in memory or, past 64 KiB, in the unlinked file $spool_fd.
sub _serve_psgi {
    my ($fd, $env, $body, $spool_fd, $spec) = @_;
    my $psgi = $PSGI{$spec};
    if (!$psgi) {    # the worker's config has an app this process's has not
        if ($spool_fd >= 0) {
            require POSIX;
            POSIX::close($spool_fd);
        }
        return _last($fd, 'X', "worker pool: this process serves no PSGI app '$spec'");
    }
    my $input;
    if ($spool_fd >= 0) {
        open $input, '+<&=', $spool_fd or do {
            require POSIX;
            POSIX::close($spool_fd);
            return _last($fd, 'X', "worker pool: cannot read the spooled body: $!");
        };
    } else {
        open $input, '<', \$body;
    }
    binmode $input;
    # An empty body's shared handle, spoiled by an app: a new one for the next.
    $EMPTY_INPUT = _empty_input() if $spool_fd < 0 && !length $body;
    PAGI::Server::Pagid::PSGI::Request::_prepare_env($env, $input);
    my $res = eval { $psgi->[0]->($env) };
    my $e = $@;
    PAGI::Server::Pagid::PSGI::Errors::flush_pending();    # a last line without its newline
    return _answer($fd, $psgi, $env, $res, $e);
}

# The app ($psgi) answered $res or died with $e: its response goes out.
sub _answer {
    my ($fd, $psgi, $env, $res, $e) = @_;
    # The common response, [status, [headers], [strings]], goes out in C at
    # once; the cleanup handlers run after it, as after any response.
    my $rc;
    if (!$e && ref $res eq 'ARRAY' && ($rc = PAGI::Server::Pagid::XS::pool_respond($fd, $res))) {
        PAGI::Server::Pagid::PSGI::Request::_cleanup($env);
        return _done($rc - 1);
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
        scope => $scope, send => $send, app => $psgi->[0], env => $env,
        worker => {multiprocess => 1, harakiri => 1}, req_type => 'http.request',
        start => 'http.response.start', body => 'http.response.body', done => Future->new,
    }, 'PAGI::Server::Pagid::PSGI::Request';
    $r->{done}->on_ready(sub {
        my ($f) = @_;
        $out .= $f->is_failed
            ? PAGI::Server::Pagid::Pool::_frame('X', PAGI::Server::Pagid::_message(($f->failure)[0]))
            : PAGI::Server::Pagid::Pool::_frame('E', '');
        my ($retire, $ok) = PAGI::Server::Pagid::XS::pool_finish($fd, $conn->{ok} ? $out : '');
        $out = '';
        $conn->{ok} &&= $ok;
        $conn->_ended;
        _done($retire);
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
