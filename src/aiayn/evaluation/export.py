"""A trained model as a Hugging Face `MarianMTModel` folder, exactly: `transformers` loads it with
`from_pretrained`, and its logits are ours (to float rounding).

Marian is the stock architecture that is this paper's model: post-norm encoder-decoder, token
embeddings scaled by √d_model plus sinusoidal positions, biases everywhere, ReLU (set), tied
embeddings and pre-softmax projection, one head size d_model / h. A model without attention
biases (init "t2t", tensor2tensor's) is exported with those biases 0, the same function. Two
layouts differ:

- positions: Marian's sinusoid table is [sin | cos] halves, ours interleaves sin and cos (§3.5).
  Permuting the d_model dimensions of the residual stream consistently (every weight that reads
  from it, every weight and bias that writes to it, layer norms, embeddings) is an exact symmetry
  of the model, so the export permutes our weights; the position table is then Marian's own
  layout of the same numbers (transformers recomputes it on load, in float64 rounded to float32,
  as `aiayn.model.transformer.sinusoidal_positions` does: equal to the bit).
- the decoder's first input: Marian's `decoder_start_token_id` is set to our BOS.

Not exportable as Marian (a clear error says why): h·d_k or h·d_v other than d_model (Table 3
rows B and A with unequal sizes), pre-norm, learned positions.

`transformers` is imported only here (the `export` extra; envs/export.yaml).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

from aiayn.data import vocab
from aiayn.data.binary import BOS, EOS, PAD
from aiayn.errors import UserError
from aiayn.io import atomic_dir, file_sha256, writable
from aiayn.model.hparams import ModelConfig
from aiayn.model.transformer import sinusoidal_positions
from aiayn.runtime import checkpoint as ckpt
from aiayn.runtime import metrics, records


def residual_permutation(d_model: int) -> torch.Tensor:
    """Marian dimension j holds our dimension perm[j]: sines (our even dims) first, then cosines."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def check_exportable(cfg: ModelConfig) -> None:
    why = []
    if cfg.h * cfg.d_k != cfg.d_model or cfg.h * cfg.d_v != cfg.d_model:
        why.append(f"h*d_k = {cfg.h * cfg.d_k} and h*d_v = {cfg.h * cfg.d_v} must both equal d_model = {cfg.d_model}")
    if cfg.pre_norm:
        why.append("pre-norm layers (Marian is post-norm)")
    if cfg.positional != "sinusoidal":
        why.append("learned positions (Marian's are sinusoidal)")
    if why:
        raise UserError("this model has no exact Marian form: " + "; ".join(why))


def marian_config(cfg: ModelConfig, max_positions: int) -> dict:
    """MarianConfig arguments of our model."""
    return {
        "vocab_size": cfg.tgt_vocab,
        "decoder_vocab_size": cfg.tgt_vocab,
        "d_model": cfg.d_model,
        "encoder_layers": cfg.N,
        "decoder_layers": cfg.N,
        "encoder_attention_heads": cfg.h,
        "decoder_attention_heads": cfg.h,
        "encoder_ffn_dim": cfg.d_ff,
        "decoder_ffn_dim": cfg.d_ff,
        "activation_function": "relu",
        "dropout": cfg.P_drop,
        "attention_dropout": cfg.P_drop_attn,
        "activation_dropout": 0.0,
        "max_position_embeddings": max_positions,
        "scale_embedding": True,
        "share_encoder_decoder_embeddings": cfg.shared_vocab,
        "tie_word_embeddings": True,
        "pad_token_id": PAD,
        "eos_token_id": EOS,
        "bos_token_id": BOS,
        "decoder_start_token_id": BOS,
        "forced_eos_token_id": EOS,
        "is_encoder_decoder": True,
    }


