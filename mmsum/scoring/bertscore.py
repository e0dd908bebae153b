"""BERTScore, numerically equal to `bert_score` 0.3.13, batched and with a document-embedding cache.

What is replicated from bert_score (so our numbers equal theirs, see tests/scoring/test_bertscore.py):
  * tokenisation: `text.strip()`, then `tokenizer.encode(text, add_special_tokens=True,
    max_length=tokenizer.model_max_length, truncation=True)` (plus `add_prefix_space=True` for
    GPT-2/RoBERTa tokenizers — transformers 5 ignores that flag, as it does inside bert_score);
  * the encoder truncated to its first `num_layers` blocks, last hidden state, no token types;
  * CLS/SEP stay in the similarity matrix but carry weight 0 (idf off) or their idf (idf on);
  * idf(w) = log((N + 1) / (df(w) + 1)) over the N references of the call, unseen = log(N + 1);
  * greedy matching on cosine similarity, idf-weighted means, F = 2PR/(P+R) with NaN -> 0;
  * empty (after strip) candidate or reference: P = R = F = 0.

Deliberate differences (documented in docs/metrics.md):
  * bert_score pads a batch of references and fills the similarity of padded positions with 0, so
    a token whose best real match has a *negative* cosine scores 0 instead — but only when its
    partner happens to be shorter than the longest one in the batch. We take the max over real
    tokens only, so a score never depends on what else is in the batch. With real pretrained
    encoders cosines between contextual embeddings are positive and the two agree.
  * bert_score 0.3.13 crashes on empty strings under transformers 5; we return its documented 0.
"""

from __future__ import annotations

import math
import os
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Mapping, Sequence
from contextlib import nullcontext

import torch

from mmsum.scoring.encoders import LoadedTextEncoder, load_text_encoder


class EmbeddingCache:
    """LRU of per-text (token ids, normalised token embeddings), bounded by bytes.

    Keyed by the text itself (content, not identity), so the same document met again in the
    next SCST step or epoch is not re-encoded.
    """

    def __init__(self, max_bytes: int = 1 << 30) -> None:
        self.max_bytes = int(max_bytes)
        self._data: OrderedDict[str, tuple[torch.Tensor, torch.Tensor]] = OrderedDict()
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    @staticmethod
    def _size(key: str, value: tuple[torch.Tensor, torch.Tensor]) -> int:
        ids, emb = value
        return len(key) + ids.numel() * ids.element_size() + emb.numel() * emb.element_size()

    def get(self, key: str) -> tuple[torch.Tensor, torch.Tensor] | None:
        value = self._data.get(key)
        if value is None:
            self.misses += 1
            return None
        self.hits += 1
        self._data.move_to_end(key)
        return value

    def put(self, key: str, value: tuple[torch.Tensor, torch.Tensor]) -> None:
        size = self._size(key, value)
        if size > self.max_bytes:
            return
        if key in self._data:
            self.bytes -= self._size(key, self._data.pop(key))
        self._data[key] = value
        self.bytes += size
        while self.bytes > self.max_bytes:
            old_key, old = self._data.popitem(last=False)
            self.bytes -= self._size(old_key, old)

    def clear(self) -> None:
        self._data.clear()
        self.bytes = self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._data)


def idf_from_corpus(token_ids: Sequence[Sequence[int]]) -> tuple[dict[int, float], float]:
    """bert_score's `get_idf_dict` on already tokenised texts: ({token: idf}, idf of unseen tokens)."""
    df: Counter = Counter()
    for ids in token_ids:
        df.update(set(ids))
    n = len(token_ids)
    return {tok: math.log((n + 1) / (c + 1)) for tok, c in df.items()}, math.log(n + 1)


