"""PNG files from numpy pixels with the standard library alone (zlib and struct)."""

import struct
import zlib

import numpy as np

#: PNG color types by channel count: gray, RGB, RGBA.
COLOR_TYPES = {1: 0, 3: 2, 4: 6}


def png_bytes(pixels, color_type=None):
    """A PNG file of (height, width, channels) uint8 pixels (gray, RGB or RGBA):
    IHDR, one IDAT, IEND."""
    pixels = np.ascontiguousarray(pixels, np.uint8)
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    height, width, channels = pixels.shape
    if color_type is None:
        if channels not in COLOR_TYPES:
            raise ValueError(f"a PNG has 1, 3 or 4 channels, not {channels}")
        color_type = COLOR_TYPES[channels]
    rows = pixels.reshape(height, width * channels)
    # Every row uses PNG's "Sub" filter (type 1): each byte minus the same channel
    # of the pixel to its left. Smooth images then compress far better, and faster.
    # uint8 arithmetic wraps modulo 256, which is what the filter specifies.
    filtered = np.empty((height, 1 + width * channels), np.uint8)
    filtered[:, 0] = 1
    filtered[:, 1 : 1 + channels] = rows[:, :channels]
    filtered[:, 1 + channels :] = rows[:, channels:] - rows[:, :-channels]

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)  # 8 bits, no interlace
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(filtered.tobytes(), 6))
        + chunk(b"IEND", b"")
    )


def write_png(path, pixels):
    """Writes (height, width, channels) uint8 pixels to ``path``; returns the file's size."""
    data = png_bytes(pixels)
    with open(path, "wb") as f:
        f.write(data)
    return len(data)
