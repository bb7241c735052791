# AnyEvent/Impl/Pagid.pm - AnyEvent's backend inside a pagid worker: io,
# timers, idle, signals and child processes on the worker's own libev loop.
# A blocking wait (a condvar's ->recv before ->send) dies: pagid runs the loop.
package AnyEvent::Impl::Pagid;
use AnyEvent (); BEGIN { AnyEvent::common_sense }
use Carp ();

our $VERSION = '1';

# Each returns the watcher object: dropping it stops the watch (AnyEvent's guard rule).
sub io {
    my ($class, %arg) = @_;
    my $fh = $arg{fh};
    my $fd = ref $fh ? fileno $fh : $fh;
    defined $fd or Carp::croak("AnyEvent->io: fh is not an open file handle");
    my $cb = $arg{cb};
    PAGI::Server::Pagid::Loop::io($fd, $arg{poll} eq 'w' ? 2 : 1, sub { $cb->() })
}

sub timer {
    my ($class, %arg) = @_;
    PAGI::Server::Pagid::Loop::timer($arg{after} // 0, $arg{interval} // 0, $arg{cb})
}

sub signal {
    my ($class, %arg) = @_;
    my $num = AnyEvent::Base::sig2num($arg{signal});
    PAGI::Server::Pagid::Loop::signal($num, $arg{cb})
}

# libev reaps every child of the worker: the status comes from it.
sub child {
    my ($class, %arg) = @_;
    PAGI::Server::Pagid::Loop::child($arg{pid}, $arg{cb})
}

sub idle {
    my ($class, %arg) = @_;
    my $cb = $arg{cb};
    # AnyEvent's idle repeats while nothing else is to do; a zero-delay repeating
    # timer would spin the worker at full CPU, so it yields a little between rounds.
    PAGI::Server::Pagid::Loop::timer(0, 0.001, sub { $cb->() })
}

sub _poll {
    # The app's line, not AnyEvent's.
    local @Carp::Internal{qw(AnyEvent AnyEvent::CondVar AnyEvent::CondVar::Base AnyEvent::Base)}
        = (1) x 4;
    Carp::croak("AnyEvent condvar ->recv would block inside a pagid worker: pagid runs "
          . "the loop; use ->cb (or return a Future) instead");
}

sub AnyEvent::CondVar::Base::_wait {
    _poll() unless exists $_[0]{_ae_sent};
}

1;
