# PagidTestGreeting.pm - a module found only through pagid -I (uses_lib.pl).
package PagidTestGreeting;
use strict;
use warnings;
sub greeting { 'greetings from -I' }
1;
