"""The Hugging Face transformers corpus (issue 8): GPT-2, BERT, LLaMA, T5 (encoder and decoder
stacks), ViT and Whisper's encoder, each built from a small configuration written here, with random
weights, in eval mode. Nothing is downloaded: the module sets HF_HUB_OFFLINE=1 before transformers is
imported and never calls from_pretrained. Used by the opt-in tests (tests/corpus/test_hf.py), which
run in the corpus virtualenv (`make corpus`), where transformers is installed.

Example inputs are positional, in the order of the model's `forward` parameters, because
`script(model, example_inputs=...)` passes them that way; a parameter that comes before one we need is
given as None (the T5 decoder's attention mask). Options that are keywords in eager use (`use_cache`,
`return_dict`) are not passed: `use_cache=False` is set in the configurations, and every model returns
its default, a ModelOutput dataclass. The attention implementation is the library's default for a model
built from a configuration (SDPA with this torch), recorded in `ATTENTION`.

`compare_outputs` checks a compiled model's result against eager's, leaf by leaf, whatever the nesting
(ModelOutput, tuple, list, dict)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

# transformers is imported inside the builders, after this: no download, ever.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# Small enough that a forward takes about a millisecond on two CPU threads, large enough that every
# head has more than one dimension and every sequence more than a few positions.
VOCAB = 256
HIDDEN = 64
HEADS = 4
LAYERS = 2
FFN = 128
SEQ = 16  # tokens per sequence (text models)
ENC_SEQ = 24  # the T5 decoder's encoder states: a different length, so a mixed-up axis shows
IMAGE = 32  # ViT: 32x32 images in 8x8 patches, 16 patches and the class token
PATCH = 8
MEL_BINS = 16  # Whisper: input_features (B, MEL_BINS, 2 * SOURCE_POSITIONS)
SOURCE_POSITIONS = 16

# What the models below resolve `config._attn_implementation` to (checked in the tests).
ATTENTION = "sdpa"


@dataclass(frozen=True)
class HFModel:
    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[int], tuple]  # batch size -> positional example inputs
    # Documented tolerance against eager (float32), as in zoo_models: compiled code fuses and
    # reorders float operations, so results agree to rounding, scaled by the output's magnitude.
    rtol: float = 1e-4
    atol: float = 1e-4


def _token_ids(batch: int, length: int = SEQ, seed: int = 0) -> torch.Tensor:
    """Token ids in [1, VOCAB): id 0 is a padding id in some of the configurations."""
    generator = torch.Generator().manual_seed(seed + batch)
    return torch.randint(1, VOCAB, (batch, length), generator=generator)


def _normal(*shape: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed + shape[0])
    return torch.randn(*shape, generator=generator)


def _built(make: Callable[[], nn.Module]) -> nn.Module:
    # The weights come from post_init's initializers, which draw from torch's RNG.
    torch.manual_seed(0)
    return make().eval()


def _gpt2() -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=VOCAB,
        n_positions=64,
        n_embd=HIDDEN,
        n_layer=LAYERS,
        n_head=HEADS,
        bos_token_id=VOCAB - 1,  # the defaults name GPT-2's real vocabulary (50256)
        eos_token_id=VOCAB - 1,
        use_cache=False,
    )
    return GPT2LMHeadModel(config)


def _bert_config() -> Any:
    from transformers import BertConfig

    return BertConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=FFN,
        max_position_embeddings=64,
    )


def _bert() -> nn.Module:
    from transformers import BertModel

    return BertModel(_bert_config())


def _bert_padded_inputs(batch: int) -> tuple:
    """input_ids and a 2-D attention mask in which the last quarter of every sequence is padding:
    the usual call after a tokenizer pads a batch. The mask turns into a 4-D boolean mask inside."""
    mask = torch.ones(batch, SEQ, dtype=torch.long)
    mask[:, SEQ - SEQ // 4 :] = 0
    return (_token_ids(batch), mask)


def _llama() -> nn.Module:
    from transformers import LlamaConfig, LlamaModel

    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=FFN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS // 2,  # grouped-query attention, as in current LLaMA checkpoints
        max_position_embeddings=64,
        use_cache=False,
    )
    return LlamaModel(config)


def _t5_config(decoder: bool) -> Any:
    from transformers import T5Config

    config = T5Config(
        vocab_size=VOCAB,
        d_model=HIDDEN,
        d_kv=HIDDEN // HEADS,
        d_ff=FFN,
        num_layers=LAYERS,
        num_decoder_layers=LAYERS,
        num_heads=HEADS,
        relative_attention_num_buckets=16,
        relative_attention_max_distance=32,
        use_cache=False,
    )
    # As T5Model.__init__ configures its two stacks.
    config.is_decoder = decoder
    return config


def _t5_stack(decoder: bool) -> Callable[[], nn.Module]:
    def make() -> nn.Module:
        from transformers.models.t5.modeling_t5 import T5Stack

        return T5Stack(_t5_config(decoder))

    return make


def _t5_decoder_inputs(batch: int) -> tuple:
    # T5Stack.forward(input_ids, attention_mask, encoder_hidden_states, ...): no decoder mask (the
    # causal mask is built inside), the encoder's output standing in as random states.
    return (_token_ids(batch), None, _normal(batch, ENC_SEQ, HIDDEN, seed=100))


def _vit() -> nn.Module:
    from transformers import ViTConfig, ViTModel

    config = ViTConfig(
        image_size=IMAGE,
        patch_size=PATCH,
        num_channels=3,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=FFN,
    )
    return ViTModel(config)


def _whisper_encoder() -> nn.Module:
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    config = WhisperConfig(
        vocab_size=VOCAB,
        num_mel_bins=MEL_BINS,
        d_model=HIDDEN,
        encoder_layers=LAYERS,
        encoder_attention_heads=HEADS,
        encoder_ffn_dim=FFN,
        decoder_layers=LAYERS,
        decoder_attention_heads=HEADS,
        decoder_ffn_dim=FFN,
        max_source_positions=SOURCE_POSITIONS,
        max_target_positions=64,
        pad_token_id=VOCAB - 1,  # the defaults name Whisper's real vocabulary (50256, 50257)
        bos_token_id=VOCAB - 1,
        eos_token_id=VOCAB - 1,
        decoder_start_token_id=VOCAB - 2,
        use_cache=False,
    )
    return WhisperEncoder(config)


MODELS: list[HFModel] = [
    HFModel("gpt2", lambda: _built(_gpt2), lambda b: (_token_ids(b),)),
    HFModel("bert", lambda: _built(_bert), lambda b: (_token_ids(b),)),
    HFModel("bert_padded", lambda: _built(_bert), _bert_padded_inputs),
    HFModel("llama", lambda: _built(_llama), lambda b: (_token_ids(b),)),
    HFModel("t5_encoder", lambda: _built(_t5_stack(decoder=False)), lambda b: (_token_ids(b),)),
    HFModel("t5_decoder", lambda: _built(_t5_stack(decoder=True)), _t5_decoder_inputs),
    HFModel("vit", lambda: _built(_vit), lambda b: (_normal(b, 3, IMAGE, IMAGE),)),
    HFModel(
        "whisper_encoder",
        lambda: _built(_whisper_encoder),
        lambda b: (_normal(b, MEL_BINS, 2 * SOURCE_POSITIONS),),
    ),
]

BY_NAME = {m.name: m for m in MODELS}


def make(name: str, batch: str = "1") -> tuple[nn.Module, tuple]:
    """(model, inputs) for benchmarks/first_call.py: `benchmarks.hf_models:make:gpt2:1`."""
    model = BY_NAME[name]
    return model.build(), model.inputs(int(batch))


def _leaves(value: Any, path: str) -> list[tuple[str, Any]]:
    """(path, leaf) pairs in order, with the container kinds and keys as part of the path, so two
    structures have equal paths exactly when they nest the same way. A ModelOutput is a Mapping (an
    OrderedDict of its fields that are not None)."""
    if isinstance(value, Mapping):
        kind = type(value).__name__
        keys = list(value.keys())
        out = [(f"{path}<{kind} keys={keys}>", None)]
        for key in keys:
            out += _leaves(value[key], f"{path}.{key}")
        return out
    if isinstance(value, (tuple, list)):
        out = [(f"{path}<{type(value).__name__} len={len(value)}>", None)]
        for i, item in enumerate(value):
            out += _leaves(item, f"{path}[{i}]")
        return out
    return [(path, value)]


def compare_outputs(expected: Any, actual: Any, rtol: float = 1e-4, atol: float = 1e-4) -> int:
    """Assert that `actual` has `expected`'s structure (container types, keys, lengths) and that
    every tensor leaf matches in shape, dtype and value: rtol, and atol scaled by the leaf's largest
    magnitude (as tests/corpus/test_zoo.py does); other leaves must be equal. Returns the number of
    tensor leaves compared."""
    want, got = _leaves(expected, "out"), _leaves(actual, "out")
    want_paths, got_paths = [p for p, _ in want], [p for p, _ in got]
    assert (
        got_paths == want_paths
    ), f"output structure differs:\n  eager:    {want_paths}\n  compiled: {got_paths}"
    tensors = 0
    for (path, w), (_, g) in zip(want, got):
        if isinstance(w, torch.Tensor):
            assert isinstance(g, torch.Tensor), f"{path}: expected a tensor, got {type(g).__name__}"
            assert (
                g.shape == w.shape and g.dtype == w.dtype
            ), f"{path}: {tuple(g.shape)} {g.dtype}, eager {tuple(w.shape)} {w.dtype}"
            scale = w.abs().max().item() if w.numel() and w.is_floating_point() else 0.0
            torch.testing.assert_close(
                g,
                w,
                rtol=rtol,
                atol=atol * max(1.0, scale),
                msg=lambda m, path=path: f"{path}: {m}",
            )
            tensors += 1
        else:
            assert type(g) is type(w) and g == w, f"{path}: {g!r}, eager {w!r}"
    assert tensors > 0, "no tensor in the output"
    return tensors
