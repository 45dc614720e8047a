"""What training computes and what the GPUs can: the FLOPs of an update counted from its batches'
real lengths (`training_flops`), and the peak arithmetic rates of GPU models, for model-FLOPs
utilisation (MFU) and the paper's cost formula.

Dense (no sparsity) tensor-core peaks in FLOP/s as published by NVIDIA; `fp32` is the plain
single-precision rate that the paper's footnote 5 uses for its training-cost estimates.
"""

from __future__ import annotations

import re

import numpy as np

# GPU model, as whole words of torch.cuda.get_device_name ("NVIDIA H100 80GB HBM3", "Tesla P100-PCIE-16GB")
# -> {precision: FLOP/s}
PEAKS = {
    "H200": {"bf16": 989e12, "fp16": 989e12, "fp32": 67e12},
    "H100 PCIe": {"bf16": 756e12, "fp16": 756e12, "fp32": 51e12},
    "H100": {"bf16": 989e12, "fp16": 989e12, "fp32": 67e12},
    "A100": {"bf16": 312e12, "fp16": 312e12, "fp32": 19.5e12},
    "A10G": {"bf16": 70e12, "fp16": 70e12, "fp32": 31.2e12},
    "L40S": {"bf16": 362e12, "fp16": 362e12, "fp32": 91.6e12},
    "L4": {"bf16": 121e12, "fp16": 121e12, "fp32": 30.3e12},
    "V100": {"fp16": 125e12, "fp32": 15.7e12},
    "P100": {"fp32": 9.5e12, "fp16": 19e12},  # paper footnote 5: 9.5 TFLOPS
    "K80": {"fp32": 2.8e12},
    "K40": {"fp32": 3.7e12},
    "M40": {"fp32": 6.0e12},
}


def _words(name: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", name.lower())


def gpu_model(device_name: str | None) -> str | None:
    """The PEAKS entry a device name is: its words include the entry's words in a row, the entry with
    the most words winning ("NVIDIA H100 PCIe" is "H100 PCIe", not "H100"); "NVIDIA L40" is not "L4"."""
    if not device_name:
        return None
    words = _words(device_name)
    found = [key for key in PEAKS if any(words[i : i + len(_words(key))] == _words(key) for i in range(len(words)))]
    return max(found, key=lambda k: len(_words(k)), default=None)


def peak_flops(device_name: str | None, precision: str) -> float | None:
    """Peak FLOP/s of `device_name` at `precision` ("bf16", "fp16", "fp32"), or None if unknown."""
    model = gpu_model(device_name)
    return PEAKS[model].get(precision) if model else None


def forward_macs(model: dict, src_len, tgt_len):
    """Multiply-accumulates of one forward pass of the encoder-decoder over one sentence pair of
    `src_len` source and `tgt_len` target positions (EOS and BOS included), at its real lengths.

    `model` is a ModelConfig as a dict (N, d_model, d_ff, h, d_k, d_v, tgt_vocab). Per layer:
    - encoder, per source position: Q, K, V, O projections, the feed-forward network, and the
      attention products Q·K^T and weights·V over the S source positions;
    - decoder, per target position: the self-attention's projections and products over T positions,
      the encoder-decoder attention's Q and O projections and products over S positions, the
      feed-forward network; per source position: that attention's K and V projections;
    - the output projection, per target position: d_model x vocabulary.
    Embedding lookups, layer norm, softmax, dropout and biases are not counted (no matrix products).
    The lengths may be numpy arrays (one count per pair).
    """
    d, d_ff, N = model["d_model"], model["d_ff"], model["N"]
    qk, v = model["h"] * model["d_k"], model["h"] * model["d_v"]
    S, T = src_len, tgt_len
    projections = d * (2 * qk + v) + v * d
    ffn = 2 * d * d_ff
    encoder = S * (projections + ffn + S * (qk + v))
    decoder = T * (projections + ffn + T * (qk + v)) + T * (d * qk + v * d + S * (qk + v)) + S * d * (qk + v)
    return N * (encoder + decoder) + T * d * model["tgt_vocab"]


def training_flops(model: dict, src_lens, tgt_lens) -> float:
    """FLOPs of one training update over sentence pairs of these lengths (sequences or arrays):
    backward = 2 x forward, and a multiply-accumulate is 2 FLOPs, so 6 x `forward_macs` per pair."""
    src = np.asarray(src_lens, dtype=np.int64)
    tgt = np.asarray(tgt_lens, dtype=np.int64)
    return 6.0 * float(np.sum(forward_macs(model, src, tgt)))
