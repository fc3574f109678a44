#!/usr/bin/env python3
"""Glass-to-glass probe for bench/devices: draws, copies and reads time codes on one X display.

The code is the `pattern` source's strip (Sources/ConclaveMedia/Pattern.swift): two rows of 16
square black/white cells at the top of a picture, 32 bits MSB first = a 24-bit number and its
CRC-8 (polynomial 0x07, start 0xA5), cells (width / 16) & ~1 pixels wide. Here the number is not a
frame count but the CLOCK_MONOTONIC time in milliseconds (mod 2^24) at which the strip was drawn,
so a dropped or late redraw never shifts the scale, and a difference of two readings is a time.

  source  RECT --rate HZ      a window at RECT showing the code of "now", redrawn HZ times a second
                              (plus a moving box, so an encoder has motion to code); the strip goes
                              to the screen in one XCopyArea, so no grab sees half of it.
  copy    FROM TO --fps FPS   a window at TO showing the screen at FROM, copied FPS times a second
                              (XGetImage + XPutImage): the floor of any path that samples the
                              screen at FPS and shows what it got.
  sample  SOURCE TILE --picture WxH --samples N
                              grabs SOURCE and TILE in ONE XGetImage, again and again at random
                              intervals, and reads both codes: source minus tile is how long ago
                              the picture in TILE was on the glass at SOURCE, at that one instant.
                              Prints "count p50 p95 unreadable staleness_p95" (ms; staleness is the
                              grab's end minus the source's code: how late the ruler was); exits 1
                              when no tile code can be read.
  selftest                    checks the reader against strips drawn in memory (no display).

RECT is X,Y,WxH on the screen. `source` and `copy` print "ready" once their window is mapped, then
run until SIGTERM. Standard library only (libX11 through ctypes).
"""

import argparse
import ctypes
import random
import signal
import sys
import time

ZPIXMAP = 2
ALL_PLANES = 0xFFFFFFFF
STRUCTURE_NOTIFY_MASK = 1 << 17
MAP_NOTIFY = 19
CW_OVERRIDE_REDIRECT = 1 << 9
COLUMNS, ROWS = 16, 2
MODULUS = 1 << 24


class XImage(ctypes.Structure):
    _fields_ = [
        ("width", ctypes.c_int), ("height", ctypes.c_int), ("xoffset", ctypes.c_int), ("format", ctypes.c_int),
        ("data", ctypes.c_void_p), ("byte_order", ctypes.c_int), ("bitmap_unit", ctypes.c_int),
        ("bitmap_bit_order", ctypes.c_int), ("bitmap_pad", ctypes.c_int), ("depth", ctypes.c_int),
        ("bytes_per_line", ctypes.c_int), ("bits_per_pixel", ctypes.c_int), ("red_mask", ctypes.c_ulong),
        ("green_mask", ctypes.c_ulong), ("blue_mask", ctypes.c_ulong), ("obdata", ctypes.c_void_p),
        ("funcs", ctypes.c_void_p * 6),
    ]


class SetWindowAttributes(ctypes.Structure):
    _fields_ = [
        ("background_pixmap", ctypes.c_ulong), ("background_pixel", ctypes.c_ulong),
        ("border_pixmap", ctypes.c_ulong), ("border_pixel", ctypes.c_ulong), ("bit_gravity", ctypes.c_int),
        ("win_gravity", ctypes.c_int), ("backing_store", ctypes.c_int), ("backing_planes", ctypes.c_ulong),
        ("backing_pixel", ctypes.c_ulong), ("save_under", ctypes.c_int), ("event_mask", ctypes.c_long),
        ("do_not_propagate_mask", ctypes.c_long), ("override_redirect", ctypes.c_int),
        ("colormap", ctypes.c_ulong), ("cursor", ctypes.c_ulong),
    ]


def load_xlib():
    x = ctypes.CDLL("libX11.so.6")
    p, ul, i, ui = ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_uint
    signatures = {
        "XOpenDisplay": ([ctypes.c_char_p], p),
        "XDefaultRootWindow": ([p], ul),
        "XDefaultScreen": ([p], i),
        "XDefaultDepth": ([p, i], i),
        "XCreateSimpleWindow": ([p, ul, i, i, ui, ui, ui, ul, ul], ul),
        "XChangeWindowAttributes": ([p, ul, ul, ctypes.POINTER(SetWindowAttributes)], i),
        "XSelectInput": ([p, ul, ctypes.c_long], i),
        "XMapRaised": ([p, ul], i),
        "XNextEvent": ([p, ctypes.c_void_p], i),
        "XCreatePixmap": ([p, ul, ui, ui, ui], ul),
        "XCreateGC": ([p, ul, ul, p], p),
        "XSetForeground": ([p, p, ul], i),
        "XFillRectangle": ([p, ul, p, i, i, ui, ui], i),
        "XCopyArea": ([p, ul, ul, p, i, i, ui, ui, i, i], i),
        "XFlush": ([p], i),
        "XSync": ([p, i], i),
        "XGetImage": ([p, ul, i, i, ui, ui, ul, i], ctypes.POINTER(XImage)),
        "XGetSubImage": ([p, ul, i, i, ui, ui, ul, i, ctypes.POINTER(XImage), i, i], ctypes.POINTER(XImage)),
        "XPutImage": ([p, ul, p, ctypes.POINTER(XImage), i, i, i, i, ui, ui], i),
    }
    for name, (arguments, result) in signatures.items():
        function = getattr(x, name)
        function.argtypes, function.restype = arguments, result
    return x


