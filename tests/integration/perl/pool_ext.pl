# pool_ext.pl - a PAGI app using the worker_pool extension (test_psgi_pool.py):
# /call?NAME runs a named handler with args [2, 3] and answers what the
# Future gave (ok: RESULT, or failed: MESSAGE); /stats the pool's stats; /lifespan
# what lifespan's pagi.extensions listed.
use strict;
use warnings;
use Future;

my $lifespan_ext = '';

sub {
    my ($scope, $receive, $send) = @_;
    if ($scope->{type} eq 'lifespan') {
        $lifespan_ext = join ',', @{ $scope->{pagi}{extensions} || [] };
        my $loop;
        $loop = sub {
            $receive->()->then(sub {
                my ($ev) = @_;
                if ($ev->{type} eq 'lifespan.startup') {
                    return $send->({type => 'lifespan.startup.complete'})->then($loop);
                }
                undef $loop;
                return $send->({type => 'lifespan.shutdown.complete'});
            });
        };
        return $loop->();
    }
    my $answer = sub {
        my ($text) = @_;
        $send->({type => 'http.response.start', status => 200,
                 headers => [['content-type', 'text/plain']]})
            ->then(sub { $send->({type => 'http.response.body', body => $text}) });
    };
    my $pool = $scope->{pagi}{extensions}{worker_pool}
        or return $answer->('no worker_pool');
    my $path = $scope->{path};
    return $answer->("lifespan=$lifespan_ext") if $path eq '/lifespan';
    if ($path eq '/stats') {
        my $s = $pool->stats;
        return $answer->(join ' ', map { "$_=$s->{$_}" } sort keys %$s);
    }
    if ($path eq '/forget') {
        $pool->call_forget('add', args => [1, 1]);
        return $answer->('forgot');
    }
    my ($name) = $scope->{query_string} =~ /^([\w.]+)/;
    my ($timeout) = $scope->{query_string} =~ /timeout=([\d.]+)/;
    my $f = $pool->call($name, args => [2, 3], ($timeout ? (timeout => $timeout) : ()));
    return $f->then(sub {
        my ($v) = @_;
        $answer->('ok: ' . (ref $v ? join(',', map { "$_=$v->{$_}" } sort keys %$v) : $v));
    }, sub {
        $answer->("failed: $_[0]");
    });
};
