# futures.pl - a plain (not async) app that chains on the Futures $send
# returns and reports what it saw: the code refs, the connection/transport
# object, and the done Future a send accepted at once gives back.
use strict;
use warnings;
use Future;

sub {
    my ($scope, $receive, $send) = @_;
    return Future->done if $scope->{type} ne 'http';
    my @facts = (
        'send:' . ref($send), 'receive:' . ref($receive),
        'same:' . ($scope->{'pagi.connection'} == $scope->{'pagi.transport'} ? 1 : 0),
        'connected:' . $scope->{'pagi.connection'}->is_connected,
    );
    my $f = $send->({type => 'http.response.start', status => 200,
                     headers => [['content-type', 'text/plain']]});
    my @got = $f->get;
    push @facts, 'isa:' . ($f->isa('Future') ? 1 : 0), 'done:' . ($f->is_done ? 1 : 0),
        'failed:' . ($f->is_failed ? 1 : 0), 'values:' . scalar(@got);
    return $f->then(sub {
        Future->needs_all($send->({type => 'http.response.body', body => "@facts", more => 1}),
                          Future->done);
    })->then(sub { $send->({type => 'http.response.body', body => "\nend"}) });
};
