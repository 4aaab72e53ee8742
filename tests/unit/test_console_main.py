"""The ``dpbench`` command's wrapper (:func:`dpbench.cli.main.console_main`): exit codes and
streams at the end of a command, in a subprocess (it ends the process with ``os._exit``)."""

from __future__ import annotations

import subprocess
import sys

from dpbench.cli.main import EXIT_SIGPIPE


def _console(body: str) -> subprocess.CompletedProcess:
    code = f"import dpbench.cli.main as m\n{body}\nm.console_main()\n"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)


def test_exit_code_and_flushed_output() -> None:
    r = _console("def fake():\n    print('partial line', end='')\n    return 3\nm.main = fake")
    assert r.returncode == 3 and r.stdout == "partial line" and r.stderr == ""


def test_a_closed_pipe_ends_quietly_with_141() -> None:
    # `dpbench status | head`: the reader has gone; no traceback, the shell's 128 + SIGPIPE.
    r = _console("def fake():\n    raise BrokenPipeError(32, 'Broken pipe')\nm.main = fake")
    assert r.returncode == EXIT_SIGPIPE == 141
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr


def test_a_reader_that_stops_early() -> None:
    # A real pipe: more output than the pipe holds, and a reader that takes one line.
    proc = subprocess.Popen(
        [sys.executable, "-c",
         "import dpbench.cli.main as m\n"
         "def fake():\n"
         "    for i in range(200000):\n"
         "        print('line', i)\n"
         "    return 0\n"
         "m.main = fake\n"
         "m.console_main()\n"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == b"line 0\n"
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == EXIT_SIGPIPE, err
    assert "Traceback" not in err, err
