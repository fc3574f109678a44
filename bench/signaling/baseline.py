#!/usr/bin/env python3
"""Baseline for bench/signaling: the same round trips with Debian's python3-stomp.

python3-stomp has no WebSocket transport, so this speaks STOMP 1.2 over TCP to the broker's
rabbitmq_stomp listener (127.0.0.1 only). Devices 3 (sender) and 4 (echo), the same exchanges and
routing as the Swift client. Arguments: STOMP_PORT SEQUENTIAL CONCURRENT IN_FLIGHT; standard input:
passcode of device-3, passcode of device-4, the message body (one line each). Prints:
  sequential n <n> p50_us <x> p99_us <y>
  concurrent n <n> seconds <s> rate <r>
"""
import sys
import threading
import time

import stomp

port, sequential, concurrent, in_flight = (int(a) for a in sys.argv[1:5])
passcode_a = sys.stdin.readline().strip()
passcode_b = sys.stdin.readline().strip()
body = sys.stdin.readline().rstrip("\n")


def connect(device, passcode, listener):
    connection = stomp.Connection12([("127.0.0.1", port)], vhost="ecall", heartbeats=(10000, 10000))
    connection.set_listener("", listener)
    connection.connect(f"device-{device}", passcode, wait=True)
    connection.subscribe(f"/exchange/ecall.signal.out/{device}", id=f"sub-{device}", ack="auto")
    return connection


class Echo(stomp.ConnectionListener):
    def __init__(self):
        self.connection = None

    def on_message(self, frame):
        self.connection.send("/exchange/ecall.signal.in/3", frame.body, content_type="application/json")


class Replies(stomp.ConnectionListener):
    def __init__(self):
        self.condition = threading.Condition()
        self.count = 0

    def on_message(self, frame):
        with self.condition:
            self.count += 1
            self.condition.notify_all()

    def wait_for(self, count, timeout=30):
        with self.condition:
            if not self.condition.wait_for(lambda: self.count >= count, timeout):
                raise TimeoutError(f"only {self.count} of {count} replies")


echo = Echo()
echo.connection = connect(4, passcode_b, echo)
replies = Replies()
sender = connect(3, passcode_a, replies)


def send():
    sender.send("/exchange/ecall.signal.in/4", body, content_type="application/json")


# Both subscriptions are live once a probe comes back.
send()
replies.wait_for(1)
samples = []
for index in range(sequential + 100):
    start = time.perf_counter()
    target = replies.count + 1
    send()
    replies.wait_for(target)
    if index >= 100:
        samples.append(time.perf_counter() - start)
samples.sort()
p50 = samples[len(samples) // 2] * 1e6
p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1e6
print(f"sequential n {sequential} p50_us {p50:.1f} p99_us {p99:.1f}", flush=True)

base = replies.count
start = time.perf_counter()
sent = 0
while sent < concurrent:
    # Keep at most in_flight outstanding: wait for replies before sending more.
    window = min(in_flight - (sent - (replies.count - base)), concurrent - sent)
    for _ in range(max(window, 0)):
        send()
        sent += 1
    with replies.condition:
        replies.condition.wait_for(lambda: sent - (replies.count - base) < in_flight, 30)
replies.wait_for(base + concurrent, 60)
seconds = time.perf_counter() - start
print(f"concurrent n {concurrent} seconds {seconds:.3f} rate {concurrent / seconds:.1f}", flush=True)
sender.disconnect()
echo.connection.disconnect()
