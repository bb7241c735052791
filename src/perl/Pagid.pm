# Pagid.pm - the Perl half of pagid's Perl host, compiled into pagid and
# evaluated once per worker: app loading, running a scope's app,
# pagi.connection/pagi.transport objects, and Future::IO's impl.
use strict;
use warnings;

package PAGI::Server::Pagid;
use Future;

our %RUNNING;   # scope handle address -> the app's Future, until it is ready

# Each app file is compiled in a package of its own (as Plack's sandbox
# does), so two apps mounted in one config cannot clobber each other's
# globals and subs in main by accident.
my $sandboxes = 0;

sub _load {
    my ($file, $lib) = @_;
    unshift @INC, grep { length } split /:/, $lib;
    # The counter makes it unique; the file's base name (short: Perl caps a
    # package name's length) only helps a reader of a stack trace.
    (my $name = $file) =~ s{.*/}{};
    $name =~ s/\W/_/g;
    my $package = sprintf 'PAGI::Server::Pagid::Sandbox::App%d_%s', ++$sandboxes,
        substr($name, 0, 40);
    # `do` searches @INC for a relative path that does not start with ./ or
    # ../ (and '.' is not in @INC): a relative app path means the directory
    # pagid runs in, as it does for every other path.
    $file = "./$file" unless $file =~ m{^\.{0,2}/};
    my $psgi = $file =~ /\.psgi\z/;
    my $app = eval sprintf <<'END_LOAD', $package;
package %s;
no strict;
local @ARGV;
my $app = do $file;
die $@ if $@;
# $! may be stale (a `use` searched @INC): only an unreadable file is that.
die "cannot read $file: $!\n" if !defined $app && !-r $file;
$app;
END_LOAD
    die _at_line($file, $@) . "\n" if $@; # "\n": not " at (eval 1) line N" of this glue
    _dev_report($file) if $ENV{PAGID_DEV_REPORT_FD};
    if ($psgi) {
        # A PSGI app may be an object with &{} overloaded (Plack::Component's
        # to_app returns a plain sub, but some apps return the object).
        die _last_line($file) . ": did not return a code reference (a PSGI app file ends with "
            . "its app, e.g. `my \$app = sub { ... };` as its last statement)\n"
            unless ref $app eq 'CODE' || (Scalar::Util::blessed($app) && do { require overload; overload::Method($app, '&{}') });
        require PAGI::Server::Pagid::PSGI;
        return PAGI::Server::Pagid::PSGI->wrap($app, $file);
    }
    die _last_line($file) . ": did not return a code reference but "
        . (ref $app ? 'a ' . ref($app) . ' reference' : defined $app ? "'$app'" : 'undef')
        . " (a PAGI app file ends with its app, e.g. `my \$app = async sub { ... }; \$app;`;"
        . " a PSGI app, which plackup runs whatever its name, as a Mojolicious::Lite myapp.pl,"
        . " must be named FILE.psgi here)\n"
        unless ref $app eq 'CODE';
    return $app;
}

