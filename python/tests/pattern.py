"""The content pattern every test peer writes and checks: byte i of message k is
(k + i) % 251. numpy only, so that peers running under a stock ROS 2 interpreter
(which has numpy but neither pytest nor freight) import it too."""

import numpy as np

#: The pattern's period: a prime, so that no power-of-two offset bug aligns with it.
PERIOD = 251


def _period(k):
    return ((k + np.arange(PERIOD)) % PERIOD).astype(np.uint8)


def fill_pattern(array, k):
    """Writes message ``k``'s pattern in place: byte i is (k + i) % 251."""
    flat = array.reshape(-1).view(np.uint8)
    whole = flat.size - flat.size % PERIOD
    if whole:
        flat[:whole].reshape(-1, PERIOD)[:] = _period(k)
    flat[whole:] = _period(k)[: flat.size - whole]


def first_mismatch(array, k):
    """Index of the first byte that breaks message ``k``'s pattern, or None."""
    flat = np.asarray(array).reshape(-1).view(np.uint8)
    whole = flat.size - flat.size % PERIOD
    if whole:
        bad = np.nonzero((flat[:whole].reshape(-1, PERIOD) != _period(k)).any(axis=1))[0]
        if bad.size:
            row = flat[bad[0] * PERIOD : (bad[0] + 1) * PERIOD]
            return int(bad[0] * PERIOD + np.nonzero(row != _period(k))[0][0])
    tail = np.nonzero(flat[whole:] != _period(k)[: flat.size - whole])[0]
    return int(whole + tail[0]) if tail.size else None
