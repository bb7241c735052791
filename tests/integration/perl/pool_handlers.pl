# pool_handlers.pl - the worker_pool handlers of pool_ext.pl.
use strict;
use warnings;

{
    init => sub { return {started_in => $$, calls => 0} },
    handlers => {
        'add'      => sub { my ($state, $a, $b) = @_; $state->{calls}++; return $a + $b },
        'user.get' => sub { my ($state, $id) = @_; return {id => $id, pid => $$, init => $state->{started_in}} },
        'fails'    => sub { die "handler failed on purpose\n" },
        'slow'     => sub { sleep 4; return 'late' },
        'crash'    => sub { kill 'KILL', $$ },
    },
};
