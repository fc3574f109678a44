// Conclave's browser peer: one Janus VideoRoom publisher and one multistream subscriber to every
// other publisher in the room, with janus.js (Debian's janus-demos).
//
// URL parameters (all optional):
//   server   Janus WebSocket URL                       (default ws://127.0.0.1:8188)
//   room     VideoRoom room id                          (default 1234)
//   display  display name, USERID:NAME as Conclave uses (default browser:Browser)
//   publish  yes or no: send our camera and microphone  (default yes)
//   codec    video codec to send: vp8 or h264           (default vp8; audio is always Opus)
//   audio    yes or no: send the microphone             (default yes)
//   video    yes or no: send the camera                 (default yes)
//   width, height, fps  the camera's capture size      (default 640x480, the camera's own rate)
//   pattern  yes or no: read the test pattern's frame numbers from every remote video frame
//            (default yes; no leaves the page doing what a plain call page does, for CPU figures)
//   crypto   none, ecall or sframe: end-to-end encryption (default none; e2ee-page.js, key via
//            conclave.setCallKey, never the URL)
//   simulcast  1: send the video as three simulcast layers (rids h, m, l at full, half and
//              quarter size; janus.js's encodings), for subscribers that choose a layer
//
// The camera and microphone are whatever getUserMedia gives: a real device, Chromium's fake
// device (--use-fake-device-for-media-stream), or a file (--use-file-for-fake-video-capture=F.y4m,
// --use-file-for-fake-audio-capture=F.wav): the page cannot tell, and does not need to.
//
// Everything a driver needs is in `window.conclavePeer`:
//   state                    joined, feeds, remote tracks, last error (plain data, JSON-able)
//   waitFor(predicate, ms)   a promise of the state once predicate(state) holds, rejected at ms
//   stats()                  a promise of per-track counters from getStats (inbound and outbound)
//   selectLayer(mid, n)      ask Janus for simulcast substream n (0 lowest) of the subscribed
//                            video `mid`; Janus's answer is in state.substreams[mid]
//   leave()                  hang up and destroy the Janus session
// Conclave's test pattern carries its frame number in a code strip at the top of each picture
// (Sources/ConclaveMedia/Pattern.swift); the page reads it from every video frame it shows and
// keeps the numbers in state.tracks[mid].pattern.
"use strict";

