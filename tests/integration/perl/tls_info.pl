# tls_info.pl - answers with $scope->{extensions}{tls} as JSON (test_tls_pagi.py):
# every field, whether the key exists at all, and which fields are defined,
# for an http scope (the body) or a websocket one (one text message).
use strict;
use warnings;
use Future::AsyncAwait;
use JSON::PP ();

sub describe {
    my ($scope) = @_;
    my $tls = $scope->{extensions}{tls};
    return JSON::PP->new->utf8->canonical->encode({
        scheme  => $scope->{scheme},
        exists  => exists $scope->{extensions}{tls} ? 1 : 0,
        tls     => $tls,
        defined => $tls ? { map { ($_ => defined $tls->{$_} ? 1 : 0) }
                            qw(client_cert_name client_cert_error) } : undef,
    });
}

my $app = async sub {
    my ($scope, $receive, $send) = @_;
    return if $scope->{type} eq 'lifespan';
    if ($scope->{type} eq 'websocket') {
        await $receive->();
        await $send->({type => 'websocket.accept'});
        await $send->({type => 'websocket.send', text => describe($scope)});
        await $send->({type => 'websocket.close', code => 1000});
        return;
    }
    await $send->({
        type    => 'http.response.start',
        status  => 200,
        headers => [['content-type', 'application/json']],
    });
    await $send->({type => 'http.response.body', body => describe($scope)});
};
$app;
