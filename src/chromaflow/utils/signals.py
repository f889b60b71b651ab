"""Stop signals: SIGTERM, SIGINT and SIGHUP end every command alike (:class:`Interrupted`, exit 128 + signal)."""

from __future__ import annotations

import os
import signal
import sys
from typing import Callable


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread by SIGTERM, SIGINT or SIGHUP (:func:`handle_stop_signals`). A KeyboardInterrupt,
    so everything that cleans up after Ctrl-C (temporaries, worker pools, child processes) does so for all three;
    the CLI prints one line naming the signal and exits with 128 + its number."""

    def __init__(self, signum: int, note: str = ""):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.note = note


#: the stop signal this process received (:func:`handle_stop_signals`). Its :class:`Interrupted` can be raised where
#: Python swallows exceptions (a ``__del__`` or weakref callback: "Exception ignored in ...") and the run then goes
#: on, so :func:`atomic_output` checks this before renaming and the CLI before reporting success.
STOPPED: list[int] = []


def raise_if_stopped() -> None:
    """Raise :class:`Interrupted` again if a stop signal arrived (its first exception may have been swallowed)."""
    if STOPPED:
        raise Interrupted(STOPPED[0])


def _unraisable(hook: Callable) -> Callable:
    """``sys.unraisablehook`` that keeps quiet about a swallowed :class:`Interrupted` (:data:`STOPPED` has it)."""

    def quiet(unraisable) -> None:
        """Pass ``unraisable`` on to the previous hook unless it is an :class:`Interrupted`."""
        if not isinstance(unraisable.exc_value, Interrupted):
            hook(unraisable)

    setattr(quiet, "chromaflow_quiet", True)  # a function attribute: handle_stop_signals reads it with getattr
    return quiet


def handle_stop_signals(on_stop: Callable[[int], None] | None = None) -> None:
    """Make SIGTERM, SIGINT and SIGHUP raise :class:`Interrupted` in this (main) process, or, with ``on_stop``,
    call ``on_stop(signum)`` instead (``train`` stops at the next batch end, see its StopOnSignal).

    A signal ignored when the process started stays ignored (SIGINT of a background job, SIGHUP under nohup).
    After the first signal the three get their default action back: a second one ends the process at once
    (what the first left is then removed by the next run, see :func:`remove_stale_temporaries`). A process
    forked from this one (a worker pool) does not raise: it takes the signal's default action, as before.
    """
    main_pid = os.getpid()
    handled = [s for s in STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN]

    def on_signal(signum: int, frame: object) -> None:
        """The stop signals' handler: restore their default actions, then re-send the signal in a forked process,
        call ``on_stop``, or record it and raise :class:`Interrupted`."""
        for s in handled:
            signal.signal(s, signal.SIG_DFL)
        if os.getpid() != main_pid:
            os.kill(os.getpid(), signum)
        elif on_stop is not None:
            on_stop(signum)
        else:
            STOPPED.append(signum)
            raise Interrupted(signum)

    STOPPED.clear()
    if on_stop is None and not getattr(sys.unraisablehook, "chromaflow_quiet", False):
        sys.unraisablehook = _unraisable(sys.unraisablehook)
    for s in handled:
        signal.signal(s, on_signal)
