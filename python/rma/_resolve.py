# SPDX-License-Identifier: BSD-2-Clause
"""Resolving a request's future from a thread other than its loop's."""


def _set(fut, exc, value):
    if fut.cancelled():
        return
    if exc is None:
        fut.set_result(value)
    else:
        fut.set_exception(exc)


def resolve_threadsafe(fut, exc, value=None):
    """Hand the outcome to the future's loop (called by the C extension).
    A loop closed with the request pending has nobody to tell: the
    outcome stays on the request (its status), with no error per
    request."""
    loop = fut.get_loop()
    try:
        loop.call_soon_threadsafe(_set, fut, exc, value)
    except RuntimeError:
        if not loop.is_closed():
            raise


async def notifications(client):
    """Client.notifications(): queued ones first, then each as the loop's
    reader of the client (or any progress) takes it; ends once closed."""
    while not client.closed:
        n = client._notify_next()
        if n is None:
            n = await client._notify_wait()
            if n is None:  # closed meanwhile
                return
        yield n


def _deliver(client, fut, exc, n):
    if fut.cancelled():
        if n is not None:
            client._notify_unget(n)
    elif exc is None:
        fut.set_result(n)
    else:
        fut.set_exception(exc)


def notify_deliver(client, fut, exc, n):
    """Hand a notification (or failure) to an iterator's future from a
    thread other than its loop's; one cancelled meanwhile, or whose loop
    was closed, gives it back."""
    loop = fut.get_loop()
    try:
        loop.call_soon_threadsafe(_deliver, client, fut, exc, n)
    except RuntimeError:
        if not loop.is_closed():
            raise
        if n is not None:
            client._notify_unget(n)
