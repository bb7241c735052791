# IO/Async/Loop/Pagid.pm - IO::Async's loop inside a pagid worker: every
# watch (io, timers, idle, signals, child processes) goes on the worker's own
# libev loop, which pagid runs. Running it from Perl (run, loop_once, await,
# ->get on a pending IO::Async::Future) dies: it could only block the worker.
package IO::Async::Loop::Pagid;
use strict;
use warnings;

our $VERSION = '1';

use constant API_VERSION => '0.76';
use constant _CAN_ON_HANGUP => 0;
use constant _CAN_SUBSECOND_ACCURATELY => 1;
use constant _CAN_WATCHDOG => 0;

use Carp ();
use Scalar::Util ();
use IO::Async::Loop;
our @ISA = ('IO::Async::Loop');

sub new {
    my ($class) = @_;
    # A child forked from the worker (the app's own fork, IO::Async::Loop->fork
    # code) has no pagid loop: it gets the loop IO::Async would pick anywhere.
    # The worker's pid is asked each time: with preload this module may be
    # compiled in the zygote, whose pid the workers forked from it inherit.
    if ($$ != PAGI::Server::Pagid::Loop::worker_pid()) {
        local $IO::Async::Loop::LOOP;
        return IO::Async::Loop->really_new;
    }
    my $self = $class->__new;
    $self->{pagid_io}     = {};    # fileno => [read watcher, write watcher]
    $self->{pagid_sig}    = {};    # signal name => watcher
    $self->{pagid_idle}   = [];    # pending 'later' callbacks, by id
    $self->{pagid_timers} = {};    # watch_time id => watcher, until it fires
    return $self;
}

# IO::Async::Loop->new returns the loop it made first, and a child forked
# from the worker by the app's own fork inherits the worker's, which cannot
# run there: the child gets a loop of its own (as IO::Async's ->fork does).
{
    no warnings 'redefine';
    my $new = \&IO::Async::Loop::new;
    *IO::Async::Loop::new = sub {
        undef $IO::Async::Loop::ONE_TRUE_LOOP
            if Scalar::Util::blessed($IO::Async::Loop::ONE_TRUE_LOOP)
            && $IO::Async::Loop::ONE_TRUE_LOOP->isa(__PACKAGE__)
            && $$ != PAGI::Server::Pagid::Loop::worker_pid();
        goto &$new;
    };
}

sub _refuse {
    my ($what) = @_;
    # The app's line, not IO::Async's or Future's.
    local @Carp::Internal{qw(IO::Async::Loop IO::Async::Future Future Future::PP Future::XS)}
        = (1) x 5;
    Carp::croak("$what inside a pagid worker: pagid runs the loop; "
          . "return/await the Future instead");
}

sub loop_once    { _refuse('IO::Async::Loop->loop_once') }
sub run          { _refuse('IO::Async::Loop->run') }
sub loop_forever { _refuse('IO::Async::Loop->loop_forever') }

sub await {
    my ($self, $future) = @_;
    return $future if $future->is_ready;
    _refuse('->get/->await on a pending IO::Async future');
}

sub await_all {
    my ($self, @futures) = @_;
    return if !grep { !$_->is_ready } @futures;
    _refuse('IO::Async::Loop->await_all on pending futures');
}

# ---- io ---------------------------------------------------------------

sub watch_io {
    my ($self, %params) = @_;
    my $handle = $params{handle};
    $self->__watch_io(%params);    # checks the arguments, O_NONBLOCK, records the callbacks
    $self->_sync_io($handle->fileno);
}

sub unwatch_io {
    my ($self, %params) = @_;
    my $handle = $params{handle} or Carp::croak("Expected 'handle'");
    my $fd = $handle->fileno;
    return unless defined $fd;    # closed already: its watchers went with _sync_io below
    $self->__unwatch_io(%params);
    $self->_sync_io($fd);
}

