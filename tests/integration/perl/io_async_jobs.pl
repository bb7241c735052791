# io_async_jobs.pl - a job runner in the spirit of PAGI's examples: POST
# /jobs queues a job, an IO::Async::Timer::Periodic worker picks queued jobs
# up, each advances through IO::Async::Timer::Countdown steps and finishes by
# computing its result in an IO::Async::Function worker; GET /jobs/ID says
# where it is. Written for IO::Async as for the reference server.
use strict;
use warnings;
use Future::AsyncAwait;
use IO::Async::Loop;
use IO::Async::Timer::Periodic;
use IO::Async::Timer::Countdown;
use IO::Async::Function;

my $loop = IO::Async::Loop->new;
my (%jobs, @queue);
my $next_id = 0;
my $sum = IO::Async::Function->new(code => sub { my $t = 0; $t += $_ for 1 .. $_[0]; $t });
$loop->add($sum);

sub step {
    my ($job) = @_;
    if ($job->{step} >= 3) {
        $sum->call(args => [$job->{n}])->on_done(sub {
            @$job{qw(status result)} = ('completed', $_[0]);
        })->on_fail(sub { @$job{qw(status result)} = ('failed', $_[0]) })->retain;
        return;
    }
    my $timer = IO::Async::Timer::Countdown->new(delay => 0.05, remove_on_expire => 1,
        on_expire => sub { $job->{step}++; step($job) });
    $loop->add($timer);
    $timer->start;
}

my $worker = IO::Async::Timer::Periodic->new(interval => 0.05, on_tick => sub {
    while (my $job = shift @queue) {
        $job->{status} = 'running';
        step($job);
    }
});
$loop->add($worker);
$worker->start;

return async sub {
    my ($scope, $receive, $send) = @_;
    return if $scope->{type} ne 'http';
    my ($status, $body) = (404, 'no such job');
    if ($scope->{method} eq 'POST' && $scope->{path} eq '/jobs') {
        my $id = ++$next_id;
        my $n = ($scope->{query_string} =~ /n=(\d+)/)[0] // 10;
        push @queue, $jobs{$id} = {id => $id, n => $n, step => 0, status => 'pending'};
        ($status, $body) = (201, $id);
    } elsif ($scope->{path} =~ m{^/jobs/(\d+)$} && $jobs{$1}) {
        my $job = $jobs{$1};
        ($status, $body) = (200, join ' ', "status=$job->{status}", "step=$job->{step}",
                            'result=' . ($job->{result} // ''));
    }
    await $send->({type => 'http.response.start', status => $status,
                   headers => [['content-type', 'text/plain']]});
    await $send->({type => 'http.response.body', body => $body});
};
