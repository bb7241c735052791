# psgi_app.psgi - the PSGI app of bench/psgi.sh, the same for pagid, Starman
# and uWSGI: / is hello (with a content-length, so every server keeps the
# connection alive), /sleep?s=N blocks its process (a slow DBI call),
# /big?kb=N answers N KiB (for clients that never read), POST reads the body.
use strict;
use warnings;

my $hello = 'Hello from PAGI';

my $app = sub {
    my ($env) = @_;
    my $p = $env->{PATH_INFO};
    if ($p eq '/sleep') {
        my ($s) = ($env->{QUERY_STRING} =~ /s=([\d.]+)/);
        select undef, undef, undef, $s // 1;
        return [200, ['Content-Type' => 'text/plain', 'Content-Length' => 5], ['slept']];
    }
    if ($p eq '/big') {
        my ($kb) = ($env->{QUERY_STRING} =~ /kb=(\d+)/);
        my $n = ($kb // 1024) << 10;
        return [200, ['Content-Type' => 'application/octet-stream', 'Content-Length' => $n],
            ['x' x $n]];
    }
    if ($env->{REQUEST_METHOD} eq 'POST') {
        my $in = $env->{'psgi.input'};
        my $len = 0;
        while (my $n = $in->read(my $buf, 65536)) { $len += $n }
        return [200, ['Content-Type' => 'text/plain', 'Content-Length' => length "$len"], ["$len"]];
    }
    return [200, ['Content-Type' => 'text/plain', 'Content-Length' => length $hello], [$hello]];
};
