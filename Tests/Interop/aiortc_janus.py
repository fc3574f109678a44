#!/usr/bin/env python3
"""aiortc as a third-party peer in a Janus VideoRoom, for Conclave's interop tests.

  aiortc_janus.py publish   --janus ws://H:P --room R --address A --duration S
      publishes aiortc's own test video (VP8) and audio (Opus); prints {"feed": id} once
      published, then {"done": true} when it leaves.
  aiortc_janus.py subscribe --janus ws://H:P --room R --feed F --address A --duration S
      subscribes to feed F, decodes what arrives, and prints
      {"video_frames": n, "audio_frames": n, "width": w, "height": h, "decode_errors": n}.

Network safety: ICE gathers only on --address (the test bed's veth address), and no STUN or
TURN server is used (aiortc would otherwise fall back to a public STUN server).
"""
import argparse
import asyncio
import base64
import json
import os
import struct
import sys
from urllib.parse import urlparse

import aioice.ice
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.contrib.media import MediaBlackhole
from aiortc.mediastreams import AudioStreamTrack, MediaStreamError, VideoStreamTrack


class JanusSocket:
    """A minimal asyncio WebSocket client speaking Janus's protocol (standard library only)."""

    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer
        self.counter = 0
        self.pending = {}
        self.events = asyncio.Queue()

    @classmethod
    async def connect(cls, url):
        parsed = urlparse(url)
        reader, writer = await asyncio.open_connection(parsed.hostname, parsed.port or 80)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            (
                f"GET {parsed.path or '/'} HTTP/1.1\r\nHost: {parsed.hostname}:{parsed.port}\r\n"
                "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                "Sec-WebSocket-Protocol: janus-protocol\r\n\r\n"
            ).encode()
        )
        await reader.readuntil(b"\r\n\r\n")
        socket = cls(reader, writer)
        asyncio.ensure_future(socket._read_loop())
        return socket

    async def _read_loop(self):
        text = b""  # a text message so far: Janus may fragment long ones
        try:
            while True:
                header = await self.reader.readexactly(2)
                length = header[1] & 0x7F
                if length == 126:
                    length = struct.unpack(">H", await self.reader.readexactly(2))[0]
                elif length == 127:
                    length = struct.unpack(">Q", await self.reader.readexactly(8))[0]
                payload = await self.reader.readexactly(length)
                opcode, final = header[0] & 0x0F, header[0] & 0x80
                if opcode == 1:
                    text = payload
                elif opcode == 0:
                    text += payload
                else:
                    continue  # control frames, which may come between fragments
                if not final:
                    continue
                message = json.loads(text)
                transaction = message.get("transaction")
                future = self.pending.get(transaction)
                if future and message["janus"] == "ack" and self.pending_kind.get(transaction) == "message":
                    continue
                if future:
                    del self.pending[transaction]
                    future.set_result(message)
                else:
                    await self.events.put(message)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    pending_kind = {}

    async def request(self, message):
        self.counter += 1
        transaction = f"a{self.counter}"
        message["transaction"] = transaction
        future = asyncio.get_event_loop().create_future()
        self.pending[transaction] = future
        self.pending_kind[transaction] = message["janus"]
        payload = json.dumps(message).encode()
        mask = os.urandom(4)
        if len(payload) < 126:
            header = bytes([0x81, 0x80 | len(payload)])
        elif len(payload) < 65536:
            header = bytes([0x81, 0x80 | 126]) + struct.pack(">H", len(payload))
        else:
            header = bytes([0x81, 0x80 | 127]) + struct.pack(">Q", len(payload))
        self.writer.write(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
        reply = await asyncio.wait_for(future, 10)
        if reply["janus"] == "error":
            raise RuntimeError(f"Janus error: {reply['error']}")
        data = reply.get("plugindata", {}).get("data", {})
        if "error_code" in data:
            raise RuntimeError(f"VideoRoom error {data['error_code']}: {data.get('error')}")
        return reply


async def keepalive(socket, session):
    while True:
        await asyncio.sleep(20)
        await socket.request({"janus": "keepalive", "session_id": session})


def restrict_ice(address):
    aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: [address]


def peer_connection():
    return RTCPeerConnection(RTCConfiguration(iceServers=[]))


async def open_handle(args):
    socket = await JanusSocket.connect(args.janus)
    session = (await socket.request({"janus": "create"}))["data"]["id"]
    asyncio.ensure_future(keepalive(socket, session))
    handle = (await socket.request({"janus": "attach", "session_id": session, "plugin": "janus.plugin.videoroom"}))[
        "data"
    ]["id"]
    return socket, session, handle


async def publish(args):
    socket, session, handle = await open_handle(args)

    async def message(body, jsep=None):
        request = {"janus": "message", "session_id": session, "handle_id": handle, "body": body}
        if jsep:
            request["jsep"] = jsep
        return await socket.request(request)

    joined = await message({"request": "join", "ptype": "publisher", "room": args.room, "display": "9:aiortc"})
    feed = joined["plugindata"]["data"]["id"]
    pc = peer_connection()
    pc.addTrack(AudioStreamTrack())
    pc.addTrack(VideoStreamTrack())
    await pc.setLocalDescription(await pc.createOffer())
    reply = await message(
        {"request": "publish", "audiocodec": "opus", "videocodec": "vp8"},
        {"type": "offer", "sdp": pc.localDescription.sdp},
    )
    answer = reply["jsep"]
    await pc.setRemoteDescription(RTCSessionDescription(sdp=answer["sdp"], type=answer["type"]))
    print(json.dumps({"feed": feed}), flush=True)
    await asyncio.sleep(args.duration)
    await message({"request": "leave"})
    await pc.close()
    print(json.dumps({"done": True}), flush=True)


async def subscribe(args):
    socket, session, handle = await open_handle(args)
    reply = await socket.request(
        {
            "janus": "message",
            "session_id": session,
            "handle_id": handle,
            "body": {"request": "join", "ptype": "subscriber", "room": args.room, "streams": [{"feed": args.feed}]},
        }
    )
    offer = reply["jsep"]
    pc = peer_connection()
    counts = {"video_frames": 0, "audio_frames": 0, "width": 0, "height": 0, "decode_errors": 0}

    async def consume(track):
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            except Exception:
                counts["decode_errors"] += 1
                continue
            if track.kind == "video":
                counts["video_frames"] += 1
                counts["width"], counts["height"] = frame.width, frame.height
            else:
                counts["audio_frames"] += 1

    @pc.on("track")
    def on_track(track):
        asyncio.ensure_future(consume(track))

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
    print(json.dumps({"subscribed": True}), flush=True)
    await asyncio.sleep(args.duration)
    await pc.close()
    print(json.dumps(counts), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["publish", "subscribe"])
    parser.add_argument("--janus", required=True)
    parser.add_argument("--room", type=int, required=True)
    parser.add_argument("--feed", type=int)
    parser.add_argument("--address", required=True)
    parser.add_argument("--duration", type=float, default=5)
    args = parser.parse_args()
    restrict_ice(args.address)
    runner = publish if args.mode == "publish" else subscribe
    asyncio.run(asyncio.wait_for(runner(args), args.duration + 30))
    return 0


if __name__ == "__main__":
    sys.exit(main())
