# defaults.pl - every optional event key left out, so the server's defaults
# (Www.pod) apply: sse.start without status (200) or headers, http.response.start
# without headers, http.response.body without body or more, websocket.accept
# with no keys, websocket.close without code (1000) or reason ('').
use strict;
use warnings;
use Future::AsyncAwait;

async sub {
    my ($scope, $receive, $send) = @_;
    my $t = $scope->{type};
    return if $t eq 'lifespan';
    if ($t eq 'sse') {
        await $send->({type => 'sse.start'});
        await $send->({type => 'sse.send', data => 'one'});
        await $send->({type => 'sse.send', data => 'two', event => 'e'});
        return;
    }
    if ($t eq 'websocket') {
        await $receive->();    # websocket.connect
        await $send->({type => 'websocket.accept'});
        my $ev = await $receive->();
        await $send->({type => 'websocket.send', text => $ev->{text} // ''});
        await $send->({type => 'websocket.close'});
        return;
    }
    if ($scope->{path} eq '/empty') {
        await $send->({type => 'http.response.start', status => 204});
        await $send->({type => 'http.response.body'});
        return;
    }
    # /stream: more=1 chunks, then a body event with neither body nor more ends it
    await $send->({type => 'http.response.start', status => 200});
    await $send->({type => 'http.response.body', body => 'a', more => 1});
    await $send->({type => 'http.response.body', body => 'b', more => 1});
    await $send->({type => 'http.response.body'});
};
