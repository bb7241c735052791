# man pages: pagid(8), pagid.yaml(5), pagi(3), pagi_easy(3), pagi_router(3), pagi_shared(3)
dist_man_MANS += man/pagid.8 man/pagid.yaml.5 man/pagi.3 man/pagi_easy.3 man/pagi_router.3 \
	man/pagi_shared.3
