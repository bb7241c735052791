# preload.pl - an app that says where and how often it was compiled: each
# compile of the file appends "load pid=PID" to PAGID_TEST_LOG (a BEGIN
# block: once per process that compiles it), lifespan startup appends
# "lifespan pid=PID", and it calls rand() at load time, as a module might.
# Answers "TAG pid=PID uid=UID rand=N" (TAG changes when a test edits it).
use strict;
use warnings;
use Future::AsyncAwait;

sub note {
    my ($line) = @_;
    my $log = $ENV{PAGID_TEST_LOG} or return;
    # Unprivileged workers may not reach the test's log: not the app's problem.
    open my $fh, '>>', $log or return;
    print $fh "$line\n";
    close $fh;
}

BEGIN { note("load pid=$$") }
our $at_load = rand();    # seeds Perl's generator before any fork
my $tag = 'v1';

async sub {
    my ($scope, $receive, $send) = @_;
    if ($scope->{type} eq 'lifespan') {
        while (1) {
            my $ev = await $receive->();
            if ($ev->{type} eq 'lifespan.startup') {
                note("lifespan pid=$$");
                await $send->({type => 'lifespan.startup.complete'});
            } elsif ($ev->{type} eq 'lifespan.shutdown') {
                await $send->({type => 'lifespan.shutdown.complete'});
                return;
            }
        }
    }
    await $send->({type => 'http.response.start', status => 200,
                   headers => [['content-type', 'text/plain']]});
    await $send->({type => 'http.response.body',
                   body => sprintf('%s pid=%d uid=%d rand=%d', $tag, $$, $<, int(rand(1e9)))});
};
