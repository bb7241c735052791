# anyevent.pl - an app written for AnyEvent: a repeating timer counting,
# a one-shot timer and an io watcher on a pipe answering a request, a child
# process watched, EV refused, and a condvar ->recv that would block (must fail loudly).
use strict;
use warnings;
use AnyEvent;
use Future;

my $ticks = 0;
# A watcher lives as long as its object: a file-scope `my` would end with the load.
our $repeat = AnyEvent->timer(after => 0.05, interval => 0.05, cb => sub { $ticks++ });

sub reply {
    my ($send, $status, $body) = @_;
    return $send->({type => 'http.response.start', status => $status,
                    headers => [['content-type', 'text/plain']]})
        ->then(sub { $send->({type => 'http.response.body', body => $body}) });
}

my %routes = (
    '/ticks' => sub { reply($_[1], 200, "ticks=$ticks model=$AnyEvent::MODEL") },
    '/timer' => sub {
        my $f = Future->new;
        my $t0 = AnyEvent->time;
        my $w; $w = AnyEvent->timer(after => 0.2, cb => sub { undef $w; $f->done(AnyEvent->time - $t0) });
        my $send = $_[1];
        return $f->then(sub { reply($send, 200, sprintf 'waited %.3f', $_[0]) });
    },
    '/io' => sub {
        my $send = $_[1];
        pipe(my $r, my $w) or die "pipe: $!";
        my $f = Future->new;
        my $io; $io = AnyEvent->io(fh => $r, poll => 'r', cb => sub {
            sysread $r, my $buf, 100;
            undef $io;
            $f->done($buf);
        });
        my $t; $t = AnyEvent->timer(after => 0.05, cb => sub { undef $t; syswrite $w, 'through the pipe' });
        return $f->then(sub { reply($send, 200, "read: $_[0]") });
    },
    '/child' => sub {
        my $send = $_[1];
        my $pid = fork // die "fork: $!";
        if (!$pid) { exit 7 }
        my $f = Future->new;
        my $cw; $cw = AnyEvent->child(pid => $pid, cb => sub { undef $cw; $f->done($_[1] >> 8) });
        return $f->then(sub { reply($send, 200, "child exit=$_[0]") });
    },
    '/fork_die' => sub {
        my $send = $_[1];
        my $pid = fork // die "fork: $!";
        die "the child died\n" if !$pid;    # back into pagid's code: it must end there
        my $f = Future->new;
        my $cw; $cw = AnyEvent->child(pid => $pid, cb => sub { undef $cw; $f->done($_[1] >> 8) });
        return $f->then(sub { reply($send, 200, "child exit=$_[0]") });
    },
    '/signal' => sub {
        my $send = $_[1];
        my $f = Future->new;
        my $sw; $sw = AnyEvent->signal(signal => 'USR2', cb => sub { undef $sw; $f->done('got USR2') });
        kill 'USR2', $$;
        return $f->then(sub { reply($send, 200, $_[0]) });
    },
    '/idle' => sub {
        my $send = $_[1];
        my ($n, $f) = (0, Future->new);
        my $iw; $iw = AnyEvent->idle(cb => sub { return if ++$n < 3; undef $iw; $f->done($n) });
        return $f->then(sub { reply($send, 200, "idle ran $_[0] times") });
    },
    '/recv' => sub {
        my $cv = AnyEvent->condvar;
        my $t = AnyEvent->timer(after => 5, cb => sub { $cv->send });
        $cv->recv;
        reply($_[1], 200, 'recv returned');
    },
    '/ev' => sub {
        my $r = eval { require EV; 1 } ? 'EV loaded' : "require EV: $@";
        reply($_[1], 200, $r);
    },
);

return sub {
    my ($scope, $receive, $send) = @_;
    return Future->done if $scope->{type} ne 'http';
    my $route = $routes{$scope->{path}} or return reply($send, 404, 'no such path');
    return $route->($scope, $send);
};