# --dev: tell the master which files the app loaded (not Perl's own
# library), one absolute path a line, so it watches them for changes.
our $DEV_FH;
sub _dev_report {
    my ($file) = @_;
    require Config;
    require Cwd;
    my @system = grep { defined && length } map { $Config::Config{$_} }
        qw(privlibexp archlibexp vendorlibexp vendorarchexp sitelibexp sitearchexp);
    my %seen;
    my @files = grep { !$seen{$_}++ }
        grep { my $f = $_; !grep { index($f, "$_/") == 0 } @system }
        map { Cwd::abs_path($_) // () } grep { defined && !ref } $file, values %INC;
    # Kept open: closing a handle of '>&=' closes the fd under it.
    $DEV_FH //= do { open my $fh, '>&=', $ENV{PAGID_DEV_REPORT_FD} or return; $fh };
    syswrite $DEV_FH, "$_\n" for @files;
    return;
}

# A load error as FILE:LINE: message, the app file's line when Perl names
# it (a syntax error, a missing module: "... at app.psgi line 3."), so an
# editor or a log reader lands on it.
# The worker pool (PAGI/Server/Pagid/Pool.pm, compiled only with a pool).
sub PAGI::Server::Pagid::Pool::setup {
    require PAGI::Server::Pagid::Pool;
    return PAGI::Server::Pagid::Pool::_setup(@_);
}

sub _at_line {
    my ($file, $e) = @_;
    $e = _message($e);
    (my $short = $file) =~ s{^\./}{};
    for my $name ($file, $short) {
        return "$short:$1: $e" if $e =~ /at \Q$name\E line (\d+)/;
    }
    # Elsewhere: a module the app uses, or -e's code.
    return "$1:$2: $e" if $e =~ /at (\S+) line (\d+)/;
    return "$short: $e";
}

# FILE:LINE of the app file's last statement (what `do` returned), for an
# app file that did not end with its code reference.
sub _last_line {
    my ($file) = @_;
    (my $short = $file) =~ s{^\./}{};
    open my $fh, '<', $file or return $short;
    my ($n, $last) = (0, 0);
    while (my $line = <$fh>) {
        $n++;
        last if $line =~ /^__(?:END|DATA)__\b/;
        $last = $n if $line =~ /\S/ && $line !~ /^\s*#/;
    }
    return $last ? "$short:$last" : $short;
}

sub _message {
    my ($e) = @_;
    # An exception object whose stringification dies must not take the
    # report (and the request's end, which waits for it) with it.
    my $text = eval { "$e" };
    $e = defined $text ? $text : ref($e) . ' object (its stringification died)';
    $e =~ s/\s+\z//;
    return length $e ? $e : 'died';
}

# perl_handle_scope calls the app and finishes the scope when the app dies
# or returns a done Future; anything else comes here.
sub _settle {
    my ($h, $f) = @_;
    if (!(Scalar::Util::blessed($f) && $f->can('on_ready'))) {
        PAGI::Server::Pagid::XS::finish($h, _psgi_response($f)
            ? "the app returned a PSGI response ([$f->[0], ...]), not a Future: it is a PSGI app,"
              . " which pagid runs only from a file named FILE.psgi (docs/psgi.md)"
            : undef);
        return;
    }
    if ($f->is_ready) {
        PAGI::Server::Pagid::XS::finish($h, $f->is_done ? undef : _failure($f));
        return;
    }
    my $key = 0 + $$h;
    $RUNNING{$key} = $f;
    $f->on_ready(sub {
        delete $RUNNING{$key};
        PAGI::Server::Pagid::XS::finish($h, _failure($_[0]));
    });
    return;
}

# [STATUS, [HEADERS], ...]: what a PSGI app (Dancer2, Mojolicious, Catalyst)
# returns when a .pl file holding it is run as a PAGI app; otherwise its
# scope would end with only "app finished without responding".
sub _psgi_response {
    my ($r) = @_;
    return ref $r eq 'ARRAY' && @$r >= 2 && defined $r->[0] && !ref $r->[0]
        && $r->[0] =~ /\A\d{3}\z/ && ref $r->[1] eq 'ARRAY';
}

sub _failure {
    my ($f) = @_;
    return undef unless $f->is_failed || $f->is_cancelled;
    return 'cancelled' if $f->is_cancelled;
    return _message(($f->failure)[0]);
}

# The class of the one done Future every at-once send returns: a Future
# whose await questions (AWAIT_IS_READY, AWAIT_GET, ...) are XSUBs.
package PAGI::Server::Pagid::Done;
our @ISA = ('Future');

package PAGI::Server::Pagid::Connection;
# An http scope's pagi.connection is its pagi.transport as well.
our @ISA = ('PAGI::Server::Pagid::Transport');

sub is_connected      { PAGI::Server::Pagid::XS::query($_[0]{h}, 0) ? 1 : 0 }
sub disconnect_reason { PAGI::Server::Pagid::XS::query($_[0]{h}, 1) }
sub response_started  { PAGI::Server::Pagid::XS::query($_[0]{h}, 2) ? 1 : 0 }
sub response_complete { PAGI::Server::Pagid::XS::query($_[0]{h}, 3) ? 1 : 0 }
sub on_disconnect     { PAGI::Server::Pagid::XS::watch($_[0]{h}, 0, $_[1]); return }
sub on_complete       { PAGI::Server::Pagid::XS::watch($_[0]{h}, 1, $_[1]); return }

sub disconnect_future {
    my ($self) = @_;
    return $self->{df} if $self->{df};
    my $f = $self->{df} = Future->new;
    # The callback holds the future weakly: the scope's release frees the rest.
    Scalar::Util::weaken(my $weak = $f);
    PAGI::Server::Pagid::XS::watch($self->{h}, 0, sub {
        $weak->done($_[0]) if $weak && !$weak->is_ready;
    });
    return $f;
}

package PAGI::Server::Pagid::Transport;
# extensions->{'pagi.pubsub'} of a request scope is this object too.
our @ISA = ('PAGI::Server::Pagid::PubSub');

sub buffered_amount { PAGI::Server::Pagid::XS::query($_[0]{h}, 4) // 0 }
sub high_water_mark { PAGI::Server::Pagid::XS::query($_[0]{h}, 5) }
sub low_water_mark  { PAGI::Server::Pagid::XS::query($_[0]{h}, 6) }
sub on_high_water   { PAGI::Server::Pagid::XS::watch($_[0]{h}, 2, $_[1]); return }
sub on_drain        { PAGI::Server::Pagid::XS::watch($_[0]{h}, 3, $_[1]); return }

# pagid.server (the same object): the worker's drain notice.
sub draining        { PAGI::Server::Pagid::XS::query($_[0]{h}, 7) ? 1 : 0 }
sub on_server_drain { PAGI::Server::Pagid::XS::watch($_[0]{h}, 4, $_[1]); return }

sub server_drain_future {
    my ($self) = @_;
    return $self->{sdf} if $self->{sdf};
    my $f = $self->{sdf} = Future->new;
    Scalar::Util::weaken(my $weak = $f);
    PAGI::Server::Pagid::XS::watch($self->{h}, 4, sub {
        $weak->done if $weak && !$weak->is_ready;
    });
    return $f;
}

# The pagi.pubsub extension (docs/perl.md). publish is an XSUB
# (perl_pubsub.c); a lifespan scope's object is of this class, a request
# scope's is its pagi.transport object, a subclass.
package PAGI::Server::Pagid::PubSub;

our %POLICY = (drop_oldest => 0, conflate => 1);
# Errors name the app's line, not the glue's.
our @CARP_NOT = ('PAGI::Server::Pagid::Subscription');

# subscribe($channel, [$callback], [policy => ..., max_pending => ...])
sub subscribe {
    my ($self, $channel, @opt) = @_;
    my $cb = @opt % 2 ? shift @opt : undef;    # options are pairs: an odd one out is the callback
    Carp::croak('subscribe: the callback must be a code reference')
        if defined $cb && (Scalar::Util::reftype($cb) // '') ne 'CODE';
    my %opt = @opt;
    my @bad = grep { $_ ne 'policy' && $_ ne 'max_pending' } sort keys %opt;
    Carp::croak("subscribe: unknown option '$bad[0]' (policy, max_pending)") if @bad;
    my $sub = bless {h => $self->{h}, channel => $channel, policy => 'drop_oldest',
                     max_pending => 1024, queue => [], waiters => [], cb => $cb ? 1 : 0},
        'PAGI::Server::Pagid::Subscription';
    # Checked before subscribing: a bad option subscribes nothing.
    my ($policy, $max) =
        $sub->_check_policy('subscribe', $opt{policy} // 'drop_oldest', $opt{max_pending});
    eval { PAGI::Server::Pagid::XS::ps_subscribe($sub, $channel, $cb); 1 }
        or Carp::croak(PAGI::Server::Pagid::_message($@));
    $sub->set_policy($policy, $max) if exists $opt{policy} || exists $opt{max_pending};
    return $sub;
}

# The pagi.shared extension (docs/perl.md): the worker's shared dictionaries
# by name; each a PAGI::Server::Pagid::SharedDict whose methods are XSUBs
# (perl_shared_xs.c).
package PAGI::Server::Pagid::SharedDicts;
sub dict  { $_[0]{$_[1]} }
sub names { sort keys %{$_[0]} }

package PAGI::Server::Pagid::Subscription;
our @CARP_NOT = ('PAGI::Server::Pagid::PubSub');

sub channel     { $_[0]{channel} }
sub policy      { $_[0]{policy} }
sub max_pending { $_[0]{max_pending} }
sub pending     { scalar @{ $_[0]{queue} } }
sub is_active   { PAGI::Server::Pagid::XS::ps_active($_[0]) ? 1 : 0 }
sub dropped     { PAGI::Server::Pagid::XS::ps_dropped($_[0]) }

sub count_dropped {
    my ($self, $n) = @_;
    PAGI::Server::Pagid::XS::ps_count_dropped($self, $n // 1);
    return $self;
}

sub _check_policy {
    my ($self, $what, $policy, $max) = @_;
    Carp::croak("$what: the policy is 'drop_oldest' or 'conflate'")
        unless defined $policy && exists $PAGI::Server::Pagid::PubSub::POLICY{$policy};
    $max //= $self->{max_pending};
    Carp::croak("$what: max_pending is a whole number, at least 1")
        unless defined $max && $max =~ /\A[0-9]+\z/ && $max >= 1;
    return ($policy, $max);
}

# set_policy($policy, [$max_pending]): as pagi_subscription_set_policy, and
# the same bound for the messages waiting here for `next`.
sub set_policy {
    my ($self, @args) = @_;
    my ($policy, $max) = $self->_check_policy('set_policy', @args);
    PAGI::Server::Pagid::XS::ps_policy($self, $PAGI::Server::Pagid::PubSub::POLICY{$policy}, $max);
    @$self{qw(policy max_pending)} = ($policy, $max);
    $self->_trim;
    return $self;
}

sub _trim {
    my ($self) = @_;
    my $q = $self->{queue};
    my $keep = $self->{policy} eq 'conflate' ? 1 : $self->{max_pending};
    return if @$q <= $keep;
    my $n = @$q - $keep;
    splice @$q, 0, $n;    # the oldest go
    PAGI::Server::Pagid::XS::ps_count_dropped($self, $n);
}

# A Future done with (message, channel): the oldest waiting message, or the
# next to come; done with nothing once the subscription has ended.
sub next {
    my ($self) = @_;
    Carp::croak('next: this subscription has a callback, which gets its messages')
        if $self->{cb};
    my $q = $self->{queue};
    return Future->done(shift @$q, $self->{channel}) if @$q;
    return Future->done unless PAGI::Server::Pagid::XS::ps_active($self);
    my $w = $self->{waiters};
    @$w = grep { !$_->is_ready } @$w if @$w;    # cancelled ones (a lost wait_any)
    push @$w, my $f = Future->new;
    return $f;
}

sub unsubscribe {
    my ($self) = @_;
    PAGI::Server::Pagid::XS::ps_end($self);
    @{ $self->{queue} } = ();
    $_->done for grep { !$_->is_ready } splice @{ $self->{waiters} };
    return;
}

# From the server (perl_pubsub.c), one message of the queue form.
sub _queue {
    my ($self, $message) = @_;
    my $w = $self->{waiters};
    while (@$w) {
        my $f = shift @$w;
        next if $f->is_ready;    # cancelled: the message waits for the next one
        $f->done($message, $self->{channel});
        return;
    }
    push @{ $self->{queue} }, $message;
    $self->_trim;
}

# From the server: the callback returned a Future not done yet (an async
# sub), or failed. Kept until it is ready (with the subscription object,
# which the scope's release frees), its failure logged as a die would be.
sub _callback_future {
    my ($self, $f) = @_;
    return unless $f->can('on_ready');
    my $channel = $self->{channel};
    return _callback_failed($channel, $f) if $f->is_ready;
    my $running = $self->{running} //= {};
    my $key = Scalar::Util::refaddr($f);
    $running->{$key} = $f;
    Scalar::Util::weaken(my $weak = $running);
    $f->on_ready(sub {
        delete $weak->{$key} if $weak;
        _callback_failed($channel, $_[0]);
    });
    return;
}

sub _callback_failed {
    my ($channel, $f) = @_;
    return unless $f->is_failed;
    PAGI::Server::Pagid::XS::log(0, "perl: pub/sub callback on channel '$channel' died: "
        . PAGI::Server::Pagid::_message(($f->failure)[0]));
    return;
}

package PAGI::Server::Pagid::FutureIO;
use Future::IO::ImplBase;
our @ISA = ('Future::IO::ImplBase');

sub sleep {
    my ($class, $secs) = @_;
    my $f = Future->new;
    # The loop holds the future until the timer fires or is cancelled.
    my $id = PAGI::Server::Pagid::XS::timer_start($secs, sub { $f->done unless $f->is_ready });
    $f->on_cancel(sub { PAGI::Server::Pagid::XS::timer_stop($id) });
    return $f;
}

sub alarm {
    my ($class, $epoch) = @_;
    return $class->sleep($epoch - Time::HiRes::time());
}

sub _ready {
    my ($fh, $events) = @_;
    my $f = Future->new;
    my $fd = ref $fh ? fileno($fh) : $fh;
    return Future->fail("not an open file handle") unless defined $fd;
    my $id;
    $id = PAGI::Server::Pagid::XS::io_watch($fd, $events, sub {
        PAGI::Server::Pagid::XS::io_stop($id) if defined $id;
        undef $id;
        $f->done unless $f->is_ready;
    });
    $f->on_cancel(sub { PAGI::Server::Pagid::XS::io_stop($id) if defined $id; undef $id });
    return $f;
}

sub ready_for_read  { _ready($_[1], 1) }
sub ready_for_write { _ready($_[1], 2) }

sub HAVE_MULTIPLE_FILEHANDLES { 1 }

package main;
# exit() in an app would end the worker from inside a callback: make it a die
# (the scope fails, the worker goes on), as mod_perl does. In a process forked
# from the worker it exits (without pagid's teardown, which is the worker's).
# The worker is asked each time, never cached: with preload this code is
# compiled in the zygote, whose pid every forked worker would inherit.
BEGIN {
    *CORE::GLOBAL::exit = sub {
        # A pool process ends for real: its request is answered 502 and the
        # master starts another (docs/psgi.md).
        if ($$ != PAGI::Server::Pagid::Loop::worker_pid() || $PAGI::Server::Pagid::Pool::IN_PROCESS) {
            $_->flush for grep { defined fileno $_ } *STDOUT{IO}, *STDERR{IO};
            require POSIX;
            POSIX::_exit($_[0] // 0);
        }
        die "exit(" . ($_[0] // 0) . ") called by the app\n";
    };
}
use Carp ();
use Scalar::Util ();
use Time::HiRes ();
use Future::IO;
Future::IO->override_impl('PAGI::Server::Pagid::FutureIO');
1;