class BertScorer:
    """BERTScore (Zhang et al. 2020) with bert_score 0.3.13's exact definition.

    BERT-S of Wan & Bansal (2022) is `score(summaries, documents)[0]`: precision, summary as the
    candidate, document as the reference. Defaults follow their code: roberta-large-mnli, 10
    layers, no idf, no baseline rescaling.

    The encoder is a plain attribute (this is not an nn.Module), so holding a scorer inside a
    LightningModule adds nothing to its parameters or checkpoints.
    """

    def __init__(
        self,
        model: str | os.PathLike | LoadedTextEncoder = "roberta-large-mnli",
        num_layers: int | None = 10,
        idf: bool | Mapping[int, float] = False,
        batch_size: int = 64,
        device: str | torch.device | None = None,
        cache_max_bytes: int = 1 << 30,
        amp: bool = True,
    ) -> None:
        self.encoder = (
            model if isinstance(model, LoadedTextEncoder) else load_text_encoder(model, num_layers, device)
        )
        self.model_name = self.encoder.name
        self.num_layers = num_layers
        self.idf = idf
        self.batch_size = int(batch_size)
        self.cache = EmbeddingCache(cache_max_bytes)
        self.amp = amp  # bf16 autocast, only ever on CUDA; turn off for bit-level parity there
        tok = self.encoder.tokenizer
        from transformers import GPT2Tokenizer, RobertaTokenizer

        self._prefix_space = isinstance(tok, (GPT2Tokenizer, RobertaTokenizer))
        self._special = (tok.cls_token_id, tok.sep_token_id)
        self._pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0

    @property
    def device(self) -> torch.device:
        return self.encoder.device

    # -- tokenisation and encoding -------------------------------------------------------------
    def token_ids(self, text: str) -> list[int]:
        """bert_score's `sent_encode` (empty text -> [CLS, SEP])."""
        tok = self.encoder.tokenizer
        text = text.strip()
        if not text:
            return tok.encode("", add_special_tokens=True)
        kwargs = dict(add_special_tokens=True, max_length=tok.model_max_length, truncation=True)
        if self._prefix_space:
            kwargs["add_prefix_space"] = True
        return tok.encode(text, **kwargs)

    def _amp_context(self):
        if self.amp and self.device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return nullcontext()

    @torch.no_grad()
    def _encode_ids(self, all_ids: list[list[int]]) -> list[torch.Tensor]:
        """Unit-normalised last-layer token embeddings, batched by length (least padding)."""
        order = sorted(range(len(all_ids)), key=lambda i: len(all_ids[i]), reverse=True)
        out: list[torch.Tensor | None] = [None] * len(all_ids)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            lens = torch.tensor([len(all_ids[i]) for i in chunk])
            width = int(lens.max())
            ids = torch.full((len(chunk), width), self._pad_id, dtype=torch.long)
            for row, i in enumerate(chunk):
                ids[row, : lens[row]] = torch.tensor(all_ids[i], dtype=torch.long)
            mask = (torch.arange(width)[None, :] < lens[:, None]).long()
            with self._amp_context():
                hidden = self.encoder.model(ids.to(self.device), attention_mask=mask.to(self.device))[0]
            hidden = hidden.float()
            hidden = hidden / hidden.norm(dim=-1, keepdim=True)
            for row, i in enumerate(chunk):
                out[i] = hidden[row, : lens[row]].clone()
        return out  # type: ignore[return-value]

    def _embed(self, texts: Sequence[str], use_cache: bool) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """{text: (ids, embeddings)} for the distinct texts, through the cache when asked."""
        result: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        todo: list[str] = []
        for t in dict.fromkeys(texts):
            hit = self.cache.get(t) if use_cache else None
            if hit is None:
                todo.append(t)
            else:
                result[t] = hit
        if todo:
            ids = [self.token_ids(t) for t in todo]
            for t, i, e in zip(todo, ids, self._encode_ids(ids)):
                value = (torch.tensor(i, dtype=torch.long), e)
                result[t] = value
                if use_cache:
                    self.cache.put(t, value)
        return result

    # -- weights -----------------------------------------------------------------------------
    def _weights(self, ids: torch.Tensor, idf: torch.Tensor | None) -> torch.Tensor:
        """Per-token weights: 1 with CLS/SEP at 0 (idf off), else a lookup in the idf table."""
        if idf is None:
            return (ids != self._special[0]).float() * (ids != self._special[1]).float()
        return idf[ids]

    def compute_idf(self, texts: Sequence[str]) -> defaultdict:
        """bert_score's `get_idf_dict(texts)`: a defaultdict {token_id: idf}, unseen -> log(N + 1)."""
        table, unseen = idf_from_corpus([self.token_ids(t) for t in texts])
        out: defaultdict = defaultdict(lambda: unseen)
        out.update(table)
        return out

    def _idf_table(self, table: Mapping[int, float], unseen: float) -> torch.Tensor:
        vocab = max(len(self.encoder.tokenizer), max(table, default=0) + 1)
        lookup = torch.full((vocab,), float(unseen))
        if table:
            lookup[torch.tensor(list(table.keys()))] = torch.tensor(list(table.values()), dtype=torch.float32)
        return lookup

    def _resolve_idf(
        self, idf: bool | Mapping[int, float] | None, ref_ids: Sequence[torch.Tensor]
    ) -> torch.Tensor | None:
        idf = self.idf if idf is None else idf
        if idf is False:
            return None
        if idf is True:  # bert_score: idf from the references of this call (duplicates counted)
            return self._idf_table(*idf_from_corpus([r.tolist() for r in ref_ids]))
        factory = getattr(idf, "default_factory", None)
        return self._idf_table(idf, factory() if factory else 0.0)

    # -- scoring ------------------------------------------------------------------------------
    @torch.no_grad()
    def score(
        self,
        candidates: Sequence[str],
        references: Sequence[str],
        idf: bool | Mapping[int, float] | None = None,
        cache_references: bool = True,
        cache_candidates: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-pair (P, R, F) float32 CPU tensors. References go through the embedding cache."""
        if len(candidates) != len(references):
            raise ValueError(f"{len(candidates)} candidates but {len(references)} references")
        n = len(candidates)
        if n == 0:
            empty = torch.zeros(0)
            return empty, empty, empty
        ref_store = self._embed(references, cache_references)
        cand_store = self._embed(candidates, cache_candidates)
        idf_spec = self._resolve_idf(idf, [ref_store[r][0] for r in references])
        P, R, F = torch.zeros(n), torch.zeros(n), torch.zeros(n)
        # Group pairs by lengths so the padded similarity tensor stays small.
        order = sorted(
            range(n), key=lambda i: (len(ref_store[references[i]][0]), len(cand_store[candidates[i]][0]))
        )
        for start in range(0, n, self.batch_size):
            chunk = order[start : start + self.batch_size]
            hyp = [cand_store[candidates[i]] for i in chunk]
            ref = [ref_store[references[i]] for i in chunk]
            p, r, f = self._greedy(hyp, ref, idf_spec)
            P[chunk], R[chunk], F[chunk] = p, r, f
        return P, R, F

    def _greedy(
        self,
        hyp: list[tuple[torch.Tensor, torch.Tensor]],
        ref: list[tuple[torch.Tensor, torch.Tensor]],
        idf: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        pad = torch.nn.utils.rnn.pad_sequence
        h_emb = pad([e for _, e in hyp], batch_first=True)
        r_emb = pad([e for _, e in ref], batch_first=True)
        h_len = torch.tensor([len(i) for i, _ in hyp])
        r_len = torch.tensor([len(i) for i, _ in ref])
        h_w = pad([self._weights(i, idf) for i, _ in hyp], batch_first=True).to(h_emb.device)
        r_w = pad([self._weights(i, idf) for i, _ in ref], batch_first=True).to(r_emb.device)
        h_mask = (torch.arange(h_emb.shape[1])[None] < h_len[:, None]).to(h_emb.device)
        r_mask = (torch.arange(r_emb.shape[1])[None] < r_len[:, None]).to(r_emb.device)
        sim = torch.bmm(h_emb, r_emb.transpose(1, 2))
        # Max over *real* tokens only (see module docstring on bert_score's batch-dependent zero fill).
        valid = h_mask[:, :, None] & r_mask[:, None, :]
        sim = sim.masked_fill(~valid, float("-inf"))
        word_p = sim.max(dim=2).values.masked_fill(~h_mask, 0.0)
        word_r = sim.max(dim=1).values.masked_fill(~r_mask, 0.0)
        P = (word_p * (h_w / h_w.sum(dim=1, keepdim=True))).sum(dim=1)
        R = (word_r * (r_w / r_w.sum(dim=1, keepdim=True))).sum(dim=1)
        F = 2 * P * R / (P + R)
        empty = h_len.eq(2).to(P.device) | r_len.eq(2).to(P.device)  # [CLS, SEP] only
        P = P.masked_fill(empty, 0.0)
        R = R.masked_fill(empty, 0.0)
        F = F.masked_fill(torch.isnan(F), 0.0)
        return P.float().cpu(), R.float().cpu(), F.float().cpu()

    def precision(self, summaries: Sequence[str], documents: Sequence[str]) -> torch.Tensor:
        """BERT-S (Wan & Bansal 2022): BERTScore precision of each summary against its document."""
        return self.score(summaries, documents)[0]
