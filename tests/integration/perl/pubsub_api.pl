# pubsub_api.pl - the pagi.pubsub extension's rules, one HTTP route each
# (test_perl_pubsub.py), answered with a line the test compares: callbacks
# run from the loop, never inside publish; unsubscribe; the drop_oldest and
# conflate policies as a Perl app sees them; a callback that dies; refused
# arguments; a lifespan subscription; a `next` cancelled by a lost race.
use strict;
use warnings;
use Future;
use Future::AsyncAwait;
use Future::IO;

my $serial = 0;    # a fresh channel per request: requests never hear each other

async sub lifespan {
    my ($scope, $receive, $send) = @_;
    my $pubsub = $scope->{extensions}{'pagi.pubsub'} or die "no pagi.pubsub in lifespan\n";
    my $heard = $scope->{state}{heard} = [];
    while (1) {
        my $ev = await $receive->();
        if ($ev->{type} eq 'lifespan.startup') {
            # Lives as long as the app: request scopes come and go meanwhile.
            $pubsub->subscribe('lifespan', sub { push @$heard, $_[0] });
            $scope->{state}{class} = ref $pubsub;
            await $send->({type => 'lifespan.startup.complete'});
        } elsif ($ev->{type} eq 'lifespan.shutdown') {
            await $send->({type => 'lifespan.shutdown.complete'});
            return;
        }
    }
}

sub query { my ($scope) = @_; return map { split /=/, $_, 2 } split /&/, $scope->{query_string} }

my %route;

# publish never runs a callback itself: they run later, from the loop.
$route{'/order'} = async sub {
    my ($scope, $pubsub) = @_;
    my $ch = 'order' . ++$serial;
    my (@got, $during);
    my $all = Future->new;
    my $sub = $pubsub->subscribe($ch, sub {
        my ($message, $channel, $s) = @_;
        push @got, "$message\@$channel";
        $all->done if @got == 3;
    });
    for my $m (qw(a b c)) {
        await $pubsub->publish($ch, $m);
    }
    $during = @got;
    await $all;
    $sub->unsubscribe;
    return "during=$during got=@got";
};

$route{'/unsubscribe'} = async sub {
    my ($scope, $pubsub) = @_;
    my $ch = 'unsub' . ++$serial;
    my @got;
    my $first = Future->new;
    my $sub = $pubsub->subscribe($ch, sub { push @got, $_[0]; $first->done if !$first->is_ready });
    my $witness = $pubsub->subscribe($ch);
    await $pubsub->publish($ch, 'a');
    await $first;
    $sub->unsubscribe;
    $sub->unsubscribe;    # twice is harmless
    my $active = $sub->is_active;
    await $pubsub->publish($ch, 'b');
    my @seen;
    for my $i (1 .. 2) {
        push @seen, scalar await $witness->next;
    }
    # A next waiting when the subscription ends is done with nothing, and so is one after.
    my $waiting = $witness->next;
    $witness->unsubscribe;
    my $after = await $witness->next;
    return sprintf 'got=%s active=%d witness=%s waiting=%s after=%s still=%d',
        join(',', @got), $active, join(',', @seen),
        ($waiting->is_done && !defined scalar $waiting->get) ? 'ended' : 'pending',
        $after // 'undef', $witness->is_active;
};

# mode=burst: ten messages in one loop round (the server's queue applies the
# policy); spread: one per round, read only afterwards (the queue `next`
# reads applies it); callback: a burst to a callback; switch: five waiting,
# then the policy changes.
$route{'/policy'} = async sub {
    my ($scope, $pubsub) = @_;
    my %q = query($scope);
    my $ch = 'policy' . ++$serial;
    my @got;
    my $cb = $q{mode} eq 'callback' ? sub { push @got, $_[0] } : undef;
    my $sub = $q{mode} eq 'switch'
        ? $pubsub->subscribe($ch)
        : $pubsub->subscribe($ch, $cb ? $cb : (), policy => $q{policy}, max_pending => $q{max});
    my $n = $q{mode} eq 'switch' ? 5 : 10;
    for my $i (1 .. $n) {
        await $pubsub->publish($ch, $i);
        await Future::IO->sleep(0.01) if $q{mode} ne 'burst' && $q{mode} ne 'callback';
    }
    await Future::IO->sleep(0.05);
    my $waiting = $sub->pending;
    $sub->set_policy($q{policy}, $q{max}) if $q{mode} eq 'switch';
    unless ($cb) {
        while ($sub->pending) {
            push @got, scalar await $sub->next;
        }
    }
    return sprintf 'waiting=%d got=%s dropped=%d policy=%s max=%d', $waiting, join(',', @got),
        $sub->dropped, $sub->policy, $sub->max_pending;
};

