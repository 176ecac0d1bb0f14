"""allspark: the base class of PAI-EAS Python processors, as eas-server runs them.

A processor is a module that defines a subclass of BaseProcessor and runs it:

    import allspark

    class MyProcessor(allspark.BaseProcessor):
        def initialize(self):
            self.model = load(self.get_model_path())

        def process(self, data):          # data: the request body, bytes
            return self.model(data), 200  # (bytes or str, HTTP status)

    if __name__ == '__main__':
        MyProcessor(worker_threads=5, worker_processes=1).run()

eas-server starts the module (processor_entry) with descriptor 3 connected to
it and EAS_WORKER_FD=3 set; run() then speaks eas-server's frame protocol on
it. Started by hand (no EAS_WORKER_FD), run() serves plain HTTP on endpoint
(default 0.0.0.0:8080) for local debugging: POST a body, get process's answer.

The frame protocol: every frame is a 13-byte header (u32 length of the rest,
u8 kind, u64 request id; big-endian) and a payload. The worker sends Hello
(JSON), receives Init (JSON), calls initialize() and sends Ready (or Fail
with the traceback), then answers every Request (the body) with an Answer
(u32 status, then the body) of the same id.
"""

import atexit
import json
import os
import socket
import struct
import sys
import threading
import traceback

__all__ = ["BaseProcessor"]

_HEADER = struct.Struct(">IBQ")
_STATUS = struct.Struct(">I")
_MIN_LENGTH = 9
_MAX_FRAME = 1 << 30

HELLO, INIT, READY, FAIL, REQUEST, ANSWER = (ord(c) for c in "HIRFQA")


def _frame(kind, ident, *parts):
    n = sum(len(p) for p in parts)
    return b"".join((_HEADER.pack(_MIN_LENGTH + n, kind, ident),) + parts)


class BaseProcessor(object):
    """Subclass it and define initialize() and process(data)."""

    def __init__(self, worker_threads=5, worker_processes=1, endpoint=None, **kwargs):
        # worker_threads: requests one process runs at once (threads);
        # worker_processes: processes eas-server starts for the service,
        # each with its own initialize(). Other EAS keyword arguments are
        # accepted and ignored.
        self.worker_threads = max(1, int(worker_threads))
        self.worker_processes = max(1, int(worker_processes))
        self.endpoint = endpoint
        self._model_path = ""
        self._model_entry = ""
        self._model_config = ""
        self._service = ""

    # What the user overrides.

    def initialize(self):
        """Load the model; runs once per process before any request."""

    def process(self, data):
        """Return (bytes, status) for one request body (bytes)."""
        raise NotImplementedError("define process(self, data) in your BaseProcessor subclass")

    # What the user may call.

    def get_model_path(self):
        """The local copy of model_path (a file or a directory); "" when none."""
        return self._model_path

    def get_model_entry(self):
        """model_entry inside the local model_path."""
        return self._model_entry

    def get_model_config(self):
        """model_config as a string (the JSON text of an object)."""
        return self._model_config

    def get_service_name(self):
        return self._service

    # The runtime.

    def run(self):
        global _run_called
        _run_called = True
        fd = os.environ.get("EAS_WORKER_FD")
        if fd is None:
            return self._run_http()
        sock = socket.socket(fileno=int(fd))
        try:
            _Worker(self, sock).serve()
        finally:
            sock.close()

    def _call(self, body):
        """Run process on one body; always returns (status, bytes)."""
        try:
            out = self.process(body)
        except Exception as e:  # the service keeps serving
            traceback.print_exc(file=sys.stderr)
            return 500, ("process raised %s: %s" % (type(e).__name__, e)).encode("utf-8", "replace")
        status = 200
        if isinstance(out, tuple):
            if len(out) != 2:
                return 500, b"process returned a tuple of %d items; return (bytes, status)" % len(out)
            out, status = out
        if out is None:
            out = b""
        elif isinstance(out, str):
            out = out.encode("utf-8")
        elif isinstance(out, (bytearray, memoryview)):
            out = bytes(out)
        elif not isinstance(out, bytes):
            return 500, ("process returned %s; return bytes or str (and a status)" % type(out).__name__).encode()
        if isinstance(status, bool) or not isinstance(status, int):
            return 500, ("process returned status %r; return an int HTTP status" % (status,)).encode()
        if status == 0:
            status = 200
        if not 100 <= status <= 599:
            return 500, b"process returned status %d, which is not an HTTP status" % status
        return status, out

    def _run_http(self):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        host, _, port = (self.endpoint or "0.0.0.0:8080").rpartition(":")
        proc = self
        proc.initialize()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, out = proc._call(body)
                self.send_response(status)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        print("allspark: serving %s on http://%s:%s (local debugging)" % (type(self).__name__, host or "0.0.0.0", port))
        ThreadingHTTPServer((host or "0.0.0.0", int(port)), Handler).serve_forever()


_run_called = False
_import_pid = os.getpid()


def _subclasses(cls):
    for c in cls.__subclasses__():
        yield c
        for d in _subclasses(c):
            yield d


