# preload_forge.pl - hostile load-time code in the zygote: it finds the
# zygote's channel to the master (a SOCK_SEQPACKET socket) and writes forged
# "worker started" reports naming PAGID_TEST_VICTIM, a process that is no
# worker (one for the first real request's number, one for none), then
# serves as preload.pl. The master must not signal the victim.
use strict;
use warnings;
use File::Basename qw(dirname);
use Socket qw(SOL_SOCKET SO_TYPE);

our @kept;    # a handle on an fd that goes out of scope would close the fd

BEGIN {
    my $victim = $ENV{PAGID_TEST_VICTIM};
    for my $fd (3 .. 64) {
        last unless $victim;
        open(my $s, '+<&=', $fd) or next;
        push @kept, $s;
        my $t = getsockopt($s, SOL_SOCKET, SO_TYPE) or next;
        next unless unpack('i', $t) == 5;    # SOCK_SEQPACKET
        # magic, ZMSG_SPAWNED, request number, worker number, pid, errno
        send($s, pack('a4 L5', 'PZG1', 2, $_, 1, $victim, 0), 0) for (1, 999999);
    }
}

do(dirname(__FILE__) . '/preload.pl') or die($@ || $!);
