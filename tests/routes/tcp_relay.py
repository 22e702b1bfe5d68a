"""A TCP relay in a process of its own: ``python -m tests.routes.tcp_relay LISTEN TARGET``.

It stands in front of a provider simulator so that a test can ``kill -9`` the provider's
address (the relay) while the simulator behind it keeps counting what reached it: the
proof that nothing was submitted twice is counted at the fakes, before and after the
kill. Bytes go both ways as they come; a side that closes closes the other.
"""

from __future__ import annotations

import asyncio
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def _serve(listen: int, target: int) -> None:
    async def relay(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(_pipe(client_r, up_w), _pipe(up_r, client_w))

    server = await asyncio.start_server(relay, "127.0.0.1", listen)
    print("relay ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(_serve(int(sys.argv[1]), int(sys.argv[2])))
