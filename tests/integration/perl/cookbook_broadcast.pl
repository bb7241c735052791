# cookbook_broadcast.pl - PAGI::Cookbook "Broadcasting events" (the pause
# shortened to 0.1 s). ?as=written holds the first $receive as if it were
# the disconnect: for a GET it is sse.request (Www.pod, "Request Body"),
# already there, so the recipe stops early. Otherwise the corrected form:
# take sse.request first, then hold the next $receive (sse.disconnect).
# Logs "first=TYPE sent=N" to PAGID_TEST_LOG.
use strict;
use warnings;
use Future::AsyncAwait;
use Future::IO;

sub note { open my $fh, '>>', $ENV{PAGID_TEST_LOG} or return; print $fh "@_\n" }

my $app = async sub {
    my ($scope, $receive, $send) = @_;
    return if $scope->{type} eq 'lifespan';
    die "Unsupported scope type: $scope->{type}" if $scope->{type} ne 'sse';

    await $send->({
        type    => 'sse.start',
        status  => 200,
        headers => [ [ 'content-type', 'text/event-stream' ] ],
    });

    my $as_written = ($scope->{query_string} // '') =~ /as=written/;
    my $first;
    unless ($as_written) {
        $first = await $receive->();    # sse.request (body '', more 0 for a GET)
    }
    my $disconnect = $receive->();   # completes on sse.disconnect

    my @events = (
        { event => 'tick', data => '1' },
        { event => 'tick', data => '2' },
        { event => 'done', data => 'finished' },
    );

    my $sent = 0;
    for my $msg (@events) {
        last if $disconnect->is_ready;
        await Future::IO->sleep(0.1);
        await $send->({ type => 'sse.send', %$msg });
        $sent++;
    }
    $first //= $disconnect->is_ready ? $disconnect->get : undef;
    note(($as_written ? 'written' : 'fixed') . " first=" . ($first ? $first->{type} : 'pending')
        . " sent=$sent");
};
$app;
