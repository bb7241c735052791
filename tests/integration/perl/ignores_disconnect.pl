# ignores_disconnect.pl - handlers that never look at their disconnect:
#   /ignore     awaits a 60 s Future::IO sleep, then answers (its client is long gone)
#   /slow?s=N   awaits N seconds, then answers (a live client waits for it)
#   /after      answers at once, then works 2 s more (work after a complete response)
#   /guarded    like /ignore, and keeps its sleep in a global object whose
#               DESTROY cancels it: that runs in the interpreter's teardown,
#               after the host stopped the timer
# Each start and end is written to the test log.
use strict;
use warnings;
use Future::AsyncAwait;
use Future::IO;

sub note {
    my $log = $ENV{PAGID_TEST_LOG} or return;
    open my $fh, '>>', $log or return;
    print $fh "@_\n";
    close $fh;
}

sub Guard::DESTROY { my $f = $_[0]{f}; $f->cancel if $f && !$f->is_ready }

async sub {
    my ($scope, $receive, $send) = @_;
    return if $scope->{type} eq 'lifespan';
    if ($scope->{path} eq '/after') {
        note("start /after");
        await $send->({type => 'http.response.start', status => 200,
                       headers => [['content-type', 'text/plain']]});
        await $send->({type => 'http.response.body', body => "done"});
        await Future::IO->sleep(2);
        note("end /after");
        return;
    }
    if ($scope->{path} eq '/guarded') {
        note("start /guarded");
        our $GUARD = bless {f => Future::IO->sleep(60)}, 'Guard';
        await $GUARD->{f};
        note("end /guarded");
        return;
    }
    my $secs = $scope->{path} eq '/ignore' ? 60 : ($scope->{query_string} =~ /s=([\d.]+)/)[0] // 1;
    note("start $scope->{path}");
    await Future::IO->sleep($secs);
    note("end $scope->{path}");
    await $send->({type => 'http.response.start', status => 200,
                   headers => [['content-type', 'text/plain']]});
    await $send->({type => 'http.response.body', body => "slept $secs"});
};
