"""sieve.AttentionModel over the golden fixtures (tests/data, specs/golden_format.md): every family's
requests, stepped together as an engine steps them (chunks and decodes of several requests in one step),
teacher-forced with the captured inputs, give the outputs transformers captured."""

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import sieve

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"
FIXTURES = ["deepseek_v4", "deepseek_v32", "hy_v4", "qwen4_exp"]


def golden(name):
    tensors = load_file(DATA / name / "golden.safetensors")
    n_requests = len({k.split(".")[0] for k in tensors})
    return tensors, n_requests


def fixture_layers(tensors):
    return sorted({int(k.split(".")[1][len("layer"):]) for k in tensors if ".layer" in k})


def run_stepped(model, tensors, n_requests, chunk):
    """Steps every request together, `chunk` tokens per request per step, with string request ids."""
    layers = model.layers
    lengths = [tensors[f"req{r}.positions"].numel() for r in range(n_requests)]
    done = [0] * n_requests
    outputs = {(r, l): torch.full((lengths[r], model.hidden_size), float("nan")) for r in range(n_requests)
               for l in layers}
    while any(d < n for d, n in zip(done, lengths)):
        reqs = [r for r in range(n_requests) if done[r] < lengths[r]]
        spans = [(r, done[r], min(chunk, lengths[r] - done[r])) for r in reqs]
        qsl = torch.tensor([0] + [sum(n for _, _, n in spans[: i + 1]) for i in range(len(spans))], dtype=torch.int32)
        positions = torch.cat([torch.arange(s, s + n) for _, s, n in spans])
        model.begin_step([f"req-{r}" for r, _, _ in spans], qsl, positions)
        for pos, layer in enumerate(layers):
            rows = torch.cat([tensors[f"req{r}.layer{layer}.input"][s : s + n] for r, s, n in spans])
            out = model.forward(pos, rows)
            for (r, s, n), chunk_out in zip(spans, torch.split(out, [n for _, _, n in spans])):
                outputs[(r, layer)][s : s + n] = chunk_out
        model.end_step()
        for r, s, n in spans:
            done[r] = s + n
    for r in range(n_requests):
        assert model.tokens_done(f"req-{r}") == lengths[r]
        model.free(f"req-{r}")
    return outputs


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_through_the_step_api_matches_transformers(name):
    tensors, n_requests = golden(name)
    model = sieve.AttentionModel(DATA / name / "ckpt", profile="exact")
    assert model.model_type == name
    assert model.layers == fixture_layers(tensors)
    outputs = run_stepped(model, tensors, n_requests, chunk=3)
    for (r, layer), got in outputs.items():
        expected = tensors[f"req{r}.layer{layer}.output"]
        rel = ((got.double() - expected.double()).norm() / expected.double().norm()).item()
        assert rel <= 1e-4, f"request {r} layer {layer}: relative error {rel:.3g}"  # golden_format.md, exact
    assert all(g["used_blocks"] == 0 for g in model.cache_groups)


def test_deployed_profile_bf16_rows():
    tensors, _ = golden("deepseek_v4")
    model = sieve.AttentionModel(DATA / "deepseek_v4" / "ckpt")  # deployed: FP8 caches
    layer = model.layers[0]
    x = tensors[f"req0.layer{layer}.input"]
    model.begin_step(["a"], torch.tensor([0, x.shape[0]]), torch.arange(x.shape[0]))
    out = model.forward(0, x.bfloat16())
    assert out.dtype == torch.bfloat16 and out.shape == x.shape
    expected = tensors[f"req0.layer{layer}.output"]
    rel = ((out.double() - expected.double()).norm() / expected.double().norm()).item()
    assert rel <= 5e-2, rel  # bf16 activations, FP8 caches: the deployed bound of tests/models/deepseek_v4/golden_test.cpp
    model.end_step()


