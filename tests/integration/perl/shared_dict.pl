# shared_dict.pl - the pagi.shared extension from Perl: /OP?k=KEY&v=VALUE&...
# runs one method of $scope->{extensions}{'pagi.shared'}->dict('t') and
# answers its result as text ("undef: ERROR" on a failure).
use strict;
use warnings;
use Future::AsyncAwait;

my $app = async sub {
    my ($scope, $receive, $send) = @_;
    die "Unsupported scope type: $scope->{type}\n" if $scope->{type} ne 'http';
    my %q = map { my ($k, $v) = split /=/, $_, 2; ($k, $v // '') } split /&/,
        $scope->{query_string} // '';
    my $shared = $scope->{extensions}{'pagi.shared'};
    my $out;
    if (!$shared) {
        $out = 'no pagi.shared';
    } else {
        my $d = $shared->dict($q{d} // 't');
        my $op = substr $scope->{path}, 1;
        my @r;
        if (!$d) { @r = (undef, 'no such dict') }
        elsif ($op eq 'names') { @r = (join ',', $shared->names) }
        elsif ($op eq 'get') { @r = $d->get($q{k}) }
        elsif ($op =~ /^(set|safe_set|add|safe_add|replace)$/) {
            @r = $d->$op($q{k}, $q{v}, $q{ttl} // 0, $q{flags} // 0);
        }
        elsif ($op eq 'incr') { @r = $d->incr($q{k}, $q{by}, $q{init}) }
        elsif ($op eq 'cas') { @r = $d->cas($q{k}, $q{old}, $q{v}) }
        elsif ($op =~ /^(delete|ttl)$/) { @r = $d->$op($q{k}) }
        elsif ($op eq 'stats') { @r = (join ',', $d->count, $d->capacity > 0 ? 1 : 0) }
        else { @r = (undef, 'unknown op') }
        $out = defined $r[0] ? join(' ', map { $_ // '' } @r) : "undef: " . ($r[1] // '');
    }
    await $send->({type => 'http.response.start', status => 200,
                   headers => [['content-type', 'text/plain']]});
    await $send->({type => 'http.response.body', body => $out});
};
$app;