def marian_state(payload: dict, max_positions: int) -> tuple[dict, dict[str, torch.Tensor]]:
    """(MarianConfig arguments, state dict) of a checkpoint's model, weights permuted (module doc)."""
    cfg = ModelConfig.from_stored(payload["model_config"])
    check_exportable(cfg)
    ours = {k: v.float() for k, v in payload["model"].items()}
    p = residual_permutation(cfg.d_model)

    def reads(w):  # a weight whose input is the residual stream
        return w[:, p].contiguous()

    def writes(w):  # a weight or bias whose output is the residual stream
        return w[p].contiguous()

    out: dict[str, torch.Tensor] = {}

    def bias(name: str, weight: torch.Tensor) -> torch.Tensor:  # absent without attention biases: 0
        return ours[name] if cfg.attention_bias else torch.zeros(weight.size(0))

    def attention(src: str, dst: str) -> None:
        for a, b in (("W_q", "q_proj"), ("W_k", "k_proj"), ("W_v", "v_proj")):
            w = ours[f"{src}.{a}.weight"]
            out[f"{dst}.{b}.weight"] = reads(w)
            out[f"{dst}.{b}.bias"] = bias(f"{src}.{a}.bias", w)
        w = ours[f"{src}.W_o.weight"]
        out[f"{dst}.out_proj.weight"] = writes(w)
        out[f"{dst}.out_proj.bias"] = writes(bias(f"{src}.W_o.bias", w))

    def ffn(src: str, dst: str) -> None:
        out[f"{dst}.fc1.weight"] = reads(ours[f"{src}.W_1.weight"])
        out[f"{dst}.fc1.bias"] = ours[f"{src}.W_1.bias"]
        out[f"{dst}.fc2.weight"] = writes(ours[f"{src}.W_2.weight"])
        out[f"{dst}.fc2.bias"] = writes(ours[f"{src}.W_2.bias"])

    def norm(src: str, dst: str) -> None:
        out[f"{dst}.weight"] = writes(ours[f"{src}.weight"])
        out[f"{dst}.bias"] = writes(ours[f"{src}.bias"])

    for i in range(cfg.N):
        e, me = f"encoder.{i}", f"model.encoder.layers.{i}"
        attention(f"{e}.self_attn", f"{me}.self_attn")
        norm(f"{e}.sub.0.norm", f"{me}.self_attn_layer_norm")
        ffn(f"{e}.ffn", me)
        norm(f"{e}.sub.1.norm", f"{me}.final_layer_norm")
        d, md = f"decoder.{i}", f"model.decoder.layers.{i}"
        attention(f"{d}.self_attn", f"{md}.self_attn")
        norm(f"{d}.sub.0.norm", f"{md}.self_attn_layer_norm")
        attention(f"{d}.cross_attn", f"{md}.encoder_attn")
        norm(f"{d}.sub.1.norm", f"{md}.encoder_attn_layer_norm")
        ffn(f"{d}.ffn", md)
        norm(f"{d}.sub.2.norm", f"{md}.final_layer_norm")
    tgt = reads(ours["tgt_embed.weight"])
    out["model.shared.weight"] = out["model.decoder.embed_tokens.weight"] = out["lm_head.weight"] = tgt
    out["model.encoder.embed_tokens.weight"] = tgt if cfg.shared_vocab else reads(ours["src_embed.weight"])
    out["final_logits_bias"] = torch.zeros(1, cfg.tgt_vocab)
    table = reads(sinusoidal_positions(max_positions, cfg.d_model))
    out["model.encoder.embed_positions.weight"] = out["model.decoder.embed_positions.weight"] = table
    return marian_config(cfg, max_positions), out


def vocab_json(spm_path: str | Path) -> dict[str, int]:
    """piece -> id of a sentencepiece model: the ids are ours (PAD 0, UNK 1, BOS 2, EOS 3)."""
    sp = vocab.load(spm_path)
    return {sp.IdToPiece(i): i for i in range(sp.GetPieceSize())}


