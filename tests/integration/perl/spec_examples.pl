# spec_examples.pl - the spec's own examples, verbatim where possible:
# Spec.pod's `application`, Lifespan.pod's `app` (as lifespan_app), and
# Www.pod's "Racing Against Disconnect" long_poll_handler (at /poll).
use strict;
use warnings;
use Future;
use Future::AsyncAwait;
use Future::IO;

async sub application {
    my ($scope, $receive, $send) = @_;
    if ($scope->{type} ne 'http') {
        die "Unsupported protocol type: $scope->{type}";
    }

    await $send->({
        type    => 'http.response.start',
        status  => 200,
        headers => [ [ 'content-type', 'text/plain' ] ],
    });

    await $send->({
        type       => 'http.response.body',
        body       => "Hello from PAGI!",
        more       => 0,
    });

    return;
}

async sub lifespan_app {
    my ($scope, $receive, $send) = @_;
    # Only handle 'lifespan' protocol
    if ($scope->{type} eq 'lifespan') {

        while (1) {
            my $message = await $receive->();

            if ($message->{type} eq 'lifespan.startup') {
                # ... Do some startup actions here ...
                await $send->({
                    type => 'lifespan.startup.complete',
                });
            }
            elsif ($message->{type} eq 'lifespan.shutdown') {
                # ... Do some shutdown/cleanup actions here ...
                await $send->({
                    type => 'lifespan.shutdown.complete',
                });
                return; # End the loop
            }
            else {
                # Unknown or additional message type; you can handle it or ignore it
            }
        }

    }
    else {
        die "Unsupported protocol type: $scope->{type}";
    }
}

sub wait_for_event { Future::IO->sleep(0.05)->then_done('the event') }

async sub send_response {
    my ($send, $event) = @_;
    await $send->({ type => 'http.response.start', status => 200, headers => [] });
    await $send->({ type => 'http.response.body', body => $event, more => 0 });
}

async sub long_poll_handler {
    my ($scope, $receive, $send) = @_;
    my $conn = $scope->{'pagi.connection'};

    my $disconnect_future = $conn->disconnect_future;
    my $event_future = wait_for_event();

    if ($disconnect_future) {
        # Race: wait for event OR disconnect
        await Future->wait_any($disconnect_future, $event_future);

        return unless $conn->is_connected;
    }

    my $event = $event_future->get;
    await send_response($send, $event);
}

sub {
    my ($scope) = @_;
    return lifespan_app(@_) if $scope->{type} eq 'lifespan';
    return long_poll_handler(@_) if $scope->{path} eq '/poll';
    return application(@_);
};
