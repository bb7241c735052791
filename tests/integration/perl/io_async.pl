# io_async.pl - an app written for IO::Async, as for the reference server:
# IO::Async::Timer::Periodic and ::Countdown ticking on the loop, a command
# run with IO::Async::Process, code run in a forked IO::Async::Function
# worker, Net::Async::HTTP fetching from this same server, and the loop
# misused (run, ->get on a pending future), which must fail loudly.
use strict;
use warnings;
use Future::AsyncAwait;
use IO::Async::Loop;
use IO::Async::Timer::Periodic;
use IO::Async::Timer::Countdown;
use IO::Async::Process;
use IO::Async::Function;
use Net::Async::HTTP;

my $loop = IO::Async::Loop->new;
my ($ticks, $countdown) = (0, 'pending');
my $periodic = IO::Async::Timer::Periodic->new(interval => 0.05, on_tick => sub { $ticks++ });
my $once = IO::Async::Timer::Countdown->new(delay => 0.1, on_expire => sub { $countdown = 'expired' });
$loop->add($_) for $periodic, $once;
$periodic->start;
$once->start;

my $function = IO::Async::Function->new(
    code => sub { my ($n) = @_; return ($n * $n, $$) },
    max_workers => 2,
);
$loop->add($function);
my $http = Net::Async::HTTP->new(max_connections_per_host => 0);
$loop->add($http);

async sub reply {
    my ($send, $status, $body) = @_;
    await $send->({type => 'http.response.start', status => $status,
                   headers => [['content-type', 'text/plain']]});
    await $send->({type => 'http.response.body', body => $body});
}

my %routes = (
    '/ticks' => async sub { my ($scope, $send) = @_;
        await reply($send, 200, "ticks=$ticks countdown=$countdown loop=" . ref($loop)) },
    '/delay' => async sub { my ($scope, $send) = @_;
        my $t0 = $loop->time;
        await $loop->delay_future(after => 0.2);
        await reply($send, 200, sprintf('slept %.3f', $loop->time - $t0)) },
    '/process' => async sub { my ($scope, $send) = @_;
        my $out = '';
        my $done = $loop->new_future;
        my $p = IO::Async::Process->new(
            command => ['sh', '-c', 'echo process-output; echo pid $$'],
            stdout => {into => \$out},
            on_finish => sub { $done->done($_[1]) });
        $loop->add($p);
        my $status = await $done;
        await reply($send, 200, "status=$status $out") },
    '/run_child' => async sub { my ($scope, $send) = @_;
        my $f = $loop->new_future;
        $loop->run_child(command => ['sh', '-c', 'echo child; exit 3'],
            on_finish => sub { my (undef, $code, $out) = @_; $f->done($code >> 8, $out) });
        my ($code, $out) = await $f;
        await reply($send, 200, "exit=$code $out") },
    '/run_process' => async sub { my ($scope, $send) = @_;
        my ($stdout) = await $loop->run_process(command => ['echo', 'ran'], capture => ['stdout']);
        await reply($send, 200, $stdout) },
    '/open_process' => async sub { my ($scope, $send) = @_;
        my $f = $loop->new_future;
        my $out = '';
        my $p = $loop->open_process(command => ['cat'],
            stdin => {from => "opened\n"},
            stdout => {on_read => sub { my ($s, $b, $eof) = @_; $out .= $$b; $$b = ''; 0 }},
            on_finish => sub { $f->done($_[1]) });
        my $status = await $f;
        await reply($send, 200, "status=$status $out") },
    '/function' => async sub { my ($scope, $send) = @_;
        my ($sq, $pid) = await $function->call(args => [7]);
        await reply($send, 200, "square=$sq worker_pid=$pid me=$$") },
    '/function_stop' => async sub { my ($scope, $send) = @_;
        $function->stop;
        await $loop->delay_future(after => 0.3);
        await reply($send, 200, 'stopped') },
    '/fetch' => async sub { my ($scope, $send) = @_;
        my $port = $scope->{server}[1];
        # ?localhost: the name goes through IO::Async's resolver (a Function of its own)
        my $host = $scope->{query_string} =~ /^(localhost)$/ ? $1 : '127.0.0.1';
        my $res = await $http->GET("http://$host:$port/ticks");
        await reply($send, 200, 'fetched ' . $res->code . ' ' . $res->content) },
    '/run' => async sub { $loop->run; },
    '/get' => async sub { $loop->delay_future(after => 5)->get; },
    '/signal' => async sub { my ($scope, $send) = @_;
        my $f = $loop->new_future;
        $loop->attach_signal(USR2 => sub { $f->done('got USR2') unless $f->is_ready });
        kill 'USR2', $$;
        my ($r) = await $f;
        await reply($send, 200, $r) },
);

return async sub {
    my ($scope, $receive, $send) = @_;
    return if $scope->{type} ne 'http';
    my $route = $routes{$scope->{path}} or return await reply($send, 404, 'no such path');
    await $route->($scope, $send);
};
