#!/usr/bin/env python3
"""aiortc's MediaRecorder recording N feeds of a Janus VideoRoom: the baseline of bench/recorder.

  aiortc_record.py --janus ws://H:P --room R --feeds 1,2,3 --address A --out DIR --duration S

One subscriber PeerConnection and one MediaRecorder (WebM: VP8 + Opus, so it decodes and
re-encodes both) per feed, as aiortc's examples do; each recorder starts once its feed's first
video frame is decoded (see record_feed). Prints {"files": [...]} when done, and to standard
error any track whose recording failed.

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


STARTED = 0.0
STOPPING = False


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
    tracks = []

    @pc.on("connectionstatechange")
    def on_state():
        # A connection that fails or closes mid-recording ends that feed's recording: say so.
        if pc.connectionState in ("failed", "closed") and not STOPPING:
            elapsed = asyncio.get_event_loop().time() - STARTED
            message = f"feed {feed}: connection {pc.connectionState} {elapsed:.1f} s after the start"
            print(message, file=sys.stderr, flush=True)

    @pc.on("track")
    def on_track(track):
        tracks.append(track)
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
    # MediaRecorder writes the file header (which opens every encoder) on the first packet of any
    # track, and sets the video size from the first video frame it sees. Audio comes first, so
    # started as is, it fails the video track ("Cannot change width after codec is open") and the
    # file holds audio only. So wait for the first decoded video frame, give its size to the video
    # stream and mark that track as started (so the recorder does not set the size again) before
    # starting. That one frame is not recorded.
    for track in tracks:
        if track.kind == "video":
            first = await asyncio.wait_for(track.recv(), 15)
            context = recorder._MediaRecorder__tracks[track]
            context.stream.width, context.stream.height = first.width, first.height
            context.started = True
    await recorder.start()
    return pc, recorder


async def report_janus_events(socket):
    """Prints Janus's hangups and media-loss events: why a feed's recording ended early."""
    while True:
        event = await socket.events.get()
        if event.get("janus") in ("hangup", "detached", "slowlink", "media") and not STOPPING:
            elapsed = asyncio.get_event_loop().time() - STARTED
            details = {key: event[key] for key in ("reason", "type", "receiving", "uplink", "lost") if key in event}
            print(f"Janus {event['janus']} {details} {elapsed:.1f} s after the start", file=sys.stderr, flush=True)


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
    asyncio.ensure_future(report_janus_events(socket))
    global STARTED, STOPPING
    started = STARTED = asyncio.get_event_loop().time()
    feeds = [int(feed) for feed in args.feeds.split(",") if feed]
    files = [os.path.join(args.out, f"feed-{feed}.webm") for feed in feeds]
    # Concurrently: each waits for its feed's first video frame (a keyframe every 2 s).
    sessions = await asyncio.gather(
        *(record_feed(socket, session, args.room, feed, path) for feed, path in zip(feeds, files))
    )
    remaining = args.duration - (asyncio.get_event_loop().time() - started)
    await asyncio.sleep(max(0, remaining))
    STOPPING = True
    for pc, recorder in sessions:
        # A recording task that died (a decode or encode error) would otherwise vanish silently.
        for track, context in recorder._MediaRecorder__tracks.items():
            if context.task is not None and context.task.done() and context.task.exception() is not None:
                print(f"{track.kind} recording failed: {context.task.exception()!r}", file=sys.stderr, flush=True)
        await recorder.stop()
        await pc.close()
    print(json.dumps({"files": files}), flush=True)


asyncio.run(main())
