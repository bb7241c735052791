# mount_b.psgi - one of two PSGI apps mounted side by side for the worker
# pool's tests (test_psgi_pool.py): says which app and process ran it, under
# which SCRIPT_NAME and PATH_INFO; /sleep?s=N blocks its process.
use strict;
use warnings;

sub {
    my ($env) = @_;
    if ($env->{PATH_INFO} eq '/sleep') {
        my ($s) = ($env->{QUERY_STRING} =~ /s=([\d.]+)/);
        select undef, undef, undef, $s // 1;
    }
    return [200, ['Content-Type' => 'text/plain'],
        ["app=b\npid=$$\nscript=$env->{SCRIPT_NAME}\npath=$env->{PATH_INFO}"]];
};
