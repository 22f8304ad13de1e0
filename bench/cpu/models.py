"""The models of the CPU peer comparison (bench/cpu_compare.py), built the same way by the
driver and by each runtime's runner, from a seed, so every runtime gets the same weights."""
import torch

MODELS = {
    # The encoder of issue 23's table: pre-norm nn.TransformerEncoderLayer, GELU.
    "encoder": dict(d=512, heads=8, ffn=2048, layers=2, norm_first=True),
    # BERT-base-sized blocks (post-norm, GELU, d 768, 12 heads, FFN 3072), 6 of them; the
    # input is the embedded sequence (no token table).
    "bert6": dict(d=768, heads=12, ffn=3072, layers=6, norm_first=False),
    # One small block: the smoke run's model.
    "tiny": dict(d=64, heads=4, ffn=128, layers=1, norm_first=True),
}


def build(name, seed=0):
    cfg = MODELS[name]
    torch.manual_seed(seed)
    layer = torch.nn.TransformerEncoderLayer(cfg["d"], cfg["heads"], cfg["ffn"], dropout=0.0,
                                             activation="gelu", batch_first=True,
                                             norm_first=cfg["norm_first"])
    return torch.nn.TransformerEncoder(layer, cfg["layers"], enable_nested_tensor=False).eval()


def width(name):
    return MODELS[name]["d"]
