#!/usr/bin/env python3
"""Independent implementation of the ECall iOS media and key formats, for Conclave's interop tests.

Written from the interoperability specification (sections 1 and 2), not from Conclave's Swift code,
using only the `cryptography` package. Reads one JSON request on stdin, writes one JSON answer on
stdout.

  produce  {"key", "rsa_public", "p256_public"}
           -> ecall frames (H264 IDR with SPS/PPS, H264 P frame, Opus) sealed here, with their
              plaintexts, and the key wrapped for both public keys.
  open     {"key", "frames": [{"name", "codec", "sealed"}], "rsa_private", "p256_private",
            "rsa_wrapped", "p256_wrapped"}
           -> each frame opened here, and both wrapped keys unwrapped.
  sframe   {"vectors": [{"base_key", "kid", "ctr", "metadata", "pt"}]}
           -> RFC 9605 SFrame ciphertexts for cipher suite AES_256_GCM_SHA512_128 (0x0005).

Bytes are hex in JSON, keys and wrapped strings as the wire carries them (base64 text).
"""

import base64
import json
import os
import random
import sys

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF, HKDFExpand
from cryptography.hazmat.primitives import hmac

ECALL_INFO = b"ecall-e2ee-key"


# ---------------------------------------------------------------- ECall H264 / audio framing

def find_nal_units(frame):
    """(header_index, end) of every NAL unit, scanning as ECall's parser does (Annex-B only here)."""
    if not (frame[:4] == b"\x00\x00\x00\x01" or frame[:3] == b"\x00\x00\x01"):
        return []
    units = []
    pos = 0
    current = None
    n = len(frame)
    while pos + 3 <= n:
        if frame[pos:pos + 4] == b"\x00\x00\x00\x01":
            code = 4
        elif frame[pos:pos + 3] == b"\x00\x00\x01":
            code = 3
        else:
            pos += 1
            continue
        if current is not None:
            units.append((current, pos))
        current = pos + code
        pos = current + 1
    if current is not None and current < n:
        units.append((current, n))
    return units


def looks_like_start_code(region):
    return b"\x00\x00\x01" in region or region.endswith(b"\x00")


def seal_box(key, plaintext):
    nonce = os.urandom(12)
    return nonce + AESGCM(key).encrypt(nonce, plaintext, None)


def open_box(key, box):
    return AESGCM(key).decrypt(box[:12], box[12:], None)


def seal_h264(key, frame):
    out = bytearray()
    last = 0
    slices = [(h, e) for (h, e) in find_nal_units(frame) if frame[h] & 0x1F in (1, 5)]
    assert len(slices) <= 1, "ECall frames carry one slice"
    for header, end in slices:
        start = header + 2
        if start >= end:
            continue
        # Re-draw the nonce until the sealed bytes cannot be mistaken for a start code.
        while True:
            sealed = seal_box(key, frame[start:end])
            if not looks_like_start_code(frame[start - 2:start] + sealed):
                break
        out += frame[last:start] + sealed
        last = end
    out += frame[last:]
    return bytes(out)


def open_h264(key, frame):
    out = bytearray()
    last = 0
    for header, end in find_nal_units(frame):
        if frame[header] & 0x1F not in (1, 5):
            continue
        start = header + 2
        if end - start < 28:
            continue
        out += frame[last:start] + open_box(key, frame[start:end])
        last = end
    out += frame[last:]
    return bytes(out)


def seal_audio(key, packet):
    return b"\xff" + seal_box(key, packet)


def open_audio(key, packet):
    if not packet or packet[0] != 0xFF:
        raise ValueError("no 0xFF marker")
    return open_box(key, packet[1:])


def nal(header, size, rng):
    # Payload bytes 1..255: no zeros, so no start code emulation in the plaintext.
    return b"\x00\x00\x00\x01" + bytes([header]) + bytes(rng.randint(1, 255) for _ in range(size))


def sample_frames():
    rng = random.Random(9605)
    sps = nal(0x67, 12, rng)
    pps = nal(0x68, 4, rng)
    idr = nal(0x65, 3000, rng)
    p_frame = nal(0x41, 700, rng)
    # An Opus packet: TOC byte for 20 ms SILK wideband, then payload.
    opus = bytes([0x48]) + bytes(rng.randint(0, 255) for _ in range(90))
    return [
        ("h264_idr", "h264", sps + pps + idr),
        ("h264_p", "h264", p_frame),
        ("opus", "opus", opus),
    ]


# ---------------------------------------------------------------- key wrapping

def p256_wrapping_key(private_key, peer_public):
    shared = private_key.exchange(ec.ECDH(), peer_public)  # the x-coordinate, 32 bytes
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=ECALL_INFO).derive(shared)


def p256_public_from_raw(raw):
    return ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), b"\x04" + raw)


def p256_raw(public_key):
    return public_key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)[1:]


def oaep():
    return padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA256()), algorithm=hashes.SHA256(), label=None)