# One libev watcher per fd and direction, there while IO::Async has a callback for it.
sub _sync_io {
    my ($self, $fd) = @_;
    my $cbs = $self->{iowatches}{$fd};
    my $w   = $self->{pagid_io}{$fd} ||= [];
    my $iow = $self->{iowatches};
    for my $dir (0, 1) {
        my $want = $cbs && $cbs->[$dir + 1];
        if ($want && !$w->[$dir]) {
            my $slot = $dir + 1;
            $w->[$dir] = PAGI::Server::Pagid::Loop::io($fd, $slot, sub {
                my $c = $iow->{$fd};
                $c->[$slot]->() if $c && $c->[$slot];
            });
        }
        elsif (!$want && $w->[$dir]) {
            undef $w->[$dir];    # DESTROY stops it
        }
    }
    delete $self->{pagid_io}{$fd} unless $w->[0] || $w->[1];
}

# ---- timers -----------------------------------------------------------

sub watch_time {
    my ($self, %params) = @_;
    my $code = $params{code} or Carp::croak("Expected 'code' as CODE ref");
    my $delay;
    if (exists $params{after}) {
        $delay = $params{after};
        $delay += $params{now} - $self->time if exists $params{now};
    }
    elsif (exists $params{at}) {
        $delay = $params{at} - $self->time;
    }
    else {
        Carp::croak("Expected one of 'at' or 'after'");
    }
    # The loop keeps the watcher (dropping it would stop the timer): IO::Async
    # and its users call watch_time in void context. The id is a plain number.
    my $timers = $self->{pagid_timers} ||= {};
    my $id     = ++$self->{pagid_timer_seq};
    $timers->{$id} = PAGI::Server::Pagid::Loop::timer($delay, 0, sub {
        delete $timers->{$id};
        $code->();
    });
    return $id;
}

sub unwatch_time {
    my ($self, $id) = @_;
    delete $self->{pagid_timers}{$id} if defined $id;    # DESTROY stops it
    return;
}

# ---- idle -------------------------------------------------------------

sub watch_idle {
    my ($self, %params) = @_;
    my $code = delete $params{code};
    ref $code or Carp::croak("Expected 'code' to be a reference");
    my $when = delete $params{when} or Carp::croak("Expected 'when'");
    $when eq 'later' or Carp::croak("Expected 'when' to be 'later'");
    my $id = \$code;
    push @{ $self->{pagid_idle} }, $id;
    $self->{pagid_idle_timer} ||= PAGI::Server::Pagid::Loop::timer(0, 0, sub { $self->_run_idle });
    return $id;
}

sub unwatch_idle {
    my ($self, $id) = @_;
    @{ $self->{pagid_idle} } = grep { $_ != $id } @{ $self->{pagid_idle} };
    return;
}

# One round: those queued by these callbacks wait for the next loop turn.
sub _run_idle {
    my ($self) = @_;
    delete $self->{pagid_idle_timer};
    my $round = $self->{pagid_idle};
    $self->{pagid_idle} = [];
    for my $id (@$round) {
        next if eval { ${$id}->(); 1 };
        my $e = "$@";
        $e =~ s/\s+\z//;
        PAGI::Server::Pagid::XS::log(0, "perl: IO::Async idle callback died: $e");
    }
    return;
}

# ---- signals ----------------------------------------------------------

sub watch_signal {
    my ($self, $signal, $code) = @_;
    my $num = $self->signame2num($signal);
    defined $num or Carp::croak("Unrecognised signal name '$signal'");
    $self->{pagid_sig}{$signal} = PAGI::Server::Pagid::Loop::signal($num, $code);
    return;
}

sub unwatch_signal {
    my ($self, $signal) = @_;
    delete $self->{pagid_sig}{$signal};
    return;
}

# ---- child processes ------------------------------------------------------
# libev reaps every child of the worker (SIGCHLD on its default loop): a
# waitpid of our own would find nothing, so the exit status comes from it.

sub watch_process {
    my ($self, $pid, $code) = @_;
    my $watches = $self->{childwatches};
    Carp::croak("Already have a handler for $pid") if exists $watches->{$pid};
    $watches->{$pid} = PAGI::Server::Pagid::Loop::child($pid, sub {
        delete $watches->{$pid} if $pid;    # a PID's watch ends with the process
        $code->(@_);
    });
    return;
}

sub unwatch_process {
    my ($self, $pid) = @_;
    delete $self->{childwatches}{$pid};
    return;
}

sub watch_child   { shift->watch_process(@_) }
sub unwatch_child { shift->unwatch_process(@_) }

1;
