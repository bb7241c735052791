# uses_lib.pl - an app whose module comes from a directory given with -I.
use strict;
use warnings;
use Future::AsyncAwait;
use PagidTestGreeting;

async sub {
    my ($scope, $receive, $send) = @_;
    die "http only\n" if $scope->{type} ne 'http';
    await $send->({type => 'http.response.start', status => 200, headers => []});
    await $send->({type => 'http.response.body', body => PagidTestGreeting::greeting()});
};