def wrap_rsa(key, public_b64):
    public_key = serialization.load_der_public_key(
        pkcs1_to_spki(base64.b64decode(public_b64)))
    return base64.b64encode(public_key.encrypt(key, oaep())).decode()


def pkcs1_to_spki(pkcs1):
    """Wraps a PKCS#1 RSAPublicKey in a SubjectPublicKeyInfo (what `load_der_public_key` reads)."""
    def der_length(n):
        if n < 0x80:
            return bytes([n])
        body = n.to_bytes((n.bit_length() + 7) // 8, "big")
        return bytes([0x80 | len(body)]) + body
    algorithm = bytes.fromhex("300d06092a864886f70d0101010500")
    bit_string = b"\x03" + der_length(len(pkcs1) + 1) + b"\x00" + pkcs1
    body = algorithm + bit_string
    return b"\x30" + der_length(len(body)) + body


def wrap_p256(key, public_b64):
    recipient = p256_public_from_raw(base64.b64decode(public_b64))
    ephemeral = ec.generate_private_key(ec.SECP256R1())
    box = seal_box(p256_wrapping_key(ephemeral, recipient), key)
    return base64.b64encode(p256_raw(ephemeral.public_key())).decode() + ":" + base64.b64encode(box).decode()


def unwrap(wrapped, rsa_private_b64, p256_private_b64):
    if ":" in wrapped:
        sender_b64, box_b64 = wrapped.split(":")
        scalar = int.from_bytes(base64.b64decode(p256_private_b64), "big")
        private_key = ec.derive_private_key(scalar, ec.SECP256R1())
        sender = p256_public_from_raw(base64.b64decode(sender_b64))
        return open_box(p256_wrapping_key(private_key, sender), base64.b64decode(box_b64))
    private_key = serialization.load_der_private_key(base64.b64decode(rsa_private_b64), password=None)
    return private_key.decrypt(base64.b64decode(wrapped), oaep())


# ---------------------------------------------------------------- SFrame (RFC 9605, suite 0x0005)

def sframe_header(kid, ctr):
    def field(value):
        if value < 8:
            return value, b""
        length = (value.bit_length() + 7) // 8
        return 0x08 | (length - 1), value.to_bytes(length, "big")
    k, kid_bytes = field(kid)
    c, ctr_bytes = field(ctr)
    return bytes([(k << 4) | c]) + kid_bytes + ctr_bytes


def sframe_seal(base_key, kid, ctr, metadata, plaintext):
    suite = (5).to_bytes(2, "big")
    h = hmac.HMAC(b"\x00" * 64, hashes.SHA512())  # HKDF-Extract with an empty salt
    h.update(base_key)
    secret = h.finalize()
    kid_bytes = kid.to_bytes(8, "big")
    key = HKDFExpand(hashes.SHA512(), 32, b"SFrame 1.0 Secret key " + kid_bytes + suite).derive(secret)
    salt = HKDFExpand(hashes.SHA512(), 12, b"SFrame 1.0 Secret salt " + kid_bytes + suite).derive(secret)
    nonce = bytes(a ^ b for a, b in zip(salt, ctr.to_bytes(12, "big")))
    header = sframe_header(kid, ctr)
    return header + AESGCM(key).encrypt(nonce, plaintext, header + metadata)


# ---------------------------------------------------------------- commands

def produce(request):
    key = bytes.fromhex(request["key"])
    frames = []
    for name, codec, plain in sample_frames():
        sealed = seal_h264(key, plain) if codec == "h264" else seal_audio(key, plain)
        frames.append({"name": name, "codec": codec, "plain": plain.hex(), "sealed": sealed.hex()})
    return {
        "frames": frames,
        "rsa_wrapped": wrap_rsa(key, request["rsa_public"]),
        "p256_wrapped": wrap_p256(key, request["p256_public"]),
    }


def open_frames(request):
    key = bytes.fromhex(request["key"])
    results = []
    for frame in request["frames"]:
        sealed = bytes.fromhex(frame["sealed"])
        try:
            plain = open_h264(key, sealed) if frame["codec"] == "h264" else open_audio(key, sealed)
            results.append({"name": frame["name"], "plain": plain.hex()})
        except Exception as error:  # report, let the Swift test fail with the reason
            results.append({"name": frame["name"], "error": repr(error)})
    return {
        "frames": results,
        "rsa_unwrapped": unwrap(request["rsa_wrapped"], request["rsa_private"], None).hex(),
        "p256_unwrapped": unwrap(request["p256_wrapped"], None, request["p256_private"]).hex(),
    }


def sframe(request):
    results = []
    for v in request["vectors"]:
        ct = sframe_seal(bytes.fromhex(v["base_key"]), v["kid"], v["ctr"],
                         bytes.fromhex(v["metadata"]), bytes.fromhex(v["pt"]))
        results.append({"ct": ct.hex()})
    return {"results": results}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("produce", "open", "sframe"):
        sys.exit("usage: e2ee_vectors.py produce|open|sframe < request.json")
    request = json.load(sys.stdin)
    answer = {"produce": produce, "open": open_frames, "sframe": sframe}[sys.argv[1]](request)
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
