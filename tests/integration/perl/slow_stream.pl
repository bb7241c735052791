# slow_stream.pl - a producer that streams as fast as the transport allows and
# never looks at the connection: after its client is gone it keeps sending
# (each send is then the spec's no-op) until its stream is done. Each request
# notes "start N", its on_disconnect "gone N", the handler's end "end N", and a
# guard held by the request's closures "freed N" once the server let go of them.
# GET /stream/MIB streams MIB mebibytes in 4 KiB chunks.
use strict;
use warnings;
use Future::AsyncAwait;

my $note = sub {
    open my $fh, '>>', $ENV{PAGID_TEST_LOG} or return;
    print $fh "@_\n";
    close $fh;
};

package SlowStreamGuard {
    sub new     { my ($class, $id, $note) = @_; bless {id => $id, note => $note}, $class }
    sub DESTROY { $_[0]{note}->("freed $_[0]{id}") }
}

my $chunk = join '', map { chr(33 + $_ % 90) } 0 .. 4095;
my $requests = 0;

async sub {
    my ($scope, $receive, $send) = @_;
    return if $scope->{type} ne 'http';
    my ($mib) = $scope->{path} =~ m{^/stream/(\d+)$};
    $mib //= 1;
    my $id = ++$requests;
    my $guard = SlowStreamGuard->new($id, $note);
    $note->("start $id");
    $scope->{'pagi.connection'}->on_disconnect(sub { $note->("gone $id $_[0]"); $guard->{gone} = 1 });
    await $send->({type => 'http.response.start', status => 200,
                   headers => [['content-type', 'application/octet-stream']]});
    for my $i (1 .. $mib * 256) {
        await $send->({type => 'http.response.body', body => $chunk, more => 1});
    }
    await $send->({type => 'http.response.body', body => '', more => 0});
    $note->("end $id");
};
