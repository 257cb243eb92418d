"""Tools that reach the web: web_fetch, web_search, web_extract/web_crawl, the browser, and the
SSRF guard they all share."""
