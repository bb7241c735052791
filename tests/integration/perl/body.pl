# body.pl - reads the whole request body, answers with its length and the
# scope's keys (path as characters, raw_path, query_string, headers).
use strict;
use warnings;
use Future::AsyncAwait;

async sub {
    my ($scope, $receive, $send) = @_;
    die "http only\n" if $scope->{type} ne 'http';
    my $body = '';
    while (1) {
        my $ev = await $receive->();
        last if $ev->{type} ne 'http.request';
        $body .= $ev->{body};
        last unless $ev->{more};
    }
    my %h = map { $_->[0] => $_->[1] } @{ $scope->{headers} };
    my $out = join "\n",
        "method=$scope->{method}",
        "path_chars=" . length($scope->{path}),
        "raw_path=$scope->{raw_path}",
        "query=$scope->{query_string}",
        "root_path=[$scope->{root_path}]",
        "http_version=$scope->{http_version}",
        "scheme=$scope->{scheme}",
        "pagi=$scope->{pagi}{version}",
        "client=$scope->{client}[0]",
        "server_port=$scope->{server}[1]",
        "x_test=" . ($h{'x-test'} // ''),
        "length=" . length($body),
        "utf8=" . (utf8::is_utf8($body) ? 1 : 0),
        "connected=" . $scope->{'pagi.connection'}->is_connected,
        "started=" . $scope->{'pagi.connection'}->response_started,
        "hwm=" . ($scope->{'pagi.transport'}->high_water_mark // 'undef'),
        "";
    await $send->({type => 'http.response.start', status => 200,
                   headers => [['content-type', 'text/plain'], ['content-length', length $out]]});
    await $send->({type => 'http.response.body', body => $out});
};
