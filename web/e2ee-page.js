// End-to-end encryption for the browser peer: the page's side of e2ee-worker.js.
//
// URL parameter `crypto=none|ecall|sframe` (default none) picks Conclave's media format. The call
// key never comes through the URL: call `conclave.setCallKey(KEY)` (a driver does it over DevTools),
// paste the key into the page's key field, or load it from a file. KEY is the 32-byte call key in
// base64 or as 64 hexadecimal characters (as `conclave keys unwrap` prints it). A second key
// becomes current and keeps the first as the previous one (key rotation).
//
// conclave-peer.js calls `protectSenders` once the publisher's offer exists and `protectReceivers`
// when a remote track arrives, so every frame goes through the worker before anything is sent or
// decoded. The counters (frames encrypted, decrypted, undecryptable, passed in clear, per direction
// and kind) are in `conclaveE2EE.state`, which conclave-peer.js shows as `state.e2ee`.
"use strict";

(function () {
  const format = (new URLSearchParams(location.search).get("crypto") || "none").toLowerCase();
  const state = {
    format,
    keyEpoch: null,
    send: {}, // kind -> { encrypted, clear, notSent }
    receive: {}, // kind -> { decrypted, clear, undecryptable }
    lastFailure: null,
    error: null,
  };
  let onChange = () => {};
  let worker = null;
  const keyWaiters = [];
  // Settles when the page may join: at once without encryption, at the first key with it, and
  // never successfully when encryption was asked for but cannot run (the page must not join in clear).
  let keyArrived;
  const ready = new Promise((resolve, reject) => {
    keyArrived = resolve;
    queueMicrotask(() => {
      if (state.error) reject(new Error(state.error));
      else if (!worker) resolve();
    });
  });

  if (format !== "none") {
    if (format !== "ecall" && format !== "sframe") {
      state.error = `crypto=${format}: expected none, ecall or sframe`;
    } else if (typeof RTCRtpScriptTransform === "undefined") {
      state.error = "this browser has no RTCRtpScriptTransform (Encoded Transform)";
    } else {
      worker = new Worker("e2ee-worker.js", { type: "module" });
      worker.onmessage = (event) => {
        const message = event.data;
        if (message.type === "counters") {
          state.send = message.counters.send;
          state.receive = message.counters.receive;
          state.lastFailure = message.counters.lastFailure;
        } else if (message.type === "keyInstalled" || message.type === "keyRejected") {
          if (message.type === "keyInstalled") {
            state.keyEpoch = message.epoch;
            keyArrived();
          }
          else state.error = `call key rejected: ${message.reason}`;
          const waiter = keyWaiters.shift();
          if (waiter) waiter(message);
        }
        onChange();
      };
      worker.onerror = (event) => {
        state.error = `e2ee worker: ${event.message}`;
        onChange();
      };
    }
  }

  // The key's bytes from base64 or 64 hex digits; throws on anything else.
  function keyBytes(text) {
    const trimmed = String(text).trim();
    if (/^[0-9a-fA-F]{64}$/.test(trimmed)) {
      return Uint8Array.from(trimmed.match(/../g), (pair) => parseInt(pair, 16));
    }
    let bytes;
    try {
      bytes = Uint8Array.from(atob(trimmed), (c) => c.charCodeAt(0));
    } catch (e) {
      throw new Error("the call key is neither base64 nor 64 hexadecimal characters");
    }
    if (bytes.length !== 32) throw new Error(`the call key has ${bytes.length} bytes, not 32`);
    return bytes;
  }

  // Installs the call key (current; the one before stays usable for receiving). `epoch` is the
  // key's rotation count, as Conclave numbers it (0 for the call's first key; sframe key ids carry
  // it). Resolves once the worker holds the key.
  function setCallKey(text, epoch) {
    if (!worker) return Promise.reject(new Error(state.error || "crypto=none: the page does not encrypt"));
    const bytes = keyBytes(text);
    const next = epoch === undefined ? (state.keyEpoch === null ? 0 : state.keyEpoch + 1) : Number(epoch);
    return new Promise((resolve, reject) => {
      keyWaiters.push((message) =>
        message.type === "keyInstalled" ? resolve(message.epoch) : reject(new Error(message.reason)),
      );
      worker.postMessage({ type: "key", key: bytes.buffer, epoch: next }, [bytes.buffer]);
    });
  }

  function protectSenders(pc, { codec, senderID }) {
    if (!worker || !pc) return;
    for (const sender of pc.getSenders()) {
      if (!sender.track || sender.transform) continue;
      const kind = sender.track.kind;
      sender.transform = new RTCRtpScriptTransform(worker, { side: "send", kind, codec, format, senderID });
    }
  }

  function protectReceivers(pc, codec) {
    if (!worker || !pc) return;
    for (const transceiver of pc.getTransceivers()) {
      const receiver = transceiver.receiver;
      if (!receiver || !receiver.track || receiver.transform) continue;
      const kind = receiver.track.kind;
      receiver.transform = new RTCRtpScriptTransform(worker, { side: "receive", kind, codec, format });
    }
  }

  // For a person: a field to paste the key into and a file to load it from.
  function addKeyForm() {
    if (!worker) return;
    const form = document.createElement("form");
    form.id = "callKeyForm";
    form.innerHTML =
      '<label>Call key (base64 or hex) <input id="callKey" type="password" autocomplete="off"></label> ' +
      '<button type="submit">Use key</button> <label>or from a file <input id="callKeyFile" type="file"></label>';
    const use = (text) =>
      setCallKey(text).catch((error) => {
        state.error = error.message;
        onChange();
      });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const field = document.getElementById("callKey");
      use(field.value);
      field.value = "";
    });
    form.querySelector("#callKeyFile").addEventListener("change", async (event) => {
      const file = event.target.files[0];
      if (file) use(await file.text());
      event.target.value = "";
    });
    document.body.insertBefore(form, document.body.firstChild);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", addKeyForm);
  else addKeyForm();

  window.conclaveE2EE = {
    state,
    enabled: worker !== null,
    ready,
    protectSenders,
    protectReceivers,
    set onChange(callback) {
      onChange = callback;
    },
  };
  // The page's public functions: the key, and the formats themselves (for checks against Conclave).
  window.conclave = { setCallKey, core: () => import("./e2ee-core.js") };
})();
