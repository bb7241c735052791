# preload_slow.pl - preload.pl after 3 seconds of sleep at load time; it
# refuses to load when the sleep was cut short (a signal interrupted it).
use strict;
use warnings;
use File::Basename qw(dirname);
use Time::HiRes qw(time sleep);

BEGIN {
    my $t0 = time;
    sleep 3;
    die sprintf("load-time sleep interrupted after %.1fs\n", time - $t0) if time - $t0 < 2.9;
}

do(dirname(__FILE__) . '/preload.pl') or die($@ || $!);
