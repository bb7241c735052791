# stderr_app.pl - an app that talks on standard error three ways: Perl's
# warn (as DBI's PrintError does), a print to STDERR, and a write(2) on fd 2
# (as C code's fprintf(stderr) does).
use strict;
use warnings;
use Future::AsyncAwait;
use POSIX ();

async sub {
    my ($scope, $receive, $send) = @_;
    return if $scope->{type} ne 'http';
    warn "DBD::Pg::st execute failed: relation \"users\" does not exist\n";
    print STDERR "printed to STDERR\n";
    POSIX::write(2, "written to fd 2\n", 16);
    await $send->({type => 'http.response.start', status => 200, headers => []});
    await $send->({type => 'http.response.body', body => 'ok'});
};
