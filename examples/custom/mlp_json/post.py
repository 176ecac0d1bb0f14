"""post_process: the MLP's PyTorch protobuf response becomes JSON
{"outputs": [[numbers], ...]}, a row per input row."""
import json

import allspark
import torchpb


class TensorToJSON(allspark.BaseProcessor):
    def process(self, data):
        (shape, flat), = torchpb.decode_response(data)[:1]
        width = shape[-1] if shape else len(flat)
        rows = [flat[i:i + width] for i in range(0, len(flat), width)]
        return json.dumps({"outputs": rows}), 200


if __name__ == "__main__":
    TensorToJSON(worker_threads=1).run()
