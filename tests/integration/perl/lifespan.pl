# lifespan.pl - lifespan per worker: startup fills state (shallow-copied into
# every request); startup fails when PAGID_PERL_FAIL_STARTUP is set.
use strict;
use warnings;
use Future::AsyncAwait;

async sub {
    my ($scope, $receive, $send) = @_;
    if ($scope->{type} eq 'lifespan') {
        while (1) {
            my $ev = await $receive->();
            if ($ev->{type} eq 'lifespan.startup') {
                if ($ENV{PAGID_PERL_FAIL_STARTUP}) {
                    await $send->({type => 'lifespan.startup.failed', message => 'no database'});
                    return;
                }
                $scope->{state}{greeting} = 'hello from startup';
                $scope->{state}{shared} = {count => 0};
                await $send->({type => 'lifespan.startup.complete'});
            } elsif ($ev->{type} eq 'lifespan.shutdown') {
                await $send->({type => 'lifespan.shutdown.complete'});
                return;
            }
        }
    }
    my $state = $scope->{state};
    $state->{shared}{count}++;
    my $mine = exists $state->{private} ? 'leaked' : 'fresh';
    $state->{private} = 1;   # a top-level key: private to this request
    my $body = "$state->{greeting} count=$state->{shared}{count} $mine";
    await $send->({type => 'http.response.start', status => 200, headers => [['content-type', 'text/plain']]});
    await $send->({type => 'http.response.body', body => $body});
};
