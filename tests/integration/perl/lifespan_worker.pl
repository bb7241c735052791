# lifespan_worker.pl - records the lifespan scope's $scope->{pagi}{is_worker} and
# {worker_num} (Lifespan.pod 0.2) in the test log at startup, keeps them in
# state and answers every request with them.
use strict;
use warnings;
use Future::AsyncAwait;

sub fmt {
    my ($p) = @_;
    return sprintf('is_worker=%s worker_num=%s', $p->{is_worker} // 'undef',
                   exists $p->{worker_num} ? $p->{worker_num} // 'undef' : 'absent');
}

async sub {
    my ($scope, $receive, $send) = @_;
    if ($scope->{type} eq 'lifespan') {
        while (1) {
            my $ev = await $receive->();
            if ($ev->{type} eq 'lifespan.startup') {
                my $line = fmt($scope->{pagi});
                $scope->{state}{worker} = $line;
                if (my $log = $ENV{PAGID_TEST_LOG}) {
                    open my $fh, '>>', $log or die "$log: $!";
                    print $fh "lifespan pid=$$ $line\n";
                    close $fh;
                }
                await $send->({type => 'lifespan.startup.complete'});
            } elsif ($ev->{type} eq 'lifespan.shutdown') {
                await $send->({type => 'lifespan.shutdown.complete'});
                return;
            }
        }
    }
    await $send->({type => 'http.response.start', status => 200,
                   headers => [['content-type', 'text/plain']]});
    await $send->({type => 'http.response.body', body => "pid=$$ $scope->{state}{worker}"});
};
