# Pagid.pm - the Perl half of pagid's Perl host, compiled into pagid and
# evaluated once per worker: app loading, running a scope's app,
# pagi.connection/pagi.transport objects, and Future::IO's impl.
use strict;
use warnings;

package PAGI::Server::Pagid;
use Future;

our %RUNNING;   # scope handle address -> the app's Future, until it is ready

# Each app file is compiled in a package of its own (as Plack's sandbox
# does), so two apps mounted in one config cannot clobber each other's
# globals and subs in main by accident.
my $sandboxes = 0;

sub _load {
    my ($file, $lib) = @_;
    unshift @INC, grep { length } split /:/, $lib;
    # The counter makes it unique; the file's base name (short: Perl caps a
    # package name's length) only helps a reader of a stack trace.
    (my $name = $file) =~ s{.*/}{};
    $name =~ s/\W/_/g;
    my $package = sprintf 'PAGI::Server::Pagid::Sandbox::App%d_%s', ++$sandboxes,
        substr($name, 0, 40);
    # `do` searches @INC for a relative path that does not start with ./ or
    # ../ (and '.' is not in @INC): a relative app path means the directory
    # pagid runs in, as it does for every other path.
    $file = "./$file" unless $file =~ m{^\.{0,2}/};
    my $app = eval sprintf <<'END_LOAD', $package;
package %s;
no strict;
local @ARGV;
my $app = do $file;
die $@ if $@;
# $! may be stale (a `use` searched @INC): only an unreadable file is that.
die "cannot read $file: $!\n" if !defined $app && !-r $file;
$app;
END_LOAD
    die $@ if $@;
    die "$file did not return a code reference\n" unless ref $app eq 'CODE';
    return $app;
}

sub _message {
    my ($e) = @_;
    $e = "$e";
    $e =~ s/\s+\z//;
    return length $e ? $e : 'died';
}

# perl_handle_scope calls the app and finishes the scope when the app dies
# or returns a done Future; anything else comes here.
sub _settle {
    my ($h, $f) = @_;
    if (!(Scalar::Util::blessed($f) && $f->can('on_ready'))) {
        PAGI::Server::Pagid::XS::finish($h, undef);
        return;
    }
    if ($f->is_ready) {
        PAGI::Server::Pagid::XS::finish($h, $f->is_done ? undef : _failure($f));
        return;
    }
    my $key = 0 + $$h;
    $RUNNING{$key} = $f;
    $f->on_ready(sub {
        delete $RUNNING{$key};
        PAGI::Server::Pagid::XS::finish($h, _failure($_[0]));
    });
    return;
}

sub _failure {
    my ($f) = @_;
    return undef unless $f->is_failed || $f->is_cancelled;
    return 'cancelled' if $f->is_cancelled;
    return _message(($f->failure)[0]);
}

# The class of the one done Future every at-once send returns: a Future
# whose await questions (AWAIT_IS_READY, AWAIT_GET, ...) are XSUBs.
package PAGI::Server::Pagid::Done;
our @ISA = ('Future');

package PAGI::Server::Pagid::Connection;
# An http scope's pagi.connection is its pagi.transport as well.
our @ISA = ('PAGI::Server::Pagid::Transport');

sub is_connected      { PAGI::Server::Pagid::XS::query($_[0]{h}, 0) ? 1 : 0 }
sub disconnect_reason { PAGI::Server::Pagid::XS::query($_[0]{h}, 1) }
sub response_started  { PAGI::Server::Pagid::XS::query($_[0]{h}, 2) ? 1 : 0 }
sub response_complete { PAGI::Server::Pagid::XS::query($_[0]{h}, 3) ? 1 : 0 }
sub on_disconnect     { PAGI::Server::Pagid::XS::watch($_[0]{h}, 0, $_[1]); return }
sub on_complete       { PAGI::Server::Pagid::XS::watch($_[0]{h}, 1, $_[1]); return }

