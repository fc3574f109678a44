#!/usr/bin/env python3
"""bench/browser's measurements, run by bench/browser/run inside the test bed's namespace.

    measure.py --conclave BIN/conclave [--runs N] [--feeds F] [--seconds S] [--display :D]

1. Join to first frame, over N runs (after one warm-up round that is not counted), three ways in
   the same round: Chromium subscribing to Chromium (the baseline), Chromium subscribing to
   Conclave, Conclave subscribing to Chromium. The publisher sends video only (640x480 VP8), so
   the first frame is a video frame on both sides. Every subscriber publishes audio only (Janus
   wants a publisher to publish something, and Conclave always does): Chromium its fake
   microphone, Conclave its tone.
     Chromium: a fresh load of web/index.html (video=no) in a running headless browser; from the
       page's performance.now() when it starts joining (`timing.joinStarted`, before it connects
       to Janus) and when it sends its subscriber's join request (`timing.subscribeRequested`),
       to the `now` of the first requestVideoFrameCallback of the remote <video> (a frame
       decoded and presented).
     Conclave: `conclave join --video none --audio tone --no-window --speaker none --status json`;
       from the call's origin (`startedAtUnixMs`, taken before it connects to Janus) to the
       publisher's `firstFrameMs` in the status lines: the first complete video frame received
       (reassembled, in clear). Nothing in this mode decodes video: the figure has no decode in it.
   Both spans cover connecting, joining the room, subscribing, ICE, DTLS and the first keyframe.
2. Receive CPU per feed: F publishers (`conclave join`, pattern 640x480/30 VP8 and tone) in one
   room; in the same window of S seconds, receiving all F feeds at once:
     Chromium: headless (--disable-gpu) web/index.html with video=no pattern=no: decodes every
       video into its <video> and plays every audio track; CPU of all its processes, and of the
       renderer + GPU processes alone;
     Conclave `--no-window --speaker none`: receives, SRTP-decrypts and reassembles every frame,
       decodes nothing;
     Conclave `--window --speaker none` on a private Xvfb (DISPLAY given): also decodes every
       video and draws the call window's tiles;
     Conclave `record`: receives and writes every frame to its files (no decoding).
   CPU is utime+stime from /proc (Chromium: every process of its tree) over the window, per
   second of wall time and per feed; the ratio is Conclave's over Chromium's (all processes). As in
   part 1 every receiver also publishes audio only (Chromium its fake microphone, Conclave its tone):
   one Opus encoder each, in both figures.

3. Send CPU with simulcast: in a room of their own, each alone (one after the other, so that
   neither starves the other), over S seconds:
     Chromium: web/index.html?simulcast=1&audio=no&fps=30, its fake camera (640x480/30) sent as three VP8
       layers (640x480, 320x240, 160x120; the field trial WebRTC-LegacySimulcastLayerLimit/Disabled
       lets headless Chromium send three at this size); CPU of all its processes;
     Conclave: `join --video pattern --codec vp8 --simulcast 3 --audio none` (the same three
       layers of the pattern), and the same without --simulcast (one layer) for reference.
   Frames encoded per second per layer are printed beside (Chromium's outbound getStats per rid;
   Conclave's framesSent over its layers sent), so a side that drops frames is seen. The two
   encode different pictures (Chromium's fake camera, Conclave's pattern), both simple
   synthetic motion.

Chromium runs with the flags of Tests/ConclaveTestSupport/TestChromium.swift: headless, DevTools
over a pipe (no port), `--host-resolver-rules` leaving it localhost and Janus only, no background
networking, component updates, sync or domain reliability, no mDNS host candidates; the page uses
no STUN server. Everything started here is removed on exit (SIGKILL from the kernel too, should
this script die: PR_SET_PDEATHSIG, and this script is the subreaper of what they leave).
"""

import argparse
import ctypes
import json
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIBRARIES = ["/usr/share/javascript/janus-gateway/janus.js", "/usr/share/javascript/webrtc-adapter/adapter.js"]


class Failure(Exception):
    """One clear line for stderr."""


def die_with_parent():
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


CHILDREN = []


