// Conclave's two media encryption formats, byte for byte as Sources/ConclaveE2EE writes them, on
// WebCrypto AES-256-GCM (and HKDF-SHA512 for sframe). The Encoded Transform worker
// (e2ee-worker.js) runs these on every frame; the page imports the same module so that a test can
// check them against Conclave's own seal and open on known frames.
//
// ecall (ECallFrameFormat.swift, ECall iOS's format):
//   Opus   0xFF ‖ nonce(12) ‖ AES-GCM(whole packet) ‖ tag(16), a random nonce per packet, no AAD.
//   H264   Annex-B; the one slice NAL unit (type 1 or 5) keeps its header byte and the next byte in
//          clear, the rest becomes nonce ‖ ciphertext ‖ tag. No key id: the receiver tries the
//          current key, then the previous one.
//   VP8    not encrypted (ECall never encrypts it, so neither does Conclave): passed in clear.
// sframe (SFrame.swift, SFrameFrameFormat.swift, RFC 9605 with AES_256_GCM_SHA512_128):
//   key id = sender id << 8 | key epoch (mod 256); key and salt from HKDF-SHA512 of the call key
//   with the key id in the labels; nonce = salt XOR counter; AAD = SFrame header ‖ clear bytes.
//   Opus   header ‖ ciphertext ‖ tag over the whole packet.
//   VP8    the payload header (10 bytes on keyframes, 3 otherwise) in clear, then the SFrame.
//   H264   start codes and NAL header bytes in clear; every unit but SPS, PPS and AUD sealed, with a
//          0x80 stop byte and emulation prevention.
//
// Failures throw a FrameError with a reason named as Conclave counts them
// (DecryptFailureReason): the caller drops the frame and counts it.
"use strict";

export class FrameError extends Error {
  constructor(reason, detail) {
    super(`${reason}: ${detail}`);
    this.reason = reason;
  }
}

const NONCE = 12;
const TAG = 16;
const SEAL_OVERHEAD = NONCE + TAG;
const AUDIO_MARKER = 0xff;
const MAX_NONCE_DRAWS = 16;
const SFRAME_SUITE = 0x0005n;
const H264_STOP = 0x80;

// MARK: Keys

// One call key and its epoch, with what each format needs made once: the ecall AES key, and the
// sframe key and salt of every key id seen (derived on first use).
export class CallKeyEntry {
  static async make(raw, epoch) {
    const bytes = new Uint8Array(raw);
    if (bytes.length !== 32) throw new FrameError("bad_key", `a call key has 32 bytes, not ${bytes.length}`);
    const entry = new CallKeyEntry();
    entry.epoch = epoch;
    entry.aes = await crypto.subtle.importKey("raw", bytes, "AES-GCM", false, ["encrypt", "decrypt"]);
    entry.hkdf = await crypto.subtle.importKey("raw", bytes, "HKDF", false, ["deriveBits"]);
    entry.sframe = new Map(); // key id (BigInt) -> Promise of { key, salt }
    return entry;
  }

  // The sframe key and salt for `keyID` (BigInt), RFC 9605 §4.4.2.
  sframeMaterial(keyID) {
    let material = this.sframe.get(keyID);
    if (!material) {
      material = deriveSFrame(this.hkdf, keyID);
      if (this.sframe.size >= 16) this.sframe.clear();
      this.sframe.set(keyID, material);
    }
    return material;
  }
}

function label(kind, keyID) {
  const text = new TextEncoder().encode(`SFrame 1.0 Secret ${kind}`);
  const out = new Uint8Array(text.length + 10);
  out.set(text);
  writeBigEndian(out, text.length, keyID, 8);
  writeBigEndian(out, text.length + 8, SFRAME_SUITE, 2);
  return out;
}

async function deriveSFrame(hkdf, keyID) {
  // HKDF-Extract with an empty salt is HMAC keyed with zeros, as RFC 5869 says; WebCrypto does both
  // steps in one deriveBits.
  const parameters = (info) => ({ name: "HKDF", hash: "SHA-512", salt: new Uint8Array(0), info });
  const keyBits = await crypto.subtle.deriveBits(parameters(label("key ", keyID)), hkdf, 256);
  const saltBits = await crypto.subtle.deriveBits(parameters(label("salt ", keyID)), hkdf, 96);
  const key = await crypto.subtle.importKey("raw", keyBits, "AES-GCM", false, ["encrypt", "decrypt"]);
  return { key, salt: new Uint8Array(saltBits) };
}

