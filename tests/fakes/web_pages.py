"""Local web pages for the browser tests and benchmark: a page that needs JavaScript, a login
form, a multi-step shop, a page with Delete buttons, and a page that attacks internal
addresses; plus `InternalServer`, which must never see a request.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
from collections.abc import Awaitable, Callable
from html import escape

from aiohttp import WSMsgType, web

from tests.fakes.server import LocalServer
from tools.web.browser.guardproxy import Connector, Streams
from tools.web.netguard import Address, Resolver

PAGES_HOST = "pages.test"  # allowed in the tests' AddressGuard, resolves to 127.0.0.1
PRIVATE_HOST = "intranet.test"  # resolves to 10.0.0.7 in the tests; never connected to


def _html(title: str, body: str) -> web.Response:
    page = f"<!doctype html><html><head><title>{title}</title></head><body>{body}</body></html>"
    return web.Response(text=page, content_type="text/html")


JS_PAGE = """
<div id="app">Loading...</div>
<script>
fetch('/api/greeting').then((r) => r.json()).then((d) => {
  document.getElementById('app').innerHTML =
    '<h1>' + d.greeting + '</h1><ul id="items"></ul><button id="more">Load more</button>';
  document.getElementById('more').onclick = () => setTimeout(() =>
    fetch('/api/more').then((r) => r.json()).then((items) => {
      for (const item of items) {
        const li = document.createElement('li'); li.textContent = item;
        document.getElementById('items').appendChild(li);
      }
    }), 50);
});
</script>"""

LOGIN_PAGE = """
<h1>Sign in</h1>
<form method="post" action="/login">
  <label>User name <input name="user" autocomplete="username"></label>
  <label for="pw">Password</label> <input id="pw" type="password" name="password">
  <button type="submit">Sign in</button>
</form>"""

SHOP_STEP1 = """
<h1>Choose a shirt</h1>
<form method="get" action="/shop/step2">
  <label>Size <select name="size"><option value="s">Small</option>
    <option value="m">Medium</option><option value="l">Large</option></select></label>
  <label><input type="checkbox" name="gift" value="yes"> Gift wrap</label>
  <button type="submit">Next</button>
</form>"""

ITEMS_PAGE = """
<h1>Your items</h1>
<ul><li>notes.txt</li><li>photo.jpg</li></ul>
<form method="post" action="/items/remove"><button>Delete</button></form>
<button onclick="say('refreshed')">Refresh</button>
<button onclick="if (confirm('Really empty the trash?')) {
  fetch('/items/empty', {method: 'POST'}).then(() => say('emptied')); } else { say('kept'); }"
>Delete all</button>
<button onclick="say(confirm('Reset the view?') ? 'reset' : 'not reset')">Reset view</button>
<p id="status">idle</p>
<a href="/files/report.csv">Download report</a>
<script>function say(t) { document.getElementById('status').textContent = t; }</script>"""


def many_links(count: int) -> str:
    return "<h1>Index</h1>" + "".join(
        f'<a href="/p/{n}">Page number {n}</a> ' for n in range(count)
    )


WS_PAGE = """
<p id="ws">connecting</p>
<script>
const ws = new WebSocket('ws://' + location.host + '/ws');
ws.onopen = () => ws.send('ping');
ws.onmessage = (e) => { document.getElementById('ws').textContent = 'echo: ' + e.data; };
ws.onerror = () => { document.getElementById('ws').textContent = 'websocket failed'; };
</script>"""


def attack_page(port: int) -> str:
    """Every way we know for a page to reach the internal server at 127.0.0.1:`port`."""
    inside = f"127.0.0.1:{port}"
    return f"""
