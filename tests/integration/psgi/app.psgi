# app.psgi - a PSGI app for test_psgi.py: one route per behaviour of pagid's
# PSGI adapter (env, body spooling, response forms, streaming, errors,
# psgix.cleanup and psgix.harakiri).
use strict;
use warnings;
use Plack::Util;

my %routes = (
    '/env' => sub {
        my $env = shift;
        my $in = $env->{'psgi.input'};
        my $body = '';
        1 while $in->read($body, 65536, length $body);
        seek $in, 0, 0;
        my $again = '';
        $in->read($again, 10);
        my @keys = grep { !/^psgi\.(input|errors)$|^psgix\.cleanup\.handlers$/ } sort keys %$env;
        my $out = join '', map {
            my $v = $env->{$_};
            "$_=" . (ref $v eq 'ARRAY' ? join(',', @$v) : $v) . "\n"
        } @keys;
        $out .= "input.length=" . length($body) . "\n";
        $out .= "input.md5=" . do { require Digest::MD5; Digest::MD5::md5_hex($body) } . "\n";
        $out .= "input.reread=" . (substr($body, 0, 10) eq $again ? 1 : 0) . "\n";
        $out .= "input.file=" . (defined fileno($in) && fileno($in) >= 0 ? 1 : 0) . "\n";
        $out .= "errors.ok=" . (defined $env->{'psgi.errors'} ? 1 : 0) . "\n";
        return [200, ['Content-Type' => 'text/plain'], [$out]];
    },
    '/errors' => sub {
        my $env = shift;
        $env->{'psgi.errors'}->print("psgi.errors line one\n");
        print {$env->{'psgi.errors'}} "psgi.errors line two\n";
        return [200, ['Content-Type' => 'text/plain'], ['logged']];
    },
    '/stream' => sub {
        my $env = shift;
        my ($n, $pause) = $env->{QUERY_STRING} =~ /n=(\d+)&pause=([\d.]+)/ ? ($1, $2) : (3, 0.3);
        return sub {
            my $w = shift->([200, ['Content-Type' => 'text/plain']]);
            for my $i (1 .. $n) {
                $w->write("chunk $i\n");
                select undef, undef, undef, $pause if $i < $n;
            }
            $w->close;
        };
    },
    '/dies-mid-stream' => sub {
        return sub {
            my $w = shift->([200, ['Content-Type' => 'text/plain']]);
            $w->write("part1\n");
            die "broke mid-stream\n";
        };
    },
    '/drops-writer' => sub {
        return sub {
            my $w = shift->([200, ['Content-Type' => 'text/plain']]);
            $w->write("all of it\n");
            return;    # no close: dropping the writer ends the body
        };
    },
    '/big-stream' => sub {
        my $env = shift;
        my ($mib) = $env->{QUERY_STRING} =~ /mib=(\d+)/;
        return sub {
            my $w = shift->([200, ['Content-Type' => 'application/octet-stream']]);
            my $chunk = 'x' x 65536;
            my $wrote = 0;
            my $ok = eval { for (1 .. 16 * $mib) { $w->write($chunk); $wrote++ } 1 };
            $env->{'psgi.errors'}->print("big-stream: " . ($ok ? "done" : "stopped after $wrote chunks: $@"));
            $w->close if $ok;
        };
    },
    '/delayed' => sub {
        return sub { shift->([200, ['Content-Type' => 'text/plain'], ['delayed body']]) };
    },
    '/getline' => sub {
        my $i = 0;
        my $body = Plack::Util::inline_object(
            getline => sub { $i < 5 ? 'line ' . ++$i . "\n" : undef },
            close   => sub { $main::closed_getline++ },
        );
        return [200, ['Content-Type' => 'text/plain'], $body];
    },
    '/closed' => sub {
        return [200, ['Content-Type' => 'text/plain'], [$main::closed_getline // 0]];
    },
    '/file' => sub {
        my $env = shift;
        my ($path) = $env->{QUERY_STRING} =~ /path=(.*)/;
        open my $fh, '<:raw', $path or die "open $path: $!";
        Plack::Util::set_io_path($fh, $path) if $env->{QUERY_STRING} =~ /^with_path/;
        return [200, ['Content-Type' => 'application/octet-stream'], $fh];
    },
    '/dies' => sub { die "the app broke on purpose\n" },
    '/bad-status' => sub { return ['abc', [], ['x']] },
    '/odd-headers' => sub { return [200, ['X-One'], ['x']] },
    '/bad-body' => sub { return [200, [], 'a string body'] },
    '/wide' => sub { return [200, [], ["caf\x{e9} \x{263a}"]] },
    '/nul-in-name' => sub { return [200, ["X-A\0B" => 1], ['x']] },
    '/cr-in-value' => sub { return [200, ['X-A' => "1\r\nX-B: 2"], ['x']] },
    '/undef-value' => sub { return [200, ['X-A' => undef], ['x']] },
    '/cookies' => sub {
        my $env = shift;
        return [200, ['Content-Type' => 'text/plain', 'Set-Cookie' => 'a=1; Path=/', 'Set-Cookie' => 'b=2; Path=/'],
                [$env->{HTTP_COOKIE} // '']];
    },
    '/cleanup' => sub {
        my $env = shift;
        my $log = $ENV{PAGID_TEST_LOG};
        push @{ $env->{'psgix.cleanup.handlers'} }, sub {
            open my $fh, '>>', $log or return;
            print {$fh} "cleanup ran for $_[0]{REQUEST_URI}\n";
        };
        return [200, ['Content-Type' => 'text/plain'], ["cleanup=$env->{'psgix.cleanup'}"]];
    },
    '/harakiri' => sub {
        my $env = shift;
        $env->{'psgix.harakiri.commit'} = $env->{'psgix.harakiri'};
        return [200, ['Content-Type' => 'text/plain'], ["pid=$$ harakiri=$env->{'psgix.harakiri'}"]];
    },
    '/harakiri-lingering' => sub { # leaves 0.5 s after its response (a slow cleanup)
        my $env = shift;
        $env->{'psgix.harakiri.commit'} = $env->{'psgix.harakiri'};
        push @{ $env->{'psgix.cleanup.handlers'} }, sub { select(undef, undef, undef, 0.5) };
        return [200, ['Content-Type' => 'text/plain'], ["pid=$$ harakiri=$env->{'psgix.harakiri'}"]];
    },
    '/pid' => sub { return [200, ['Content-Type' => 'text/plain'], ["pid=$$"]] },
);

my $app = sub {
    my $env = shift;
    my $route = $routes{$env->{PATH_INFO}} || $routes{'/env'};
    return $route->($env);
};
