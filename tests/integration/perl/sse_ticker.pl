# sse_ticker.pl - an SSE stream of three ticks paced with Future::IO->sleep.
use strict;
use warnings;
use Future::AsyncAwait;
use Future::IO;

async sub {
    my ($scope, $receive, $send) = @_;
    if ($scope->{type} eq 'http') {
        await $send->({type => 'http.response.start', status => 404, headers => []});
        await $send->({type => 'http.response.body', body => 'not an event stream'});
        return;
    }
    die "sse only\n" if $scope->{type} ne 'sse';
    await $send->({type => 'sse.start', status => 200});
    for my $i (1 .. 3) {
        await Future::IO->sleep(0.05);
        await $send->({type => 'sse.send', event => 'tick', id => $i, data => "tick $i"});
    }
    # Newline in an id: the server's validation message fails the send.
    my $err = '';
    eval { await $send->({type => 'sse.send', id => "a\nb", data => 'x'}); 1 } or $err = $@;
    $err =~ s/\s+at .*//s;
    await $send->({type => 'sse.send', event => 'error', data => $err});
};