def export(
    model: str | Path,
    spm_src: str | Path,
    spm_tgt: str | Path,
    out: str | Path,
    *,
    decode: dict,
    card: str,
    max_positions: int = 1024,
) -> Path:
    """Write the Hugging Face folder `out` (written beside, renamed into place whole)."""
    payload = ckpt.load(model)
    vocab.check_model(payload, model, {"src": spm_src, "tgt": spm_tgt})  # before the extra's import: refused anywhere
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    config, state = marian_state(payload, max_positions)
    with atomic_dir(out) as tmp:
        marian = MarianMTModel(MarianConfig(**config))
        missing, unexpected = marian.load_state_dict(state, strict=False)
        if unexpected or [k for k in missing if "embed_positions" not in k]:
            raise RuntimeError(f"the Marian layout changed: missing {missing}, unexpected {unexpected}")
        marian.eval()
        marian.generation_config = GenerationConfig(
            num_beams=decode["beam"],
            length_penalty=decode["alpha"],
            max_new_tokens=decode["max_len_b"] + 1,
            decoder_start_token_id=BOS,
            bos_token_id=BOS,
            eos_token_id=EOS,
            pad_token_id=PAD,
            forced_eos_token_id=EOS,
            early_stopping=True,
        )
        marian.save_pretrained(tmp)
        shared = Path(spm_src).read_bytes() == Path(spm_tgt).read_bytes()
        shutil.copyfile(spm_src, tmp / "source.spm")
        shutil.copyfile(spm_tgt, tmp / "target.spm")
        (tmp / "vocab.json").write_text(json.dumps(vocab_json(spm_src)))
        tokenizer = {
            "tokenizer_class": "MarianTokenizer",
            "separate_vocabs": not shared,
            "eos_token": "</s>",
            "unk_token": "<unk>",
            "pad_token": "<pad>",
            "model_max_length": max_positions,
        }
        if not shared:
            (tmp / "target_vocab.json").write_text(json.dumps(vocab_json(spm_tgt)))
            tokenizer["target_vocab_file"] = "target_vocab.json"
        (tmp / "tokenizer_config.json").write_text(json.dumps(tokenizer, indent=2))
        (tmp / "README.md").write_text(card)
        write_checksums(tmp)
    return Path(out)


CHECKSUMS = "checksums.sha256"


