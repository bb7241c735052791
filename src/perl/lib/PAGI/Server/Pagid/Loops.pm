# Loops.pm - evaluated once per interpreter after the glue (in the zygote
# under preload, else in each worker): points the event loop modules an app
# may bring (IO::Async, AnyEvent, EV) at pagid's own loop. Only assignments,
# deletions from %ENV and an @INC hook: the loop modules compile when required.
use strict;
use warnings;

package PAGI::Server::Pagid::Loops;

# pagid's own modules come from the binary; EV.pm is pagid's refusal (EV
# brings a second libev that nothing would run).
sub _inc {
    my (undef, $file) = @_;
    my $src = PAGI::Server::Pagid::Loop::module_source($file);
    return unless defined $src;
    open my $fh, '<', \$src or return;
    $INC{$file} = "/pagid/embedded/$file";    # where caller() and %INC say it came from
    return $fh;
}
unshift @INC, \&_inc;

# IO::Async::Loop->new takes its candidates from IO_ASYNC_LOOP, then $LOOP.
# Any other loop class would never run in a worker: the environment's choice
# goes (a forked child gets the usual choice back: IO::Async::Loop::Pagid->new).
delete $ENV{IO_ASYNC_LOOP};
$IO::Async::Loop::LOOP = 'Pagid';

# AnyEvent looks at @REGISTRY before its own list (which would load EV), but
# after PERL_ANYEVENT_MODEL (AE_MODEL is copied to it when AnyEvent loads): a
# model named there would never run in a worker, so it goes too.
delete @ENV{qw(PERL_ANYEVENT_MODEL AE_MODEL)};
$PAGI::Server::Pagid::Loops::VERSION = 1;
push @AnyEvent::REGISTRY, ['PAGI::Server::Pagid::Loops' => 'AnyEvent::Impl::Pagid'];

1;