<h1>Totally normal page</h1>
<img src="http://localhost:{port}/img.png" alt="pixel">
<iframe src="http://2130706433:{port}/frame"></iframe>
<link rel="stylesheet" href="http://[::1]:{port}/style.css">
<script src="http://{inside}/script.js"></script>
<p id="out">waiting</p>
<script>
const out = [];
const note = (t) => {{ out.push(t); document.getElementById('out').textContent = out.join(' '); }};
fetch('http://{inside}/fetch').then(() => note('fetch-ok'), () => note('fetch-blocked'));
fetch('http://{PRIVATE_HOST}/admin').then(() => note('private-ok'), () => note('private-blocked'));
const ws = new WebSocket('ws://{inside}/ws');
ws.onopen = () => note('ws-open');
ws.onerror = () => note('ws-blocked');
navigator.sendBeacon('http://{inside}/beacon', 'x');
</script>"""


class PageSite(LocalServer):
    """The pages the browser tests walk through; `hits` records "METHOD /path" per request."""

    def __init__(self) -> None:
        super().__init__()
        self.hits: list[str] = []
        self.orders: list[dict[str, str]] = []
        self.internal_port = 0  # the InternalServer the attack pages aim at

    @property
    def base(self) -> str:
        return f"http://{PAGES_HOST}:{self.port}"

    def routes(self, app: web.Application) -> None:
        app.middlewares.append(self._record)
        pages: dict[str, Callable[[web.Request], web.StreamResponse]] = {
            "/js": lambda r: _html("JS page", JS_PAGE),
            "/login": lambda r: _html("Sign in", LOGIN_PAGE),
            "/shop": lambda r: _html("Shop", SHOP_STEP1),
            "/items": lambda r: _html("Items", ITEMS_PAGE),
            "/ws-page": lambda r: _html("Websocket", WS_PAGE),
            "/attack": lambda r: _html("Attack", attack_page(self.internal_port)),
            "/file-link": lambda r: _html(
                "Local files",
                '<a href="file:///etc/passwd">passwords</a>'
                "<button onclick=\"location.href='file:///etc/passwd'\">Open file</button>",
            ),
            "/many": lambda r: _html("Index", many_links(int(r.query.get("n", "300")))),
            "/api/greeting": lambda r: web.json_response({"greeting": "Rendered by JavaScript"}),
            "/api/more": lambda r: web.json_response(["first extra", "second extra"]),
            "/files/report.csv": lambda r: web.Response(
                body=b"a,b\n1,2\n",
                headers={
                    "Content-Type": "text/csv",
                    "Content-Disposition": 'attachment; filename="report.csv"',
                },
            ),
        }
        for path, page in pages.items():
            app.router.add_get(path, _sync(page))
        app.router.add_post("/login", self._login)
        app.router.add_get("/account", self._account)
        app.router.add_get("/shop/step2", self._shop_step2)
        app.router.add_post("/shop/order", self._order)
        app.router.add_post("/items/remove", _sync(lambda r: _html("Removed", "<h1>Deleted</h1>")))
        app.router.add_post("/items/empty", _sync(lambda r: web.Response(text="ok")))
        app.router.add_get("/redirect-internal", self._redirect_internal)
        app.router.add_get("/redirect-private", self._redirect_private)
        app.router.add_get("/ws", self._echo)

    @web.middleware
    async def _record(self, request: web.Request, handler: object) -> web.StreamResponse:
        self.hits.append(f"{request.method} {request.path}")
        response: web.StreamResponse = await handler(request)  # type: ignore[operator]
        return response

    async def _login(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        if form.get("user") == "ana" and form.get("password") == "correct horse":
            response = web.HTTPSeeOther("/account")
            response.set_cookie("sid", "ana-session", httponly=True)
            raise response
        return _html("Sign in", "<p>Wrong user name or password.</p>" + LOGIN_PAGE)

    async def _account(self, request: web.Request) -> web.StreamResponse:
        if request.cookies.get("sid") != "ana-session":
            raise web.HTTPSeeOther("/login")
        return _html("Account", "<h1>Signed in as ana</h1><a href='/items'>Your items</a>")

    async def _shop_step2(self, request: web.Request) -> web.StreamResponse:
        size = escape(request.query.get("size", "?"))
        gift = "with gift wrap" if request.query.get("gift") == "yes" else "no gift wrap"
        return _html(
            "Checkout",
            f"<h1>Checkout</h1><p>Size {size}, {gift}.</p>"
            '<form method="post" action="/shop/order">'
            f'<input type="hidden" name="size" value="{size}">'
            '<label>Name <input name="name"></label> <button>Buy now</button></form>',
        )

    async def _order(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        order = {k: str(v) for k, v in form.items()}
        self.orders.append(order)
        return _html("Thanks", f"<h1>Order placed for {escape(order.get('name', ''))}</h1>")

    async def _redirect_internal(self, request: web.Request) -> web.StreamResponse:
        scheme = request.query.get("scheme", "http")
        raise web.HTTPFound(f"{scheme}://127.0.0.1:{self.internal_port}/secret")

    async def _redirect_private(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(f"http://{PRIVATE_HOST}/admin")

    async def _echo(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for message in ws:
            if message.type == WSMsgType.TEXT:
                await ws.send_str(message.data)
        return ws


class InternalServer(LocalServer):
    """Stands for an internal service; every request it receives is a guard failure."""

    def __init__(self) -> None:
        super().__init__()
        self.hits: list[str] = []

    def routes(self, app: web.Application) -> None:
        async def anything(request: web.Request) -> web.StreamResponse:
            self.hits.append(f"{request.method} {request.path}")
            return web.Response(text=json.dumps({"secret": "internal"}))

        app.router.add_route("*", "/{tail:.*}", anything)


def page_resolver(table: dict[str, str] | None = None) -> Resolver:
    """A resolver for AddressGuard: pages.test is the local page site, intranet.test is a
    private address; anything else is unknown (no DNS on the test machines)."""
    names = {PAGES_HOST: "127.0.0.1", PRIVATE_HOST: "10.0.0.7", "localhost": "127.0.0.1"}
    names.update(table or {})

    async def resolve(host: str, port: int) -> list[Address]:
        if host not in names:
            raise OSError(f"{host}: name not known")
        return [ipaddress.ip_address(names[host])]

    return resolve


def loopback_connector(refused: list[str]) -> Connector:
    """The guard proxy's connector for tests: connects on 127.0.0.0/8 only and records any
    other address it was asked for (the guard should have refused it before)."""

    async def connect(address: Address, port: int) -> Streams:
        if not address.is_loopback:
            refused.append(f"{address}:{port}")
            raise OSError("the tests never connect beyond the loopback interface")
        return await asyncio.open_connection(str(address), port)

    return connect


def _sync(
    page: Callable[[web.Request], web.StreamResponse],
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        return page(request)

    return handle
