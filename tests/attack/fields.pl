# fields.pl - the attack battery's field app: the body lists the scope's
# path (hex), raw_path, query and every request header (name=hex value, one a
# line); ?h=HEXNAME:HEXVALUE (repeatable) become response fields, as given.
use strict;
use warnings;
use Future::AsyncAwait;

async sub {
    my ($scope, $receive, $send) = @_;
    return if $scope->{type} ne 'http';
    while (1) {
        my $ev = await $receive->();
        last if $ev->{type} ne 'http.request' || !$ev->{more};
    }
    my @out = ('path=' . unpack('H*', do { my $p = $scope->{path}; utf8::encode($p); $p }),
               "raw_path=$scope->{raw_path}", "query=$scope->{query_string}");
    push @out, "$_->[0]=" . unpack('H*', $_->[1]) for @{ $scope->{headers} };
    my $out = join("\n", @out) . "\n";
    my @h = (['content-length', length $out]);
    for my $kv (split /&/, $scope->{query_string}) {
        next unless $kv =~ /^h=([0-9a-fA-F]*):([0-9a-fA-F]*)$/;
        push @h, [pack('H*', $1), pack('H*', $2)];
    }
    await $send->({type => 'http.response.start', status => 200, headers => \@h});
    await $send->({type => 'http.response.body', body => $out});
};
