"""The web console (APP-5): server-rendered pages over the same store as the API.

Each module here serves one area and exposes ``routes()``; this package joins them
and serves the bundled static files (CSS and one small script, no CDN).
"""

from __future__ import annotations

from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles


def routes() -> list[BaseRoute]:
    from appliance.web.pages import (
        delivery,
        imports,
        inbox,
        keys,
        lists,
        optout,
        sending,
        sign_in,
        steering,
        webhooks,
    )
    from appliance.web.pages.render import STATIC_DIR

    return [
        *sign_in.routes(),
        *imports.routes(),
        *lists.routes(),
        *sending.routes(),
        *steering.routes(),
        *delivery.routes(),
        *inbox.routes(),
        *keys.routes(),
        *optout.routes(),
        *webhooks.routes(),
        Mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static"),
    ]
