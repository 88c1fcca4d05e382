"""Parity of the Hugging Face bridge with the unmodified transformers model, for every router family.

The bridge hands the model exactly the inputs transformers' own `generate` builds (left padding,
positions from the attention mask, its DynamicCache), and in native mode the router's output reaches
the experts untouched. So tokens and routing decisions always equal `generate`'s. Floats are compared
bit for bit only where both sides compute the same shapes: `generate` projects only the last position
(`logits_to_keep=1`) while the bridge projects all of them, two matrix shapes that may round apart on
another CPU, so the bitwise references pass `logits_to_keep=0`; against plain `generate` the logits
agree within `ULPS`.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hf_tiny import FAMILIES, tiny_model, tiny_tokenizer, transformers
from ulps import assert_within_ulps

from model.generate import generate
from model.hf.bridge import HFMoEModel
from model.hf.families import family_of
from model.recorder import Recorder
from model.routing import RoutingPolicy

PROMPTS = ("The target list is", "x = 1")
NEW = 5
#: How far plain `generate`'s logits may be from the bridge's, in ulps of their magnitude: one matrix
#: shape against another rounds apart by about one ulp (seen: 6e-8 to 9e-8 at logits of about 0.3).
ULPS = 8


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer(300)


def bridge(model, tok, impose="auto"):
    return HFMoEModel(model, tok, family_of(model.config.model_type), impose=impose)


def dropless(w):
    return w.adapt_policy(RoutingPolicy.preset("dropless"))


def left_padded(prompts, pad_id):
    T = max(len(p) for p in prompts)
    ids = torch.tensor([[pad_id] * (T - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (T - len(p)) + [1] * len(p) for p in prompts])
    return ids, mask


def hf_generate(model, ids, mask, tok, n=NEW, eos=None, same_shapes=True):
    """transformers' own greedy `generate` with its logits; `same_shapes` makes it project every
    position, as the bridge does, so the two compute the same matrix shapes."""
    extra = {"logits_to_keep": 0} if same_shapes else {}
    return model.generate(ids, attention_mask=mask, max_new_tokens=n, do_sample=False, eos_token_id=eos,
                          pad_token_id=tok.pad_token_id, output_logits=True, return_dict_in_generate=True,
                          **extra)


def record(w, prompts, policy=None, n=NEW):
    rec = Recorder()
    result = generate(w, prompts, n, policy or dropless(w), recorder=rec, stop_at_eos=False)
    return result, rec.arrays(result)


@pytest.mark.parametrize("family", FAMILIES)
def test_router_adapter_reproduces_the_router(family, tok):
    model = tiny_model(family, len(tok))
    w = bridge(model, tok)
    w.close()
    x = torch.randn(7, model.config.hidden_size, generator=torch.Generator().manual_seed(1))
    for li in w.config.moe_layers:
        router = getattr(model.model.layers[li].mlp, w.family.router_attr)
        logits, weights, index = router(x)
        mine_w, mine_i = w.family.choose(router, logits)
        assert torch.equal(mine_i, index) and torch.equal(mine_w, weights) and mine_w.dtype == weights.dtype


@pytest.mark.parametrize("family", FAMILIES)
def test_native_recording_equals_hf_generate(family, tok):
    """Batched greedy tokens, next-token logits at every step: as transformers' `generate` gives,
    bit for bit where it computes the same shapes, within `ULPS` where it projects only the last
    position."""
    model = tiny_model(family, len(tok))
    prompts = [tok.encode(p) for p in PROMPTS]
    result, arrays = record(bridge(model, tok), prompts)
    ids, mask = left_padded(prompts, tok.pad_token_id)
    same = hf_generate(model, ids, mask, tok)
    plain = hf_generate(model, ids, mask, tok, same_shapes=False)
    for b, p in enumerate(prompts):
        assert result.new_tokens[b] == same.sequences[b, ids.shape[1]:].tolist()
        assert result.new_tokens[b] == plain.sequences[b, ids.shape[1]:].tolist()
        for s, (hf_same, hf_plain) in enumerate(zip(same.logits, plain.logits, strict=True)):  # [B,V] each
            mine = torch.from_numpy(arrays["logits"][b, len(p) - 1 + s])
            assert torch.equal(mine, hf_same[b].float()), (b, s)
            assert_within_ulps(mine, hf_plain[b].float(), ULPS, f"row {b} step {s}")


@pytest.mark.parametrize("family", FAMILIES)
def test_router_logits_equal_output_router_logits(family, tok):
    """Prefill of a padded batch: logits and router logits as the unhooked forward returns them."""
    model = tiny_model(family, len(tok))
    prompts = [tok.encode(p) for p in PROMPTS]
    _, arrays = record(bridge(model, tok), prompts, n=0)
    ids, mask = left_padded(prompts, tok.pad_token_id)
    pos = (mask.cumsum(1) - 1).masked_fill(mask == 0, 0)
    with torch.no_grad():  # as the first step of `generate`: with a fresh cache
        out = model(input_ids=ids, attention_mask=mask, position_ids=pos, output_router_logits=True,
                    cache=transformers.DynamicCache(config=model.config), use_cache=True)
    B, T = ids.shape
    E = family_of(family).num_experts(model.config)
    assert len(out.router_logits) == arrays["routing/router_logits"].shape[0]
    for b, p in enumerate(prompts):
        cols = slice(T - len(p), T)  # the row's real tokens in the left-padded layout
        assert torch.equal(torch.from_numpy(arrays["logits"][b, :len(p)]), out.logits[b, cols].float())
        for li, z in enumerate(out.router_logits):
            hf = z.view(B, T, E)[b, cols].float()
            assert torch.equal(torch.from_numpy(arrays["routing/router_logits"][li, b, :len(p)]), hf)
            chosen = torch.topk(hf, model.config.num_experts_per_tok, dim=-1).indices  # all families
            if family != "deepseek_v3":  # grouped top-k with a bias: not the plain top-k of the logits
                assert (torch.sort(chosen).values.numpy()
                        == torch.sort(torch.from_numpy(arrays["routing/expert"][li, b, :len(p)]
                                                       .astype("int64"))).values.numpy()).all()


@pytest.mark.parametrize("family", FAMILIES)
def test_imposed_dropless_equals_native(family, tok):
    model = tiny_model(family, len(tok))
    prompts = [tok.encode(p) for p in PROMPTS]
    native, a = record(bridge(model, tok), prompts)
    w = bridge(model, tok, impose="always")
    imposed, b = record(w, prompts)
    assert native.tokens == imposed.tokens
    for name in a:
        assert (a[name] == b[name]).all(), name


@pytest.mark.parametrize("family", FAMILIES)
def test_imposed_drop_sends_candidates_nowhere(family, tok):
    """Capacity 0 drops every candidate: the logits are those of the model with zeroed experts."""
    model = tiny_model(family, len(tok))
    prompts = [tok.encode(p) for p in PROMPTS]
    w = bridge(model, tok)
    policy = w.adapt_policy(RoutingPolicy(capacity_mode="fixed", fixed_capacity=0, norm="none"))
    _, dropped = record(w, prompts, policy, n=2)
    assert not dropped["routing/kept"].any() and not dropped["routing/gate"].any()
    w.close()
    with torch.no_grad():
        for li in w.config.moe_layers:
            for name, p in model.model.layers[li].mlp.experts.named_parameters():
                if name.startswith("down_proj"):
                    p.zero_()
    _, zeroed = record(bridge(model, tok), prompts, n=2)
    assert (dropped["logits"] == zeroed["logits"]).all()
    assert (dropped["tokens"] == zeroed["tokens"]).all()


@pytest.mark.parametrize("family", ["mixtral", "gpt_oss"])
def test_batch_invariant_mode_runs_and_tiles_linear_layers(family, tok):
    """Inside the mode a row's F.linear / x @ W result does not depend on the rows beside it; a
    batch-invariant recording completes each prompt as it does alone (attention stays native)."""
    from model.hf.kernels import kernel_mode

    model = tiny_model(family, len(tok))
    g = torch.Generator().manual_seed(3)
    x, W = torch.randn(5, 32, generator=g), torch.randn(48, 32, generator=g)
    with kernel_mode(model, "batch_invariant"):
        assert torch.equal(F.linear(x[:1], W), F.linear(x, W)[:1])
        assert torch.equal(x[:1] @ W.t(), (x @ W.t())[:1])
    w = bridge(model, tok)
    prompts = [tok.encode(p) for p in PROMPTS + ("def f(x): return x",)]
    batch = generate(w, prompts, 3, dropless(w), "batch_invariant", stop_at_eos=False)
    alone = generate(w, prompts[:1], 3, dropless(w), "batch_invariant", stop_at_eos=False)
    assert batch.tokens[0] == alone.tokens[0]


@pytest.mark.parametrize("family", ["mixtral", "deepseek_v3"])
def test_bfloat16_recording_equals_hf_generate(family, tok):
    """In bfloat16 too the bridge runs the very operations of `generate` on the same shapes: bitwise
    equal logits."""
    model = tiny_model(family, len(tok), dtype=torch.bfloat16)
    prompts = [tok.encode(p) for p in PROMPTS]
    result, arrays = record(bridge(model, tok), prompts, n=3)
    ids, mask = left_padded(prompts, tok.pad_token_id)
    out = hf_generate(model, ids, mask, tok, n=3)
    for b, p in enumerate(prompts):
        assert result.new_tokens[b] == out.sequences[b, ids.shape[1]:].tolist()
        for s, hf_logits in enumerate(out.logits):
            assert torch.equal(torch.from_numpy(arrays["logits"][b, len(p) - 1 + s]), hf_logits[b].float())


def test_a_row_that_ends_early_leaves_the_others_as_in_hf_generate(tok):
    """EOS ends row 0 early; row 1 runs on with the logits `generate` gives. The end token is the
    first of row 0's free completion (after its first) that neither row produced before."""
    model = tiny_model("qwen2_moe", len(tok))
    prompts = [tok.encode(p) for p in PROMPTS]
    ids, mask = left_padded(prompts, tok.pad_token_id)
    free = model.generate(ids, attention_mask=mask, max_new_tokens=NEW, do_sample=False, eos_token_id=None,
                          pad_token_id=tok.pad_token_id)
    row0, row1 = free[0, ids.shape[1]:].tolist(), free[1, ids.shape[1]:].tolist()
    ends = [k for k in range(1, NEW - 1) if row0[k] not in row1 and row0[k] not in row0[:k]]
    assert ends, "every token of row 0's completion also occurs in row 1's: no end token for row 0 alone"
    stop = ends[0]
    eos = row0[stop]
    model.generation_config.eos_token_id = eos  # the bridge reads its end tokens from here
    w = bridge(model, tok)
    rec = Recorder()
    result = generate(w, prompts, NEW, dropless(w), recorder=rec)
    arrays = rec.arrays(result)
    out = hf_generate(model, ids, mask, tok, eos=eos)
    assert result.new_tokens[0] == out.sequences[0, ids.shape[1]:ids.shape[1] + stop + 1].tolist()
    assert result.new_tokens[1] == out.sequences[1, ids.shape[1]:].tolist()
    for s, hf_logits in enumerate(out.logits):
        mine = torch.from_numpy(arrays["logits"][1, len(prompts[1]) - 1 + s])
        assert torch.equal(mine, hf_logits[1].float())
