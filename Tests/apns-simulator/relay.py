"""What the push simulators share: reading a request's body, hypercorn's HTTP/2-over-TLS settings,
and a TCP relay in front of a simulator that can cut every client connection at once (a dropped
network path or a dead peer, with no answer and no GOAWAY)."""
import asyncio
import socket

from hypercorn.asyncio import serve
from hypercorn.config import Config


async def read_body(receive):
    """The whole body of an ASGI request."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


def h2_config(certfile, keyfile):
    """hypercorn serving HTTP/2 over TLS with the test certificate, its connections kept open."""
    config = Config()
    config.certfile = certfile
    config.keyfile = keyfile
    config.alpn_protocols = ["h2"]
    config.keep_alive_max_requests = 10**9
    config.loglevel = "WARNING"
    return config


class DroppingRelay:
    """Relays TCP to the real server and can cut every client connection at once."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.connections = set()

    async def handle(self, client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            client_writer.transport.abort()
            return
        pair = (client_writer, server_writer)
        self.connections.add(pair)

        async def pipe(reader, writer):
            try:
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
                writer.close()
            except (ConnectionError, OSError):
                writer.transport.abort()

        try:
            await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer))
        finally:
            self.connections.discard(pair)

    def drop(self):
        for client, server in list(self.connections):
            client.transport.abort()
            server.transport.abort()
        self.connections.clear()


async def serve_on(port, droppable, config, make_app):
    """Serves the app `make_app(relay)` builds on `port` with hypercorn's `config`: directly, or
    with `droppable` behind a DroppingRelay (the app gets it, to cut connections; else None)."""
    if not droppable:
        config.bind = [f"127.0.0.1:{port}"]
        await serve(make_app(None), config)
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        inner = probe.getsockname()[1]
    relay = DroppingRelay(inner)
    config.bind = [f"127.0.0.1:{inner}"]
    server = asyncio.ensure_future(serve(make_app(relay), config))
    listener = await asyncio.start_server(relay.handle, "127.0.0.1", port)
    async with listener:
        await server
