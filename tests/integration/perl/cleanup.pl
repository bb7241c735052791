# cleanup.pl - on_disconnect / on_complete cleanup and disconnect_future:
# /ok completes; /slow waits on a client that leaves. Events are appended to
# the file named by PAGID_TEST_LOG.
use strict;
use warnings;
use Future;
use Future::AsyncAwait;
use Future::IO;

sub note {
    open my $fh, '>>', $ENV{PAGID_TEST_LOG} or return;
    print $fh "@_\n";
    close $fh;
}

async sub {
    my ($scope, $receive, $send) = @_;
    die "http only\n" if $scope->{type} ne 'http';
    my $conn = $scope->{'pagi.connection'};
    my $id = $scope->{query_string};
    $conn->on_disconnect(sub { note("$id disconnect $_[0] connected=" . $conn->is_connected) });
    $conn->on_complete(sub { note("$id complete complete=" . $conn->response_complete) });
    if ($scope->{path} eq '/slow') {
        await $send->({type => 'http.response.start', status => 200, headers => []});
        await $send->({type => 'http.response.body', body => "waiting\n", more => 1});
        my $df = $conn->disconnect_future;
        my $r = await Future->wait_any($df, Future::IO->sleep(20)->then_done('timeout'));
        note("$id raced " . ($df->is_ready ? 'disconnect ' . $df->get : 'timeout'));
        await $send->({type => 'http.response.body', body => "late\n"}); # a no-op now
        return;
    }
    await $send->({type => 'http.response.start', status => 200, headers => []});
    await $send->({type => 'http.response.body', body => 'ok'});
};
