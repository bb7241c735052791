# syntax_error.psgi - does not compile (line 4): test_psgi.py's bad_psgi_files.
my $app = sub {
    my $env = shift;
    return [200, [], ['x']]]
};
