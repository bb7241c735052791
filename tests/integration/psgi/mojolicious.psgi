# mojolicious.psgi - a small Mojolicious::Lite app through Mojo::Server::PSGI
# for test_psgi_frameworks.py: routes, a form POST, an upload, cookies, a
# redirect, JSON, HEAD and a chunked (streamed) response.
use strict;
use warnings;
use Mojolicious::Lite -signatures;
use Mojo::Server::PSGI;
use Digest::MD5 qw(md5_hex);

app->log->level('fatal');
app->secrets(['pagid test secret']);

get '/' => sub ($c) { $c->render(text => 'mojolicious home') };
get '/hello/:name' => sub ($c) { $c->render(text => 'hello ' . $c->param('name')) };
post '/form' => sub ($c) {
    $c->render(text => 'form name=' . $c->param('name') . ' age=' . $c->param('age'));
};
post '/upload' => sub ($c) {
    my $u = $c->req->upload('file') or return $c->render(text => 'no upload');
    $c->render(text => sprintf 'upload %s %d %s', $u->filename, $u->size, md5_hex($u->slurp));
};
get '/cookie/set' => sub ($c) { $c->cookie(flavour => 'oatmeal', {path => '/'}); $c->render(text => 'cookie set') };
get '/cookie/get' => sub ($c) { $c->render(text => 'cookie=' . ($c->cookie('flavour') // '')) };
get '/redirect' => sub ($c) { $c->redirect_to('/hello/redirected') };
get '/json' => sub ($c) { $c->render(json => {framework => 'Mojolicious', list => [1, 2, 3]}) };
get '/stream' => sub ($c) {
    $c->res->headers->content_type('text/plain');
    $c->write_chunk("part $_\n") for 1 .. 3;
    $c->finish;
};

my $server = Mojo::Server::PSGI->new(app => app);
$server->to_psgi_app;
