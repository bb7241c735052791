# preload_sigterm.pl - preload.pl with handlers for SIGTERM and SIGQUIT set
# at load time, as a module might. They replace the zygote's own, and a
# Perl handler never runs while the zygote waits in C: its generation's end
# must still reach it (the channel's EOF).
use strict;
use warnings;
use File::Basename qw(dirname);

$SIG{TERM} = sub { warn "app TERM handler\n" };
$SIG{QUIT} = sub { warn "app QUIT handler\n" };

do(dirname(__FILE__) . '/preload.pl') or die($@ || $!);