// The key ring a browser keeps: the current key and the one before it (for frames sent just
// before a rotation).
export class KeyRing {
  constructor() {
    this.current = null;
    this.previous = null;
  }

  async install(raw, epoch) {
    const entry = await CallKeyEntry.make(raw, epoch);
    if (this.current && this.current.epoch !== epoch) this.previous = this.current;
    this.current = entry;
  }

  candidates() {
    return [this.current, this.previous].filter(Boolean);
  }

  // The sframe key whose epoch byte the key id names.
  byEpochByte(epochByte) {
    return this.candidates().find((entry) => (entry.epoch & 0xff) === epochByte) || null;
  }
}

// MARK: AES-GCM

async function seal(key, iv, plaintext, aad) {
  const parameters = { name: "AES-GCM", iv, tagLength: 128 };
  if (aad && aad.length > 0) parameters.additionalData = aad;
  return new Uint8Array(await crypto.subtle.encrypt(parameters, key, plaintext));
}

// The plaintext, or null when the tag does not verify.
async function open(key, iv, sealed, aad) {
  const parameters = { name: "AES-GCM", iv, tagLength: 128 };
  if (aad && aad.length > 0) parameters.additionalData = aad;
  try {
    return new Uint8Array(await crypto.subtle.decrypt(parameters, key, sealed));
  } catch (e) {
    return null;
  }
}

