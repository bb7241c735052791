# app.pl - the Perl app the system test mounts under /p in the packaged
# pagid: /p/hello answers at once, /p/slow?ms=N after N ms on the worker's
# loop (an in-flight request for drain checks), /p/block blocks the whole
# worker's loop (what the master's heartbeat must catch).
use strict;
use warnings;
use Future::AsyncAwait;
use Future::IO;

async sub {
    my ($scope, $receive, $send) = @_;
    return if $scope->{type} ne 'http';
    my $path = $scope->{path};
    my $body = "perl $$\n";
    if ($path =~ m{/slow$}) {
        my ($ms) = ($scope->{query_string} // '') =~ /ms=(\d+)/;
        await Future::IO->sleep(($ms // 1000) / 1000);
        $body = "slow done $$\n";
    } elsif ($path =~ m{/block$}) {
        sleep 600;    # the worker's event loop stops turning
    }
    await $send->({type => 'http.response.start', status => 200,
                   headers => [['content-type', 'text/plain']]});
    await $send->({type => 'http.response.body', body => $body});
};
