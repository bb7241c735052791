# plack_suite.t - Plack::Test::Suite->run_server_tests against pagid: its
# server callback (in the child Test::TCP forks) execs pagid on the port with
# plack_suite.psgi; its client runs every Plack test over real HTTP.
# Needs PAGID (the binary); PAGID_ARGS adds options (-u root, workers),
# PAGID_POOL sets the worker pool (below); TMPDIR holds its config.
use strict;
use warnings;
use File::Basename qw(dirname);
use File::Spec;
use Test::More;
use Plack::Test::Suite;

my $pagid = $ENV{PAGID} or plan skip_all => 'PAGID names the pagid binary to test';
my $psgi = File::Spec->rel2abs(File::Spec->catfile(dirname(__FILE__), 'plack_suite.psgi'));
my @extra = split ' ', $ENV{PAGID_ARGS} // '';

# PAGID_POOL: the worker_pool mapping to run the app with ({processes: 0}:
# on the workers' loops); unset: pagid's default for a .psgi app.
my $pool = $ENV{PAGID_POOL};

Plack::Test::Suite->run_server_tests(sub {
    my ($port) = @_;    # the suite's own app is rebuilt from the .psgi by pagid
    my @app = ('-a', $psgi);
    if (defined $pool) {
        my $conf = "$ENV{TMPDIR}/plack_suite.$port.yaml";
        open my $fh, '>', $conf or die "cannot write $conf: $!\n";
        print {$fh} "app: {psgi: $psgi, worker_pool: $pool}\n";
        close $fh;
        @app = ('-c', $conf);
    }
    exec $pagid, '-l', "127.0.0.1:$port", @app, @extra
        or die "cannot exec $pagid: $!\n";
});
done_testing;
