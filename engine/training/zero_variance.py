"""Zero-variance GRPO groups: a group whose rollouts all got the same reward has zero advantage
and carries no policy gradient, so it is taken out of the loss.

TRL 1.16 only logs such groups (`frac_reward_zero_std`); it has no option to drop them. Left
in, they still count in the loss: under TRL's default `dapo` loss their tokens enlarge the
normaliser (`num_items_in_batch`), diluting the groups that do differ, and the KL term still
acts on them. `DropZeroVariance` is a mixin for `GRPOTrainer` that, after TRL has scored a
generation batch, zeroes those groups' loss mask (`tool_mask`, the loss-only mask: attention
is untouched) and advantages and recounts `num_items_in_batch`, so the `dapo` loss is exactly
the loss of the batch without them. It logs the share of groups dropped per step as
`zero_variance_share`. The logged `kl` and `entropy` then average over the kept rollouts (0
when a step drops every group; such a step has no gradient, though AdamW's moments still move
the weights a little).
"""
from __future__ import annotations

import torch

SHARE_KEY = "zero_variance_share"


def constant_groups(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """(N,) total rewards, groups of `group_size` consecutive rows -> (N / group_size,) bool:
    True where the group's rewards are all equal (to float tolerance, `torch.isclose`, as
    TRL's own zero-std test). NaN rewards (unscorable rollouts) are left out; a group with at
    most one scored rollout is constant."""
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    g = rewards.detach().float().view(-1, group_size)
    scored = ~torch.isnan(g)
    hi = torch.where(scored, g, torch.full_like(g, -torch.inf)).amax(dim=1)
    lo = torch.where(scored, g, torch.full_like(g, torch.inf)).amin(dim=1)
    return (scored.sum(dim=1) <= 1) | torch.isclose(hi, lo)


def drop_rows(batch: dict, keep: torch.Tensor, gather=lambda t: t) -> None:
    """Take the rows where `keep` (B,) is False out of the loss of TRL's scored batch, in
    place: loss mask and advantage 0, `num_items_in_batch` recounted over the kept tokens
    (`gather` sums it across processes, as TRL does)."""
    completion_mask = batch["completion_mask"]
    keep = keep.to(completion_mask.device)
    loss_only = batch.get("tool_mask")
    if loss_only is None:
        loss_only = torch.ones_like(completion_mask)
    batch["tool_mask"] = loss_only * keep.unsqueeze(1).to(loss_only.dtype)
    adv = batch["advantages"]                                     # (B,) or (B, T)
    batch["advantages"] = adv * keep.to(adv.dtype).view(-1, *[1] * (adv.dim() - 1))
    batch["num_items_in_batch"] = gather((completion_mask * batch["tool_mask"]).sum()).sum()


class DropZeroVariance:
    """Mixin before `GRPOTrainer` (`class T(DropZeroVariance, GRPOTrainer)`): logs the share
    of zero-variance groups each generation batch and, when `drop_zero_variance` is true,
    takes them out of the loss (see the module docstring)."""

    drop_zero_variance: bool = True

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        # (N, reward functions), gathered over all processes: kept for the group test below
        self._rewards_per_func = super()._calculate_rewards(inputs, prompts, completions,
                                                            completion_ids_list)
        return self._rewards_per_func

    def _generate_and_score_completions(self, inputs):
        batch = super()._generate_and_score_completions(inputs)
        mode = "train" if self.model.training else "eval"
        group = self.num_generations if mode == "train" else self.num_generations_eval
        per_func = self._rewards_per_func
        weights = self.reward_weights.to(per_func.device)
        rewards = (per_func * weights.unsqueeze(0)).nansum(dim=1)
        rewards[torch.isnan(per_func).all(dim=1)] = torch.nan      # unscorable, as in TRL
        constant = constant_groups(rewards, group)
        self._metrics[mode][SHARE_KEY].append(constant.float().mean().item())
        if self.drop_zero_variance and constant.any():
            n_local = batch["completion_ids"].size(0)
            start = self.accelerator.process_index * n_local
            keep = ~constant.repeat_interleave(group)[start:start + n_local]
            drop_rows(batch, keep, self.accelerator.gather)
        return batch
