# lifespan_polite.pl - a lifespan handler that answers startup and shutdown at
# once; requests get "polite". Notes "polite startup" and "polite shutdown" in
# PAGID_TEST_LOG (mounted beside lifespan_hang.pl, the order shows).
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
                $note->('polite startup');
                await $send->({type => 'lifespan.startup.complete'});
            } elsif ($ev->{type} eq 'lifespan.shutdown') {
                $note->('polite shutdown');
                await $send->({type => 'lifespan.shutdown.complete'});
                return;
            }
        }
    }
    await $send->({type => 'http.response.start', status => 200, headers => []});
    await $send->({type => 'http.response.body', body => 'polite'});
};
