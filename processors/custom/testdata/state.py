"""A python custom processor for the tests: state from initialize (a
counter and model_config's prefix), and requests that raise, exit, sleep past
the deadline, answer a status of their own or the process id. "fork" starts a
multiprocessing helper (forked: it keeps the worker's socket) that sleeps, and
answers its pid; "die" ends the process at once (os._exit)."""
import json
import multiprocessing
import os
import sys
import time

import allspark


class Stateful(allspark.BaseProcessor):
    def initialize(self):
        cfg = json.loads(self.get_model_config() or "{}")
        self.prefix = cfg.get("prefix", "").encode()
        self.count = 0
        if cfg.get("fail_init"):
            raise RuntimeError("initialize was told to fail")

    def process(self, data):
        self.count += 1
        if data == b"raise":
            raise ValueError("asked to raise")
        if data == b"sleep":
            time.sleep(2)
        if data == b"exit":
            sys.exit(3)
        if data == b"fork":
            helper = multiprocessing.get_context("fork").Process(target=time.sleep, args=(3600,))
            helper.start()
            return str(helper.pid), 200
        if data == b"die":
            os._exit(1)
        if data == b"pid":
            return str(os.getpid()), 200
        if data == b"count":
            return str(self.count), 200
        if data == b"missing":
            return b"no such thing", 404
        if data == b"sys.prefix":
            return sys.prefix, 200
        if data == b"model":
            return self.get_model_entry(), 200
        return self.prefix + data.upper(), 200


if __name__ == "__main__":
    Stateful(worker_threads=int(os.environ.get("TEST_ALLSPARK_THREADS", "1")),
             worker_processes=int(os.environ.get("TEST_ALLSPARK_PROCESSES", "1"))).run()
