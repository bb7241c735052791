# pubsub_chat.pl - a chat room per path over pagi.pubsub (test_perl_pubsub.py):
# a websocket on /ROOM is told "worker N", then gets every message said in
# ROOM, by anyone on any worker; each text it sends is published to ROOM.
# GET /stats answers "live=N": subscriptions of this worker whose callback
# (and what it holds) is still alive, so a test sees them freed with their
# scope.
use strict;
use warnings;
use Encode qw(encode_utf8 decode_utf8);
use Future::AsyncAwait;

my $live = 0;

# Counts itself in $live while it exists.
package Held {
    sub new     { my ($class, $count) = @_; $$count++; return bless [$count], $class }
    sub DESTROY { ${ $_[0][0] }-- }
}

async sub lifespan {
    my ($scope, $receive, $send) = @_;
    while (1) {
        my $ev = await $receive->();
        if ($ev->{type} eq 'lifespan.startup') {
            $scope->{state}{worker} = $scope->{pagi}{worker_num} // 0;
            await $send->({type => 'lifespan.startup.complete'});
        } elsif ($ev->{type} eq 'lifespan.shutdown') {
            await $send->({type => 'lifespan.shutdown.complete'});
            return;
        }
    }
}

async sub chat {
    my ($scope, $receive, $send) = @_;
    my $pubsub = $scope->{extensions}{'pagi.pubsub'} or die "no pagi.pubsub extension\n";
    (my $room = $scope->{path}) =~ s{^/+}{};
    my $ev = await $receive->();
    return if $ev->{type} ne 'websocket.connect';
    await $send->({type => 'websocket.accept'});
    await $send->({type => 'websocket.send', text => "worker $scope->{state}{worker}"});
    my $held = Held->new(\$live);
    my $transport = $scope->{'pagi.transport'};
    $pubsub->subscribe("chat:$room", sub {
        my ($message, $channel, $sub) = @_;
        return unless $held;
        # A client that stopped reading: drop for it rather than buffer without end.
        return $sub->count_dropped if $transport->buffered_amount > 1 << 20;
        return $send->({type => 'websocket.send', text => decode_utf8($message)});
    });
    while (1) {
        $ev = await $receive->();
        last if $ev->{type} eq 'websocket.disconnect';
        await $pubsub->publish("chat:$room", encode_utf8($ev->{text})) if defined $ev->{text};
    }
}

async sub http {
    my ($scope, $receive, $send) = @_;
    my $body = $scope->{path} eq '/stats' ? "live=$live" : 'a websocket chat: ws://HOST/ROOM';
    await $send->({type => 'http.response.start', status => 200,
                   headers => [['content-type', 'text/plain']]});
    await $send->({type => 'http.response.body', body => $body});
}

my %handler = (lifespan => \&lifespan, websocket => \&chat, http => \&http);

sub {
    my ($scope) = @_;
    my $h = $handler{$scope->{type}} or die "unsupported scope type $scope->{type}\n";
    return $h->(@_);
};
