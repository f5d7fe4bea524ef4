"""The reverse proxy to a job's TensorBoard: `/jobs/JOB/tensorboard/...` of the dashboard, behind its token.

Requests under the prefix go, as they came (method, path, query, body), to the TensorBoard that
`TensorBoards` runs on a Unix socket, without the dashboard's cookie or `Authorization` header;
its answers come back streamed, as they were sent (compressed or not), less the hop-by-hop
headers. TensorBoard serves at the same prefix (`--path_prefix`), so its links and its own
requests stay under the proxy.
"""

from __future__ import annotations

from urllib.parse import quote

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse

from spotfit.ui.planning import read_body

MAX_BODY_BYTES = 1 << 20  # TensorBoard's own POSTs (its time series queries) are a few kilobytes
# Not forwarded: the connection's own headers, and the dashboard's credentials (TensorBoard needs none).
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "transfer-encoding", "upgrade", "host", "cookie", "authorization"})


async def forward(request: Request, sock: str, where: str, path: str) -> StreamingResponse:
    """TensorBoard's answer to `request`, sent to `where/path` on the Unix socket `sock`."""
    body = await read_body(request, MAX_BODY_BYTES) if request.method not in ("GET", "HEAD") else b""
    headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP]
    client = httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=sock), timeout=httpx.Timeout(60.0))
    upstream = client.build_request(request.method, f"http://tensorboard{where}/{quote(path)}",
                                    params=request.url.query, headers=headers, content=body)
    try:
        answer = await client.send(upstream, stream=True)
    except httpx.HTTPError:
        await client.aclose()
        raise
    kept = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_BY_HOP}

    async def close() -> None:
        await answer.aclose()
        await client.aclose()

    return StreamingResponse(answer.aiter_raw(), status_code=answer.status_code, headers=kept,
                             background=BackgroundTask(close))
