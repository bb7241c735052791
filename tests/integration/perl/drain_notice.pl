# drain_notice.pl - the drain notice in Perl ($scope->{'pagid.server'}): a
# WebSocket echo that closes with 1001 when the worker starts draining, and
# an endless SSE ticker that sends a last event and ends.
use strict;
use warnings;
use Future::AsyncAwait;
use Future::IO;

async sub {
    my ($scope, $receive, $send) = @_;
    my $server = $scope->{'pagid.server'};
    if ($scope->{type} eq 'websocket') {
        await $receive->();    # websocket.connect
        await $send->({type => 'websocket.accept'});
        $server->server_drain_future->on_done(sub {
            $send->({type => 'websocket.close', code => 1001, reason => 'drain in perl'})->retain;
        });
        while (1) {
            my $ev = await $receive->();
            last if $ev->{type} eq 'websocket.disconnect';
            next if $server->draining;
            await $send->({type => 'websocket.send', text => $ev->{text} // ''});
        }
        return;
    }
    if ($scope->{type} eq 'sse') {
        my $draining = 0;
        $server->on_server_drain(sub { $draining = 1 });
        await $send->({type => 'sse.start', status => 200});
        my $i = 0;
        until ($draining) {
            await $send->({type => 'sse.send', event => 'tick', data => 'draining=' . $server->draining});
            await Future::IO->sleep(0.05);
        }
        await $send->({type => 'sse.send', event => 'bye', data => 'draining=' . $server->draining});
        return;
    }
    if ($scope->{type} eq 'http') {
        await $send->({type => 'http.response.start', status => 200, headers => []});
        await $send->({type => 'http.response.body', body => 'draining=' . $server->draining});
        return;
    }
    die "unsupported\n" if $scope->{type} ne 'lifespan';
    while (1) {
        my $ev = await $receive->();
        if ($ev->{type} eq 'lifespan.startup') {
            await $send->({type => 'lifespan.startup.complete'});
        } else {
            await $send->({type => 'lifespan.shutdown.complete'});
            return;
        }
    }
};
