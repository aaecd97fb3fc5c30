"""Talks to the example repository (pip install "tritonclient[http,grpc]" numpy):

    python3 client.py [HOST]     # default localhost; HTTP on 8000, gRPC on 8001

1. mlp over HTTP: one request, the input's name and shape read from the completed config.
2. llm over gRPC: greedy generation as one sequence: prefill (START), decode calls, END on the last.
"""
import sys

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

host = sys.argv[1] if len(sys.argv) > 1 else "localhost"

http = httpclient.InferenceServerClient(f"{host}:8000")
cfg = http.get_model_config("mlp")
inp, out = cfg["input"][0], cfg["output"][0]
x = np.random.default_rng(0).standard_normal([d if d > 0 else 1 for d in inp["dims"]]).astype(np.float32)
t = httpclient.InferInput(inp["name"], list(x.shape), "FP32")
t.set_data_from_numpy(x)
y = http.infer("mlp", [t]).as_numpy(out["name"])
print(f"mlp: {inp['name']} {list(x.shape)} -> {out['name']} {list(y.shape)}")

# The lm fixture: prefill(tokens i64[8]) -> logits f32[8, 64]; decode(token i64[1], pos i64[1]) -> f32[1, 64].
# Both methods name their token input alike, so the config has one input for it (dims [-1]).
grpc = grpcclient.InferenceServerClient(f"{host}:8001")
cfg = grpc.get_model_config("llm", as_json=True)["config"]
names = sorted(i["name"] for i in cfg["input"])  # [token(s), pos] as the model library names them
logits_name = cfg["output"][0]["name"]


def call(method, arrays, **seq):
    ins = []
    for name, a in zip(names, arrays):
        i = grpcclient.InferInput(name, list(a.shape), "INT64")
        i.set_data_from_numpy(a)
        ins.append(i)
    return grpc.infer("llm", ins, parameters={"method": method}, sequence_id=42, **seq).as_numpy(logits_name)


prompt = np.arange(8, dtype=np.int64)
tokens = [int(np.argmax(call("prefill", [prompt], sequence_start=True)[-1]))]
for k in range(7):  # the fixture's cache holds 16 positions
    logits = call("decode", [np.array([tokens[-1]]), np.array([8 + k])], sequence_end=(k == 6))
    tokens.append(int(np.argmax(logits)))
print("llm: generated", tokens)