def parse_rect(text):
    try:
        position, size = text.rsplit(",", 1)
        x, y = (int(v) for v in position.split(","))
        width, height = (int(v) for v in size.split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError("a rectangle is X,Y,WxH, not %r" % text)
    if x < 0 or y < 0 or width < 64 or height < 16:
        raise argparse.ArgumentTypeError("rectangle %r is off the screen or smaller than 64x16" % text)
    return x, y, width, height


def parse_size(text):
    try:
        width, height = (int(v) for v in text.split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError("a size is WxH, not %r" % text)
    if width < 64 or height < 16:
        raise argparse.ArgumentTypeError("size %r is smaller than 64x16" % text)
    return width, height


def crc8(number):
    crc = 0xA5
    for shift in (16, 8, 0):
        crc ^= (number >> shift) & 0xFF
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def cell_size(width):
    return (width // COLUMNS) & ~1


def now_ms():
    return int(time.monotonic() * 1000)


class Display:
    def __init__(self, name):
        self.x = load_xlib()
        self.d = self.x.XOpenDisplay(name.encode())
        if not self.d:
            sys.exit("screen-probe: cannot open X display %s" % name)
        self.root = self.x.XDefaultRootWindow(self.d)
        self.depth = self.x.XDefaultDepth(self.d, self.x.XDefaultScreen(self.d))
        if self.depth != 24:
            sys.exit("screen-probe: the display is %d bits deep; 24 expected" % self.depth)

    def window(self, rect, background):
        """A borderless window at RECT, kept there (override-redirect); returns once it is mapped."""
        x, y, width, height = rect
        window = self.x.XCreateSimpleWindow(self.d, self.root, x, y, width, height, 0, 0, background)
        attributes = SetWindowAttributes(override_redirect=1)
        self.x.XChangeWindowAttributes(self.d, window, CW_OVERRIDE_REDIRECT, ctypes.byref(attributes))
        self.x.XSelectInput(self.d, window, STRUCTURE_NOTIFY_MASK)
        self.x.XMapRaised(self.d, window)
        event = (ctypes.c_long * 24)()
        while True:  # events, not a timer: MapNotify says the window is on the screen
            self.x.XNextEvent(self.d, event)
            if ctypes.cast(event, ctypes.POINTER(ctypes.c_int))[0] == MAP_NOTIFY:
                return window

    def image(self, rect):
        x, y, width, height = rect
        image = self.x.XGetImage(self.d, self.root, x, y, width, height, ALL_PLANES, ZPIXMAP)
        if not image or image.contents.bits_per_pixel != 32:
            sys.exit("screen-probe: cannot read the screen at %r as 32-bit pixels" % (rect,))
        return image

    def grab(self, rect, image):
        x, y, width, height = rect
        if not self.x.XGetSubImage(self.d, self.root, x, y, width, height, ALL_PLANES, ZPIXMAP, image, 0, 0):
            sys.exit("screen-probe: XGetImage of %r failed" % (rect,))


def paced(rate):
    """Yields once per 1/rate s on a fixed grid (a late tick is skipped, not bunched up)."""
    period = 1.0 / rate
    start = time.monotonic()
    tick = 0
    while True:
        yield
        tick = max(tick + 1, int((time.monotonic() - start) / period) + 1)
        time.sleep(max(0.0, start + tick * period - time.monotonic()))


def ready():
    print("ready", flush=True)


def run_source(arguments):
    display = Display(arguments.display)
    x = display.x
    _, _, width, height = arguments.rect
    cell = cell_size(width)
    strip = cell * ROWS
    window = display.window(arguments.rect, 0x808080)
    gc = x.XCreateGC(display.d, window, 0, None)
    pixmap = x.XCreatePixmap(display.d, window, width, strip, display.depth)
    box = max(8, height // 6)
    travel = max(1, width - box)
    last_box = None
    ready()
    for _ in paced(arguments.rate):
        number = now_ms() % MODULUS
        word = number << 8 | crc8(number)
        x.XSetForeground(display.d, gc, 0x000000)
        x.XFillRectangle(display.d, pixmap, gc, 0, 0, width, strip)
        x.XSetForeground(display.d, gc, 0xFFFFFF)
        for bit in range(COLUMNS * ROWS):
            if word >> (31 - bit) & 1:
                row, column = divmod(bit, COLUMNS)
                x.XFillRectangle(display.d, pixmap, gc, column * cell, row * cell, cell, cell)
        x.XCopyArea(display.d, pixmap, window, gc, 0, 0, width, strip, 0, 0)
        phase = (number // 5) % (2 * travel)
        box_x = phase if phase < travel else 2 * travel - phase
        box_y = strip + (height - strip - box) // 2
        if last_box is not None:
            x.XSetForeground(display.d, gc, 0x808080)
            x.XFillRectangle(display.d, window, gc, last_box, box_y, box, box)
        x.XSetForeground(display.d, gc, 0x282828)
        x.XFillRectangle(display.d, window, gc, box_x, box_y, box, box)
        last_box = box_x
        x.XFlush(display.d)


def run_copy(arguments):
    if arguments.source[2:] != arguments.target[2:]:
        sys.exit("screen-probe: copy needs two rectangles of one size")
    display = Display(arguments.display)
    x = display.x
    _, _, width, height = arguments.target
    window = display.window(arguments.target, 0)
    gc = x.XCreateGC(display.d, window, 0, None)
    image = display.image(arguments.source)
    ready()
    for _ in paced(arguments.fps):
        display.grab(arguments.source, image)
        x.XPutImage(display.d, window, gc, image, 0, 0, 0, 0, width, height)
        x.XFlush(display.d)


class Reader:
    """Reads the code strip of a picture of size `picture` shown scaled into `rect`, from a grab
    whose top left is (`left`, `top`)."""

    def __init__(self, rect, picture, left, top):
        x, y, width, height = rect
        cell = cell_size(picture[0])
        self.points = []
        for bit in range(COLUMNS * ROWS):
            row, column = divmod(bit, COLUMNS)
            cx = x - left + (column * cell + cell // 2) * width // picture[0]
            cy = y - top + (row * cell + cell // 2) * height // picture[1]
            self.points.append([(cx + dx, cy + dy) for dx, dy in ((0, 0), (-2, 0), (2, 0), (0, -2), (0, 2))])
        self.bottom = y + (cell * ROWS * height + picture[1] - 1) // picture[1] + 1

    def read(self, pixels, stride):
        word = 0
        for samples in self.points:
            total = 0
            for px, py in samples:
                offset = py * stride + px * 4
                total += pixels[offset] + pixels[offset + 1] + pixels[offset + 2]
            word = word << 1 | (1 if total >= 128 * 3 * len(samples) else 0)
        number = word >> 8
        return number if crc8(number) == word & 0xFF else None


def percentile(values, q):
    return values[min(len(values) - 1, int(q * len(values)))]


def run_sample(arguments):
    display = Display(arguments.display)
    source, tile = arguments.source, arguments.tile
    left = min(source[0], tile[0])
    top = min(source[1], tile[1])
    source_reader = Reader(source, (source[2], source[3]), left, top)
    tile_reader = Reader(tile, arguments.picture, left, top)
    right = max(source[0] + source[2], tile[0] + tile[2])
    bottom = max(source_reader.bottom, tile_reader.bottom)
    area = (left, top, right - left, bottom - top)
    image = display.image(area)
    contents = image.contents
    stride = contents.bytes_per_line
    pixels = (ctypes.c_ubyte * (stride * contents.height)).from_address(contents.data)

    def grab():
        display.grab(area, image)
        return now_ms(), source_reader.read(pixels, stride), tile_reader.read(pixels, stride)

    # Wait for the first readable tile: the call (or the copy) is still starting.
    deadline = time.monotonic() + arguments.start_timeout
    while True:
        _, shown, seen = grab()
        if shown is not None and seen is not None:
            break
        if time.monotonic() > deadline:
            print("0 nan nan 0 nan")
            return 1
        time.sleep(0.02)  # the retry interval while the tile is still empty, not a synchronisation

    latencies, stalenesses, unreadable = [], [], 0
    trace = open(arguments.trace, "w") if arguments.trace else None
    deadline = time.monotonic() + arguments.timeout
    while len(latencies) < arguments.samples and time.monotonic() < deadline:
        # Random intervals, so the samples fall on every phase of the source's and the capture's periods.
        time.sleep(random.uniform(0.02, 0.06))
        grabbed_at, shown, seen = grab()
        if shown is None or seen is None:
            unreadable += 1
            continue
        latency = (shown - seen) % MODULUS
        if latency > 10_000:  # a code from the future or from long ago is a misreading
            unreadable += 1
            continue
        latencies.append(latency)
        stalenesses.append((grabbed_at - shown) % MODULUS)
        if trace:
            trace.write("%d %d %d\n" % (grabbed_at, shown, seen))
    if trace:
        trace.close()
    if not latencies:
        print("0 nan nan %d nan" % unreadable)
        return 1
    latencies.sort()
    stalenesses.sort()
    print(
        len(latencies), percentile(latencies, 0.5), percentile(latencies, 0.95), unreadable,
        percentile(stalenesses, 0.95),
    )
    return 0


def run_selftest(_):
    """The reader against pictures drawn here: every number read back from a strip scaled like a
    tile, a damaged strip or a blank one never read as a number, the CRC as Pattern.swift has it."""
    failures = []
    if (crc8(0), crc8(0xFFFFFF)) != (crc8_reference(0), crc8_reference(0xFFFFFF)):
        failures.append("crc8 differs from the bitwise reference")
    picture, rect = (640, 360), (7, 4, 945, 532)
    stride = (rect[0] + rect[2]) * 4
    reader = Reader(rect, picture, 0, 0)

    def draw(word):
        pixels = bytearray(stride * reader.bottom)
        cell = cell_size(picture[0])
        for y in range(rect[1], reader.bottom):
            row = (y - rect[1]) * picture[1] // rect[3] // cell
            if row >= ROWS:
                break
            line = bytearray(stride)
            for column in range(COLUMNS):
                if word >> (31 - (row * COLUMNS + column)) & 1:
                    left = rect[0] + -(-column * cell * rect[2] // picture[0])
                    right = rect[0] + -(-(column + 1) * cell * rect[2] // picture[0])
                    line[left * 4 : right * 4] = b"\xeb" * (4 * (right - left))
            pixels[y * stride : (y + 1) * stride] = line
        return pixels

    for number in (0, 1, 0x5A5A5A, 12_345_678, MODULUS - 1):
        word = number << 8 | crc8(number)
        if reader.read(draw(word), stride) != number:
            failures.append("%d not read back" % number)
        for bit in (0, 13, 31):
            if reader.read(draw(word ^ 1 << bit), stride) is not None:
                failures.append("%d with bit %d flipped read as a number" % (number, bit))
    if reader.read(bytearray(stride * reader.bottom), stride) is not None:
        failures.append("a black strip read as a number")
    for failure in failures:
        print("screen-probe selftest:", failure, file=sys.stderr)
    return 1 if failures else 0


def crc8_reference(number):
    """The same CRC as polynomial long division (the start value XORed into the first byte), a
    second spelling to check the first against."""
    register = (number ^ 0xA5 << 16) << 8
    for bit in range(31, 7, -1):
        if register >> bit & 1:
            register ^= 0x107 << (bit - 8)
    return register


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    parser = argparse.ArgumentParser(description="Glass-to-glass probe: time codes drawn and read on an X display.")
    parser.add_argument("--display", help="the X display, :N (all but selftest)")
    commands = parser.add_subparsers(dest="command", required=True)
    source = commands.add_parser("source", help="show the code of the current time")
    source.add_argument("rect", type=parse_rect)
    source.add_argument("--rate", type=int, default=120, help="redraws per second")
    copy = commands.add_parser("copy", help="copy one rectangle of the screen to another")
    copy.add_argument("source", type=parse_rect)
    copy.add_argument("target", type=parse_rect)
    copy.add_argument("--fps", type=int, default=30)
    sample = commands.add_parser("sample", help="read the source's and the tile's codes from one grab")
    sample.add_argument("source", type=parse_rect)
    sample.add_argument("tile", type=parse_rect, help="where the picture is shown, scaled")
    sample.add_argument("--picture", type=parse_size, required=True, help="the size of the picture in the tile")
    sample.add_argument("--samples", type=int, default=200)
    sample.add_argument("--timeout", type=float, default=60, help="seconds to collect the samples in")
    sample.add_argument("--start-timeout", type=float, default=60, help="seconds to wait for a readable tile")
    sample.add_argument("--trace", help="write 'grab source tile' (ms) per sample to this file")
    commands.add_parser("selftest", help="check the reader against pictures drawn in memory")
    arguments = parser.parse_args()
    if arguments.command != "selftest" and not arguments.display:
        parser.error("--display is needed")
    for name in ("rate", "fps", "samples"):
        if getattr(arguments, name, 1) < 1 or getattr(arguments, name, 1) > 1000:
            parser.error("--%s must be 1 to 1000" % name)
    try:
        if arguments.command == "source":
            run_source(arguments)
        elif arguments.command == "copy":
            run_copy(arguments)
        elif arguments.command == "selftest":
            sys.exit(run_selftest(arguments))
        else:
            sys.exit(run_sample(arguments))
    except BrokenPipeError:
        pass


if __name__ == "__main__":
    main()