def test_rollback_keeps_the_accepted_draft_tokens_and_leaves_no_trace():
    # hy_v4's longest request: a prefill chunk, then verification steps of the next token and 3 drafts of
    # which the first `accepted` are the fixture's own rows and the rest wrong rows; rollback keeps them.
    tensors, n_requests = golden("hy_v4")
    r = max(range(n_requests), key=lambda i: tensors[f"req{i}.positions"].numel())
    n = tensors[f"req{r}.positions"].numel()

    def speculate(wrong_shift):
        model = sieve.AttentionModel(DATA / "hy_v4" / "ckpt", profile="exact")
        out = {l: torch.full((n, model.hidden_size), float("nan")) for l in model.layers}
        done, pattern = 0, iter([2, 0, 3, 1] * n)
        while done < n:
            count = 4 if done == 0 else 1 + min(3, n - 1 - done)
            kept = count if done == 0 else 1 + min(next(pattern), count - 1)
            model.begin_step(["a"], torch.tensor([0, count], dtype=torch.int32), torch.arange(done, done + count))
            for pos, layer in enumerate(model.layers):
                rows = tensors[f"req{r}.layer{layer}.input"][done : done + count].clone()
                rows[kept:] += wrong_shift
                out[layer][done : done + kept] = model.forward(pos, rows)[:kept]
            model.end_step()
            if kept < count:
                model.rollback("a", done + kept)
            done += kept
        assert model.tokens_done("a") == n
        return out

    a, b = speculate(1.0), speculate(-3.0)
    for layer, got in a.items():
        assert torch.equal(got, b[layer])
        torch.testing.assert_close(got, tensors[f"req{r}.layer{layer}.output"], rtol=1e-4, atol=1e-5)
    model = sieve.AttentionModel(DATA / "hy_v4" / "ckpt", profile="exact")
    with pytest.raises(sieve.InvalidArgumentError, match=r"has run no step"):
        model.rollback("b", 0)


@pytest.mark.parametrize("name,mtp_layer", [("deepseek_v32", 2), ("hy_v4", 4), ("qwen4_exp", 4)])
def test_an_mtp_draft_model_reuses_step_zeros_top_k_and_rolls_back_whole_rounds(name, mtp_layer):
    # The fixture's MTP layer alone is the draft model. Its longest request: a prefill matching transformers
    # (draft step 0), then three draft tokens reusing step 0's selections, which differ from the same tokens
    # selecting anew (those match transformers); a rollback of the whole draft round, and the rest of the
    # request gives what it gives without any draft round, matching transformers.
    tensors, n_requests = golden(f"mtp/{name}")
    r = max(range(n_requests), key=lambda i: tensors[f"req{i}.positions"].numel())
    rows = tensors[f"req{r}.layer{mtp_layer}.input"]
    n, p = rows.shape[0], rows.shape[0] // 2

    def run(reuse, drafts=3, rollback=True):
        model = sieve.AttentionModel(DATA / "mtp" / name / "ckpt", profile="exact", layers=[mtp_layer])
        assert model.layers == [mtp_layer]
        model.reuse_selections()
        model.begin_step(["a"], torch.tensor([0, p], dtype=torch.int32), torch.arange(p))
        prefill = model.forward(0, rows[:p])
        model.end_step()
        out = []
        for q in range(p, p + drafts):
            model.begin_step(["a"], torch.tensor([0, 1], dtype=torch.int32), torch.tensor([q]), reuse_selection=[reuse])
            out.append(model.forward(0, rows[q : q + 1]))
            model.end_step()
        if not rollback:
            return prefill, torch.cat(out), None
        model.rollback("a", p)  # the whole draft round
        model.begin_step(["a"], torch.tensor([0, n - p], dtype=torch.int32), torch.arange(p, n))
        rest = model.forward(0, rows[p:])
        model.end_step()
        return prefill, torch.cat(out) if out else None, rest

    prefill, reused, rest = run(True)
    _, fresh, _ = run(False, rollback=False)  # no rollback past steps that selected anew
    _, _, plain = run(False, drafts=0)
    expected = tensors[f"req{r}.layer{mtp_layer}.output"]
    torch.testing.assert_close(prefill, expected[:p], rtol=1e-4, atol=1e-5)
    assert not torch.equal(reused, fresh)
    torch.testing.assert_close(fresh, expected[p : p + 3], rtol=1e-4, atol=1e-5)
    assert torch.equal(rest, plain)
    torch.testing.assert_close(rest, expected[p:], rtol=1e-4, atol=1e-5)

    model = sieve.AttentionModel(DATA / "mtp" / name / "ckpt", profile="exact", layers=[mtp_layer])
    with pytest.raises(sieve.InvalidArgumentError, match=r"call reuse_selections first"):
        model.begin_step(["a"], torch.tensor([0, 1], dtype=torch.int32), torch.tensor([0]), reuse_selection=[True])
    model.reuse_selections()
    with pytest.raises(sieve.InvalidArgumentError, match=r"reuse_selection has 2 values"):
        model.begin_step(["a"], torch.tensor([0, 1], dtype=torch.int32), torch.tensor([0]), reuse_selection=[True, False])


