# cookbook_streaming.pl - PAGI::Cookbook "Streaming a response", as written
# (the pause shortened to 0.2 s): trailers => 1, bodies with more => 1, and
# a first $receive held as if it were the disconnect. For a GET it is the
# http.request event (Www.pod), so the loop may stop after a body sent with
# more => 1; the trailers then end the body (Www.pod: after trailers the
# response body is complete).
use strict;
use warnings;
use Future::AsyncAwait;
use Future::IO;

my $app = async sub {
    my ($scope, $receive, $send) = @_;
    return if $scope->{type} eq 'lifespan';
    die "Unsupported scope type: $scope->{type}" if $scope->{type} ne 'http';

    await $send->({
        type     => 'http.response.start',
        status   => 200,
        headers  => [ [ 'content-type', 'text/plain' ] ],
        trailers => 1,
    });

    my @chunks     = ( "Chunk 1\n", "Chunk 2\n", "Chunk 3\n" );
    my $disconnect = $receive->();   # completes when http.disconnect arrives

    for my $i (0 .. $#chunks) {
        last if $disconnect->is_ready;          # client went away
        my $more = ($i < $#chunks) ? 1 : 0;
        await $send->({ type => 'http.response.body', body => $chunks[$i], more => $more });
        await Future::IO->sleep(0.2) if $more;  # pace the stream
    }

    await $send->({
        type    => 'http.response.trailers',
        headers => [ [ 'x-stream-complete', '1' ] ],
    });
};
$app;
