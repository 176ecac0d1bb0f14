"""An allspark Python processor: it answers the request body unchanged.
Two worker processes, each running one request at a time."""
import allspark


class Echo(allspark.BaseProcessor):
    def initialize(self):
        # Runs once per process before any request: load the model here
        # (self.get_model_path() is the local copy of model_path).
        self.served = 0

    def process(self, data):
        self.served += 1
        return data, 200


if __name__ == "__main__":
    Echo(worker_threads=1, worker_processes=2).run()
