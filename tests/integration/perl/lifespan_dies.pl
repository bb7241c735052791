# lifespan_dies.pl - a lifespan startup handler that dies after taking
# lifespan.startup (its database is down): a startup failure naming the
# exception, not an app that "does not support lifespan".
use strict;
use warnings;
use Future::AsyncAwait;

async sub {
    my ($scope, $receive, $send) = @_;
    if ($scope->{type} eq 'lifespan') {
        my $ev = await $receive->();
        die "DBI connect('dbname=app') failed: connection refused\n"
            if $ev->{type} eq 'lifespan.startup';
        return;
    }
    await $send->({type => 'http.response.start', status => 200, headers => []});
    await $send->({type => 'http.response.body', body => 'served without state'});
};
