"""Shared-prefix SFT: batches of rows with a common token prefix, and that prefix run once.

Most tokens of a tool-use row are its system prompt with the tool declarations, which carry no
loss, and a round's rows use only a handful of tool sets. Two pieces turn that into speed:

- `prefix_batches` orders rows so that micro-batches hold rows sharing a long token prefix
  (bottom-up over the rows' token trie: full batches form as deep as possible, leftovers move
  up and fill mixed batches), rows of similar length together inside a prefix (less padding),
  shuffled by seed and epoch. `PrefixSharingSFTTrainer` serves it through the Trainer's
  sampler hook, so checkpoint resume replays the same order.
- `PrefixSharingSFTTrainer.compute_loss` runs a padded micro-batch's shared prefix once (batch
  1, with grad, KV cache kept, no LM head), repeats its cache over the batch (autograd sums
  the rows' gradients back into the one prefix pass) and hands the suffixes with that cache to
  TRL's own `compute_loss`, so the loss normalisation (`num_items_in_batch`) and the metrics
  are TRL's. The prefix stops before the position whose hidden state predicts any row's first
  label, so no labelled logit comes from it: loss and gradients equal the padded forward's
  (with LoRA dropout > 0 the prefix rows share one dropout mask, so they agree in expectation).
"""
from __future__ import annotations

import random

import torch
from torch.utils.data import Sampler
from trl import SFTTrainer

MIN_SHARED_PREFIX = 32   # below this, a second forward call costs more than it saves
_SHAREABLE_KEYS = {"input_ids", "attention_mask", "labels", "position_ids"}


def usable_prefix(input_ids: list[int], labels: list[int]) -> list[int]:
    """The row's tokens that a shared prefix may cover: those before the position whose
    hidden state predicts the first label (label j is scored from position j - 1)."""
    first = next((j for j, lab in enumerate(labels) if lab != -100), len(labels))
    return list(input_ids[:max(first - 1, 0)])


def prefix_batches(keys: list[list[int]], batch_size: int, seed: int, epoch: int = 0,
                   lengths: list[int] | None = None) -> list[list[int]]:
    """Row indices in micro-batches of `batch_size`, rows with long common prefixes together.

    Bottom-up over the trie of `keys`: at each branching node the rows that end there and the
    leftovers of its children are shuffled, cut into full batches (they share the node's
    prefix), and what remains moves up. With `lengths` (row tokens) the shuffled rows are
    sorted by length before the cut (longest batches first, equal lengths in random order),
    so a batch's suffixes pad to similar lengths and the shortest rows move up. Full batches
    are shuffled; the one short batch, if any, comes last (the data loader cuts the index
    stream every `batch_size`). Same (seed, epoch), same batches."""
    rng = random.Random(f"prefix-batches:{seed}:{epoch}")
    batches: list[list[int]] = []

    def walk(rows: list[int], depth: int) -> list[int]:
        # rows share keys[:depth]; skip ahead to their longest common prefix
        while all(len(keys[r]) > depth for r in rows) and \
                len({keys[r][depth] for r in rows}) == 1:
            depth += 1
        pool = [r for r in rows if len(keys[r]) == depth]
        children: dict[int, list[int]] = {}
        for r in rows:
            if len(keys[r]) > depth:
                children.setdefault(keys[r][depth], []).append(r)
        for token in sorted(children):
            pool += walk(children[token], depth + 1)
        rng.shuffle(pool)
        if lengths is not None:
            pool.sort(key=lambda r: -lengths[r])   # stable: ties keep their random order
        full = len(pool) - len(pool) % batch_size
        batches.extend(pool[i:i + batch_size] for i in range(0, full, batch_size))
        return pool[full:]

    rest = walk(list(range(len(keys))), 0) if keys else []
    rng.shuffle(batches)
    return batches + ([rest] if rest else [])


class PrefixGroupedSampler(Sampler):
    """Row order of `prefix_batches`, new each epoch (the Trainer calls `set_epoch`)."""

    def __init__(self, keys: list[list[int]], batch_size: int, seed: int,
                 lengths: list[int] | None = None):
        self.keys, self.batch_size, self.seed, self.epoch = keys, batch_size, seed, 0
        self.lengths = lengths

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self):
        for batch in prefix_batches(self.keys, self.batch_size, self.seed, self.epoch,
                                    self.lengths):
            yield from batch


