# zero_fields.pl - the Perl-side meaning of file/fh bodies' offset and length
# and of sse.send's retry (Www.pod), which the C interface spells with flags:
# length => 0 sends nothing, no length sends to EOF, retry => 0 writes
# "retry: 0", no retry writes no retry line. The file is the query string.
use strict;
use warnings;
use Future::AsyncAwait;

async sub {
    my ($scope, $receive, $send) = @_;
    if ($scope->{type} eq 'sse') {
        await $send->({type => 'sse.start', status => 200});
        await $send->({type => 'sse.send', data => 'no retry'});
        await $send->({type => 'sse.send', data => 'retry zero', retry => 0});
        await $send->({type => 'sse.close'});
        return;
    }
    return if $scope->{type} ne 'http';
    my $file = $scope->{query_string};
    my %body = (
        '/len0'  => {file => $file, length => 0},
        '/len0-missing' => {file => "$file.missing", length => 0},
        '/range' => {file => $file, offset => 2, length => 3},
        '/tail'  => {file => $file, offset => 4},
    );
    my $b = $body{$scope->{path}};
    if ($scope->{path} eq '/fh0') {
        open my $fh, '<:raw', $file or die "open: $!";
        $b = {fh => $fh, length => 0};
    }
    await $send->({type => 'http.response.start', status => 200, headers => []});
    await $send->({type => 'http.response.body', %$b});
};
