# preload_opens.pl - an app that opens a socket and a file while it loads
# (as `my $dbh = DBI->connect(...)` at the top of a file does): preloaded,
# both are shared by every worker, and the zygote says so.
use strict;
use warnings;
use IO::Socket::INET;
use Future::AsyncAwait;

my $db = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $ENV{PAGID_TEST_DB_PORT})
    or die "connect: $!";
open my $cache, "<", __FILE__ or die "open: $!";

async sub {
    my ($scope, $receive, $send) = @_;
    return if $scope->{type} ne 'http';
    await $send->({type => 'http.response.start', status => 200, headers => []});
    # Uses them, as an app uses its $dbh: the closure keeps them open.
    await $send->({type => 'http.response.body', body => ($db && $cache ? 'ok' : 'lost')});
};
