# bench/preload_app.pl - a PAGI app that loads what a large Perl app loads:
# an object system, dates, a database interface and a template engine
# (Debian: libmoose-perl libdatetime-perl libdbi-perl libtemplate-perl),
# and builds a little with them at load time, as frameworks do. Used by
# bench/preload.sh to measure what preloading shares between workers.
use strict;
use warnings;
use Future::AsyncAwait;
use Moose ();
use Moose::Util::TypeConstraints ();
use DateTime;
use DateTime::Duration;
use DBI;
use Template;
use Template::Stash;
use POSIX ();
use Data::Dumper ();
use Storable ();
use List::Util ();
use Scalar::Util ();
use Encode ();

# A few classes, as an ORM's result classes would be: Moose compiles
# accessors and metaclass data for each.
for my $n (1 .. 40) {
    my $meta = Moose::Meta::Class->create("Bench::Row$n");
    $meta->add_attribute($_ => (is => 'rw', isa => 'Str')) for map { "col$_" } 1 .. 12;
    $meta->make_immutable;
}
my $tt = Template->new;
my $out = '';
$tt->process(\"[% FOREACH i IN list %][% i %] [% END %]", {list => [1 .. 10]}, \$out)
    or die $tt->error;

async sub {
    my ($scope, $receive, $send) = @_;
    if ($scope->{type} eq 'lifespan') {
        while (1) {
            my $ev = await $receive->();
            if ($ev->{type} eq 'lifespan.startup') {
                await $send->({type => 'lifespan.startup.complete'});
            } elsif ($ev->{type} eq 'lifespan.shutdown') {
                await $send->({type => 'lifespan.shutdown.complete'});
                return;
            }
        }
    }
    my $row = Bench::Row1->new(col1 => 'x');
    my $body = DateTime->now->ymd . ' ' . $row->col1 . " $out\n";
    await $send->({type => 'http.response.start', status => 200,
                   headers => [['content-type', 'text/plain']]});
    await $send->({type => 'http.response.body', body => $body});
};
