# producer.pl - a producer that paces itself with pagi.transport: it writes
# while buffered_amount is below the high-water mark and waits for on_drain.
use strict;
use warnings;
use Future;
use Future::AsyncAwait;

my $CHUNK = 'x' x 65536;

async sub {
    my ($scope, $receive, $send) = @_;
    die "http only\n" if $scope->{type} ne 'http';
    my $t = $scope->{'pagi.transport'};
    my $total = 4 * 1024 * 1024;
    my ($waits, $drain) = (0, undef);
    $t->on_drain(sub { $drain->done if $drain && !$drain->is_ready });
    await $send->({type => 'http.response.start', status => 200,
                   headers => [['content-length', $total]]});
    my $sent = 0;
    while ($sent < $total) {
        if ($t->buffered_amount >= $t->high_water_mark) {
            $drain = Future->new;
            $waits++;
            await $drain;
        }
        $send->({type => 'http.response.body', body => $CHUNK, more => 1})->retain;
        $sent += length $CHUNK;
    }
    await $send->({type => 'http.response.body', body => ''});
    open my $fh, '>>', $ENV{PAGID_TEST_LOG} or return;
    print $fh "producer waits=$waits\n";
};