def test_a_cached_prefix_starts_a_request_after_it_with_the_same_outputs():
    # hy_v4's longest request runs twice with the same rows and chunk keys (cache blocks of 4 tokens: chunks
    # of 4): the second starts after the chunks the first cached, below its last prompt token, and gives the
    # same outputs from there, which match transformers.
    tensors, n_requests = golden("hy_v4")
    r = max(range(n_requests), key=lambda i: tensors[f"req{i}.positions"].numel())
    n = tensors[f"req{r}.positions"].numel()
    model = sieve.AttentionModel(DATA / "hy_v4" / "ckpt", profile="exact", cache_block_size=4)
    assert model.prefix_chunk_tokens == 4
    keys = [2**63 + i for i in range(n // 4)]  # unsigned 64-bit keys
    cached = (n - 1) // 4 * 4

    def run(request_id):  # steps that end at `cached` and at n, from where the cache starts the request
        start = model.attach_prefix(request_id, keys, n - 1)
        out = {}
        for begin, end in [(s, e) for s, e in [(0, cached), (cached, n)] if s >= start]:
            model.begin_step([request_id], torch.tensor([0, end - begin], dtype=torch.int32), torch.arange(begin, end))
            for pos, layer in enumerate(model.layers):
                out[(layer, begin)] = model.forward(pos, tensors[f"req{r}.layer{layer}.input"][begin:end])
            model.end_step()
        model.free(request_id)
        return start, {layer: rows for (layer, begin), rows in out.items() if begin == cached}

    first_start, first = run("first")
    second_start, second = run("second")
    assert first_start == 0 and second_start == cached > 0
    for layer, got in second.items():
        assert torch.equal(got, first[layer])
        torch.testing.assert_close(got, tensors[f"req{r}.layer{layer}.output"][cached:], rtol=1e-4, atol=1e-5)
    with pytest.raises(sieve.InvalidArgumentError, match=r"has already started"):
        model.begin_step(["third"], torch.tensor([0, 1], dtype=torch.int32), torch.arange(0, 1))
        model.attach_prefix("third", keys, n - 1)


def test_step_api_errors_name_what_is_wrong():
    model = sieve.AttentionModel(DATA / "deepseek_v4" / "ckpt", profile="exact")
    hidden = model.hidden_size
    with pytest.raises(sieve.InvalidArgumentError, match=r"no step is open"):
        model.forward(0, torch.zeros(1, hidden))
    with pytest.raises(sieve.InvalidArgumentError, match=r"position 5 at token 1, expected 4"):
        model.begin_step(["a"], torch.tensor([0, 2]), torch.tensor([3, 5]))
    with pytest.raises(sieve.InvalidArgumentError, match=r"starts at position 3, but it has run 0"):
        model.begin_step(["a"], torch.tensor([0, 2]), torch.tensor([3, 4]))
    with pytest.raises(sieve.InvalidArgumentError, match=r"query_start_loc has 2 values"):
        model.begin_step(["a", "b"], torch.tensor([0, 2]), torch.tensor([0, 1]))
    model.begin_step(["a"], torch.tensor([0, 2]), torch.tensor([0, 1]))
    with pytest.raises(sieve.InvalidArgumentError, match=r"hidden_states: shape \[3, %d\], expected \[2, %d\]" % (hidden, hidden)):
        model.forward(0, torch.zeros(3, hidden))
    with pytest.raises(sieve.InvalidArgumentError, match=r"layer position 1, expected 0"):
        model.forward(1, torch.zeros(2, hidden))
    assert not model.tokens_done("a")


def test_missing_checkpoint_is_a_clear_error():
    with pytest.raises(sieve.SieveError, match=r"no_such_dir"):
        sieve.AttentionModel(DATA / "no_such_dir")


def test_bad_profile():
    with pytest.raises(sieve.InvalidArgumentError, match=r"profile 'fast'"):
        sieve.AttentionModel(DATA / "deepseek_v4" / "ckpt", profile="fast")


class EngineCaches:
    """What an engine such as vLLM holds: per cache group and layer a uint8 tensor of blocks whose
    stride leaves a gap after each block (the engine's other pages), and per request a growing block
    list per group, drawn in a scrambled order."""

    GAP = 128

    def __init__(self, specs, num_blocks=64):
        self.specs = {s["name"]: s for s in specs}
        self.num_blocks = num_blocks
        self.storage = {s["name"]: [torch.zeros(num_blocks, s["block_bytes"] + self.GAP, dtype=torch.uint8)
                                    for _ in s["layers"]] for s in specs}
        self.blocks = {}
        self.drawn = {s["name"]: 0 for s in specs}

    def tensors(self):
        return {name: [t[:, : self.specs[name]["block_bytes"]] for t in ts] for name, ts in self.storage.items()}

    def tables(self, spans):
        """{group: [n_requests, max_blocks] int32} for requests (id, start, n) of a step."""
        out = {}
        for name, s in self.specs.items():
            rows = []
            for r, start, n in spans:
                entries = (start + n) // s["tokens_per_entry"]
                lst = self.blocks.setdefault((name, r), [])
                while len(lst) * s["block_size"] < entries:
                    lst.append(self.drawn[name] * 37 % self.num_blocks)
                    self.drawn[name] += 1
                rows.append(lst)
            width = max(1, max(len(x) for x in rows))
            out[name] = torch.tensor([x + [-1] * (width - len(x)) for x in rows], dtype=torch.int32)
        return out

    def gaps_untouched(self):
        return all(torch.all(t[:, -self.GAP :] == 0) for ts in self.storage.values() for t in ts)


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_over_an_engines_caches_and_block_tables(name):
    tensors, n_requests = golden(name)
    model = sieve.AttentionModel(DATA / name / "ckpt", profile="exact", caches="caller")
    engine = EngineCaches(model.cache_specs)
    model.bind_caches(engine.tensors())
    layers = model.layers
    lengths = [tensors[f"req{r}.positions"].numel() for r in range(n_requests)]
    done = [0] * n_requests
    while any(d < n for d, n in zip(done, lengths)):
        spans = [(r, done[r], min(4, lengths[r] - done[r])) for r in range(n_requests) if done[r] < lengths[r]]
        qsl = torch.tensor([0] + [sum(n for _, _, n in spans[: i + 1]) for i in range(len(spans))])
        positions = torch.cat([torch.arange(s, s + n) for _, s, n in spans])
        model.begin_step([f"vllm-{r}" for r, _, _ in spans], qsl, positions, block_tables=engine.tables(spans))
        for pos, layer in enumerate(layers):
            rows = torch.cat([tensors[f"req{r}.layer{layer}.input"][s : s + n] for r, s, n in spans])
            out = model.forward(pos, rows)
            for (r, s, n), got in zip(spans, torch.split(out, [n for _, _, n in spans])):
                expected = tensors[f"req{r}.layer{layer}.output"][s : s + n]
                torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
        model.end_step()
        for r, s, n in spans:
            done[r] = s + n
    assert engine.gaps_untouched()
    assert any(bool(torch.any(t != 0)) for t in engine.tensors()[model.cache_specs[0]["name"]])


def test_cache_specs_name_the_layers_of_each_group():
    # hy_v4's shared-indexer layers 1 and 3 reuse the top-k of 0 and 2 (dsa_mla.md §1.3): no keys of their own.
    specs = {s["name"]: s for s in sieve.AttentionModel(DATA / "hy_v4" / "ckpt", caches="caller").cache_specs}
    assert specs["latent_kv"]["layers"] == [0, 1, 2, 3]
    assert specs["indexer_keys"]["layers"] == [0, 2]
    specs = {s["name"]: s for s in sieve.AttentionModel(DATA / "deepseek_v4" / "ckpt", caches="caller").cache_specs}
    assert specs["swa_kv"]["layers"] == [0, 1, 2]
    assert specs["compressed_kv.m4"]["layers"] == [1] and specs["compressed_kv.m16"]["layers"] == [2]


def test_engine_caches_errors():
    model = sieve.AttentionModel(DATA / "deepseek_v4" / "ckpt", profile="exact", caches="caller")
    with pytest.raises(sieve.InvalidArgumentError, match=r"no caches bound"):
        model.begin_step(["a"], torch.tensor([0, 1]), torch.tensor([0]), block_tables={})
    engine = EngineCaches(model.cache_specs)
    short = engine.tensors()
    name = model.cache_specs[0]["name"]
    need = model.cache_specs[0]["block_bytes"]
    short[name] = [torch.zeros(64, need - 64, dtype=torch.uint8) for _ in short[name]]  # blocks too small
    with pytest.raises(sieve.InvalidArgumentError, match=r"cache %s: blocks of" % name.replace(".", r"\.")):
        model.bind_caches(short)
    strided = engine.tensors()
    strided[name] = [torch.zeros(64, 2, need, dtype=torch.uint8)[:, 0, :].unsqueeze(1).expand(64, 2, need)
                     for _ in strided[name]]  # a block's own dimensions not contiguous
    with pytest.raises(sieve.InvalidArgumentError, match=r"the dimensions after the first \(one block\) must be contiguous"):
        model.bind_caches(strided)
    model.bind_caches(engine.tensors())
    with pytest.raises(sieve.InvalidArgumentError, match=r"block_tables come with the engine's caches"):
        model.begin_step(["a"], torch.tensor([0, 1]), torch.tensor([0]))
    tables = engine.tables([(0, 0, 8)])
    tables[name] = torch.zeros(1, 0, dtype=torch.int32)
    with pytest.raises(sieve.InvalidArgumentError, match=r"block table has 0 blocks"):
        model.begin_step(["a"], torch.tensor([0, 8]), torch.arange(8), block_tables=tables)


def test_state_block_size_sets_the_compressor_state_blocks():
    ckpt = DATA / "deepseek_v4" / "ckpt"

    def state_blocks(state_block_size):
        specs = sieve.AttentionModel(ckpt, caches="caller", state_block_size=state_block_size).cache_specs
        others = max(s["block_bytes"] for s in specs if "compressor_state" not in s["name"])
        return others, {s["name"]: s for s in specs if "compressor_state" in s["name"]}

    others, window = state_blocks("window")
    assert window and all(s["block_size"] == s["window_tokens"] for s in window.values())
    _, three = state_blocks(3)
    assert all(s["block_size"] == 3 for s in three.values())
    _, fit = state_blocks("fit")
    for name, s in fit.items():
        assert s["block_size"] == max(1, min(s["window_tokens"], others // s["entry_bytes"])), (name, s, others)
    for bad in ("half", 0, -1, 2.5):
        with pytest.raises(sieve.InvalidArgumentError, match="state_block_size"):
            sieve.AttentionModel(ckpt, state_block_size=bad)
    with pytest.raises(sieve.UnsupportedError, match="only deepseek_v4 keeps compressor states"):
        sieve.AttentionModel(DATA / "deepseek_v32" / "ckpt", state_block_size="fit")


def test_cache_block_size_sets_dsa_cache_blocks():
    # DSA on MLA takes the engine's block size for its latent and indexer-key caches; 0 keeps FlashMLA's 64.
    ckpt = DATA / "deepseek_v32" / "ckpt"
    for size, want in ((0, 64), (16, 16), (48, 48)):
        specs = sieve.AttentionModel(ckpt, caches="caller", cache_block_size=size).cache_specs
        assert {s["block_size"] for s in specs} == {want}, (size, specs)
    for bad in (-1, 1.5, "16"):
        with pytest.raises(sieve.InvalidArgumentError, match="cache_block_size"):
            sieve.AttentionModel(ckpt, cache_block_size=bad)
    with pytest.raises(sieve.UnsupportedError, match="cache_block_size"):
        sieve.AttentionModel(DATA / "qwen4_exp" / "ckpt", cache_block_size=16)
