#!/usr/bin/env python3
"""aiortc's MediaRecorder recording N feeds of a Janus VideoRoom: the baseline of bench/recorder.

  aiortc_record.py --janus ws://H:P --room R --feeds 1,2,3 --address A --out DIR --duration S

One subscriber PeerConnection and one MediaRecorder (WebM) per feed, as aiortc's examples do.
Prints {"files": [...]} when done.

Network safety: ICE gathers only on --address (the test bed's address) and no STUN or TURN
server is configured (aiortc would otherwise fall back to a public STUN server).
"""
import argparse
import asyncio
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Tests", "Interop"))

from aiortc import RTCSessionDescription  # noqa: E402
from aiortc.contrib.media import MediaRecorder  # noqa: E402

from aiortc_janus import JanusSocket, keepalive, peer_connection, restrict_ice  # noqa: E402


async def record_feed(socket, session, room, feed, path):
    handle = (await socket.request({"janus": "attach", "session_id": session, "plugin": "janus.plugin.videoroom"}))[
        "data"
    ]["id"]
    reply = await socket.request(
        {
            "janus": "message",
            "session_id": session,
            "handle_id": handle,
            "body": {"request": "join", "ptype": "subscriber", "room": room, "streams": [{"feed": feed}]},
        }
    )
    offer = reply["jsep"]
    pc = peer_connection()
    recorder = MediaRecorder(path)

    @pc.on("track")
    def on_track(track):
        recorder.addTrack(track)

    await pc.setRemoteDescription(RTCSessionDescription(sdp=offer["sdp"], type=offer["type"]))
    await pc.setLocalDescription(await pc.createAnswer())
    await socket.request(
        {
            "janus": "message",
            "session_id": session,
            "handle_id": handle,
            "body": {"request": "start"},
            "jsep": {"type": "answer", "sdp": pc.localDescription.sdp},
        }
    )
    await recorder.start()
    return pc, recorder


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--janus", required=True)
    parser.add_argument("--room", type=int, required=True)
    parser.add_argument("--feeds", required=True)
    parser.add_argument("--address", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--duration", type=float, required=True)
    args = parser.parse_args()
    restrict_ice(args.address)
    os.makedirs(args.out, exist_ok=True)
    socket = await JanusSocket.connect(args.janus)
    session = (await socket.request({"janus": "create"}))["data"]["id"]
    asyncio.ensure_future(keepalive(socket, session))
    started = asyncio.get_event_loop().time()
    feeds = [int(feed) for feed in args.feeds.split(",") if feed]
    sessions = []
    files = []
    for feed in feeds:
        path = os.path.join(args.out, f"feed-{feed}.webm")
        sessions.append(await record_feed(socket, session, args.room, feed, path))
        files.append(path)
    remaining = args.duration - (asyncio.get_event_loop().time() - started)
    await asyncio.sleep(max(0, remaining))
    for pc, recorder in sessions:
        await recorder.stop()
        await pc.close()
    print(json.dumps({"files": files}), flush=True)


asyncio.run(main())
