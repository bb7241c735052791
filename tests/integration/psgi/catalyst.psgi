# catalyst.psgi - the Catalyst test app (lib/PagidCat.pm) as a PSGI app, for
# test_psgi_frameworks.py (its lib directory comes from -I).
use strict;
use warnings;
use PagidCat;

PagidCat->psgi_app;
