# fh_body.pl - answers with the file named by the query string, sent as an
# open file handle (http.response.body's fh form, Www.pod).
use strict;
use warnings;
use Future::AsyncAwait;

async sub {
    my ($scope, $receive, $send) = @_;
    return if $scope->{type} ne 'http';
    open my $fh, '<:raw', $scope->{query_string} or die "open: $!";
    await $send->({type => 'http.response.start', status => 200,
                   headers => [['content-type', 'application/octet-stream']]});
    await $send->({type => 'http.response.body', fh => $fh});
    close $fh;
};