sub disconnect_future {
    my ($self) = @_;
    return $self->{df} if $self->{df};
    my $f = $self->{df} = Future->new;
    # The callback holds the future weakly: the scope's release frees the rest.
    Scalar::Util::weaken(my $weak = $f);
    PAGI::Server::Pagid::XS::watch($self->{h}, 0, sub {
        $weak->done($_[0]) if $weak && !$weak->is_ready;
    });
    return $f;
}

package PAGI::Server::Pagid::Transport;

sub buffered_amount { PAGI::Server::Pagid::XS::query($_[0]{h}, 4) // 0 }
sub high_water_mark { PAGI::Server::Pagid::XS::query($_[0]{h}, 5) }
sub low_water_mark  { PAGI::Server::Pagid::XS::query($_[0]{h}, 6) }
sub on_high_water   { PAGI::Server::Pagid::XS::watch($_[0]{h}, 2, $_[1]); return }
sub on_drain        { PAGI::Server::Pagid::XS::watch($_[0]{h}, 3, $_[1]); return }

# pagid.server (the same object): the worker's drain notice.
sub draining        { PAGI::Server::Pagid::XS::query($_[0]{h}, 7) ? 1 : 0 }
sub on_server_drain { PAGI::Server::Pagid::XS::watch($_[0]{h}, 4, $_[1]); return }

sub server_drain_future {
    my ($self) = @_;
    return $self->{sdf} if $self->{sdf};
    my $f = $self->{sdf} = Future->new;
    Scalar::Util::weaken(my $weak = $f);
    PAGI::Server::Pagid::XS::watch($self->{h}, 4, sub {
        $weak->done if $weak && !$weak->is_ready;
    });
    return $f;
}

package PAGI::Server::Pagid::FutureIO;
use Future::IO::ImplBase;
our @ISA = ('Future::IO::ImplBase');

sub sleep {
    my ($class, $secs) = @_;
    my $f = Future->new;
    # The loop holds the future until the timer fires or is cancelled.
    my $id = PAGI::Server::Pagid::XS::timer_start($secs, sub { $f->done unless $f->is_ready });
    $f->on_cancel(sub { PAGI::Server::Pagid::XS::timer_stop($id) });
    return $f;
}

sub alarm {
    my ($class, $epoch) = @_;
    return $class->sleep($epoch - Time::HiRes::time());
}

sub _ready {
    my ($fh, $events) = @_;
    my $f = Future->new;
    my $fd = ref $fh ? fileno($fh) : $fh;
    return Future->fail("not an open file handle") unless defined $fd;
    my $id;
    $id = PAGI::Server::Pagid::XS::io_watch($fd, $events, sub {
        PAGI::Server::Pagid::XS::io_stop($id) if defined $id;
        undef $id;
        $f->done unless $f->is_ready;
    });
    $f->on_cancel(sub { PAGI::Server::Pagid::XS::io_stop($id) if defined $id; undef $id });
    return $f;
}

sub ready_for_read  { _ready($_[1], 1) }
sub ready_for_write { _ready($_[1], 2) }

sub HAVE_MULTIPLE_FILEHANDLES { 1 }

package main;
# exit() in an app would end the worker from inside a callback: make it a die
# (the scope fails, the worker goes on), as mod_perl does. In a process forked
# from the worker it exits (without pagid's teardown, which is the worker's).
# The worker is asked each time, never cached: with preload this code is
# compiled in the zygote, whose pid every forked worker would inherit.
BEGIN {
    *CORE::GLOBAL::exit = sub {
        if ($$ != PAGI::Server::Pagid::Loop::worker_pid()) {
            $_->flush for grep { defined fileno $_ } *STDOUT{IO}, *STDERR{IO};
            require POSIX;
            POSIX::_exit($_[0] // 0);
        }
        die "exit(" . ($_[0] // 0) . ") called by the app\n";
    };
}
use Scalar::Util ();
use Time::HiRes ();
use Future::IO;
Future::IO->override_impl('PAGI::Server::Pagid::FutureIO');
1;
