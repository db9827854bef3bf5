"""``/metrics``, ``/healthz`` and ``/readyz`` on the display server (docs/operations.md
"Monitoring"): reads like every page, so loopback needs nothing and any other address the
supervisor token (``Authorization: Bearer``: Prometheus' ``authorization`` scrape setting).

``/healthz`` answers while the daemon's event loop runs (a load balancer's liveness probe).
``/readyz`` is 200 when the table can do its work: its journal takes writes (no fault) and
every device is connected; otherwise 503 with the reasons, so a monitor shows why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from controller.metrics import TableMetrics
    from controller.ports import DisplayHost


def readiness(host: DisplayHost) -> list[str]:
    """Why the table is not ready (empty: it is)."""
    status = host.table.status()
    reasons = []
    if status.state == "fault":
        reasons.append("the journal cannot be written (table fault)")
    down = sorted(name for name, up in status.devices.items() if not up)
    if down:
        reasons.append(f"devices not connected: {', '.join(down)}")
    return reasons


def health_routes(app: web.Application, host_of: Any, metrics_of: Any) -> None:
    """Add the three routes; ``host_of(request)`` and ``metrics_of(request)`` find the daemon
    and its :class:`~controller.metrics.TableMetrics` (None: metrics not served)."""

    async def healthz(request: web.Request) -> web.StreamResponse:
        return web.json_response({"status": "ok"})

    async def readyz(request: web.Request) -> web.StreamResponse:
        reasons = readiness(host_of(request))
        body = {"status": "ready" if not reasons else "not_ready", "reasons": reasons}
        return web.json_response(body, status=200 if not reasons else 503)

    async def metrics(request: web.Request) -> web.StreamResponse:
        registry: TableMetrics | None = metrics_of(request)
        if registry is None:
            raise web.HTTPNotFound(text="metrics are not served by this daemon")
        from controller.metrics import CONTENT_TYPE

        body = await registry.exposition(host_of(request))
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
