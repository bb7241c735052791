# stream.pl - a streamed response: five body events with more => 1, then the end.
use strict;
use warnings;
use Future::AsyncAwait;

async sub {
    my ($scope, $receive, $send) = @_;
    die "http only\n" if $scope->{type} ne 'http';
    await $send->({type => 'http.response.start', status => 200,
                   headers => [['content-type', 'text/plain']]});
    for my $i (1 .. 5) {
        await $send->({type => 'http.response.body', body => "chunk $i\n", more => 1});
    }
    await $send->({type => 'http.response.body', body => "end\n"});
};
