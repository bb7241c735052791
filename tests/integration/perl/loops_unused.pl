# loops_unused.pl - an app that uses no event loop module: which of them got
# loaded anyway (pagid's hooks must not load IO::Async, AnyEvent or EV).
use strict;
use warnings;
use Future;

return sub {
    my ($scope, $receive, $send) = @_;
    return Future->done if $scope->{type} ne 'http';
    my $loaded = join ' ', sort grep { m{^(IO/Async|AnyEvent|EV)\b} } keys %INC;
    return $send->({type => 'http.response.start', status => 200, headers => []})
        ->then(sub { $send->({type => 'http.response.body', body => "loaded: $loaded."}) });
};
