# pool.psgi - a PSGI app for the worker pool's tests (test_psgi_pool.py):
# says which process ran it, echoes bodies, blocks, crashes, exits, streams.
use strict;
use warnings;

my $app = sub {
    my ($env) = @_;
    my $p = $env->{PATH_INFO};
    my $text = sub { [200, ['Content-Type' => 'text/plain'], [$_[0]]] };
    return $text->("pid=$$") if $p eq '/pid';
    if ($p eq '/sleep') {
        my ($s) = ($env->{QUERY_STRING} =~ /s=([\d.]+)/);
        select undef, undef, undef, $s // 1;
        return $text->("slept pid=$$");
    }
    kill 'SEGV', $$ if $p eq '/crash';
    exit 3 if $p eq '/exit';
    die "pool app died\n" if $p eq '/die';
    if ($p eq '/big') {    # 4 MiB (or ?mb=N), the same byte throughout
        my ($mb) = ($env->{QUERY_STRING} =~ /mb=(\d+)/);
        return [200, ['Content-Type' => 'application/octet-stream'], ['x' x (($mb // 4) << 20)]];
    }
    if ($p eq '/pattern') {    # ?kb=N KiB whose bytes say where they are
        my ($kb) = ($env->{QUERY_STRING} =~ /kb=(\d+)/);
        return [200, ['Content-Type' => 'application/octet-stream'],
            [pack 'N*', 0 .. ($kb // 64) * 256 - 1]];
    }
    if ($p eq '/stream') {
        return sub {
            my $w = $_[0]->([200, ['Content-Type' => 'text/plain']]);
            $w->write("part$_\n") for 1 .. 3;
            $w->close;
        };
    }
    if ($p eq '/echo') {
        my $in = $env->{'psgi.input'};
        local $/;
        my $body = <$in> // '';
        return $text->(sprintf "len=%d sum=%d multiprocess=%d", length $body,
            unpack('%32C*', $body), $env->{'psgi.multiprocess'});
    }
    if ($p eq '/input') {    # psgi.input of a request without a body, then ?how= spoils it
        my $in = $env->{'psgi.input'};
        my $n = read $in, my $buf, 10;
        my $got = sprintf 'read=%s tell=%d eof=%d layers=%s', $n // 'undef', tell $in,
            eof($in) ? 1 : 0, join ',', PerlIO::get_layers($in);
        my ($how) = ($env->{QUERY_STRING} =~ /how=(\w+)/);
        $how //= '';
        close $in if $how eq 'close';
        binmode $in, ':crlf' if $how eq 'crlf';
        binmode $in, ':utf8' if $how eq 'utf8';
        seek $in, 7, 0 if $how eq 'seek';
        return $text->($got);
    }
    if ($p eq '/spoil') {    # what used to leave a request unanswered, the process claimed
        my ($how) = ($env->{QUERY_STRING} =~ /how=(\w+)/);
        return [200, ['X-Boom' => bless({}, 'PoolBoom')], ['no']] if $how eq 'header';
        return [200, [], [bless({}, 'PoolBoom')]] if $how eq 'body';
        die bless {}, 'PoolBoom' if $how eq 'die';
        untie *{ $env->{'psgi.errors'} } if $how eq 'untie';
        tie *{ $env->{'psgi.errors'} }, 'PoolBoom' if $how eq 'tie';
        return $text->("spoiled $how");
    }
    if ($p eq '/hold') {    # a delayed response whose responder is kept and never called
        our @HELD;
        return sub { push @HELD, $_[0] };
    }
    if ($p eq '/headers') {    # HTTP_* keys, as names and lengths
        return $text->(join ' ', map { "$_:" . length $env->{$_} } sort grep /^HTTP_/, keys %$env);
    }
    return $text->("path=$p");
};

package PoolBoom;    # an object whose stringification dies
use overload '""' => sub { die "PoolBoom cannot be a string\n" }, bool => sub { 1 };
sub TIEHANDLE { bless {}, $_[0] }
sub PRINT     { 1 }

package main;
