# SPDX-License-Identifier: BSD-2-Clause
"""Integers that no 64-bit offset, length, size or value holds raise
OverflowError, negative ones too, before anything is sent: they used to be
masked to 64 bits, so put(region, 2**64 + 8, ...) wrote from offset 8
(issue 23, finding 6)."""

import pytest

import rma

BAD = [2**64, 2**64 + 8, -1]
# atomic operands: a negative one down to -2**63 is the word's two's
# complement (add -1 subtracts 1); below that, or above 2**64 - 1, none
BAD_OPERANDS = [2**64, 2**64 + 8, -2**63 - 1]
SIZE = 1 << 16


@pytest.fixture
def link(two):
    """(c, r, remote, rb): a client on A with a region r, and the remote of
    region rb, which a client on B holds."""
    a, b = two
    cb = rma.Client(b.socket)
    rb = cb.alloc(SIZE)
    c = rma.Client(a.socket)
    r = c.alloc(SIZE)
    remote = c.import_remote(c.peer(b.listen), rb.descriptor())
    yield c, r, remote, rb
    c.close()
    cb.close()


def fill(region, byte):
    with memoryview(region) as mv:
        mv[:] = bytes([byte]) * len(mv)


def content(region):
    with memoryview(region) as mv:
        return bytes(mv)


def bad_calls(c, r, remote, x):
    """Every place an int is taken, with x there and sane values elsewhere
    (each alone would move 8 bytes at offset 0)."""
    return {
        "put offset": lambda: c.put(r, x, remote, 0, 8),
        "put remote_offset": lambda: c.put(r, 0, remote, x, 8),
        "put length": lambda: c.put(r, 0, remote, 0, x),
        "put keywords": lambda: c.put(region=r, offset=x, remote=remote,
                                      remote_offset=0, length=8),
        "put callback": lambda: c.put(r, 0, remote, x, 8, None, None),
        "put notify": lambda: c.put(r, 0, remote, 0, 8, notify=x),
        "get offset": lambda: c.get(r, x, remote, 0, 8),
        "get remote_offset": lambda: c.get(r, 0, remote, x, 8),
        "get length": lambda: c.get(r, 0, remote, 0, x),
        "get keywords": lambda: c.get(r, 0, remote, remote_offset=x,
                                      length=8),
        "atomic offset": lambda: c.atomic(remote, x, "swap", 7),
        "putv offset": lambda: c.putv(r, remote, [(0, 0, 8), (x, 8, 8)]),
        "putv remote_offset": lambda: c.putv(r, remote,
                                             [(0, 0, 8), (8, x, 8)]),
        "putv length": lambda: c.putv(r, remote, [(0, 0, 8), (8, 8, x)]),
        "getv offset": lambda: c.getv(r, remote, [(0, 0, 8), (x, 8, 8)]),
        "getv remote_offset": lambda: c.getv(r, remote,
                                             [(0, 0, 8), (8, x, 8)]),
        "getv length": lambda: c.getv(r, remote, [(0, 0, 8), (8, 8, x)]),
        "alloc size": lambda: c.alloc(x),
    }


def operand_calls(c, remote, x):
    return {
        "atomic value": lambda: c.atomic(remote, 0, "swap", x),
        "atomic compare": lambda: c.atomic(remote, 0, "cswap", 7, x),
        "atomic value 32": lambda: c.atomic(remote, 0, "add", x, width=32),
    }


def test_ints_that_do_not_fit_raise_and_write_nothing(link):
    c, r, remote, rb = link
    fill(r, 0x22)
    fill(rb, 0x11)
    raised = 0
    for x in BAD:
        for name, call in bad_calls(c, r, remote, x).items():
            # the binding's message, also where an int skips __index__
            with pytest.raises(OverflowError, match=r"0 to 2\*\*64 - 1"):
                call()
                pytest.fail("%s = %d did not raise" % (name, x))
            raised += 1
    for x in BAD_OPERANDS:
        for name, call in operand_calls(c, remote, x).items():
            with pytest.raises(OverflowError):
                call()
                pytest.fail("%s = %d did not raise" % (name, x))
            raised += 1
    assert raised == 3 * 18 + 3 * 3
    assert c.in_flight == 0
    # Whatever was started is complete once a flush is: nothing moved.
    c.flush().wait(10)
    assert content(rb) == b"\x11" * SIZE
    assert content(r) == b"\x22" * SIZE
    # the link works, and takes the largest of each
    c.put(r, SIZE - 8, remote, SIZE - 8, 8).wait(10)
    assert content(rb) == b"\x11" * (SIZE - 8) + b"\x22" * 8


def test_operands_keep_their_full_range(link):
    c, r, remote, rb = link
    top = 2**64 - 1
    assert c.atomic(remote, 0, "swap", top).wait(10) is None
    req = c.atomic(remote, 0, "cswap", 5, compare=top)
    req.wait(10)
    assert req.value == top
    req = c.atomic(remote, 0, "add", -1)  # two's complement: 5 - 1
    req.wait(10)
    assert req.value == 5
    req = c.atomic(remote, 0, "swap", -2**63)
    req.wait(10)
    assert req.value == 4
    req = c.atomic(remote, 0, "swap", 0)
    req.wait(10)
    assert req.value == 2**63
    # a notification value takes all 64 bits too
    c.put(r, 0, remote, 8, 8, notify=top).wait(10)