def start(argv, **options):
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=die_with_parent,
                             **options)
    CHILDREN.append(child)
    return child


def stop_all():
    for child in reversed(CHILDREN):
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except OSError:
            pass
        child.wait()
    while True:  # whatever Chromium's crash handler left to us, its subreaper
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break


def leave(process):
    """Asks `conclave join` to leave (SIGTERM), and kills it if it has not within 10 s."""
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def descendants(root):
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as stat:
                    children.setdefault(int(stat.read().rsplit(")", 1)[1].split()[1]), []).append(int(entry))
            except OSError:
                continue
    found, queue = [], [root]
    while queue:
        pid = queue.pop(0)
        found.append(pid)
        queue.extend(children.get(pid, []))
    return found


def ticks(pid):
    """utime + stime + cutime + cstime of pid (0 when it is gone)."""
    try:
        with open("/proc/%d/stat" % pid) as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return sum(int(fields[i]) for i in (11, 12, 13, 14))


def process_type(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as cmdline:
            # Chromium's zygote children rewrite their command line into one space-separated string.
            arguments = cmdline.read().replace(b"\0", b" ").split()
    except OSError:
        return "gone"
    for argument in arguments:
        if argument.startswith(b"--type="):
            return argument[len(b"--type="):].decode()
    return "browser"


class Chromium:
    """Headless Chromium driven over --remote-debugging-pipe, serving web/ on 127.0.0.1."""

    def __init__(self, folder, janus_host, name, extra_flags=()):
        self.folder = os.path.join(folder, name)
        site = os.path.join(self.folder, "site")
        shutil.copytree(os.path.join(ROOT, "web"), site)
        for library in LIBRARIES:
            if not os.path.exists(library):
                raise Failure("%s is missing (janus-demos)" % library)
            shutil.copy(os.path.realpath(library), site)
        server = start([sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", site],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        banner = server.stdout.readline().split()
        if "port" not in banner:
            raise Failure("the page's HTTP server did not start: %s" % banner)
        self.origin = "http://localhost:%s" % banner[banner.index("port") + 1]
        executable = "/usr/lib/chromium/chromium" if os.path.exists("/usr/lib/chromium/chromium") else "chromium"
        flags = [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--remote-debugging-pipe", "--user-data-dir=" + os.path.join(self.folder, "profile"),
            "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-domain-reliability",
            "--metrics-recording-only", "--disable-breakpad", "--disable-features=WebRtcHideLocalIpsWithMdns",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE %s" % janus_host,
            "--autoplay-policy=no-user-gesture-required", "--use-fake-ui-for-media-stream",
            "--use-fake-device-for-media-stream",
        ] + list(extra_flags) + ["about:blank"]
        to_browser_read, self.to_browser = os.pipe()
        self.from_browser, from_browser_write = os.pipe()

        def child_setup():
            die_with_parent()
            os.dup2(to_browser_read, 3)
            os.dup2(from_browser_write, 4)

        log = open(os.path.join(self.folder, "chromium.log"), "w")
        self.process = subprocess.Popen([executable] + flags, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                        start_new_session=True, pass_fds=(3, 4), preexec_fn=child_setup)
        CHILDREN.append(self.process)
        os.close(to_browser_read)
        os.close(from_browser_write)
        self.buffer, self.next_id, self.session, self.events = b"", 0, None, []
        deadline = time.monotonic() + 30
        target = next(t for t in self.call("Target.getTargets", deadline)["targetInfos"] if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", deadline, targetId=target["targetId"],
                                 flatten=True)["sessionId"]
        self.call("Page.enable", deadline, session=self.session)

    def receive(self, deadline):
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.from_browser], [], [], left)[0]:
                raise Failure("Chromium did not answer in time")
            chunk = os.read(self.from_browser, 65536)
            if not chunk:
                raise Failure("Chromium exited: see %s/chromium.log" % self.folder)
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, deadline, session=None, **params):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        while True:
            answer = self.receive(deadline)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise Failure("Chromium refused %s: %s" % (method, answer["error"]))
                return answer["result"]
            if "method" in answer:
                self.events.append(answer["method"])

    def open(self, parameters, timeout=30):
        """Loads the page with `parameters` and returns once its load event fired."""
        deadline = time.monotonic() + timeout
        self.events = []
        url = "%s/index.html?%s" % (self.origin, urllib.parse.urlencode(parameters))
        self.call("Page.navigate", deadline, session=self.session, url=url)
        while "Page.loadEventFired" not in self.events:
            message = self.receive(deadline)
            if "method" in message:
                self.events.append(message["method"])

    def evaluate(self, expression, timeout=30):
        """The JSON value of `expression` in the page (promises awaited)."""
        result = self.call("Runtime.evaluate", time.monotonic() + timeout + 5, session=self.session,
                           expression="Promise.resolve(%s).then(v => JSON.stringify(v))" % expression,
                           awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            detail = result["exceptionDetails"]
            text = detail.get("exception", {}).get("description") or detail.get("text")
            raise Failure("the page: %s" % text.splitlines()[0])
        return json.loads(result["result"]["value"])

    def wait(self, predicate, timeout):
        """The page's state once `predicate` (JavaScript over the state `s`) holds: the page's
        own waitFor, woken by its state changes."""
        return self.evaluate("conclavePeer.waitFor(s => %s, %d)" % (predicate, timeout * 1000), timeout)

    def cpu(self):
        """Clock ticks of every process of the browser, and of its renderer and GPU processes."""
        pids = descendants(self.process.pid)
        by_type = {}
        for pid in pids:
            kind = process_type(pid)
            by_type[kind] = by_type.get(kind, 0) + ticks(pid)
        return by_type


class Bench:
    def __init__(self, arguments, folder):
        self.arguments, self.folder = arguments, folder
        self.janus = os.environ["CONCLAVE_JANUS_URL"]
        self.janus_host = urllib.parse.urlparse(self.janus).hostname
        self.rooms = 0

    def conclave(self, *arguments, **options):
        return subprocess.run([self.arguments.conclave] + list(arguments), check=True, capture_output=True,
                              text=True, **options)

    def room(self):
        self.rooms += 1
        room = 770000 + os.getpid() % 1000 * 100 + self.rooms
        self.conclave("rooms", "create", "--room", str(room), "--codec", "vp8")
        return room

    def join(self, room, display, *media, name=None, environment=None):
        """Starts `conclave join` in `room` with JSON status into a file; returns (process, path)."""
        name = name or display.split(":")[0]
        path = os.path.join(self.folder, "%s-%d.status" % (name, room))
        out = open(path, "w")
        process = start([self.arguments.conclave, "join", "--room", str(room), "--call-id", "1", "--crypto", "none",
                         "--display", display, "--status", "json", "--duration", "3600",
                         "--data-dir", os.path.join(self.folder, "data-" + name)] + list(media),
                        stdout=out, stderr=open(path + ".log", "w"), env=environment)
        return process, path

    @staticmethod
    def status_until(path, process, condition, timeout):
        """The first status line in `path` that satisfies `condition`, read as it is written."""
        deadline = time.monotonic() + timeout
        with open(path) as lines:
            while time.monotonic() < deadline:
                line = lines.readline()
                if not line:
                    if process.poll() is not None:
                        raise Failure("conclave exited: %s" % open(path + ".log").read()[-400:])
                    time.sleep(0.05)  # the next status line is at most a second away
                    continue
                try:
                    status = json.loads(line)
                except ValueError:
                    continue
                if condition(status):
                    return status
        raise Failure("no status line met the condition within %d s (see %s)" % (timeout, path))

    # MARK: 1. Join to first frame

    def chromium_subscribes(self, browser, room, publisher):
        browser.open({"server": self.janus, "room": room, "display": "sub:Sub", "video": "no"})
        track = "Object.values(s.tracks).find(t => t.kind == 'video' && t.display == '%s')" % publisher
        state = browser.wait("(%s || {}).firstFrameAt != null" % track, 30)
        first = next(t for t in state["tracks"].values()
                     if t["kind"] == "video" and t["display"] == publisher)["firstFrameAt"]
        browser.evaluate("conclavePeer.leave()")
        timing = state["timing"]
        return first - timing["joinStarted"], first - timing["subscribeRequested"]

    def conclave_subscribes(self, room, publisher_id):
        process, path = self.join(room, "csub:Sub", "--video", "none", "--audio", "tone", "--no-window",
                                  "--speaker", "none", name="csub")
        try:
            status = self.status_until(
                path, process,
                lambda s: any(p["id"] == publisher_id and p.get("firstFrameMs") is not None
                              for p in s["participants"]), 30)
        finally:
            leave(process)
        return next(p for p in status["participants"] if p["id"] == publisher_id)["firstFrameMs"]

    def join_times(self):
        runs = self.arguments.runs
        publishing = Chromium(self.folder, self.janus_host, "publisher")
        subscribing = Chromium(self.folder, self.janus_host, "subscriber")
        chromium_room, conclave_room = self.room(), self.room()
        publishing.open({"server": self.janus, "room": chromium_room, "display": "cpub:ChromiumPub", "audio": "no"})
        publishing.wait("s.published && Object.values(s.outbound).some(c => c.framesEncoded >= 30)", 30)
        conclave_publisher, path = self.join(conclave_room, "kpub:ConclavePub", "--video", "pattern", "--codec",
                                             "vp8", "--width", "640", "--height", "480", "--audio", "none",
                                             "--no-window", "--speaker", "none")
        self.status_until(path, conclave_publisher, lambda s: s.get("framesSent", 0) >= 30, 30)
        figures = {"chromium<-chromium": [], "chromium<-chromium (request)": [], "chromium<-conclave": [],
                   "chromium<-conclave (request)": [], "conclave<-chromium": []}
        for run in range(runs + 1):  # the first round warms up and is not counted
            base, base_request = self.chromium_subscribes(subscribing, chromium_room, "cpub:ChromiumPub")
            other, other_request = self.chromium_subscribes(subscribing, conclave_room, "kpub:ConclavePub")
            ours = self.conclave_subscribes(chromium_room, "cpub")
            if run == 0:
                continue
            figures["chromium<-chromium"].append(base)
            figures["chromium<-chromium (request)"].append(base_request)
            figures["chromium<-conclave"].append(other)
            figures["chromium<-conclave (request)"].append(other_request)
            figures["conclave<-chromium"].append(ours)
            print("  run %d: chromium<-chromium %.0f ms, chromium<-conclave %.0f ms, conclave<-chromium %.0f ms"
                  % (run, base, other, ours), flush=True)
        leave(conclave_publisher)
        base = statistics.median(figures["chromium<-chromium"])
        print("\njoin to first frame, p50 over %d runs (ms; ratio to Chromium subscribing to Chromium):" % runs)
        print("  %-44s %8s %8s %8s %6s" % ("subscriber <- publisher", "p50", "min", "max", "ratio"))
        for name, values in figures.items():
            p50 = statistics.median(values)
            print("  %-44s %8.0f %8.0f %8.0f %6.2f" % (name, p50, min(values), max(values), p50 / base))
        print("  (request): from the subscriber's join request; the others from the start of joining.")

    # MARK: 2. Receive CPU per feed

    def receive_cpu(self):
        feeds, seconds = self.arguments.feeds, self.arguments.seconds
        room = self.room()
        for index in range(feeds):
            _, path = self.join(room, "p%d:Publisher%d" % (index, index), "--video", "pattern", "--codec", "vp8",
                                "--width", "640", "--height", "480", "--fps", "30", "--audio", "tone",
                                "--no-window", "--speaker", "none")
        ids = ["p%d" % index for index in range(feeds)]
        receivers = {
            "conclave --no-window": self.join(room, "r1:Plain", "--video", "none", "--audio", "tone", "--no-window",
                                              "--speaker", "none", name="plain"),
        }
        if self.arguments.display:
            receivers["conclave --window"] = self.join(
                room, "r2:Window", "--video", "none", "--audio", "tone", "--window", "--speaker", "none",
                name="window", environment=dict(os.environ, DISPLAY=self.arguments.display))
        recording = os.path.join(self.folder, "recording")
        recorder_status = os.path.join(self.folder, "recorder.status")
        recorder = start([self.arguments.conclave, "record", "--room", str(room), "--call-id", "1", "--crypto",
                          "none", "--out", recording, "--status", "json", "--duration", "3600", "--data-dir",
                          os.path.join(self.folder, "data-recorder")],
                         stdout=open(recorder_status, "w"), stderr=open(recorder_status + ".log", "w"))
        browser = Chromium(self.folder, self.janus_host, "receiver")
        browser.open({"server": self.janus, "room": room, "display": "chromium:Receiver", "video": "no",
                      "pattern": "no"})
        decoding = ("Object.keys(s.tracks).filter(m => s.tracks[m].kind == 'video'"
                    " && (s.inbound[m] || {}).framesDecoded >= 30).length >= %d" % feeds)
        browser.wait(decoding, 90)
        for name, (process, path) in receivers.items():
            self.status_until(path, process, lambda s: all(
                any(p["id"] == i and p["videoFrames"] >= 30 for p in s["participants"]) for i in ids), 90)

        def frames(path):
            with open(path) as lines:
                last = [line for line in lines if line.startswith("{")][-1]
            return sum(p["videoFrames"] for p in json.loads(last)["participants"] if p["id"] in ids)

        def decoded():
            stats = browser.evaluate("conclavePeer.stats()")
            return sum(c["framesDecoded"] for c in stats["inbound"].values() if c["kind"] == "video")

        hz = os.sysconf("SC_CLK_TCK")
        before_time = time.monotonic()
        before = {name: ticks(process.pid) for name, (process, _) in receivers.items()}
        before["conclave record"] = ticks(recorder.pid)
        before_chromium = browser.cpu()
        before_frames = {name: frames(path) for name, (_, path) in receivers.items()}
        before_decoded = decoded()
        # The measuring window: the figures are CPU time over wall time, so the window is a span,
        # not a synchronisation.
        time.sleep(seconds)
        after_chromium = browser.cpu()
        after = {name: ticks(process.pid) for name, (process, _) in receivers.items()}
        after["conclave record"] = ticks(recorder.pid)
        after_decoded = decoded()
        after_frames = {name: frames(path) for name, (_, path) in receivers.items()}
        wall = time.monotonic() - before_time

        def per_feed(delta):
            return delta / hz / wall / feeds

        chromium_types = {kind: after_chromium.get(kind, 0) - before_chromium.get(kind, 0)
                          for kind in after_chromium}
        chromium_all = per_feed(sum(chromium_types.values()))
        chromium_rg = per_feed(chromium_types.get("renderer", 0) + chromium_types.get("gpu-process", 0))
        print("\nreceive CPU per feed: %d feeds (VP8 640x480/30 + Opus), %.1f s window "
              "(CPU seconds per second per feed; ratio to Chromium, all processes):" % (feeds, wall))
        print("  %-40s %10s %8s %12s" % ("receiver", "cpu/feed", "ratio", "video fps"))
        print("  %-40s %10.4f %8.2f %12.1f" % ("chromium (all processes)", chromium_all, 1.0,
                                               (after_decoded - before_decoded) / wall))
        print("  %-40s %10.4f %8.2f %12s" % ("chromium (renderer + gpu-process)", chromium_rg,
                                             chromium_rg / chromium_all, ""))
        for name in after:
            value = per_feed(after[name] - before[name])
            fps = ("%12.1f" % ((after_frames[name] - before_frames[name]) / wall)) if name in after_frames else ""
            print("  %-40s %10.4f %8.2f %12s" % (name, value, value / chromium_all, fps))
        print("  chromium's processes: %s" % ", ".join(
            "%s %.3f" % (kind, value / hz / wall) for kind, value in sorted(chromium_types.items())))
        print("  video fps: frames decoded (chromium) or received (conclave) per second, all feeds together.")


    # MARK: 3. Send CPU with simulcast

    def send_cpu(self):
        seconds = self.arguments.seconds
        hz = os.sysconf("SC_CLK_TCK")
        rows = []

        browser = Chromium(self.folder, self.janus_host, "simulcast-sender",
                           ["--force-fieldtrials=WebRTC-LegacySimulcastLayerLimit/Disabled/",
                            # The fake camera's own rate is 20 fps; the same 30 as Conclave's.
                            "--use-fake-device-for-media-stream=fps=30"])
        browser.open({"server": self.janus, "room": self.room(), "display": "csend:ChromiumSender", "audio": "no",
                      "codec": "vp8", "width": "640", "height": "480", "fps": "30", "simulcast": "1", "pattern": "no"})
        browser.wait("s.published && Object.values(s.outbound).filter(c => c.kind == 'video'"
                     " && c.framesEncoded >= 60).length == 3", 60)

        def encoded():
            stats = browser.evaluate("conclavePeer.stats()")
            return {key: c["framesEncoded"] for key, c in stats["outbound"].items() if c["kind"] == "video"}

        before, before_frames, started = browser.cpu(), encoded(), time.monotonic()
        time.sleep(seconds)  # the measuring window, not a synchronisation
        after, after_frames = browser.cpu(), encoded()
        wall = time.monotonic() - started
        rows.append(("chromium, 3 layers (all processes)",
                     sum(after.values()) - sum(before.get(k, 0) for k in after),
                     "/".join("%.1f" % ((after_frames[k] - before_frames.get(k, 0)) / wall)
                              for k in sorted(after_frames)), wall))
        browser.evaluate("conclavePeer.leave()")
        os.killpg(browser.process.pid, signal.SIGKILL)  # its whole tree: nothing of it runs beside Conclave
        browser.process.wait()

        def latest(path):
            with open(path) as lines:
                return json.loads([line for line in lines if line.startswith("{")][-1])

        for name, layers in (("conclave --simulcast 3", 3), ("conclave, one layer", 1)):
            process, path = self.join(self.room(), "ksend:Sender", "--video", "pattern", "--codec", "vp8",
                                      "--width", "640", "--height", "480", "--fps", "30", "--audio", "none",
                                      "--simulcast", str(layers), "--no-window", "--speaker", "none",
                                      name="send%d" % layers)
            self.status_until(path, process, lambda s: s.get("framesSent", 0) >= 60 * layers, 60)
            first = latest(path)
            ticks_before, started = ticks(process.pid), time.monotonic()
            time.sleep(seconds)  # the measuring window, not a synchronisation
            ticks_after = ticks(process.pid)
            wall = time.monotonic() - started
            last = latest(path)
            sent = last.get("videoLayersSent", 1)
            fps = (last["framesSent"] - first["framesSent"]) / max(1, (last["elapsedMs"] - first["elapsedMs"]) / 1000)
            rows.append(("%s (%d sent)" % (name, sent), ticks_after - ticks_before,
                         "/".join(["%.1f" % (fps / sent)] * sent), wall))
            leave(process)

        base = rows[0][1] / hz / rows[0][3]
        print("\nsend CPU, VP8 640x480/30 (CPU seconds per second; ratio to Chromium sending three layers):")
        print("  %-44s %8s %8s   %s" % ("sender", "cpu", "ratio", "frames/s per layer"))
        for name, delta, fps, wall in rows:
            value = delta / hz / wall
            print("  %-44s %8.3f %8.2f   %s" % (name, value, value / base, fps))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conclave", required=True)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--feeds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--display", help="an X display for `conclave join --window`")
    parser.add_argument("--only", choices=["join", "cpu", "send"])
    arguments = parser.parse_args()
    ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: Chromium's crash handler leaves its tree
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    folder = tempfile.mkdtemp(prefix="conclave-browser-bench.")
    try:
        bench = Bench(arguments, folder)
        if arguments.only in (None, "join"):
            bench.join_times()
        if arguments.only in (None, "cpu"):
            bench.receive_cpu()
        if arguments.only in (None, "send"):
            bench.send_cpu()
    except Failure as failure:
        print("bench/browser: %s" % failure, file=sys.stderr)
        return 1
    finally:
        stop_all()
        if not os.environ.get("KEEP"):
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
