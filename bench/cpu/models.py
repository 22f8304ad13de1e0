"""The models of the CPU peer comparison (bench/cpu_compare.py), built the same way by the
driver and by each runtime's runner, from a seed, so every runtime gets the same weights.

Two kinds: transformer encoders, whose input is [1, S, d] with the sequence length S as the
dynamic dim, and torchvision's classifiers (random weights, eval mode), whose input is
[N, 3, 224, 224] with the batch N as the dynamic dim. `size` below is S or N."""
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
# "<name>-tied" is <name> with every layer holding the same weights. nn.TransformerEncoder
# clones one layer, so freshly built layers are equal, and torch.onnx.export then stores
# one layer's initializers for all of them: a model 1/layers the size, whose weights stay in
# cache. Trained models differ per layer, so the plain names give each layer its own draw;
# the tied variant measures how a runtime keeps shared weights.
TIED_SUFFIX = "-tied"


def config(name):
    return MODELS[name[:-len(TIED_SUFFIX)] if name.endswith(TIED_SUFFIX) else name]

# torchvision classifiers (issue 23's CNN rows), at this image size.
VISION = {"resnet18", "mobilenet_v3_small"}
IMAGE_SIZE = 224


def is_vision(name):
    return name in VISION


def build(name, seed=0, layers=None):
    """The model `name`, its weights drawn from `seed`; `layers` overrides an encoder's
    block count (bench/onnx_encoder.py builds this encoder at 12 blocks)."""
    torch.manual_seed(seed)
    if is_vision(name):
        import torchvision
        return getattr(torchvision.models, name)(weights=None).eval()
    cfg = config(name)
    layer = torch.nn.TransformerEncoderLayer(cfg["d"], cfg["heads"], cfg["ffn"], dropout=0.0,
                                             activation="gelu", batch_first=True,
                                             norm_first=cfg["norm_first"])
    encoder = torch.nn.TransformerEncoder(layer, layers or cfg["layers"], enable_nested_tensor=False).eval()
    if not name.endswith(TIED_SUFFIX):
        with torch.no_grad():
            for i, block in enumerate(encoder.layers):
                gen = torch.Generator().manual_seed(seed * 1000 + i + 1)
                for p in block.parameters():
                    p.add_(torch.randn(p.shape, generator=gen) * 0.02)
    return encoder


def input_shape(name, size):
    """The input's shape at dynamic size `size` (S for encoders, N for classifiers)."""
    if is_vision(name):
        return (size, 3, IMAGE_SIZE, IMAGE_SIZE)
    return (1, size, config(name)["d"])


def dynamic_dim(name):
    """(axis, name) of the input's dynamic dim, as exported and as `planrt build --dim` names it."""
    return (0, "N") if is_vision(name) else (1, "S")