(function () {
  const params = new URLSearchParams(location.search);
  const yes = (name, fallback) => (params.get(name) || fallback) !== "no";
  const config = {
    server: params.get("server") || "ws://127.0.0.1:8188",
    room: Number(params.get("room") || 1234),
    display: params.get("display") || "browser:Browser",
    publish: yes("publish", "yes"),
    codec: (params.get("codec") || "vp8").toLowerCase(),
    audio: yes("audio", "yes"),
    video: yes("video", "yes"),
    width: Number(params.get("width") || 640),
    height: Number(params.get("height") || 480),
    // No frame rate asked for unless given: Chromium's track adapter then drops every picture
    // that comes early after a late one, which a busy machine makes common.
    fps: params.get("fps") ? Number(params.get("fps")) : null,
    pattern: yes("pattern", "yes"),
    simulcast: params.get("simulcast") === "1",
  };

  // Plain data only, so that a driver can read it as JSON at any time.
  const state = {
    config,
    phase: "starting",
    joined: false,
    publisherID: null,
    published: false,
    feeds: {}, // publisher id -> display
    tracks: {}, // subscriber mid -> { kind, feed, display, live, pattern }
    inbound: {}, // subscriber mid -> counters from getStats
    substreams: {}, // subscriber mid -> the simulcast substream Janus forwards, as it last said
    outbound: {}, // publisher mid -> counters from getStats
    errors: [],
    lastError: null,
    // performance.now() when the page began to join (before connecting to Janus) and when it sent
    // its subscriber's join request; each track's first presented frame is in its firstFrameAt.
    timing: { joinStarted: null, subscribeRequested: null },
    e2ee: window.conclaveE2EE.state, // format, key epoch, frame counters per direction and kind
  };

  // Waiters are woken on every state change instead of polling it.
  let waiters = [];
  function changed() {
    const ready = waiters.filter((w) => safely(w.predicate));
    waiters = waiters.filter((w) => !ready.includes(w));
    for (const w of ready) {
      clearTimeout(w.timer);
      w.resolve(state);
    }
    render();
  }
  function safely(predicate) {
    try {
      return Boolean(predicate(state));
    } catch (e) {
      return false;
    }
  }
  function waitFor(predicate, ms) {
    if (safely(predicate)) return Promise.resolve(state);
    return new Promise((resolve, reject) => {
      const waiter = { predicate, resolve };
      waiter.timer = setTimeout(() => {
        waiters = waiters.filter((w) => w !== waiter);
        reject(new Error(`not within ${ms} ms: ${predicate}; last error: ${state.lastError}`));
      }, ms);
      waiters.push(waiter);
    });
  }

  function fail(where, error) {
    const text = `${where}: ${error && error.message ? error.message : JSON.stringify(error)}`;
    state.errors.push(text);
    state.lastError = text;
    changed();
  }

  function render() {
    const element = document.getElementById("status");
    if (!element) return;
    const lines = [`${state.phase}, room ${config.room} as ${config.display}`];
    for (const [mid, track] of Object.entries(state.tracks)) {
      const counters = state.inbound[mid] || {};
      const decoded = track.kind === "video" ? counters.framesDecoded : counters.packetsReceived;
      lines.push(`${track.display} ${track.kind} (mid ${mid}): ${decoded || 0}`);
    }
    if (state.lastError) lines.push(`error: ${state.lastError}`);
    element.textContent = lines.join("\n");
  }

  // MARK: The test pattern's code strip (the same reading as PatternReader in Swift)

  const columns = 16;
  const rows = 2;
  function crc8(number) {
    let crc = 0xa5;
    for (const shift of [16, 8, 0]) {
      crc ^= (number >>> shift) & 0xff;
      for (let i = 0; i < 8; i++) crc = crc & 0x80 ? ((crc << 1) ^ 0x07) & 0xff : (crc << 1) & 0xff;
    }
    return crc;
  }
  // The frame number in the picture's code strip, or null when the CRC does not check out.
  function readPattern(pixels, width, cell) {
    const margin = Math.floor(cell / 4);
    const span = cell - 2 * margin;
    let word = 0;
    for (let bit = 0; bit < rows * columns; bit++) {
      const left = (bit % columns) * cell + margin;
      const top = Math.floor(bit / columns) * cell + margin;
      let sum = 0;
      for (let y = top; y < top + span; y++) {
        for (let x = left; x < left + span; x++) {
          const i = (y * width + x) * 4;
          // BT.601 limited-range luma, as the YUV pictures the strip was drawn in.
          sum += 16 + (65.738 * pixels[i] + 129.057 * pixels[i + 1] + 25.064 * pixels[i + 2]) / 256;
        }
      }
      word = ((word << 1) | (sum / Math.max(1, span * span) >= 128 ? 1 : 0)) >>> 0;
    }
    const number = word >>> 8;
    return (word & 0xff) === crc8(number) ? number : null;
  }
  // Reads the strip of every frame the <video> presents into track.pattern.
  function watchPattern(video, track) {
    const canvas = document.createElement("canvas");
    const context = canvas.getContext("2d", { willReadFrequently: true });
    let lastMediaTime = null;
    const onFrame = (now, metadata) => {
      if (!track.live) return;
      if (track.firstFrameAt === null) track.firstFrameAt = now;
      // The compositor may present one frame twice (a repaint); read each frame once.
      if (metadata.mediaTime === lastMediaTime) {
        video.requestVideoFrameCallback(onFrame);
        return;
      }
      lastMediaTime = metadata.mediaTime;
      const width = video.videoWidth;
      const cell = Math.floor(width / columns) & ~1;
      if (cell >= 4) {
        const height = cell * rows;
        canvas.width = width;
        canvas.height = height;
        context.drawImage(video, 0, 0, width, height, 0, 0, width, height);
        const number = readPattern(context.getImageData(0, 0, width, height).data, width, cell);
        if (number === null) {
          track.pattern.unreadable += 1;
        } else {
          track.pattern.numbers.push(number);
          if (track.pattern.numbers.length > 900) track.pattern.numbers.shift();
        }
        track.pattern.read += 1;
        changed();
      }
      video.requestVideoFrameCallback(onFrame);
    };
    video.requestVideoFrameCallback(onFrame);
  }

  // MARK: Janus

  let janus = null;
  let publisher = null;
  let subscriber = null;
  // Subscription requests go one after the other: the first joins, later ones add streams.
  let subscriptions = Promise.resolve();

  function start() {
    state.phase = "connecting";
    state.timing.joinStarted = performance.now();
    changed();
    janus = new Janus({
      server: config.server,
      iceServers: [], // never a STUN server: the peer stays on the network it is given
      success: attachPublisher,
      error: (error) => fail("janus", error),
      destroyed: () => {
        state.phase = "left";
        changed();
      },
    });
  }

  function attachPublisher() {
    janus.attach({
      plugin: "janus.plugin.videoroom",
      success: (handle) => {
        publisher = handle;
        handle.send({ message: { request: "join", ptype: "publisher", room: config.room, display: config.display } });
      },
      error: (error) => fail("attach publisher", error),
      onmessage: onPublisherMessage,
      // Called once the track's sender exists and before the offer: a sender's transform must be
      // in place before the local description, or Chromium sends its frames untransformed.
      onlocaltrack: (track, on) =>
        on && conclaveE2EE.protectSenders(publisher.webrtcStuff.pc, { codec: config.codec, senderID: state.publisherID }),
      onremotetrack: () => {},
      webrtcState: (up) => {
        state.published = up;
        changed();
      },
    });
  }

  function onPublisherMessage(message, jsep) {
    const event = message.videoroom;
    if (message.error) fail("videoroom", message.error);
    if (event === "joined") {
      state.joined = true;
      state.publisherID = message.id;
      state.phase = "joined";
      if (config.publish) publish();
    }
    if (message.publishers) subscribe(message.publishers);
    const gone = message.unpublished || message.leaving;
    if (gone && gone !== "ok") delete state.feeds[gone];
    if (jsep) publisher.handleRemoteJsep({ jsep });
    changed();
  }

  function publish() {
    const tracks = [];
    if (config.audio) tracks.push({ type: "audio", capture: true, recv: false });
    if (config.video) {
      const capture = { width: { ideal: config.width }, height: { ideal: config.height } };
      if (config.fps) capture.frameRate = { ideal: config.fps };
      // janus.js puts the codec first with setCodecPreferences.
      tracks.push({ type: "video", capture, recv: false, codec: config.codec, simulcast: config.simulcast });
    }
    publisher.createOffer({
      tracks,
      success: (offer) => {
        const request = { request: "configure", audio: config.audio, video: config.video };
        publisher.send({ message: request, jsep: offer });
      },
      error: (error) => fail("publish", error),
    });
  }

  function subscribe(publishers) {
    const fresh = publishers.filter((p) => p.id !== state.publisherID && !(p.id in state.feeds));
    if (fresh.length === 0) return;
    for (const p of fresh) state.feeds[p.id] = p.display || String(p.id);
    const streams = fresh.map((p) => ({ feed: p.id }));
    subscriptions = subscriptions.then(() =>
      subscriber
        ? subscriber.send({ message: { request: "subscribe", streams } })
        : new Promise((resolve) => attachSubscriber(streams, resolve)),
    );
  }

  function attachSubscriber(streams, attached) {
    janus.attach({
      plugin: "janus.plugin.videoroom",
      success: (handle) => {
        subscriber = handle;
        const request = { request: "join", ptype: "subscriber", room: config.room, streams };
        state.timing.subscribeRequested = performance.now();
        handle.send({ message: request, success: attached, error: attached });
      },
      error: (error) => {
        fail("attach subscriber", error);
        attached();
      },
      onmessage: onSubscriberMessage,
      onlocaltrack: () => {},
      onremotetrack: onRemoteTrack,
    });
  }

  // mid -> { feed, display } from Janus's "attached"/"updated" events.
  const streamsByMid = {};

  function onSubscriberMessage(message, jsep) {
    if (message.error) fail("subscriber", message.error);
    if (message.mid !== undefined && message.substream !== undefined) {
      state.substreams[message.mid] = message.substream;
    }
    for (const stream of message.streams || []) {
      if (stream.mid !== undefined) {
        streamsByMid[stream.mid] = { feed: stream.feed_id, display: stream.feed_display };
      }
    }
    if (jsep) {
      subscriber.createAnswer({
        jsep,
        tracks: [{ type: "data" }],
        success: (answer) => subscriber.send({ message: { request: "start", room: config.room }, jsep: answer }),
        error: (error) => fail("answer", error),
      });
    }
    changed();
  }

  function onRemoteTrack(track, mid, on) {
    if (on) conclaveE2EE.protectReceivers(subscriber.webrtcStuff.pc, config.codec);
    const known = state.tracks[mid];
    if (!on) {
      if (known) known.live = false;
      changed();
      return;
    }
    if (known && known.live && known.id === track.id) return;
    const origin = streamsByMid[mid] || {};
    const entry = {
      id: track.id,
      kind: track.kind,
      feed: origin.feed === undefined ? null : origin.feed,
      display: origin.display || null,
      live: true,
      firstFrameAt: null,
      pattern: { numbers: [], unreadable: 0, read: 0 },
    };
    state.tracks[mid] = entry;
    const element = document.createElement(track.kind === "video" ? "video" : "audio");
    element.autoplay = true;
    element.muted = track.kind === "video";
    element.playsInline = true;
    element.srcObject = new MediaStream([track]);
    element.dataset.mid = mid;
    document.getElementById("remotes").appendChild(element);
    if (track.kind === "video" && config.pattern) watchPattern(element, entry);
    changed();
  }

  // MARK: getStats

  async function collect(handle, type) {
    const pc = handle && handle.webrtcStuff && handle.webrtcStuff.pc;
    if (!pc) return {};
    const report = await pc.getStats();
    const result = {};
    report.forEach((entry) => {
      if (entry.type !== type || entry.mid === undefined) return;
      // A simulcast sender has one entry per layer: "MID:RID".
      const key = entry.rid ? `${entry.mid}:${entry.rid}` : entry.mid;
      const codec = entry.codecId ? report.get(entry.codecId) : null;
      const source = entry.mediaSourceId ? report.get(entry.mediaSourceId) : null;
      result[key] = {
        kind: entry.kind,
        codec: codec ? codec.mimeType : null,
        fmtp: codec ? codec.sdpFmtpLine || "" : "",
        packets: type === "inbound-rtp" ? entry.packetsReceived : entry.packetsSent,
        packetsLost: entry.packetsLost || 0,
        framesDecoded: entry.framesDecoded || 0,
        keyFramesDecoded: entry.keyFramesDecoded || 0,
        framesEncoded: entry.framesEncoded || 0,
        // Pictures the camera gave against pictures sent: the difference is what the encoder dropped.
        framesCaptured: source ? source.frames || 0 : 0,
        framesSent: entry.framesSent || 0,
        frameWidth: entry.frameWidth || 0,
        frameHeight: entry.frameHeight || 0,
        totalSamplesReceived: entry.totalSamplesReceived || 0,
        decoder: entry.decoderImplementation || null,
        encoder: entry.encoderImplementation || null,
        qualityLimitation: entry.qualityLimitationReason || null,
      };
    });
    return result;
  }

  async function stats() {
    state.inbound = await collect(subscriber, "inbound-rtp");
    state.outbound = await collect(publisher, "outbound-rtp");
    changed();
    return { inbound: state.inbound, outbound: state.outbound };
  }

  // Janus switches at the layer's next keyframe and then says so (onSubscriberMessage).
  function selectLayer(mid, substream) {
    return new Promise((resolve, reject) => {
      if (!subscriber) return reject(new Error("not subscribed"));
      subscriber.send({
        message: { request: "configure", streams: [{ mid: String(mid), substream }] },
        success: resolve,
        error: reject,
      });
    });
  }

  function leave() {
    return new Promise((resolve) => {
      if (!janus) return resolve(state);
      janus.destroy({ success: () => resolve(state), error: () => resolve(state) });
    });
  }

  window.conclavePeer = { state, waitFor, stats, selectLayer, leave };
  conclaveE2EE.onChange = changed;

  Janus.init({
    debug: ["warn", "error"],
    dependencies: Janus.useDefaultDependencies(),
    callback: () => {
      if (!Janus.isWebrtcSupported()) return fail("init", "this browser has no WebRTC");
      // An encrypted page joins once it holds the call key: it never sends or receives a frame it
      // cannot seal or open.
      if (conclaveE2EE.enabled) state.phase = "waiting for the call key";
      conclaveE2EE.ready.then(start, (error) => fail("e2ee", error));
      // getStats has no events: refresh the counters while anyone may be waiting on them.
      setInterval(() => stats().catch((error) => fail("stats", error)), 250);
    },
  });
})();