# A die in a callback, sync or async, is logged; the worker and the subscription go on.
$route{'/die'} = async sub {
    my ($scope, $pubsub) = @_;
    my $ch = 'die';
    my $ok = Future->new;
    my $count = 0;
    $pubsub->subscribe($ch, sub {
        my ($m) = @_;
        $count++;
        die "boom in a callback\n" if $m eq 'boom';
        $ok->done if $m eq 'ok';
    });
    $pubsub->subscribe($ch, async sub {
        my ($m) = @_;
        await Future::IO->sleep(0.01);
        die "boom in an async callback\n" if $m eq 'async';
    });
    for my $m (qw(boom async ok)) {
        await $pubsub->publish($ch, $m);
    }
    await $ok;
    await Future::IO->sleep(0.1);
    return "count=$count pid=$$";
};

$route{'/pid'} = async sub { return "pid=$$" };

# A message that comes after the app returned is not delivered: the
# callback's send would be refused (and logged).
$route{'/finish'} = async sub {
    my ($scope, $pubsub, $send) = @_;
    my $ch = 'finish' . ++$serial;
    $pubsub->subscribe($ch, sub {
        my ($message) = @_;
        die "called after the app returned\n" if $message eq 'late';
        return $send->({type => 'http.response.body', body => 'late'});
    });
    await $pubsub->publish($ch, 'late');
    return 'returned';
};

sub outcome {
    my ($code) = @_;
    my $r = eval { my $f = $code->(); $f->is_failed ? 'failed: ' . ($f->failure)[0] : 'accepted' };
    $r = "died: $@" unless defined $r;
    $r =~ s/\n+\z//;
    return $r;
}

$route{'/errors'} = async sub {
    my ($scope, $pubsub) = @_;
    my $latin1 = "caf\x{e9}";
    utf8::upgrade($latin1);
    my $sub = $pubsub->subscribe('errors', sub { });
    my @cases = (
        wide          => sub { $pubsub->publish('errors', "\x{20ac}uro") },
        latin1        => sub { $pubsub->publish('errors', $latin1) },
        at_limit      => sub { $pubsub->publish('errors', 'x' x 1048576) },
        over_limit    => sub { $pubsub->publish('errors', 'x' x 1048577) },
        empty_channel => sub { $pubsub->publish('', 'x') },
        long_channel  => sub { $pubsub->publish('c' x 256, 'x') },
        max_channel   => sub { $pubsub->publish('c' x 255, 'x') },
        nul_channel   => sub { $pubsub->publish("a\0b", 'x') },
        undef_message => sub { $pubsub->publish('errors', undef) },
        ref_message   => sub { $pubsub->publish('errors', []) },
        sub_channel   => sub { $pubsub->subscribe('') },
        sub_callback  => sub { $pubsub->subscribe('errors', 'not code') },
        sub_policy    => sub { $pubsub->subscribe('errors', sub { }, policy => 'disconnect') },
        sub_option    => sub { $pubsub->subscribe('errors', colour => 'red') },
        sub_max       => sub { $pubsub->subscribe('errors', max_pending => 0) },
        next_callback => sub { $sub->next },
        set_policy    => sub { $sub->set_policy('conflate', -1) },
    );
    my @lines;
    while (my ($name, $code) = splice @cases, 0, 2) {
        push @lines, "$name: " . outcome($code);
    }
    $sub->unsubscribe;
    return join "\n", @lines;
};

$route{'/lifespan'} = async sub {
    my ($scope, $pubsub) = @_;
    my $heard = $scope->{state}{heard};
    my $m = 'hello' . ++$serial;
    await $pubsub->publish('lifespan', $m);
    for my $try (1 .. 100) {
        last if grep { $_ eq $m } @$heard;
        await Future::IO->sleep(0.01);
    }
    return sprintf 'heard=%s class=%s', (grep { $_ eq $m } @$heard) ? $m : 'nothing',
        $scope->{state}{class};
};

# A next that lost a wait_any is cancelled: the message goes to the next one.
$route{'/race'} = async sub {
    my ($scope, $pubsub) = @_;
    my $ch = 'race' . ++$serial;
    my $sub = $pubsub->subscribe($ch);
    my $lost = $sub->next;
    my $winner = await Future->wait_any($lost, Future::IO->sleep(0.02)->then(sub { Future->done('timeout') }));
    await $pubsub->publish($ch, 'm1');
    await Future::IO->sleep(0.02);
    my ($m, $channel) = await $sub->next;
    return sprintf 'winner=%s lost=%s got=%s channel=%s', $winner,
        $lost->is_cancelled ? 'cancelled' : 'not cancelled', $m, $channel;
};

sub {
    my ($scope, $receive, $send) = @_;
    return lifespan(@_) if $scope->{type} eq 'lifespan';
    die "http only\n" if $scope->{type} ne 'http';
    return (async sub {
        my $route = $route{$scope->{path}};
        my $body = $route ? await $route->($scope, $scope->{extensions}{'pagi.pubsub'}, $send)
                          : 'no such route';
        await $send->({type => 'http.response.start', status => $route ? 200 : 404,
                       headers => [['content-type', 'text/plain; charset=utf-8']]});
        await $send->({type => 'http.response.body', body => $body});
    })->();
};
