# preload_print.pl - preload.pl that prints a line at load time on STDOUT
# (buffered by PerlIO: pagid's stdout is a file in the tests). It must be
# written once per compile, not once per worker forked after it.
use strict;
use warnings;
use File::Basename qw(dirname);

print STDOUT "printed at load time by $$\n";

do(dirname(__FILE__) . '/preload.pl') or die($@ || $!);
