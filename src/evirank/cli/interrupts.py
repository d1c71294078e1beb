"""How a command ends when it is interrupted, asked to stop, or its reader goes away.

* Ctrl-C is Python's ``KeyboardInterrupt``; SIGTERM and SIGHUP become :class:`Terminated` (a
  ``KeyboardInterrupt``), so the same unwinding runs: outputs' temporaries are removed, child
  processes stopped, and the command says what a rerun does.
* A library that turns a Ctrl-C into its own error (an interrupted import) is still an
  interruption (:func:`caused_by_interrupt`).
* A reader that stops early (``evirank explain ... | head``) ends the command quietly
  (:func:`stdout_closed`).
* After an interrupted Ray job the driver ends at once (:func:`stop_ray`, :func:`exit_now`).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from contextlib import suppress
from typing import Any


class Terminated(KeyboardInterrupt):
    """The command was asked to stop (SIGTERM, SIGHUP): it unwinds as after a Ctrl-C, and says so.

    Example:
        >>> Terminated(15).signal
        15
    """

    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.signal = number


def stop_on_termination() -> dict[int, Any]:
    """Turn SIGTERM and SIGHUP into :class:`Terminated`, so outputs' temporaries are removed, child
    processes stopped and the rerun's behaviour told, as after Ctrl-C; returns the handlers replaced."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def stop(number: int, frame: Any) -> None:
        raise Terminated(number)

    previous: dict[int, Any] = {}
    for name in ("SIGTERM", "SIGHUP"):
        number = getattr(signal, name, None)
        if number is not None and signal.getsignal(number) == signal.SIG_DFL:
            previous[number] = signal.signal(number, stop)
    return previous


def caused_by_interrupt(exc: BaseException) -> bool:
    """Whether a Ctrl-C (KeyboardInterrupt) is among the causes of ``exc``.

    Example:
        >>> try:
        ...     try:
        ...         raise KeyboardInterrupt
        ...     except KeyboardInterrupt as inner:
        ...         raise ModuleNotFoundError("Could not import module 'AutoTokenizer'") from inner
        ... except ModuleNotFoundError as outer:
        ...     caused_by_interrupt(outer)
        True
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def stdout_closed() -> bool:
    """After a broken pipe: whether it was standard output (``| head`` stopped reading).

    If so, standard output is pointed at ``os.devnull``, so that Python's own flush at exit does
    not report the same broken pipe again.
    """
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    except (OSError, ValueError):
        return False
    else:  # nothing was pending: ask the pipe whether its reader is gone
        try:
            import select

            poller = select.poll()
            poller.register(sys.stdout.fileno(), select.POLLOUT)
            if not any(event & select.POLLERR for _, event in poller.poll(0)):
                return False
        except (OSError, ValueError, AttributeError):
            return False
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return True


def stop_ray() -> None:
    """Shut down a Ray this process started, now (an interrupted job's driver otherwise crashes as
    Python exits); its processes end with it."""
    ray = sys.modules.get("ray")
    if ray is None or not getattr(ray, "is_initialized", lambda: False)():
        return
    try:
        ray.shutdown()
    except Exception:  # pragma: no cover - shutting down after an interruption is best effort
        logging.getLogger("evirank").debug("ray.shutdown after the interruption failed", exc_info=True)


def exit_now(code: int) -> None:
    """End the process now with ``code``, its output flushed, without Python's finalisation.

    After an interrupted Ray job the driver's threads (Ray Data's executor, Ray's core worker)
    are still winding down when Python finalises, and Ray's native code then crashes the process
    (status -11 instead of 130). Every cleanup that matters has run by now (outputs' temporaries
    removed, the score store committed); Ray's processes are ended by the watcher of
    :mod:`evirank.scale.reaper`. Only the ``evirank`` command itself (``main()`` without
    arguments) ends this way; a caller of ``main([...])`` gets the status back.
    """
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
