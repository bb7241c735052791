# sandbox_a.pl - one of two apps mounted side by side (test_perl
# mounted_apps_are_sandboxed): the same global and sub names as its twin,
# with its own values, and a lifespan that records its own startup.
use strict;
use warnings;
use Future::AsyncAwait;

our $COUNT = 0;
our $STARTED = 0;
sub label { 'a' }

async sub {
    my ($scope, $receive, $send) = @_;
    if ($scope->{type} eq 'lifespan') {
        while (1) {
            my $ev = await $receive->();
            if ($ev->{type} eq 'lifespan.startup') {
                $STARTED++;
                await $send->({type => 'lifespan.startup.complete'});
            } else {
                await $send->({type => 'lifespan.shutdown.complete'});
                return;
            }
        }
    }
    $COUNT++;
    my $body = label() . " count=$COUNT started=$STARTED";
    await $send->({type => 'http.response.start', status => 200,
                   headers => [['content-type', 'text/plain']]});
    await $send->({type => 'http.response.body', body => $body});
};
