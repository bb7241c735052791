# dancer2.psgi - a small Dancer2 app for test_psgi_frameworks.py: routes, a
# form POST, an upload, cookies, a redirect, JSON, HEAD and a streamed
# (delayed) response through PSGI.
use strict;
use warnings;

package PagidDancerApp;
use Dancer2;
use Digest::MD5 qw(md5_hex);

set logger => 'null';
set show_stacktrace => 0;

get '/' => sub { 'dancer2 home' };
get '/hello/:name' => sub { 'hello ' . route_parameters->get('name') };
post '/form' => sub { 'form name=' . body_parameters->get('name') . ' age=' . body_parameters->get('age') };
post '/upload' => sub {
    my $u = upload('file') or return 'no upload';
    return sprintf 'upload %s %d %s', $u->filename, $u->size, md5_hex($u->content);
};
get '/cookie/set' => sub { cookie flavour => 'oatmeal', path => '/'; 'cookie set' };
get '/cookie/get' => sub { 'cookie=' . (cookie('flavour') // '') };
get '/redirect' => sub { redirect '/hello/redirected' };
get '/json' => sub {
    content_type 'application/json';
    return to_json({framework => 'Dancer2', list => [1, 2, 3]});
};
get '/stream' => sub {
    delayed {
        response_header 'Content-Type' => 'text/plain';
        content "part $_\n" for 1 .. 3;
        done;
    };
};

PagidDancerApp->to_app;
