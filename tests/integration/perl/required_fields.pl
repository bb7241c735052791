# required_fields.pl - sends the spec refuses (Www.pod): sse.send without its
# required 'data', websocket.send with both 'text' and 'bytes'. Each failed
# send's message is sent back to the client, then a valid event follows.
use strict;
use warnings;
use Future::AsyncAwait;

sub msg { my ($e) = @_; $e =~ s/\s+at .*//s; $e =~ s/\s+\z//; $e }

async sub {
    my ($scope, $receive, $send) = @_;
    my $t = $scope->{type};
    return if $t eq 'lifespan';
    if ($t eq 'sse') {
        await $send->({type => 'sse.start'});
        my $err = '';
        for my $n (1, 2) {    # the same refusal twice: logged once
            eval { await $send->({type => 'sse.send', event => 'no-data'}); 1 } or $err = msg($@);
        }
        await $send->({type => 'sse.send', event => 'error', data => $err});
        await $send->({type => 'sse.send', data => ''});    # empty data is data
        return;
    }
    if ($t eq 'websocket') {
        await $receive->();    # websocket.connect
        await $send->({type => 'websocket.accept'});
        my $err = '';
        eval { await $send->({type => 'websocket.send', text => 'a', bytes => 'b'}); 1 }
            or $err = msg($@);
        await $send->({type => 'websocket.send', text => $err});
        await $send->({type => 'websocket.close'});
        return;
    }
    await $send->({type => 'http.response.start', status => 404});
    await $send->({type => 'http.response.body', body => 'no'});
};
