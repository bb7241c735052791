# pubsub_sse.pl - SSE subscribers over pagi.pubsub, reading their messages
# with `next` rather than a callback (test_perl_pubsub.py). An event stream
# on /CHANNEL starts with event "hello", data "worker N", then sends each
# message of CHANNEL as an event; POST /CHANNEL publishes the request body
# and answers "worker N" (which worker took it).
use strict;
use warnings;
use Future::AsyncAwait;

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

sub channel { my ($scope) = @_; (my $c = $scope->{path}) =~ s{^/+}{}; return $c }

# Done when the client has gone (sse.request comes first).
async sub disconnected {
    my ($receive) = @_;
    while (1) {
        my $event = await $receive->();
        return $event if $event->{type} eq 'sse.disconnect';
    }
}

async sub stream {
    my ($scope, $receive, $send) = @_;
    my $sub = $scope->{extensions}{'pagi.pubsub'}->subscribe(channel($scope));
    await $send->({type => 'sse.start', headers => [['content-type', 'text/event-stream']]});
    await $send->({type => 'sse.send', event => 'hello', data => "worker $scope->{state}{worker}"});
    # Unsubscribing when the client leaves ends the loop (next is done with nothing).
    my $gone = disconnected($receive);
    $gone->on_ready(sub { $sub->unsubscribe });
    while (defined(my $message = await $sub->next)) {
        await $send->({type => 'sse.send', data => $message});
    }
}

async sub http {
    my ($scope, $receive, $send) = @_;
    my $body = '';
    while (1) {
        my $ev = await $receive->();
        return if $ev->{type} ne 'http.request';
        $body .= $ev->{body};
        last unless $ev->{more};
    }
    my $status = 200;
    my $reply = "worker $scope->{state}{worker}";
    if ($scope->{method} eq 'POST') {
        my $f = $scope->{extensions}{'pagi.pubsub'}->publish(channel($scope), $body);
        await $f->else(sub { ($status, $reply) = (400, $_[0]); Future->done });
    }
    await $send->({type => 'http.response.start', status => $status,
                   headers => [['content-type', 'text/plain']]});
    await $send->({type => 'http.response.body', body => $reply});
}

my %handler = (lifespan => \&lifespan, sse => \&stream, http => \&http);

sub {
    my ($scope) = @_;
    my $h = $handler{$scope->{type}} or die "unsupported scope type $scope->{type}\n";
    return $h->(@_);
};
