# plack_suite.psgi - Plack's own server conformance app: every test of
# Plack::Test::Suite answered by its handler, checked by Plack::Middleware::Lint
# (test_psgi.py's plack_test_suite drives it through plack_suite.t).
use strict;
use warnings;
use Plack::Test::Suite;
use Plack::Middleware::Lint;

Plack::Middleware::Lint->wrap(Plack::Test::Suite->test_app_handler);