def shared_prefix_length(input_ids: torch.Tensor, labels: torch.Tensor,
                         attention_mask: torch.Tensor) -> int:
    """P for a right-padded batch (B, T): tokens every row has in common (none of them
    padding), stopping at the position whose hidden state predicts the batch's first label."""
    batch, length = input_ids.shape
    if batch < 2:
        return 0
    same = (input_ids == input_ids[:1]).all(0) & attention_mask.bool().all(0)  # (T,)
    common = length if bool(same.all()) else int((~same).nonzero()[0])
    labelled = labels != -100
    first = torch.where(labelled.any(1), labelled.int().argmax(1),
                        torch.full_like(labelled[:, 0], length, dtype=torch.long))
    return max(0, min(common, int(first.min()) - 1))


class PrefixSharingSFTTrainer(SFTTrainer):
    """TRL's SFTTrainer with prefix-grouped batches (`group_by_prefix`) and the shared prefix
    run once per micro-batch (`share_prefix`). Either off gives TRL's own behaviour for it;
    `prefix_tokens_shared` counts the row tokens whose forward and backward were shared;
    `autocast_adapters` skips PEFT's input casts in training steps (a bfloat16 base).
    Under several processes the batches stay grouped and each runs the plain forward."""

    def __init__(self, *args, group_by_prefix: bool = True, share_prefix: bool = True,
                 length_sorted: bool = False, min_shared_prefix: int = MIN_SHARED_PREFIX,
                 autocast_adapters: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.autocast_adapters = autocast_adapters
        self.group_by_prefix, self.share_prefix = group_by_prefix, share_prefix
        self.length_sorted = length_sorted
        self.min_shared_prefix = min_shared_prefix
        self.prefix_tokens_shared = self.prefix_batches_shared = 0

    def training_step(self, model, inputs, num_items_in_batch=None):
        # `autocast_adapters` (a bfloat16 base under bf16 autocast): PEFT would cast each
        # adapter's bfloat16 input to the adapter's float32 only for autocast to cast it back
        # for the matmul; the same numbers, two copies per adapter per pass (measured: copies
        # 13% -> 6% of a step's CPU time). Outside training steps PEFT casts as usual.
        from peft.helpers import disable_input_dtype_casting
        with disable_input_dtype_casting(model, active=self.autocast_adapters):
            return super().training_step(model, inputs, num_items_in_batch)

    def _get_train_sampler(self, train_dataset=None):
        dataset = self.train_dataset if train_dataset is None else train_dataset
        if not self.group_by_prefix or dataset is None or "labels" not in dataset.column_names:
            return super()._get_train_sampler(train_dataset)
        rows = dataset["input_ids"]
        keys = [usable_prefix(ids, lab) for ids, lab in zip(rows, dataset["labels"])]
        return PrefixGroupedSampler(keys, self._train_batch_size, self.args.seed,
                                    [len(ids) for ids in rows] if self.length_sorted else None)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        # Training forwards only, on an unwrapped model (one process): a DDP/FSDP wrapper
        # expects one forward per backward, so there the plain forward runs (batches stay
        # grouped). Gradient checkpointing drops the cache.
        prefix = 0
        if (self.share_prefix and model.training and not return_outputs
                and self.accelerator.unwrap_model(model) is model
                and set(inputs) <= _SHAREABLE_KEYS and "attention_mask" in inputs
                and not getattr(model, "is_gradient_checkpointing", False)):
            prefix = shared_prefix_length(inputs["input_ids"], inputs["labels"],
                                          inputs["attention_mask"])
        if prefix < self.min_shared_prefix:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

        ids, mask = inputs["input_ids"], inputs["attention_mask"]
        batch, length = ids.shape
        # The prefix once, batch 1, with grad; only its last position meets the LM head.
        out = model(input_ids=ids[:1, :prefix], attention_mask=mask[:1, :prefix],
                    use_cache=True, logits_to_keep=1)
        cache = out.past_key_values
        if cache is None or any(getattr(layer, "is_sliding", False)
                                for layer in getattr(cache, "layers", [])):
            # no cache, or a window that may drop prefix keys: the plain forward instead
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        cache.batch_repeat_interleave(batch)   # (1, H, P, D) -> (B, H, P, D); backward sums
        positions = inputs.get("position_ids")
        positions = (positions[:, prefix:] if positions is not None else
                     torch.arange(prefix, length, device=ids.device).expand(batch, -1))
        suffix = {"input_ids": ids[:, prefix:], "attention_mask": mask,   # mask: (B, P + S)
                  "labels": inputs["labels"][:, prefix:], "position_ids": positions,
                  "past_key_values": cache}
        self.prefix_tokens_shared += prefix * (batch - 1)
        self.prefix_batches_shared += 1
        return super().compute_loss(model, suffix, False, num_items_in_batch)
