#!/usr/bin/env python3
"""A deliberately misbehaving Janus WebSocket endpoint, for the client's error-path tests.

Listens on 127.0.0.1 (port chosen by the kernel), prints the port on stdout, serves one client,
and exits after at most --lifetime seconds. Modes:

  garbage  answers every request with a line of non-JSON first, then a valid success reply
  close    closes the TCP connection as soon as the first request arrives
  silent   accepts requests and never answers
  reject   answers the WebSocket upgrade with HTTP 404
  normal   answers every request with a success reply (used with --tls)

With --tls CERT KEY the endpoint speaks wss:// with that certificate.
Standard library only.
"""
import argparse
import base64
import hashlib
import json
import socket
import ssl
import struct
import sys
import time

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def read_http_request(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            return None
        data += chunk
    return data.decode("latin-1")


def handshake(conn, mode):
    request = read_http_request(conn)
    if request is None:
        return False
    if mode == "reject":
        conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        return False
    key = ""
    for line in request.split("\r\n"):
        if line.lower().startswith("sec-websocket-key:"):
            key = line.split(":", 1)[1].strip()
    accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
    conn.sendall(
        (
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: janus-protocol\r\n\r\n"
        ).encode()
    )
    return True


def recv_exact(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def read_frame(conn):
    b0, b1 = recv_exact(conn, 2)
    opcode = b0 & 0x0F
    length = b1 & 0x7F
    if length == 126:
        length = struct.unpack(">H", recv_exact(conn, 2))[0]
    elif length == 127:
        length = struct.unpack(">Q", recv_exact(conn, 8))[0]
    mask = recv_exact(conn, 4) if b1 & 0x80 else b"\0\0\0\0"
    payload = bytes(b ^ mask[i % 4] for i, b in enumerate(recv_exact(conn, length)))
    return opcode, payload


def send_text(conn, text):
    payload = text.encode()
    header = bytes([0x81])
    if len(payload) < 126:
        header += bytes([len(payload)])
    elif len(payload) < 65536:
        header += bytes([126]) + struct.pack(">H", len(payload))
    else:
        header += bytes([127]) + struct.pack(">Q", len(payload))
    conn.sendall(header + payload)


def reply_to(request):
    reply = {"janus": "success", "transaction": request.get("transaction", "")}
    if request.get("janus") in ("create", "attach"):
        reply["data"] = {"id": 4242}
    if "session_id" in request:
        reply["session_id"] = request["session_id"]
    return json.dumps(reply)


def serve(conn, mode):
    if not handshake(conn, mode):
        return
    while True:
        opcode, payload = read_frame(conn)
        if opcode == 0x8:  # close
            return
        if opcode != 0x1:
            continue
        request = json.loads(payload)
        if mode == "close":
            conn.shutdown(socket.SHUT_RDWR)
            return
        if mode == "silent":
            continue
        if mode == "garbage":
            send_text(conn, "this is not JSON {")
            send_text(conn, '{"janus": 12}')
        send_text(conn, reply_to(request))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["garbage", "close", "silent", "reject", "normal"])
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    parser.add_argument("--lifetime", type=float, default=20)
    args = parser.parse_args()

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(args.lifetime)
    print(listener.getsockname()[1], flush=True)
    context = None
    if args.tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls[0], args.tls[1])
    deadline = time.monotonic() + args.lifetime
    while time.monotonic() < deadline:
        try:
            conn, _ = listener.accept()
        except (socket.timeout, OSError):
            break
        conn.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            if context is not None:
                conn = context.wrap_socket(conn, server_side=True)
            serve(conn, args.mode)
        except (ConnectionError, ssl.SSLError, OSError, ValueError):
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
