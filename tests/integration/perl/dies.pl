# dies.pl - failures: /before dies before starting the response (500),
# /after dies after starting it, /sync dies synchronously, /exit calls
# exit (a die under pagid), /bad sends an
# invalid event and reports the server's validation message.
use strict;
use warnings;
use Future::AsyncAwait;

my $app = async sub {
    my ($scope, $receive, $send) = @_;
    die "http only\n" if $scope->{type} ne 'http';
    my $p = $scope->{path};
    die "boom before start\n" if $p eq '/before';
    exit 3 if $p eq '/exit';   # the host turns exit into a die
    if ($p eq '/bad') {
        my @msgs;
        for my $ev ({type => 'http.response.start', status => 200, headers => [['x-bad', "a\r\nb"]]},
                    {type => 'http.response.start'},
                    {type => 'http.response.start', status => 'abc'},
                    {type => 'no.such.event'},
                    {status => 200}) {
            eval { await $send->($ev); 1 } and next;
            (my $m = $@) =~ s/ at \S+ line \d+.*//s;
            chomp $m;
            push @msgs, $m;
        }
        my $body = join "\n", @msgs;
        await $send->({type => 'http.response.start', status => 200, headers => []});
        await $send->({type => 'http.response.body', body => $body});
        return;
    }
    await $send->({type => 'http.response.start', status => 200, headers => []});
    await $send->({type => 'http.response.body', body => "partial", more => 1});
    die "boom after start\n" if $p eq '/after';
    await $send->({type => 'http.response.body', body => " done"});
};
sub {
    my ($scope) = @_;
    die "boom sync\n" if $scope->{type} eq 'http' && $scope->{path} eq '/sync';
    return $app->(@_);
};
