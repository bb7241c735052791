# no_coderef.psgi - ends with a string, not an app: test_psgi.py's bad_psgi_files.
my $app = "not an app";
