# plack_suite.t - Plack::Test::Suite->run_server_tests against pagid: its
# server callback (in the child Test::TCP forks) execs pagid on the port with
# plack_suite.psgi; its client runs every Plack test over real HTTP.
# Needs PAGID (the binary); PAGID_ARGS adds options (-u root, workers).
use strict;
use warnings;
use File::Basename qw(dirname);
use File::Spec;
use Test::More;
use Plack::Test::Suite;

my $pagid = $ENV{PAGID} or plan skip_all => 'PAGID names the pagid binary to test';
my $psgi = File::Spec->rel2abs(File::Spec->catfile(dirname(__FILE__), 'plack_suite.psgi'));
my @extra = split ' ', $ENV{PAGID_ARGS} // '';

Plack::Test::Suite->run_server_tests(sub {
    my ($port) = @_;    # the suite's own app is rebuilt from the .psgi by pagid
    exec $pagid, '-l', "127.0.0.1:$port", '-a', $psgi, @extra
        or die "cannot exec $pagid: $!\n";
});
done_testing;
