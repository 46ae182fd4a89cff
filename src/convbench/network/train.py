"""`convbench train NET`: our own weights for a course network, trained with PyTorch on the CPU.

Seeded and deterministic: the same command on the same kind of machine gives the same weights, and so the same
Correctness as the shipped file (within the +-0.005 the tests allow for thread-count differences).

Training sees pixels scaled to 0..1 (x / 255): with raw 0-255 inputs the first tanh saturates and nothing learns.
The scale is folded into conv1's weights when saving, conv1(x / 255; k) = conv1(x; k / 255) (no bias), so the
shipped network takes raw 0-255 pixels like the course's. fa17 also ships `low`, a deliberately brief training,
like the course's ece408-low model.
"""

from __future__ import annotations

import datetime
import math
import platform
import sys
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from convbench.core import ui
from convbench.core.spec import NetSpec
from convbench.data.fashion_mnist import load_dataset
from convbench.network.model import correctness, forward

PIXEL_SCALE = 255.0
EVAL_COUNTS = (100, 1000, 10000)


@dataclass(frozen=True)
class Recipe:
    epochs: int = 4
    batch: int = 128
    lr: float = 2e-3
    max_steps: int | None = None  # stop early (the brief `low` training)


RECIPES: dict[tuple[str, str | None], Recipe] = {
    ("fa17", "low"): Recipe(epochs=1, batch=32, lr=1e-3, max_steps=12),
}


def recipe_for(net: str, variant: str | None) -> Recipe:
    return RECIPES.get((net, variant), Recipe())


def init_params(spec: NetSpec, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """PyTorch's default initialisation of Conv2d / Linear (kaiming-uniform weights, uniform biases)."""
    params = {}
    for name, shape in spec.param_shapes.items():
        if name.endswith(".weight"):
            fan_in = math.prod(shape[1:])
        else:
            fan_in = math.prod(spec.param_shapes[name.replace(".bias", ".weight")][1:])
        bound = 1.0 / math.sqrt(fan_in)  # kaiming_uniform(a=sqrt(5)) and the bias rule both give 1/sqrt(fan_in)
        params[name] = ((torch.rand(shape, generator=generator) * 2 - 1) * bound).requires_grad_()
    return params


def train(spec: NetSpec, variant: str | None = None, seed: int = 0, epochs: int | None = None,
          data_dir: str | None = None, quiet: bool = False) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    recipe = recipe_for(spec.name, variant)
    if epochs is not None:
        recipe = Recipe(epochs, recipe.batch, recipe.lr, recipe.max_steps)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    data = load_dataset(spec.input_size, split="train", data_dir=data_dir, quiet=quiet)
    images = torch.tensor(data.images).unsqueeze(1)
    labels = torch.from_numpy(data.labels.astype(np.int64))
    params = init_params(spec, gen)
    opt = torch.optim.Adam(params.values(), lr=recipe.lr)
    steps_per_epoch = math.ceil(len(images) / recipe.batch)
    total = recipe.max_steps or recipe.epochs * steps_per_epoch
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=recipe.lr, total_steps=total) if not recipe.max_steps else None

    step = 0
    with ui.progress_bar(f"train {spec.name}{'-' + variant if variant else ''}", total, enabled=not quiet) as bar:
        for _ in range(recipe.epochs):
            order = torch.randperm(len(images), generator=gen)
            for lo in range(0, len(images), recipe.batch):
                idx = order[lo : lo + recipe.batch]
                x = images[idx].float() / PIXEL_SCALE
                logits = forward(spec, params, x, logits=True)
                loss = F.cross_entropy(logits, labels[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                if sched is not None:
                    sched.step()
                step += 1
                bar.advance()
                if step >= total:
                    break
            if step >= total:
                break

    out = {name: p.detach().clone() for name, p in params.items()}
    out["conv1.weight"] /= PIXEL_SCALE  # fold the input scale: the network now takes raw 0-255 pixels
    metadata = {
        "seed": str(seed),
        "variant": variant or "",
        "recipe": f"epochs={recipe.epochs} batch={recipe.batch} lr={recipe.lr} max_steps={recipe.max_steps} adam"
        + (" onecycle" if sched is not None else ""),
        "steps": str(step),
        "final_loss": f"{loss.item():.4f}",
        "command": "convbench train " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["train"] else f"train({spec.name})",
        "date": datetime.date.today().isoformat(),
        "torch": torch.__version__,
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
    }
    return out, metadata


def evaluate(spec: NetSpec, params: dict[str, torch.Tensor], data_dir: str | None = None, quiet: bool = False) -> dict[int, float]:
    """Correctness at 100, 1000 and 10000 test images, float32 onednn forward (raw pixels)."""
    data = load_dataset(spec.input_size, split="t10k", data_dir=data_dir, quiet=quiet)
    x = torch.tensor(data.images).unsqueeze(1).float()
    with torch.no_grad():
        pred = forward(spec, params, x).argmax(dim=1).numpy()
    return {n: correctness(pred[:n], data.labels[:n]) for n in EVAL_COUNTS if n <= len(pred)}
