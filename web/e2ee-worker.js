// The Encoded Transform worker of the browser peer: every frame the page sends is sealed here
// between the encoder and the packetizer, and every frame it receives is opened here between the
// depacketizer and the decoder, in Conclave's `ecall` or `sframe` format (e2ee-core.js).
//
// The page creates one worker and gives each RTCRtpSender and RTCRtpReceiver
// `new RTCRtpScriptTransform(worker, { side: "send" | "receive", kind, codec, format, senderID })`.
// It sends the call key with `{ type: "key", key: ArrayBuffer, epoch }`; the worker keeps the
// current and the previous key, so frames sealed just before a rotation still open.
//
// A frame that cannot be sealed (no key yet) is not sent; a frame that cannot be opened (wrong key,
// corrupt, not encrypted) is counted and dropped, never handed to the decoder. Nothing a frame
// holds can throw out of the transform, so the stream keeps running. The counters go to the page as
// `{ type: "counters", counters }` shortly after they change.
import { KeyRing, codecOf, openFrame, passesClear, sealFrame } from "./e2ee-core.js";

const keys = new KeyRing();
// One SFrame counter for every stream this page sends: audio and video share the key id, so they
// must never share a counter value.
let counter = 0n;
const nextCounter = () => counter++;

// side -> kind -> counts; plain numbers so the page can keep them in its JSON state.
const counters = { send: {}, receive: {}, lastFailure: null, keyEpoch: null };
function countsFor(side, kind) {
  if (!counters[side][kind]) {
    counters[side][kind] =
      side === "send" ? { encrypted: 0, clear: 0, notSent: 0 } : { decrypted: 0, clear: 0, undecryptable: 0 };
  }
  return counters[side][kind];
}

let reportPending = false;
function changed() {
  if (reportPending) return;
  reportPending = true;
  setTimeout(() => {
    reportPending = false;
    self.postMessage({ type: "counters", counters });
  }, 200);
}

self.onmessage = async (event) => {
  const message = event.data || {};
  if (message.type !== "key") return;
  try {
    await keys.install(message.key, message.epoch);
    counters.keyEpoch = message.epoch;
    self.postMessage({ type: "keyInstalled", epoch: message.epoch });
  } catch (error) {
    self.postMessage({ type: "keyRejected", reason: error.reason || error.message });
  }
  changed();
};

async function transformFrame(frame, controller, options) {
  const codec = options.kind === "audio" ? "opus" : codecOf(frame.getMetadata().mimeType, options.codec);
  const counts = countsFor(options.side, options.kind);
  try {
    if (passesClear(options.format, codec)) {
      counts.clear += 1;
      controller.enqueue(frame);
      return;
    }
    const data = new Uint8Array(frame.data);
    if (data.length === 0) {
      // Chromium now and then hands a receiver an empty audio frame: nothing to open and nothing
      // to decode, so it is dropped without counting as a decryption failure.
      counts.empty = (counts.empty || 0) + 1;
      return;
    }
    if (options.side === "send") {
      const sealed = await sealFrame(options.format, codec, data, keys, { senderID: options.senderID, nextCounter });
      frame.data = sealed.buffer;
      counts.encrypted += 1;
    } else {
      const opened = await openFrame(options.format, codec, data, keys);
      frame.data = opened.buffer;
      counts.decrypted += 1;
    }
    controller.enqueue(frame);
  } catch (error) {
    // Dropped: a frame that is not what it should be never reaches the packetizer or the decoder.
    if (options.side === "send") counts.notSent += 1;
    else counts.undecryptable += 1;
    counters.lastFailure = `${options.side} ${codec}: ${error.reason || error.message}`;
  } finally {
    changed();
  }
}

self.onrtctransform = (event) => {
  const transformer = event.transformer;
  const options = transformer.options;
  countsFor(options.side, options.kind);
  transformer.readable
    .pipeThrough(new TransformStream({ transform: (frame, controller) => transformFrame(frame, controller, options) }))
    .pipeTo(transformer.writable)
    .catch((error) => {
      counters.lastFailure = `${options.side} ${options.kind} stream ended: ${error.message}`;
      changed();
    });
  changed();
};
