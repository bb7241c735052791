# lifespan_hang.pl - a lifespan handler that takes lifespan.shutdown and never
# answers it (it waits for an event that will not come), so the worker's
# shutdown limit ends it; requests get "hang". Notes "hang startup" and
# "hang shutdown" in PAGID_TEST_LOG.
use strict;
use warnings;
use Future::AsyncAwait;

my $note = sub {
    open my $fh, '>>', $ENV{PAGID_TEST_LOG} or return;
    print $fh "@_\n";
    close $fh;
};

async sub {
    my ($scope, $receive, $send) = @_;
    if ($scope->{type} eq 'lifespan') {
        while (1) {
            my $ev = await $receive->();
            if ($ev->{type} eq 'lifespan.startup') {
                $note->('hang startup');
                await $send->({type => 'lifespan.startup.complete'});
            } elsif ($ev->{type} eq 'lifespan.shutdown') {
                $note->('hang shutdown');
                await $receive->();    # nothing follows a shutdown: waits for good
            }
        }
    }
    await $send->({type => 'http.response.start', status => 200, headers => []});
    await $send->({type => 'http.response.body', body => 'hang'});
};
