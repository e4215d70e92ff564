"""Starting and ending a helper process: ``python -m hyperapp.<module>`` talking over a socket pair.

A batch runs its stages on threads of one process, and every moment of Python they spend shares that
process's one interpreter. Work that is mostly Python, or mostly system calls that each need the
interpreter on their way back, goes to a helper with an interpreter of its own: the reading helper
(:mod:`hyperapp.reading.reader_process`) and the formatting helper (:mod:`hyperapp.detect.format_process`). Both are
started here, the same way: the helper runs ``python -m`` on its module with the socket's descriptor as
its first argument, imports this package from where this process did, and ends when the socket closes
(so it never outlives this process). Messages are :mod:`multiprocessing.connection`'s pickles.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence


def can_start() -> bool:
    """Whether a helper can be started here: a Python to run it with, not a frozen application."""
    return bool(sys.executable) and not getattr(sys, "frozen", False)


def start(module: str, args: Sequence[str] = (), pass_fds: Sequence[int] = ()):
    """Start ``python -m module <socket fd> *args`` (``pass_fds`` go with the socket); returns the
    :class:`subprocess.Popen` and this side's :class:`multiprocessing.connection.Connection`."""
    import socket
    import subprocess
    from multiprocessing.connection import Connection

    ours, theirs = socket.socketpair()
    # the helper imports this package from where this process did (an embedding application may have put
    # it on sys.path by hand)
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (here, os.environ.get("PYTHONPATH"))))}
    try:
        proc = subprocess.Popen([sys.executable, "-m", module, str(theirs.fileno()), *args],
                                pass_fds=(theirs.fileno(), *pass_fds), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/", env=env)
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return proc, Connection(ours.detach())


def end(proc, conn) -> None:
    """Close the socket (the helper then ends) and wait for the helper, killing one that does not end."""
    try:
        conn.close()
    except OSError:
        pass
    try:
        proc.wait(timeout=5)
    except Exception:  # noqa: BLE001  (a helper that does not end is killed)
        proc.kill()
        try:
            proc.wait(timeout=5)
        except Exception:  # noqa: BLE001
            pass