function concat(parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

function writeBigEndian(out, offset, value, length) {
  for (let i = 0; i < length; i++) {
    out[offset + i] = Number((BigInt(value) >> BigInt(8 * (length - 1 - i))) & 0xffn);
  }
}

// MARK: H264 Annex-B (H264AnnexB.swift, the `.ecall` cut rule)

// The first i in [from, to - 2) with bytes i..i+2 equal to 00 00 x, x <= 3; -1 if none.
function zeroZeroLow(b, from, to) {
  for (let i = from; i + 2 < to; i++) {
    if (b[i] === 0 && b[i + 1] === 0 && b[i + 2] <= 3) return i;
  }
  return -1;
}

export function startsWithStartCode(b) {
  return b.length >= 3 && b[0] === 0 && b[1] === 0 && (b[2] === 1 || (b.length >= 4 && b[2] === 0 && b[3] === 1));
}

// The NAL units as ECall iOS's parser cuts them: { framingStart, header, end, type }.
export function h264Units(b) {
  const units = [];
  const n = b.length;
  let lowerBound = 0;
  let open = null;
  let search = 0;
  for (;;) {
    const triple = zeroZeroLow(b, search, n);
    if (triple < 0) break;
    if (b[triple + 2] !== 1) {
      search = triple + 1;
      continue;
    }
    let framingStart = triple;
    if (framingStart - 1 >= lowerBound && b[framingStart - 1] === 0) framingStart -= 1;
    if (open && open.header < framingStart) units.push(unit(b, open, framingStart));
    const header = triple + 3;
    if (header >= n) {
      open = null;
      break;
    }
    open = { framingStart, header };
    lowerBound = header + 1;
    search = lowerBound;
  }
  if (open && open.header < n) units.push(unit(b, open, n));
  return units;
}

function unit(b, open, end) {
  return { framingStart: open.framingStart, header: open.header, end, type: b[open.header] & 0x1f };
}

const isSlice = (type) => type === 1 || type === 5;
// SEI, SPS, PPS, AUD, end of sequence/stream, filler: what ecall leaves clear and a frame may be.
const ECALL_CLEAR_TYPES = new Set([6, 7, 8, 9, 10, 11, 12]);
// What sframe leaves clear: parameter sets and delimiters.
const sframeClear = (type) => type === 7 || type === 8 || type === 9;

// Whether b[from..<to] holds 00 00 01, or ends in 00 while another unit follows.
function emulatesStartCode(b, from, to, followed) {
  if (to <= from) return false;
  if (followed && b[to - 1] === 0) return true;
  let search = from;
  for (;;) {
    const pair = zeroZeroLow(b, search, to);
    if (pair < 0) return false;
    if (b[pair + 2] === 1) return true;
    search = pair + 1;
  }
}

// H264 emulation prevention (H264EmulationPrevention.swift).
function escape(b) {
  const out = [];
  let i = 0;
  while (i < b.length) {
    if (b[i] === 0 && i + 2 < b.length && b[i + 1] === 0 && b[i + 2] <= 3) {
      out.push(0, 0, 3);
      i += 2;
    } else {
      out.push(b[i]);
      i += 1;
    }
  }
  return Uint8Array.from(out);
}

function unescape(b) {
  const out = [];
  let i = 0;
  while (i < b.length) {
    if (b[i] === 0 && i + 2 < b.length && b[i + 1] === 0 && b[i + 2] === 3) {
      out.push(0, 0);
      i += 3;
    } else {
      out.push(b[i]);
      i += 1;
    }
  }
  return Uint8Array.from(out);
}

// MARK: ecall

// `nonce()` gives 12 fresh bytes; a test may pass its own.
export const randomNonce = () => crypto.getRandomValues(new Uint8Array(NONCE));

export async function ecallSeal(codec, frame, entry, nonce = randomNonce) {
  if (codec === "vp8") return frame;
  if (codec === "opus") {
    const iv = nonce();
    return concat([Uint8Array.of(AUDIO_MARKER), iv, await seal(entry.aes, iv, frame)]);
  }
  if (!startsWithStartCode(frame)) throw new FrameError("malformed_frame", "frame does not start with a start code");
  const slices = h264Units(frame).filter((u) => isSlice(u.type));
  if (slices.length > 1) throw new FrameError("multiple_slices", `${slices.length} slices; ecall carries one`);
  if (slices.length === 0) return frame;
  const slice = slices[0];
  const regionStart = slice.header + 2;
  if (regionStart >= slice.end) return frame;
  const followed = slice.end < frame.length;
  // ECall adds no emulation prevention: draw nonces until the sealed bytes hold no start code.
  let output = null;
  for (let draw = 0; draw < MAX_NONCE_DRAWS; draw++) {
    const iv = nonce();
    const sealed = await seal(entry.aes, iv, frame.subarray(regionStart, slice.end));
    output = concat([frame.subarray(0, regionStart), iv, sealed, frame.subarray(slice.end)]);
    if (!emulatesStartCode(output, slice.header + 1, slice.end + SEAL_OVERHEAD, followed)) break;
  }
  return output;
}

// Opens with the first of `entries` that verifies.
async function openAny(entries, iv, sealed) {
  for (const entry of entries) {
    const plaintext = await open(entry.aes, iv, sealed);
    if (plaintext) return plaintext;
  }
  return null;
}

export async function ecallOpen(codec, frame, entries) {
  if (codec === "vp8") return frame;
  if (codec === "opus") {
    if (frame.length === 0) throw new FrameError("truncated", "empty audio frame");
    if (frame[0] !== AUDIO_MARKER) throw new FrameError("not_encrypted", "first byte is not the 0xFF marker");
    if (frame.length < 1 + SEAL_OVERHEAD) throw new FrameError("truncated", `${frame.length}-byte audio frame`);
    if (entries.length === 0) throw new FrameError("no_key", "no call key installed");
    const plaintext = await openAny(entries, frame.subarray(1, 1 + NONCE), frame.subarray(1 + NONCE));
    if (!plaintext) throw new FrameError("authentication_failed", `tag did not verify with ${entries.length} key(s)`);
    return plaintext;
  }
  const units = startsWithStartCode(frame) ? h264Units(frame) : [];
  if (units.length === 0) throw new FrameError("malformed_header", `no Annex-B NAL units in ${frame.length} bytes`);
  if (!units.some((u) => isSlice(u.type))) {
    const odd = units.find((u) => !ECALL_CLEAR_TYPES.has(u.type));
    if (odd) throw new FrameError("malformed_header", `unexpected NAL type ${odd.type}`);
    return frame;
  }
  if (entries.length === 0) throw new FrameError("no_key", "no call key installed");
  const parts = [];
  let copied = 0;
  for (const slice of units.filter((u) => isSlice(u.type))) {
    const regionStart = slice.header + 2;
    if (regionStart >= slice.end) continue;
    if (slice.end - regionStart < SEAL_OVERHEAD) {
      throw new FrameError("truncated", `slice region of ${slice.end - regionStart} bytes`);
    }
    parts.push(frame.subarray(copied, regionStart));
    const plaintext = await openAny(
      entries,
      frame.subarray(regionStart, regionStart + NONCE),
      frame.subarray(regionStart + NONCE, slice.end),
    );
    if (!plaintext) throw new FrameError("authentication_failed", `slice tag did not verify with ${entries.length} key(s)`);
    parts.push(plaintext);
    copied = slice.end;
  }
  parts.push(frame.subarray(copied));
  return concat(parts);
}

// MARK: sframe

export function sframeKeyID(senderID, epoch) {
  return ((BigInt(senderID) & ((1n << 56n) - 1n)) << 8n) | BigInt(epoch & 0xff);
}

const minimalLength = (value) => Math.max(1, Math.ceil(value.toString(16).length / 2));

export function sframeHeader(keyID, counter) {
  const kid = BigInt(keyID);
  const ctr = BigInt(counter);
  const kidLength = kid >= 8n ? minimalLength(kid) : 0;
  const ctrLength = ctr >= 8n ? minimalLength(ctr) : 0;
  const out = new Uint8Array(1 + kidLength + ctrLength);
  out[0] = (kid < 8n ? Number(kid) << 4 : 0x80 | ((kidLength - 1) << 4)) | (ctr < 8n ? Number(ctr) : 0x08 | (ctrLength - 1));
  if (kidLength) writeBigEndian(out, 1, kid, kidLength);
  if (ctrLength) writeBigEndian(out, 1 + kidLength, ctr, ctrLength);
  return out;
}

export function parseSFrameHeader(b) {
  if (b.length === 0) throw new FrameError("malformed_header", "empty SFrame header");
  const config = b[0];
  let index = 1;
  const field = (extended, value, name) => {
    if (!extended) return BigInt(value);
    const length = value + 1;
    if (b.length - index < length) throw new FrameError("malformed_header", `${name} needs ${length} bytes`);
    let result = 0n;
    for (let i = 0; i < length; i++) result = (result << 8n) | BigInt(b[index + i]);
    index += length;
    return result;
  };
  const keyID = field((config & 0x80) !== 0, (config >> 4) & 0x07, "key id");
  const counter = field((config & 0x08) !== 0, config & 0x07, "counter");
  return { keyID, counter, length: index };
}

function sframeNonce(salt, counter) {
  const iv = Uint8Array.from(salt);
  for (let i = 0; i < 8; i++) iv[NONCE - 1 - i] ^= Number((BigInt(counter) >> BigInt(8 * i)) & 0xffn);
  return iv;
}

// header ‖ ciphertext ‖ tag, authenticating header ‖ metadata.
async function sframeSealPayload(material, keyID, counter, plaintext, metadata) {
  const header = sframeHeader(keyID, counter);
  const sealed = await seal(material.key, sframeNonce(material.salt, counter), plaintext, concat([header, metadata]));
  return concat([header, sealed]);
}

async function sframeOpenPayload(sealed, metadata, keys) {
  const header = parseSFrameHeader(sealed);
  if (sealed.length - header.length < TAG) {
    throw new FrameError("truncated", `SFrame body of ${sealed.length - header.length} bytes`);
  }
  const entry = keys.byEpochByte(Number(header.keyID & 0xffn));
  if (!entry) {
    if (!keys.current) throw new FrameError("no_key", "no call key installed");
    throw new FrameError("unknown_key_id", `key id ${header.keyID} is not in the key ring`);
  }
  const material = await entry.sframeMaterial(header.keyID);
  const aad = concat([sealed.subarray(0, header.length), metadata]);
  const plaintext = await open(material.key, sframeNonce(material.salt, header.counter), sealed.subarray(header.length), aad);
  if (!plaintext) throw new FrameError("authentication_failed", `tag did not verify for key id ${header.keyID}`);
  return plaintext;
}

const vp8HeaderLength = (first) => ((first & 0x01) === 0 ? 10 : 3);

// `nextCounter()` gives a counter (BigInt or number) never used before under this key id.
export async function sframeSeal(codec, frame, entry, keyID, nextCounter) {
  const material = await entry.sframeMaterial(keyID);
  if (codec === "opus") return sframeSealPayload(material, keyID, nextCounter(), frame, new Uint8Array(0));
  if (codec === "vp8") {
    const clear = frame.length > 0 ? Math.min(vp8HeaderLength(frame[0]), frame.length) : 0;
    const head = frame.subarray(0, clear);
    return concat([head, await sframeSealPayload(material, keyID, nextCounter(), frame.subarray(clear), head)]);
  }
  if (!startsWithStartCode(frame)) throw new FrameError("malformed_frame", "frame does not start with a start code");
  const parts = [];
  for (const u of h264Units(frame)) {
    parts.push(frame.subarray(u.framingStart, u.header + 1));
    const payload = frame.subarray(u.header + 1, u.end);
    if (sframeClear(u.type)) {
      parts.push(payload);
      continue;
    }
    const sealed = await sframeSealPayload(material, keyID, nextCounter(), payload, frame.subarray(u.header, u.header + 1));
    parts.push(escape(concat([sealed, Uint8Array.of(H264_STOP)])));
  }
  return concat(parts);
}

export async function sframeOpen(codec, frame, keys) {
  if (frame.length === 0) throw new FrameError("truncated", "empty frame");
  if (codec === "opus") return sframeOpenPayload(frame, new Uint8Array(0), keys);
  if (codec === "vp8") {
    const clear = vp8HeaderLength(frame[0]);
    if (frame.length <= clear) throw new FrameError("truncated", `${frame.length} bytes hold no SFrame`);
    const head = frame.subarray(0, clear);
    return concat([head, await sframeOpenPayload(frame.subarray(clear), head, keys)]);
  }
  const units = startsWithStartCode(frame) ? h264Units(frame) : [];
  if (units.length === 0) throw new FrameError("malformed_header", `no Annex-B NAL units in ${frame.length} bytes`);
  const parts = [];
  for (const u of units) {
    parts.push(frame.subarray(u.framingStart, u.header + 1));
    const payload = frame.subarray(u.header + 1, u.end);
    if (sframeClear(u.type)) {
      parts.push(payload);
      continue;
    }
    const sealed = unescape(payload);
    if (sealed[sealed.length - 1] !== H264_STOP) {
      throw new FrameError("malformed_header", `NAL type ${u.type} unit does not end with the stop byte`);
    }
    if (sealed.length <= 1) throw new FrameError("truncated", "empty sealed NAL unit");
    parts.push(await sframeOpenPayload(sealed.subarray(0, sealed.length - 1), frame.subarray(u.header, u.header + 1), keys));
  }
  return concat(parts);
}

// MARK: One entry point per direction

// A frame's codec from its MIME type ("video/VP8", "audio/opus"), else `fallback`.
export function codecOf(mimeType, fallback) {
  const name = (mimeType || "").split("/")[1];
  return name ? name.toLowerCase() : fallback;
}

export async function sealFrame(format, codec, frame, keys, { senderID = 0, nextCounter, nonce } = {}) {
  if (passesClear(format, codec)) return frame;
  if (!keys.current) throw new FrameError("no_key", "no call key installed");
  if (format === "ecall") return ecallSeal(codec, frame, keys.current, nonce);
  return sframeSeal(codec, frame, keys.current, sframeKeyID(senderID, keys.current.epoch), nextCounter);
}

export async function openFrame(format, codec, frame, keys) {
  if (format === "ecall") return ecallOpen(codec, frame, keys.candidates());
  return sframeOpen(codec, frame, keys);
}

// Whether the format leaves frames of `codec` in clear (ecall's VP8).
export const passesClear = (format, codec) => format === "ecall" && codec === "vp8";

// Base64 to bytes and back, for keys and test vectors.
export const fromBase64 = (text) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
export function toBase64(bytes) {
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(text);
}
