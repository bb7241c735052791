# preload_opens.psgi - a PSGI app that opens a file while it loads (as a
# Cache::FastMmap made at the top of a Catalyst app does): preloaded, it is
# shared by every process forked from the zygote, and the zygote says so,
# with the advice for a PSGI app (no lifespan to open it in).
use strict;
use warnings;

open my $cache, "<", __FILE__ or die "open: $!";

sub {
    # Uses it, as an app uses its cache: the closure keeps it open.
    return [200, ['Content-Type' => 'text/plain'], [$cache ? 'ok' : 'lost']];
};
