#!/usr/bin/env python3
"""bench/pubsub_redis_app.py - the yardstick of bench/pubsub.sh: fan-out the
way apps do it today, a WebSocket server that talks to Redis itself. Python
asyncio with the `websockets` package (Debian python3-websockets) and
redis-py's asyncio pub/sub (python3-redis): a WebSocket on /CHANNEL is sent
"worker N", then every message published on CHANNEL (websockets.broadcast to
the process's clients of the channel, from one Redis subscription per
channel per process); each text message it sends is PUBLISHed to CHANNEL.

usage: pubsub_redis_app.py PORT REDIS_URL [PROCESSES]
PROCESSES (2) processes share the port (SO_REUSEPORT), like pagid's workers.
Runs until SIGTERM."""

import asyncio
import os
import signal
import sys

import redis.asyncio as aioredis
import websockets


async def serve(port, url, num):
    r = aioredis.from_url(url)
    sub = r.pubsub()
    rooms = {}  # channel -> set of websockets

    relay_task = None

    async def relay():  # from the first subscription on
        async for m in sub.listen():
            if m["type"] == "message":
                ch = m["channel"].decode()
                websockets.broadcast(rooms.get(ch, ()), m["data"].decode())

    async def client(ws, path):
        nonlocal relay_task
        ch = path.lstrip("/").split("?")[0]
        if ch not in rooms:
            rooms[ch] = set()
            await sub.subscribe(ch)
            if relay_task is None:
                relay_task = asyncio.create_task(relay())
        rooms[ch].add(ws)
        try:
            await ws.send("worker %d" % num)
            async for msg in ws:
                if isinstance(msg, str):
                    await r.publish(ch, msg)
        except websockets.ConnectionClosed:
            pass
        finally:
            rooms[ch].discard(ws)

    stop = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set_result, None)
    async with websockets.serve(client, "127.0.0.1", port, reuse_port=True, compression=None,
                                max_queue=None):
        await stop
    if relay_task is not None:
        relay_task.cancel()


def main():
    port, url = int(sys.argv[1]), sys.argv[2]
    procs = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    children = []
    for num in range(1, procs):
        pid = os.fork()
        if pid == 0:
            asyncio.run(serve(port, url, num + 1))
            os._exit(0)
        children.append(pid)

    def forward(signo, frame):
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        sys.exit(0)

    signal.signal(signal.SIGTERM, forward)
    try:
        asyncio.run(serve(port, url, 1))
    finally:
        forward(None, None)


if __name__ == "__main__":
    main()
