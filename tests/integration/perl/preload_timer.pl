# preload_timer.pl - an app that starts a timer while it loads, as apps
# written for servers that load them beside a running loop do. Each compile
# appends "load pid=PID" to PAGID_TEST_LOG; the answer says whether this
# process's load-time timer fired.
use strict;
use warnings;
use Future::AsyncAwait;
use Future::IO;

BEGIN {
    if (my $log = $ENV{PAGID_TEST_LOG}) {
        if (open my $fh, '>>', $log) { print $fh "load pid=$$\n"; close $fh }
    }
}
my $fired = 0;
our $timer = Future::IO->sleep(0.1)->on_done(sub { $fired = 1 });

async sub {
    my ($scope, $receive, $send) = @_;
    die "unsupported scope\n" unless $scope->{type} eq 'http';
    await $send->({type => 'http.response.start', status => 200,
                   headers => [['content-type', 'text/plain']]});
    await $send->({type => 'http.response.body', body => "fired=$fired pid=$$\n"});
};
