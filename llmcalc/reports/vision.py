"""Typed results: what the images of a prompt cost in a vision-language model (part of `llmcalc flops`). Counts
are ints."""

from llmcalc.reports.base import Report


class VisionRow(Report):
    """One component of the vision tower or projector: its FLOPs for one image."""

    component: str
    flops_per_image: int


class VisionCost(Report):
    """One image through the vision tower and projector, and the images' share of the prompt.

    flops_per_image: matmul FLOPs (a multiply-add is 2) of the tower and the projector for one image; the
    attention core counts every (query, key) pair (the tower's attention is bidirectional, nothing is masked).
    image_tokens are part of the prompt of `seq` tokens: the language model's KV cache and prefill see them as
    any other token.
    """

    images: int
    """Images per sequence."""
    image_height: int
    """Pixels of one image as given (before the processor's resize)."""
    image_width: int
    grid_height: int
    """Patches along the height after the resize."""
    grid_width: int
    encoder_tokens: int
    """Tokens the encoder runs on per image: patches (+1 class token)."""
    tokens_per_image: int
    """Image tokens one image gives the language model, after merging or pooling."""
    image_tokens: int
    """Image tokens in one sequence: images × tokens_per_image."""
    image_share: float
    """image_tokens / seq: the images' share of the prompt, of its KV cache (full-attention layers) and of the
    language model's per-token prefill work."""
    flops_per_image: int
    """Tower + projector, one image."""
    flops: int
    """Tower + projector for every image of the batch: batch × images × flops_per_image."""
    prefill_flops_with_images: int
    """The language model's prefill_flops + flops: the whole prefill of the batch, images encoded."""
    breakdown: list[VisionRow]
    formula: str