def write_checksums(folder: Path) -> None:
    """`sha256sum`'s format: the SHA-256 of every file of an export, to check it before use."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != CHECKSUMS)
    lines = [f"{file_sha256(p)}  {p.relative_to(folder).as_posix()}\n" for p in files]
    (folder / CHECKSUMS).write_text("".join(lines))


def verify_export(folder: str | Path) -> None:
    """Every file of an export as it was written (`sha256sum -c checksums.sha256` does the same);
    a damaged, missing or foreign folder raises UserError naming the file."""
    folder = Path(folder)
    listing = folder / CHECKSUMS
    if not listing.is_file():
        raise UserError(f"{folder}: not an export of aiayn (no {CHECKSUMS}); rerun `snakemake export`")
    for line in listing.read_text().splitlines():
        digest, _, name = line.partition("  ")
        path = folder / name
        if not path.is_file() or file_sha256(path) != digest:
            raise UserError(f"{path}: damaged or missing (its checksum in {listing} differs); rerun `snakemake export`")


def to_ctranslate2(hf_dir: str | Path, out: str | Path) -> Path:
    """Convert an export to a CTranslate2 model with CTranslate2's own converter, told our model's
    two conventions its Marian loader assumes otherwise (that loader drops the last vocabulary entry
    as Marian's added <pad> and starts the decoder from a zero embedding): here the decoder starts
    from BOS's embedding and every token is kept. The layers are loaded by its BART loader, the
    same post-norm layout with biases, without an embedding layer norm."""
    from ctranslate2.converters import transformers as ct2t

    class ExactLoader(ct2t.BartLoader):
        @property
        def architecture_name(self):
            return "MarianMTModel"

        def get_model_spec(self, model):
            model.config.normalize_before = False
            model.config.normalize_embedding = False
            return super().get_model_spec(model)

        def set_config(self, config, model, tokenizer):
            super().set_config(config, model, tokenizer)
            config.bos_token = "<s>"  # MarianTokenizer has none; our BOS piece
            config.layer_norm_epsilon = 1e-5  # torch's LayerNorm default, ours

    verify_export(hf_dir)
    ct2t.register_loader("MarianConfig")(ExactLoader)  # its public hook for a configuration's loader
    try:
        with atomic_dir(out) as tmp:
            ct2t.TransformersConverter(str(hf_dir)).convert(str(tmp), force=True)
    finally:
        ct2t.register_loader("MarianConfig")(ct2t.MarianMTLoader)  # CTranslate2's own again
    return Path(out)


def model_card(info: dict, decode: dict) -> str:
    """README.md of the export: what was trained on what, how well, at what cost, beside the paper
    (`info`: what `Study.model_card` gives: name, dataset, pair, testset, paper_bleu, score and
    metrics files)."""
    score = (
        records.read(info["score"], "translation score") if info.get("score") and Path(info["score"]).exists() else {}
    )
    m = metrics.summary(info["metrics"]) if info.get("metrics") else {}
    bleu = score.get("tokenized_bleu", {}).get("score")
    sacre = score.get("sacrebleu", {})
    pair = "-".join(info.get("pair") or []) or "?"
    signature = str(sacre.get("signature")).replace("|", "&#124;")  # a | would split the table cell
    lines = [
        "---",
        "library_name: transformers",
        "pipeline_tag: translation",
        "tags: [translation, transformer, attention-is-all-you-need, aiayn]",
        "---",
        f"# {info.get('name', 'aiayn model')} ({pair})",
        "",
        'The Transformer of "Attention Is All You Need" (Vaswani et al. 2017), trained by the aiayn pipeline '
        f"on {info.get('dataset', '?')}, exported as a `MarianMTModel` whose logits equal the trained model's "
        "(the residual dimensions are permuted so that Marian's [sin | cos] position table is our interleaved one).",
        "",
        "| | |",
        "|---|---|",
        f"| test set | {info.get('testset', '?')} ({score.get('lines', '?')} lines) |",
        f"| BLEU, tokenized as the paper measured it | {bleu:.2f} |" if bleu is not None else "| BLEU | not scored |",
        f"| sacreBLEU | {sacre['score']:.2f} (`{signature}`) |" if sacre else "| sacreBLEU | - |",
        f"| the paper's BLEU | {info['paper_bleu']} |" if info.get("paper_bleu") is not None else "| the paper | - |",
        f"| training | {m['step']} updates, {m['hours']:.1f} h on {m['gpus']} x {m['device']} ({m['precision']}) |"
        if m.get("gpus") is not None  # (a job's start record says them)
        else "| training | not recorded |",
        f"| parameters | {m.get('params') or '?'} |",
        "",
        "## Decoding",
        f"The pipeline decodes with beam {decode['beam']} and GNMT's length penalty ((5 + |Y|) / 6)^alpha, alpha "
        f"{decode['alpha']}, up to input length + {decode['max_len_b']} tokens (§6.1). `generation_config.json` "
        "sets the same beam and alpha, but Hugging Face's `length_penalty` divides the score by |Y|^alpha instead: "
        "greedy output (num_beams=1) is ours token for token; beam output can differ where the two penalties rank "
        "finished hypotheses differently.",
        "",
        "```python",
        "from transformers import MarianMTModel, MarianTokenizer",
        "tok = MarianTokenizer.from_pretrained(path)",
        "model = MarianMTModel.from_pretrained(path)",
        'out = model.generate(**tok(["..."], return_tensors="pt", padding=True))',
        "print(tok.batch_decode(out, skip_special_tokens=True))",
        "```",
        "",
    ]
    return "\n".join(lines)


def export_model(model, spm_src, spm_tgt, out, *, decode: dict, card: dict, ctranslate2=None, log=print) -> Path:
    """`export` with the model card of `card` (`model_card`'s info), and with `ctranslate2` also
    `to_ctranslate2` into that folder. Needs the `export` extra (transformers, ctranslate2)."""
    writable(out, *([ctranslate2] if ctranslate2 else []), folders=True)
    try:
        folder = export(model, spm_src, spm_tgt, out, decode=decode, card=model_card(card, decode))
        log(f"exported {model} -> {folder} (transformers MarianMTModel)")
        if ctranslate2:
            to_ctranslate2(folder, ctranslate2)
            log(f"converted {folder} -> {ctranslate2} (CTranslate2)")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in ("transformers", "ctranslate2"):
            raise UserError(
                f"export needs {exc.name!r}: pip install -e '.[export]' (or use envs/export.yaml)"
            ) from None
        raise
    return folder
