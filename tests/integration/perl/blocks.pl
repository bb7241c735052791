# blocks.pl - a Perl app whose handler blocks its worker's loop on /slow
# (sleep 30: no await), for the heartbeat's kill line; anything else is
# answered "ok PID", so a client can tell which worker served it.
use strict;
use warnings;
use Future::AsyncAwait;

my $app = async sub {
    my ($scope, $receive, $send) = @_;
    die "Unsupported scope type: $scope->{type}\n" if $scope->{type} ne 'http';
    sleep 30 if $scope->{path} eq '/slow';
    await $send->({
        type    => 'http.response.start',
        status  => 200,
        headers => [['content-type', 'text/plain']],
    });
    await $send->({type => 'http.response.body', body => "ok $$"});
};
$app;
