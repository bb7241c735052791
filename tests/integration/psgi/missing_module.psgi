# missing_module.psgi - uses a module nobody has (line 3): test_psgi.py's bad_psgi_files.
use strict;
use Pagid::No::Such::Module;
sub { [200, [], ['x']] };
