#!/usr/bin/env python3
"""Baseline for bench/janus-signaling: the same Janus requests from a minimal blocking client.

A raw-socket WebSocket client with no framework (standard library only), so its round trip is
close to what Janus and the link cost by themselves. Prints one line per measurement:
  sequential <n> p50_us <x> p99_us <y>
  concurrent <n> in_flight <k> seconds <s> rate <r>
"""
import base64
import json
import os
import socket
import struct
import sys
import time


class Client:
    def __init__(self, host, port):
        self.sock = socket.create_connection((host, port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                "Sec-WebSocket-Protocol: janus-protocol\r\n\r\n"
            ).encode()
        )
        data = b""
        while b"\r\n\r\n" not in data:
            data += self.sock.recv(4096)
        self.buffer = data.split(b"\r\n\r\n", 1)[1]
        self.counter = 0

    def send(self, message):
        payload = json.dumps(message).encode()
        mask = os.urandom(4)
        header = bytes([0x81])
        if len(payload) < 126:
            header += bytes([0x80 | len(payload)])
        else:
            header += bytes([0x80 | 126]) + struct.pack(">H", len(payload))
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def _need(self, n):
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buffer += chunk

    def receive(self):
        self._need(2)
        length = self.buffer[1] & 0x7F
        offset = 2
        if length == 126:
            self._need(4)
            length = struct.unpack(">H", self.buffer[2:4])[0]
            offset = 4
        elif length == 127:
            self._need(10)
            length = struct.unpack(">Q", self.buffer[2:10])[0]
            offset = 10
        self._need(offset + length)
        payload = self.buffer[offset : offset + length]
        self.buffer = self.buffer[offset + length :]
        return json.loads(payload)

    def request(self, message, wait_event=False):
        self.counter += 1
        transaction = f"t{self.counter}"
        message["transaction"] = transaction
        self.send(message)
        while True:
            reply = self.receive()
            if reply.get("transaction") != transaction:
                continue
            if reply["janus"] == "ack" and wait_event:
                continue
            return reply


def main():
    host, port, room = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    sequential = int(sys.argv[4])
    total, in_flight = int(sys.argv[5]), int(sys.argv[6])
    client = Client(host, port)
    session = client.request({"janus": "create"})["data"]["id"]
    handle = client.request({"janus": "attach", "session_id": session, "plugin": "janus.plugin.videoroom"})["data"]["id"]
    exists = {"janus": "message", "session_id": session, "handle_id": handle, "body": {"request": "exists", "room": room}}

    for _ in range(100):
        client.request(dict(exists))
    samples = []
    for _ in range(sequential):
        start = time.perf_counter()
        client.request(dict(exists))
        samples.append(time.perf_counter() - start)
    samples.sort()
    p50 = samples[len(samples) // 2] * 1e6
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1e6
    print(f"sequential {sequential} p50_us {p50:.0f} p99_us {p99:.0f}", flush=True)

    # Pipelined: keep `in_flight` requests outstanding on the one connection.
    start = time.perf_counter()
    sent = received = 0
    while sent < min(in_flight, total):
        client.counter += 1
        client.send(dict(exists, transaction=f"p{client.counter}"))
        sent += 1
    while received < total:
        reply = client.receive()
        if reply.get("janus") != "success":
            continue
        received += 1
        if sent < total:
            client.counter += 1
            client.send(dict(exists, transaction=f"p{client.counter}"))
            sent += 1
    elapsed = time.perf_counter() - start
    print(f"concurrent {total} in_flight {in_flight} seconds {elapsed:.3f} rate {total / elapsed:.0f}", flush=True)
    client.request({"janus": "destroy", "session_id": session})


if __name__ == "__main__":
    main()
