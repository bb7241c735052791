# ws_echo.pl - WebSocket echo: text comes in as characters and goes back as
# "N:text" (N = length in characters); bytes go back unchanged.
use strict;
use warnings;
use Future::AsyncAwait;

async sub {
    my ($scope, $receive, $send) = @_;
    die "websocket only\n" if $scope->{type} ne 'websocket';
    my $ev = await $receive->();
    die "expected websocket.connect\n" if $ev->{type} ne 'websocket.connect';
    await $send->({type => 'websocket.accept'});
    while (1) {
        $ev = await $receive->();
        last if $ev->{type} eq 'websocket.disconnect';
        if (defined $ev->{text}) {
            if ($ev->{text} eq 'close') {
                await $send->({type => 'websocket.close', code => 4000, reason => "bye \x{e9}"});
                last;
            }
            await $send->({type => 'websocket.send', text => length($ev->{text}) . ':' . $ev->{text}});
        } else {
            await $send->({type => 'websocket.send', bytes => $ev->{bytes}});
        }
    }
};
