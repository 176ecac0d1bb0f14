"""batch-inference's side of scripts/bench-text-embedding.sh: a BERT sentence
embedding model class in PyTorch, as batch-inference's BERT-embedding
example has it (transformers' BertModel, @batching with BucketSeqBatcher,
max_batch_size 32), with the tokenizer in the class (Hugging Face
tokenizers, the Rust library transformers' fast tokenizers wrap), behind a
minimal threaded http.server taking the same JSON as eas-server's
text_encoder ({"text": "..."} -> {"embedding": [...]}).

Usage: modelhost_server.py PORT on|off MODEL_DIR MAX_LENGTH
  on:  ModelHost(max_batch_size=32), its defaults otherwise (wait_ms 5, wait_n 8),
       BucketSeqBatcher's buckets from $BUCKETS (token counts, comma-separated)
  off: each handler thread tokenizes and calls predict_batch itself
The embedding is the mean of the last hidden state over the text's tokens,
L2-normalized (sentence-transformers' Pooling + Normalize).
torch runs with 2 intra-op threads (torch.set_num_threads(2))."""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch
from batch_inference import batching
from batch_inference.batcher.bucket_seq_batcher import BucketSeqBatcher
from tokenizers import Tokenizer
from transformers import BertModel

torch.set_num_threads(2)


BUCKETS = [int(b) for b in os.environ.get("BUCKETS", "32,64,96,128,192,256").split(",")]


@batching(batcher=BucketSeqBatcher(padding_tokens=[0, 0], buckets=BUCKETS, tensor="pt"), max_batch_size=32)
class BertEmbedding:
    def __init__(self, model_dir, max_length):
        self.tokenizer = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length)
        self.model = BertModel.from_pretrained(model_dir, add_pooling_layer=False).eval()

    def tokenize(self, text):
        e = self.tokenizer.encode(text)
        return torch.tensor([e.ids], dtype=torch.long), torch.tensor([e.attention_mask], dtype=torch.long)

    def predict_batch(self, input_ids, attention_mask):
        with torch.no_grad():
            h = self.model(input_ids=input_ids, attention_mask=attention_mask)[0]
            m = attention_mask.unsqueeze(-1).to(h.dtype)
            e = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(e, p=2, dim=1)


def main():
    port, mode, model_dir, max_length = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
    host = BertEmbedding.host(model_dir, max_length)
    model = host.model_obj
    if mode == "on":
        host.start()
        predict = host.predict
    else:
        predict = model.predict_batch

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            y = predict(*model.tokenize(req["text"]))
            body = json.dumps({"embedding": y[0].tolist()}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.request_queue_size = 128
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
