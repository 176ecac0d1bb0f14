"""pre_process: a JSON body {"inputs": [[16 numbers], ...]} becomes the
PyTorch protobuf request the MLP's processor decodes."""
import json

import allspark
import torchpb


class JSONToTensor(allspark.BaseProcessor):
    def initialize(self):
        self.width = json.loads(self.get_model_config() or "{}").get("width", 16)

    def process(self, data):
        # A body that is not JSON, JSON of another shape, or JSON nested
        # too deep for the parser (RecursionError) is the client's mistake:
        # 400 with the reason, not a 500.
        try:
            rows = json.loads(data)["inputs"]
            flat = [float(x) for row in rows for x in row]
        except RecursionError:
            return 'want {"inputs": [[%d numbers], ...]}: the JSON is nested too deep' % self.width, 400
        except (ValueError, KeyError, TypeError) as e:
            return 'want {"inputs": [[%d numbers], ...]}: %s' % (self.width, e), 400
        if not rows or any(len(row) != self.width for row in rows):
            return "each row of inputs must hold %d numbers" % self.width, 400
        return torchpb.encode_request([([len(rows), self.width], flat)]), 200


if __name__ == "__main__":
    JSONToTensor(worker_threads=1).run()
