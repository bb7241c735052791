# PagidCat.pm - a small Catalyst app for test_psgi_frameworks.py (run by
# catalyst.psgi with -I tests/integration/psgi/lib).
package PagidCat;
use strict;
use warnings;
use Catalyst::Runtime 5.80;
use Catalyst;

__PACKAGE__->config(name => 'PagidCat', disable_component_resolution_regex_fallback => 1);
__PACKAGE__->setup;
__PACKAGE__->log->levels('fatal');

1;
