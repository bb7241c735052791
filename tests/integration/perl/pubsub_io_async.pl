# pubsub_io_async.pl - pagi.pubsub from an app in IO::Async style: loop
# timers, callbacks and Future chains, no async/await (test_perl_pubsub.py).
# Each worker's lifespan starts an IO::Async::Timer::Periodic that publishes
# "wN:K" (K = 0, 1, ...) on 'ticks' through the lifespan scope's extension.
# A websocket is told "worker N", then gets every message on 'ticks', from
# every worker; a text it sends is published as "echo:TEXT" after a
# $loop->delay_future.
use strict;
use warnings;
use Future::Utils qw(repeat);
use IO::Async::Loop;
use IO::Async::Timer::Periodic;

my $loop = IO::Async::Loop->new;

sub lifespan {
    my ($scope, $receive, $send) = @_;
    my $pubsub = $scope->{extensions}{'pagi.pubsub'};
    my $me = $scope->{pagi}{worker_num} // 0;
    my $n = 0;
    my $timer = IO::Async::Timer::Periodic->new(
        interval => 0.02,
        on_tick  => sub {
            $pubsub->publish('ticks', "w$me:" . $n++)->on_fail(sub { warn "publish failed: @_" });
        },
    );
    return $receive->()->then(sub {
        my ($ev) = @_;
        return Future->done unless $ev->{type} eq 'lifespan.startup';
        $scope->{state}{worker} = $me;
        $loop->add($timer);
        $timer->start;
        return $send->({type => 'lifespan.startup.complete'})
            ->then(sub { $receive->() })
            ->then(sub {
                $timer->stop;
                $loop->remove($timer);
                return $send->({type => 'lifespan.shutdown.complete'});
            });
    });
}

sub websocket {
    my ($scope, $receive, $send) = @_;
    my $pubsub = $scope->{extensions}{'pagi.pubsub'};
    return $receive->()
        ->then(sub { $send->({type => 'websocket.accept'}) })
        ->then(sub { $send->({type => 'websocket.send', text => "worker $scope->{state}{worker}"}) })
        ->then(sub {
            $pubsub->subscribe('ticks', sub {
                my ($message) = @_;
                return $send->({type => 'websocket.send', text => $message});
            });
            return repeat {
                $receive->()->then(sub {
                    my ($ev) = @_;
                    return Future->done($ev) unless defined $ev->{text};
                    return $loop->delay_future(after => 0.01)
                        ->then(sub { $pubsub->publish('ticks', "echo:$ev->{text}") })
                        ->then(sub { Future->done($ev) });
                });
            } until => sub { $_[0]->get->{type} eq 'websocket.disconnect' };
        });
}

sub {
    my ($scope, $receive, $send) = @_;
    return lifespan(@_) if $scope->{type} eq 'lifespan';
    return websocket(@_) if $scope->{type} eq 'websocket';
    die "unsupported scope type $scope->{type}\n";
};
