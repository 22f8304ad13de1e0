#!/usr/bin/env python3
"""Makes the Hugging Face exports in this folder: small models of the common families built
from configs (random weights, seeded), exported by torch.onnx.export with both exporters, with
their inputs (a padded batch: an attention_mask whose second row ends in padding) and
transformers' own f32 outputs. Run where transformers is installed (the GPU machine: torch
2.11, transformers 5.17, onnx 1.23); CI only reads what it wrote.

  export_hf.py OUT_DIR [--models bert,llama,...] [--exporters dynamo,torchscript]

For each MODEL and EXPORTER it writes OUT_DIR/MODEL_EXPORTER.onnx (weights inside the file)
and, once per model, OUT_DIR/MODEL_inputs.npz (the graph inputs by name), MODEL_outputs.npz
(transformers' outputs by name, f32 on the CPU) and a line in OUT_DIR/manifest.txt; a model
or exporter that fails is recorded there with its error and the rest go on.
"""
import argparse
import inspect
import os
import sys
import traceback

import numpy as np
import torch

SEED = 1234
BATCH, SEQ, PAD = 2, 12, 4  # row 1 ends in PAD padding positions
VOCAB = 512


def configs():
    import transformers as tf
    small = dict(num_hidden_layers=2, num_attention_heads=4, hidden_size=64, intermediate_size=128,
                 max_position_embeddings=64, vocab_size=VOCAB)
    return {
        "bert": (tf.BertModel, tf.BertConfig(**small, type_vocab_size=2), ("input_ids", "attention_mask", "token_type_ids")),
        "distilbert": (tf.DistilBertModel, tf.DistilBertConfig(vocab_size=VOCAB, dim=64, n_layers=2, n_heads=4,
                                                               hidden_dim=128, max_position_embeddings=64),
                       ("input_ids", "attention_mask")),
        "roberta": (tf.RobertaModel, tf.RobertaConfig(**dict(small, max_position_embeddings=80), pad_token_id=1),
                    ("input_ids", "attention_mask")),
        "vit": (tf.ViTModel, tf.ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=64,
                                          num_hidden_layers=2, num_attention_heads=4, intermediate_size=128),
                ("pixel_values",)),
        "gpt2": (tf.GPT2Model, tf.GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=64),
                 ("input_ids", "attention_mask")),
        "llama": (tf.LlamaModel, tf.LlamaConfig(**small, num_key_value_heads=2), ("input_ids", "attention_mask")),
        "qwen2": (tf.Qwen2Model, tf.Qwen2Config(**small, num_key_value_heads=2), ("input_ids", "attention_mask")),
        "t5_encoder": (tf.T5EncoderModel, tf.T5Config(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                                                      num_heads=4), ("input_ids", "attention_mask")),
    }


class Wrapper(torch.nn.Module):
    """The model called with keyword inputs, returning its hidden states as a plain tensor."""

    def __init__(self, model, names):
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *args):
        kwargs = dict(zip(self.names, args))
        # Decoders run without a cache here (the decoder issue exports with one).
        if "use_cache" in inspect.signature(self.model.forward).parameters:
            kwargs["use_cache"] = False
        return self.model(**kwargs).last_hidden_state


def make_inputs(names):
    g = torch.Generator().manual_seed(SEED)
    out = {}
    for n in names:
        if n == "pixel_values":
            out[n] = torch.randn(BATCH, 3, 32, 32, generator=g)
        elif n == "attention_mask":
            m = torch.ones(BATCH, SEQ, dtype=torch.int64)
            m[1, SEQ - PAD:] = 0
            out[n] = m
        elif n == "token_type_ids":
            t = torch.zeros(BATCH, SEQ, dtype=torch.int64)
            t[:, SEQ // 2:] = 1
            out[n] = t
        else:
            out[n] = torch.randint(2, VOCAB, (BATCH, SEQ), generator=g)
    return out


def dynamic_axes(names):
    axes = {n: ({0: "batch"} if n == "pixel_values" else {0: "batch", 1: "seq"}) for n in names}
    axes["last_hidden_state"] = {0: "batch"} if "pixel_values" in names else {0: "batch", 1: "seq"}
    return axes


def export(name, exporter, out_dir, log):
    cls, cfg, names = configs()[name]
    torch.manual_seed(SEED)
    model = cls(cfg).eval()
    wrapper = Wrapper(model, names).eval()
    inputs = make_inputs(names)
    args = tuple(inputs[n] for n in names)
    with torch.no_grad():
        ref = wrapper(*args)
    np.savez(os.path.join(out_dir, f"{name}_inputs.npz"), **{n: v.numpy() for n, v in inputs.items()})
    np.savez(os.path.join(out_dir, f"{name}_outputs.npz"), last_hidden_state=ref.numpy())
    path = os.path.join(out_dir, f"{name}_{exporter}.onnx")
    kw = dict(input_names=list(names), output_names=["last_hidden_state"])
    if exporter == "dynamo":
        # torch.export's own spelling of the dynamic dims (dynamic_axes does not convert for a
        # *args forward); the exporter names them after the Dims.
        batch, seq = torch.export.Dim("batch", min=1, max=16), torch.export.Dim("seq", min=1, max=64)
        shapes = tuple({0: batch} if n == "pixel_values" else {0: batch, 1: seq} for n in names)
        torch.onnx.export(wrapper, args, path, dynamo=True, external_data=False, dynamic_shapes={"args": shapes}, **kw)
    else:
        torch.onnx.export(wrapper, args, path, dynamo=False, opset_version=17, dynamic_axes=dynamic_axes(names), **kw)
    import onnx
    m = onnx.load(path)
    ops = sorted({n.op_type for n in m.graph.node})
    log.write(f"{name}\t{exporter}\tok\topset {m.opset_import[0].version}\t{os.path.getsize(path)} bytes\t{' '.join(ops)}\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out_dir")
    p.add_argument("--models", default="bert,distilbert,roberta,vit,gpt2,llama,qwen2,t5_encoder")
    p.add_argument("--exporters", default="dynamo,torchscript")
    a = p.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    import transformers
    import onnx
    with open(os.path.join(a.out_dir, "manifest.txt"), "a") as log:
        log.write(f"# torch {torch.__version__}, transformers {transformers.__version__}, onnx {onnx.__version__}; "
                  f"seed {SEED}, batch {BATCH}, seq {SEQ}, row 1 padded by {PAD}\n")
        for name in a.models.split(","):
            for exporter in a.exporters.split(","):
                try:
                    export(name, exporter, a.out_dir, log)
                except Exception as e:  # record and go on: one family's failure says nothing of the rest
                    log.write(f"{name}\t{exporter}\tfailed\t{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}\n")
                    traceback.print_exc()
                log.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