@atexit.register
def _ended_without_run():
    # A script that imported allspark and ended without calling run() (a
    # missing or misspelt `if __name__ == "__main__":` block) says so,
    # naming its processor, instead of a bare exit: to eas-server as the
    # worker's Fail frame in place of Hello, by hand on stderr. An uncaught
    # exception (its traceback says more), a forked child or a
    # multiprocessing child says nothing.
    if _run_called or os.getpid() != _import_pid:
        return
    if getattr(sys, "last_value", None) is not None or getattr(sys, "last_exc", None) is not None:
        return
    mp = sys.modules.get("multiprocessing")
    if mp is not None and getattr(mp, "parent_process", lambda: None)() is not None:
        return
    script = os.path.basename(sys.argv[0] if sys.argv and sys.argv[0] else "the script")
    mine = [c.__name__ for c in _subclasses(BaseProcessor) if c.__module__ == "__main__"]
    if mine:
        what = "%s defines %s (an allspark.BaseProcessor) but never calls its run(); call %s(...).run() at the end of the script" % (
            script, ", ".join(mine), mine[0])
    else:
        what = "%s imports allspark but runs no processor; call <your processor>.run() at the end of the script" % script
    msg = "the processor's script ended without calling run(): " + what + ", e.g. under `if __name__ == \"__main__\":`"
    fd = os.environ.get("EAS_WORKER_FD")
    if fd is None:
        sys.stderr.write("allspark: %s\n" % msg)
        return
    try:
        sock = socket.socket(fileno=int(fd))
        try:
            sock.sendall(_frame(FAIL, 0, msg.encode("utf-8", "replace")))
        finally:
            sock.detach()
    except (OSError, ValueError):
        pass


class _Worker(object):
    """One worker process's side of the frame protocol."""

    def __init__(self, proc, sock):
        self.proc = proc
        self.sock = sock
        self.buf = bytearray()
        self.pos = 0
        self.lock = threading.Lock()

    def send(self, data):
        with self.lock:
            self.sock.sendall(data)

    def next_frame(self, out=None):
        """Returns (kind, id, payload), or None at the end of the stream.
        Pending output in out is sent before the process blocks on a read."""
        while True:
            have = len(self.buf) - self.pos
            if have >= _HEADER.size:
                length, kind, ident = _HEADER.unpack_from(self.buf, self.pos)
                if length < _MIN_LENGTH or length - _MIN_LENGTH > _MAX_FRAME:
                    raise ValueError("allspark: bad frame length %d" % length)
                end = self.pos + 4 + length
                if len(self.buf) >= end:
                    payload = bytes(self.buf[self.pos + _HEADER.size:end])
                    self.pos = end
                    return kind, ident, payload
            if out:
                self.send(bytes(out))
                del out[:]
            if self.pos:
                del self.buf[:self.pos]
                self.pos = 0
            chunk = self.sock.recv(1 << 18)
            if not chunk:
                return None
            self.buf += chunk

    def serve(self):
        proc = self.proc
        hello = {
            "pid": os.getpid(),
            "runtime": "python %d.%d.%d" % sys.version_info[:3],
            "worker_processes": proc.worker_processes,
            "worker_threads": proc.worker_threads,
        }
        self.send(_frame(HELLO, 0, json.dumps(hello).encode()))
        f = self.next_frame()
        if f is None:
            return
        kind, _, payload = f
        if kind != INIT:
            raise ValueError("allspark: expected an init frame, got %r" % chr(kind))
        info = json.loads(payload.decode("utf-8"))
        proc._model_path = info.get("model_path", "")
        proc._model_entry = info.get("model_entry", "")
        proc._model_config = info.get("model_config", "")
        proc._service = info.get("service", "")
        try:
            proc.initialize()
        except BaseException:
            self.send(_frame(FAIL, 0, traceback.format_exc().encode("utf-8", "replace")))
            return
        self.send(_frame(READY, 0))
        if proc.worker_threads == 1:
            self.serve_inline()
        else:
            self.serve_threads(proc.worker_threads)

    def serve_inline(self):
        # Answers collect in out and leave together when no further request
        # is already here: one write per burst, not per request.
        out = bytearray()
        call = self.proc._call
        while True:
            f = self.next_frame(out)
            if f is None:
                return
            kind, ident, body = f
            if kind != REQUEST:
                raise ValueError("allspark: unexpected frame %r" % chr(kind))
            status, result = call(body)
            out += _HEADER.pack(_MIN_LENGTH + 4 + len(result), ANSWER, ident)
            out += _STATUS.pack(status)
            out += result

    def serve_threads(self, n):
        from concurrent.futures import ThreadPoolExecutor

        call = self.proc._call

        def run(ident, body):
            try:
                status, result = call(body)
            except BaseException as e:
                # SystemExit, KeyboardInterrupt: as in the one-thread loop,
                # the process ends (and eas-server starts a new one), after
                # answering this request.
                traceback.print_exc(file=sys.stderr)
                try:
                    msg = "process raised %s: %s" % (type(e).__name__, e)
                    self.send(_frame(ANSWER, ident, _STATUS.pack(500), msg.encode("utf-8", "replace")))
                finally:
                    os._exit(1)
            try:
                self.send(_frame(ANSWER, ident, _STATUS.pack(status), result))
            except OSError:
                pass  # the server is gone; the read loop ends too

        with ThreadPoolExecutor(max_workers=n) as pool:
            while True:
                f = self.next_frame()
                if f is None:
                    return
                kind, ident, body = f
                if kind != REQUEST:
                    raise ValueError("allspark: unexpected frame %r" % chr(kind))
                pool.submit(run, ident, body)
