"""A small Jupyter client for the tests: REST with the token, and one cell run over the kernel websocket."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
import uuid

from tornado.websocket import websocket_connect


def request(port: int, path: str, token: str | None, method: str = "GET", body: dict | None = None) -> tuple[int, dict]:
    """(HTTP status, JSON body) of one REST call on 127.0.0.1:`port`."""
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"token {token}"
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            text = response.read()
            return response.status, json.loads(text) if text else {}
    except urllib.error.HTTPError as exc:
        return exc.code, {}


def run_cell(port: int, token: str, code: str, timeout_s: float = 240.0) -> dict:
    """Start a kernel, execute `code` over the websocket, shut the kernel down; the execute_reply's content."""
    status, kernel = request(port, "/api/kernels", token, "POST", {"name": "python3"})
    assert status == 201, f"starting a kernel answered {status}"
    try:
        return asyncio.run(asyncio.wait_for(_execute(port, token, kernel["id"], code), timeout_s))
    finally:
        request(port, f"/api/kernels/{kernel['id']}", token, "DELETE")


async def _execute(port: int, token: str, kernel_id: str, code: str) -> dict:
    url = f"ws://127.0.0.1:{port}/api/kernels/{kernel_id}/channels?token={token}"
    conn = await websocket_connect(url)
    msg_id = uuid.uuid4().hex
    conn.write_message(json.dumps({
        "header": {"msg_id": msg_id, "username": "test", "session": uuid.uuid4().hex, "msg_type": "execute_request",
                   "version": "5.3", "date": ""},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                    "allow_stdin": False, "stop_on_error": True},
    }))
    while True:
        text = await conn.read_message()
        assert text is not None, "the kernel websocket closed before the execute_reply"
        msg = json.loads(text)
        if msg.get("msg_type") == "execute_reply" and msg["parent_header"].get("msg_id") == msg_id:
            conn.close()
            return msg["content"]
