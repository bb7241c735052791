# attack.psgi - the pool attacks' app: every answer echoes the request's id
# (?id=X) so a response delivered to the wrong client is seen.
use strict;
use warnings;

my $app = sub {
    my ($env) = @_;
    my $p = $env->{PATH_INFO};
    my ($id) = ($env->{QUERY_STRING} =~ /id=([\w.-]+)/);
    $id //= 'none';
    my $hdr = $env->{HTTP_X_ID} // 'none';
    my $text = sub { [200, ['Content-Type' => 'text/plain', 'X-Id' => $id], [$_[0]]] };
    if ($p eq '/id') { return $text->("id=$id hdr=$hdr pid=$$\n"); }
    if ($p eq '/sleep') {
        my ($s) = ($env->{QUERY_STRING} =~ /s=([\d.]+)/);
        select undef, undef, undef, $s // 1;
        return $text->("id=$id slept pid=$$\n");
    }
    if ($p eq '/big') {
        my ($mb) = ($env->{QUERY_STRING} =~ /mb=(\d+)/);
        return [200, ['Content-Type' => 'application/octet-stream', 'X-Id' => $id],
            ["id=$id;" . ('x' x (($mb // 4) << 20))]];
    }
    if ($p eq '/slowstream') {
        return sub {
            my $w = $_[0]->([200, ['Content-Type' => 'text/plain', 'X-Id' => $id]]);
            for my $i (1 .. 20) {
                $w->write("id=$id part$i\n");
                select undef, undef, undef, 0.2;
            }
            $w->close;
        };
    }
    if ($p eq '/harakiri') {
        $env->{'psgix.harakiri.commit'} = 1;
        return $text->("id=$id harakiri pid=$$\n");
    }
    if ($p eq '/echo') {
        my $in = $env->{'psgi.input'};
        local $/;
        my $body = <$in> // '';
        return $text->(sprintf "id=%s len=%d sum=%d\n", $id, length $body, unpack('%32C*', $body));
    }
    return [404, ['Content-Type' => 'text/plain', 'X-Id' => $id], ["id=$id not found\n"]];
};
