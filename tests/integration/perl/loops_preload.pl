# loops_preload.pl - the foreign loops under preload (the default): this app
# starts no watcher while loading, so it is compiled in the zygote, and it
# creates IO::Async's loop there. Each worker forked from it must still be
# "the worker": exit dies, IO::Async::Loop->new is pagid's loop. Also timers
# whose id is ignored, signal watchers dropped, AnyEvent's model.
use strict;
use warnings;
use IO::Async::Loop;
use AnyEvent;
use Future;

my $loop = IO::Async::Loop->new;    # at load time: in the zygote

sub reply {
    my ($send, $status, $body) = @_;
    return $send->({type => 'http.response.start', status => $status,
                    headers => [['content-type', 'text/plain']]})
        ->then(sub { $send->({type => 'http.response.body', body => $body}) });
}

# Resolves to "fired" when $arm's timer fires within a second, else "timeout".
sub fired_or_timeout {
    my ($arm) = @_;
    my $f = $loop->new_future;
    $arm->(sub { $f->done('fired') unless $f->is_ready });
    return Future->wait_any($f, $loop->delay_future(after => 1)->then(sub { Future->done('timeout') }));
}

my %routes = (
    '/pid'  => sub { reply($_[1], 200, "pid $$") },
    '/exit' => sub { exit(3) },
    '/loop' => sub {
        reply($_[1], 200, join ' ', 'load=' . ref($loop), 'new=' . ref(IO::Async::Loop->new),
              'really_new=' . ref(IO::Async::Loop->really_new),
              'pagid_new=' . ref(IO::Async::Loop::Pagid->new));
    },
    # The app's own fork: the child's IO::Async::Loop->new is a loop of its own, which runs.
    '/fork' => sub {
        my $send = $_[1];
        pipe(my $rd, my $wr) or die "pipe: $!";
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            close $rd;
            my $l = IO::Async::Loop->new;
            my $ran = eval { $l->delay_future(after => 0.05)->get; 'ran' } // "died: $@";
            print $wr ref($l) eq ref($loop) ? 'the worker\'s loop class' : 'own loop', " $ran";
            close $wr;
            require POSIX;
            POSIX::_exit(0);
        }
        close $wr;
        my $out = do { local $/; <$rd> };
        return reply($send, 200, "child: $out");
    },
    # Each timer's id dropped, as IO::Async's own code does.
    '/timers' => sub {
        my $send = $_[1];
        my @f = (
            fired_or_timeout(sub { my $cb = shift; $loop->watch_time(after => 0.1, code => $cb); }),
            fired_or_timeout(sub { my $cb = shift; $loop->enqueue_timer(delay => 0.1, code => $cb); }),
            fired_or_timeout(sub { my $cb = shift; $loop->later($cb); }),
            # unwatched: must not fire
            fired_or_timeout(sub {
                my $cb = shift;
                my $id = $loop->watch_time(after => 0.1, code => $cb);
                $loop->unwatch_time($id);
            }),
        );
        return Future->needs_all(@f)->then(sub {
            my $left = keys %{ $loop->{pagid_timers} || {} };
            reply($send, 200, "@_ left=$left");
        });
    },
    # Watch HUP and PIPE (both ignored by the worker), then drop the watchers.
    '/signals' => sub {
        my $g1 = AnyEvent->signal(signal => 'HUP',  cb => sub { });
        my $g2 = AnyEvent->signal(signal => 'PIPE', cb => sub { });
        undef $g1;
        undef $g2;
        $loop->watch_signal(HUP => sub { });
        $loop->unwatch_signal('HUP');
        reply($_[1], 200, 'dropped');
    },
    '/anyevent' => sub {
        my $send = $_[1];
        my $f = Future->new;
        my $t; $t = AnyEvent->timer(after => 0.05, cb => sub { undef $t; $f->done('fired') });
        return $f->then(sub { reply($send, 200, "$_[0] model=$AnyEvent::MODEL") });
    },
);

return sub {
    my ($scope, $receive, $send) = @_;
    return Future->done if $scope->{type} ne 'http';
    my $route = $routes{$scope->{path}} or return reply($send, 404, 'no such path');
    return $route->($scope, $send);
};
